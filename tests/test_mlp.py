"""Tests of course.mlp (notebook 11): the fused GELU MLP and the one-GEMM SwiGLU against float64."""

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import mlp
from course.check import check
from course.runtime import DEVICE, INTERPRET, pick

SMALL = pick(cpu=dict(num_programs=3, block_m=32, block_n=32, block_k=32, num_warps=4, num_stages=2), gpu={})
SHAPES = [(50, 48, 80), (1, 16, 8), (17, 40, 24), pick(cpu=(64, 64, 96), gpu=(1000, 512, 1376))]


def _weights(M, d, hidden, dtype):
    x = torch.randn(M, d, device=DEVICE).to(dtype)
    w_in, w_gate = (torch.randn(hidden, d, device=DEVICE).div(d ** 0.5).to(dtype) for _ in range(2))
    w_out = torch.randn(d, hidden, device=DEVICE).div(hidden ** 0.5).to(dtype)
    return x, w_in, w_gate, w_out


@pytest.mark.parametrize("M,d,hidden", SHAPES)
def test_gelu_mlp(M, d, hidden):
    x, w1, _, w2 = _weights(M, d, hidden, torch.float16)
    b1, b2 = torch.randn(hidden, device=DEVICE), torch.randn(d, device=DEVICE)
    check(f"mlp {M}x{d}x{hidden}", mlp.mlp(x, w1, b1, w2, b2, **SMALL), mlp.reference(x, w1, b1, w2, b2))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32] + ([] if INTERPRET else [torch.bfloat16]), ids=str)
@pytest.mark.parametrize("M,d,hidden", SHAPES)
def test_swiglu_in_one_gemm(M, d, hidden, dtype):
    x, w_up, w_gate, w_down = _weights(M, d, hidden, dtype)
    packed = mlp.pack_gate_up(w_gate, w_up)
    assert torch.equal(packed[0::2], w_gate) and torch.equal(packed[1::2], w_up)
    hidden_out = mlp.swiglu(x, packed, **SMALL)
    f = torch.nn.functional
    want = f.silu(x.double().cpu() @ w_gate.double().cpu().T) * (x.double().cpu() @ w_up.double().cpu().T)
    check(f"swiglu {M}x{d}x{hidden}", hidden_out, want)
    if dtype == torch.float16:  # the whole block (the down projection runs epilogues.linear: fp16/fp32)
        check("swiglu mlp", mlp.swiglu_mlp(x, packed, w_down, **SMALL), mlp.swiglu_reference(x, w_gate, w_up, w_down))


def test_the_torch_chains_are_the_references():
    x, w1, w3, w2 = _weights(20, 16, 24, torch.float32)
    b1, b2 = torch.randn(24, device=DEVICE), torch.randn(16, device=DEVICE)
    check("torch mlp", mlp.torch_mlp(x, w1, b1, w2, b2), mlp.reference(x, w1, b1, w2, b2), tol=1e-5)
    check("torch swiglu", mlp.torch_swiglu_mlp(x, w1, w3, w2), mlp.swiglu_reference(x, w1, w3, w2), tol=1e-5)


def test_hidden_traffic():
    assert mlp.hidden_traffic(10, 20, swiglu=False) == {"unfused": 1600, "fused": 800}
    assert mlp.hidden_traffic(10, 20, swiglu=True) == {"unfused": 3200, "fused": 800}


def test_bad_input_is_named():
    x, w, _, _ = _weights(8, 16, 24, torch.float16)
    with pytest.raises(ValueError, match="must both be"):
        mlp.pack_gate_up(w, w[:5])
    with pytest.raises(ValueError, match="from pack_gate_up"):
        mlp.swiglu(x, w[:23])
    with pytest.raises(TypeError, match="share a dtype"):
        mlp.swiglu(x, mlp.pack_gate_up(w, w).float())
