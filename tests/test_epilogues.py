"""Tests of course.epilogues (notebook 08): the fused linear layer's epilogue (scale, bias, activation)
against float64, int8 quantization, and the errors for bad input."""

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import epilogues
from course.check import check
from course.runtime import DEVICE, pick

SMALL = pick(cpu=dict(num_programs=3, block_m=32, block_n=32, block_k=32, num_warps=4, num_stages=2), gpu={})
ACTIVATIONS = {None: None, "relu": epilogues.relu, "silu": epilogues.silu, "gelu": epilogues.gelu}


@pytest.mark.parametrize("activation", list(ACTIVATIONS), ids=str)
@pytest.mark.parametrize("M,N,K", [(50, 40, 70), (1, 1, 1), pick(cpu=(33, 65, 64), gpu=(1000, 1000, 520))])
def test_float_linear_with_each_activation(M, N, K, activation):
    # Fixed inputs: at 1 x 1 x 1 one element near GELU's or SiLU's small negative tail has almost no size to
    # measure a relative error against, and which one comes up depended on the tests run before.
    torch.manual_seed(M * 10007 + N * 101 + K)
    x = 4 * torch.randn(M, K, device=DEVICE, dtype=torch.float16)  # large values: the activations' tails
    w = torch.randn(N, K, device=DEVICE, dtype=torch.float16)
    bias = torch.randn(N, device=DEVICE)
    y = epilogues.linear(x, w, bias, activation=ACTIVATIONS[activation], **SMALL)
    check(f"{activation} {M}x{N}x{K}", y, epilogues.reference(x, w, bias, activation))


def test_strided_inputs_and_no_bias():
    x = torch.randn(70, 50, device=DEVICE, dtype=torch.float16).T  # (50, 70), column-major
    w = torch.randn(40, 140, device=DEVICE, dtype=torch.float16)[:, ::2]  # (40, 70), every other column
    check("strided", epilogues.linear(x, w, **SMALL), epilogues.reference(x, w))


@pytest.mark.parametrize("activation", [None, "silu"], ids=str)
def test_int8_linear_scales_then_bias_then_activation(activation):
    torch.manual_seed(0)
    x, w = torch.randn(48, 256, device=DEVICE), torch.randn(40, 256, device=DEVICE)
    (xq, xs), (wq, ws) = epilogues.quantize(x), epilogues.quantize(w)
    bias = torch.randn(40, device=DEVICE)
    blocks = dict(SMALL, block_k=pick(cpu=32, gpu=128))
    y = epilogues.linear(xq, wq, bias, activation=ACTIVATIONS[activation], a_scale=xs, w_scale=ws, **blocks)
    check(f"int8 {activation}", y, epilogues.reference(xq, wq, bias, activation, xs, ws), tol=1e-5)


def test_quantize_rows():
    t = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5], [127.0, 1.0, -127.0]])
    q, scale = epilogues.quantize(t)
    assert q.dtype == torch.int8 and scale.dtype == torch.float32
    assert torch.allclose(scale, torch.tensor([1.0, 2.0 / 127, 1.0]))
    assert q[0].tolist() == [0, 0, 0] and q[1].tolist() == [64, -127, 32] and q[2].tolist() == [127, 1, -127]
    big = torch.randn(64, 512)
    q, scale = epilogues.quantize(big)
    assert (q.abs() <= 127).all() and ((q.float() * scale[:, None] - big).abs() <= scale[:, None] / 2 + 1e-6).all()


def test_apply_evaluates_a_function_on_every_element():
    x = torch.linspace(-30, 30, 301, device=DEVICE)
    check("silu", epilogues.apply(epilogues.silu, x), torch.nn.functional.silu(x.double().cpu()), tol=1e-6)
    check("gelu", epilogues.apply(epilogues.gelu, x), torch.nn.functional.gelu(x.double().cpu(), approximate="tanh"),
          tol=1e-6)


@pytest.mark.parametrize("call,message", [
    (lambda x, w: epilogues.linear(x, w[:, :5]), "w must be \\(N, K\\)"),
    (lambda x, w: epilogues.linear(x, w.float()), "share a dtype"),
    (lambda x, w: epilogues.linear(x.to(torch.int8), w.to(torch.int8)), "need a_scale"),
    (lambda x, w: epilogues.linear(x, w, activation=torch.relu), "@triton.jit function"),
    (lambda x, w: epilogues.quantize(x[0]), "2-D floating-point"),
])
def test_bad_input_is_named(call, message):
    x, w = torch.randn(4, 8, device=DEVICE, dtype=torch.float16), torch.randn(3, 8, device=DEVICE, dtype=torch.float16)
    with pytest.raises((ValueError, TypeError), match=message):
        call(x, w)


def test_quantize_rows_kernel_matches_quantize_but_for_ties():
    torch.manual_seed(1)
    x = torch.randn(37, 300, device=DEVICE, dtype=torch.float16)
    x[3] = 0  # an all-zero row: scale 1, values 0
    x[5, 7] = 65504
    for t, blocks in ((x, dict(block_n=64)), (x.T.contiguous().T, dict(block_m=4, block_n=128))):
        q, scale = epilogues.quantize_rows(t, **blocks)
        q0, scale0 = epilogues.quantize(t)
        assert q.dtype == torch.int8 and scale.dtype == torch.float32
        assert torch.equal(scale.cpu(), scale0.cpu())
        ratio = t.float().cpu() / scale0.cpu()[:, None]
        tie = (ratio - ratio.floor() - 0.5).abs() < 1e-4
        differ = q.cpu() != q0.cpu()
        assert not (differ & ~tie).any() and ((q.int() - q0.int()).abs() <= 1).all()
    assert epilogues.quantize_rows(torch.empty(0, 5, device=DEVICE))[0].shape == (0, 5)
    with pytest.raises(ValueError, match="2-D float16 or float32"):
        epilogues.quantize_rows(torch.ones(3, device=DEVICE))


def test_bias_gelu_variants_all_compute_the_same_layer():
    torch.manual_seed(2)
    x = torch.randn(40, 64, device=DEVICE, dtype=torch.float16)
    w = torch.randn(48, 64, device=DEVICE, dtype=torch.float16) / 8
    bias = torch.randn(48, device=DEVICE, dtype=torch.float16)
    variants = epilogues.bias_gelu_variants(x, w, bias)
    assert {"course.gemm, bias fused; GELU", "course.gemm; bias; GELU", "torch: matmul; bias; GELU"} <= set(variants)
    for name, run in variants.items():
        check(name, run(), epilogues.reference(x, w, bias, "gelu"))


def test_speedups_draws_one_panel_per_baseline_and_notes_a_missing_one():
    import matplotlib.pyplot as plt

    from course import plots, records

    record = records.Record(rows=[], meta={"gpu": "GPU X", "date": "2026-01-01"})
    fig = plots.speedups(["a", "b"], {"float16": {"k": [1.1, 0.9]}, "int8": {"k": [1.3, 1.2], "k2": [1.0, 1.1]},
                                      "layer": {}}, title="t", record=record, caption="c", notes={"layer": "not yet"})
    assert len(fig.axes) == 3 and [len(ax.patches) for ax in fig.axes] == [2, 4, 0]
    texts = [t.get_text() for t in fig.texts] + [t.get_text() for ax in fig.axes for t in ax.texts]
    assert record.banner in texts and "not yet" in texts
    plt.close(fig)
    with pytest.raises(ValueError, match="3 values for 2"):
        plots.speedups(["a", "b"], {"p": {"k": [1, 2, 3]}})
    with pytest.raises(ValueError, match="at least one"):
        plots.speedups(["a"], {})
