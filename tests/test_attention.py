"""Tests of course.attention (notebook 11): flash attention's forward pass against float64, with and
without the causal mask, odd lengths, strided inputs, every dtype, and the errors for bad input."""

import math

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import attention
from course.check import check, poisoned
from course.runtime import DEVICE, INTERPRET, pick

DTYPES = [torch.float16, torch.float32] + ([] if INTERPRET else [torch.bfloat16])  # bf16: compiled only


def _qkv(B, H, S_Q, S_K, D, dtype, scale=1.0):
    q = scale * torch.randn(B, H, S_Q, D, device=DEVICE)
    k, v = (torch.randn(B, H, S_K, D, device=DEVICE) for _ in range(2))
    return q.to(dtype), k.to(dtype), v.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("B,H,S_Q,S_K,D", [(1, 2, 40, 40, 16), (2, 1, 33, 70, 32), (1, 1, 50, 20, 16),
                                           (1, 1, 1, 1, 16), pick(cpu=(1, 1, 64, 64, 64), gpu=(2, 3, 1000, 1000, 128))])
def test_matches_float64(B, H, S_Q, S_K, D, causal, dtype):
    q, k, v = _qkv(B, H, S_Q, S_K, D, dtype)
    check(f"{B}x{H}x{S_Q}x{S_K}x{D} causal={causal}", attention.attention(q, k, v, causal=causal),
          attention.reference(q, k, v, causal=causal))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_grouped_query_heads_match_sdpa(causal):
    # 6 query heads over 2 key/value heads (3 each), and multi-query attention (1 for all)
    for kv_heads in (2, 1):
        q = torch.randn(2, 6, 37, 16, device=DEVICE, dtype=torch.float16)
        k, v = (torch.randn(2, kv_heads, 45, 16, device=DEVICE, dtype=torch.float16) for _ in range(2))
        want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal,
                                                                enable_gqa=True)
        check(f"{kv_heads} kv heads causal={causal}", attention.attention(q, k, v, causal=causal), want.cpu())


def test_against_torch_sdpa_and_scale():
    q, k, v = _qkv(1, 2, 48, 48, 32, torch.float32)
    for causal in (False, True):
        want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal,
                                                                scale=0.3)
        check(f"sdpa causal={causal}", attention.attention(q, k, v, causal=causal, scale=0.3), want.cpu())


def test_large_logits_stay_finite():
    for sign in (1, -1):  # scores of +-thousands: the running maximum keeps every exp2 in range
        q, k, v = _qkv(1, 1, 48, 80, 16, torch.float16, scale=300.0 * sign)  # fp16: exact products (TF32 is not)
        out = attention.attention(q, k, v)
        assert torch.isfinite(out).all()
        check(f"large logits x{sign}", out, attention.reference(q, k, v))


def test_strided_inputs_and_the_output_is_fully_written():
    q = torch.randn(1, 40, 2, 16, device=DEVICE, dtype=torch.float16).transpose(1, 2)  # (1, 2, 40, 16) strided
    kv = torch.randn(1, 2, 60, 32, device=DEVICE, dtype=torch.float16)[..., ::2]  # every other element of d
    out = attention.attention(q, kv, kv, causal=True)
    assert not torch.isnan(out).any()
    check("strided", out, attention.reference(q, kv, kv, causal=True))


def test_the_output_is_stored_as_a_models_next_reshape_reads_it():
    q, k, v = _qkv(2, 3, 20, 20, 16, torch.float16)
    out = attention.attention(q, k, v, causal=True)
    merged = out.transpose(1, 2).reshape(2, 20, 48)  # (batch, seq, heads x head_dim): the output projection's input
    assert merged.data_ptr() == out.data_ptr() and merged.is_contiguous(), "a view, not a copy"
    check("output layout", out, attention.reference(q, k, v, causal=True))


