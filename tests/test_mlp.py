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


# --- gelu_mlp: the MLP with gradients (notebook 13) ---------------------------------------------------

TRAIN_SHAPES = [(37, 16, 48), (5, 48, 80), (1, 16, 16), pick(cpu=(64, 32, 128), gpu=(1000, 768, 3072))]


def _mlp_params(d, hidden, dtype):
    w1, w2 = torch.randn(hidden, d).div(d ** 0.5), torch.randn(d, hidden).div(hidden ** 0.5)
    b1, b2 = torch.randn(hidden), torch.randn(d)
    return [t.to(DEVICE, dtype).requires_grad_() for t in (w1, b1, w2, b2)]


def _grads_and_reference(x, params):
    """The output and every gradient of gelu_mlp, and the same of torch's chain in float64 on the CPU."""
    y = mlp.gelu_mlp(x, *params)
    grad_y = torch.randn_like(y)
    mine = torch.autograd.grad(y, (x, *params), grad_y)
    exact = [t.detach().double().cpu().requires_grad_() for t in (x, *params)]
    want = mlp.torch_mlp(*exact)
    return (y, *mine), (want, *torch.autograd.grad(want, exact, grad_y.double().cpu()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32] + ([] if INTERPRET else [torch.bfloat16]), ids=str)
@pytest.mark.parametrize("M,d,hidden", TRAIN_SHAPES)
def test_gelu_mlp_gradients_against_float64(M, d, hidden, dtype):
    x = torch.randn(M, d, device=DEVICE).to(dtype).requires_grad_()
    got, want = _grads_and_reference(x, _mlp_params(d, hidden, dtype))
    tol = None if dtype != torch.float32 or INTERPRET else 2e-3  # float32 runs as TF32 on a GPU
    for name, mine, exact in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), got, want):
        assert mine.dtype == dtype and mine.shape == exact.shape, name
        check(f"gelu_mlp {M}x{d}x{hidden} {name}", mine, exact, tol=tol)


def test_gelu_mlp_takes_any_leading_shape_transposed_inputs_and_partial_grads():
    params = _mlp_params(16, 48, torch.float16)
    params[1] = torch.randn(96, device=DEVICE).to(torch.float16)[::2].requires_grad_()  # a strided bias
    x = torch.randn(16, 3, 7, device=DEVICE).to(torch.float16).transpose(0, 2).requires_grad_()  # (7, 3, 16), strided
    got, want = _grads_and_reference(x, params)
    assert got[0].shape == (7, 3, 16)
    for name, mine, exact in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), got, want):
        check(f"strided x {name}", mine, exact)
    frozen = [p.detach() for p in params[:2]] + params[2:]  # w1, b1 frozen: no gradient asked for them
    y = mlp.gelu_mlp(x, *frozen)
    dx, dw2 = torch.autograd.grad(y.sum(), (x, frozen[2]))  # .sum(): an expanded gradient
    assert dx.shape == x.shape and dw2.shape == frozen[2].shape
    (dw2_alone,) = torch.autograd.grad(mlp.gelu_mlp(x.detach(), *frozen).sum(), frozen[2])  # no dPre needed
    check("dw2 with x, w1, b1 frozen", dw2_alone, dw2.double())


def test_gelu_mlp_ops_are_registered_and_compile_without_graph_breaks():
    params = _mlp_params(16, 32, torch.float32)
    x = torch.randn(9, 16, device=DEVICE, requires_grad=True)
    with torch.no_grad():
        pre, hidden = mlp._gelu_linear_op(x, params[0], params[1])
    torch.library.opcheck(mlp._gelu_linear_op, (x.detach(), params[0].detach(), params[1].detach()),
                          test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(mlp._gelu_backward_op, (torch.randn(9, 16, device=DEVICE), params[2].detach(), pre),
                          test_utils=("test_schema", "test_faketensor"))
    compiled = torch.compile(lambda t: mlp.gelu_mlp(t, *params).square().sum(), fullgraph=True, backend="aot_eager")
    loss = compiled(x)
    loss.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    with pytest.raises(RuntimeError, match="a second backward .* is not implemented"):
        y = mlp.gelu_mlp(x, *params)
        (dx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        dx.sum().backward()


def test_gelu_mlp_bad_input_is_named():
    w1, b1, w2, b2 = _mlp_params(16, 32, torch.float16)
    x = torch.randn(4, 16, device=DEVICE).to(torch.float16)
    with pytest.raises(ValueError, match=r"w1 \(32, 16\), b1 \(32,\), w2 \(16, 32\), b2 \(16,\): pass x"):
        mlp.gelu_mlp(x[:, :8], w1, b1, w2, b2)
    with pytest.raises(ValueError, match="w2 \\(32, 16\\)"):
        mlp.gelu_mlp(x, w1, b1, w2.T, b2)
    with pytest.raises(TypeError, match="share one dtype .* got float32, float16"):
        mlp.gelu_mlp(x.float(), w1, b1, w2, b2)
    with pytest.raises(TypeError, match="got int32"):
        mlp.gelu_mlp(*(t.detach().to(torch.int32) for t in (x, w1, b1, w2, b2)))