def test_each_config_gives_the_same_answer():
    q, k, v = _qkv(1, 1, 70, 70, 32, torch.float16)
    ref = attention.reference(q, k, v, causal=True)
    for config in (dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1),
                   dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=2)):
        check(f"config {config}", attention.attention(q, k, v, causal=True, config=config), ref)


def test_flops_and_bytes():
    assert attention.flops(1, 1, 1024, 64, False) == 4 * 1024 * 1024 * 64
    assert attention.flops(1, 1, 1024, 64, True) == 2 * 1024 * 1024 * 64
    assert attention.score_bytes(2, 3, 100) == 2 * 3 * 100 * 100 * 2
    assert math.isclose(attention.LOG2E, 1 / math.log(2))


def test_empty_queries_and_bad_input():
    q, k, v = _qkv(1, 1, 0, 8, 16, torch.float16)
    assert attention.attention(q, k, v).shape == (1, 1, 0, 16)
    q, k, v = _qkv(1, 1, 8, 8, 16, torch.float16)
    with pytest.raises(ValueError, match="4-D tensor"):
        attention.attention(q[0], k, v)
    with pytest.raises(TypeError, match="share a dtype"):
        attention.attention(q, k.float(), v)
    with pytest.raises(ValueError, match="power of two from 16 to 256"):
        attention.attention(*_qkv(1, 1, 8, 8, 24, torch.float16))
    with pytest.raises(ValueError, match="q's batch and head_dim"):
        attention.attention(q, k[:, :, :, :8].repeat(1, 1, 1, 1), v)
    with pytest.raises(ValueError, match="no keys"):
        attention.attention(q, k[:, :, :0], v[:, :, :0])
    with pytest.raises(TypeError, match="@triton.jit"):
        attention.attention(q, k, v, step=lambda *a: a)
    with pytest.raises(ValueError, match="k and v have no heads"):
        attention.attention(q, k[:, :0], v[:, :0])
    with pytest.raises(ValueError, match="q has heads=1 and k, v have heads=2"):
        attention.attention(q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1))
    with pytest.raises(RuntimeError, match="computes none; for gradients call course.attention_backward.attention"):
        attention.attention(q.requires_grad_(), k, v)  # never an output without its gradient
    assert poisoned((1,), torch.float16, DEVICE).isnan().all()


def test_fastest_torch_backend_and_records_without_cudnn():
    old = dict(sdpa_tflops=300.0, tflops=450.0)  # a record made before the cuDNN backend was measured
    assert attention.fastest_torch(old) == ("flash", 300.0)
    assert attention.fastest_torch({**old, "cudnn_tflops": 550.0}) == ("cuDNN", 550.0)
    assert attention.fastest_torch({**old, "cudnn_tflops": 250.0}) == ("flash", 300.0)
    assert attention.FA3_PUBLISHED_TFLOPS["head_dim"] == 128 and attention.FA3_PUBLISHED_TFLOPS["tflops"] > 0


def test_the_hopper_table_aligns_every_column_and_divides_by_the_fastest_torch_backend():
    tflops = {"flash": 300.0, "cuDNN": 500.0, "Triton": 400.0, "+ persistent": 550.0, "course": 600.0}
    lines = attention.hopper_table([dict(head_dim=128, causal=True, seq=4096, tflops=tflops)]).splitlines()
    header, row = lines[1], lines[2]
    for name in tflops:  # each number ends where its column's name ends
        end = header.index(name) + len(name)
        assert row[:end].rstrip().endswith(f"{tflops[name]:.0f}"), (name, header, row)
    assert row.endswith("1.20 (cuDNN)")
    assert lines[0].index("torch") < header.index("cuDNN") and lines[0].index("Gluon") > header.index("Triton")
    bare = attention.hopper_table([dict(head_dim=64, causal=False, seq=1024, tflops=dict(cuDNN=2.0, course=1.0))])
    assert "Gluon" not in bare and bare.endswith("0.50 (cuDNN)")  # no Gluon or Triton column: no title over them
