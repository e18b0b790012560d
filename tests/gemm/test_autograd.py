"""Tests of course.gemm.autograd: gradients against float64, transposed and strided inputs, a second
backward, the Linear layer against nn.Linear, torch.compile without graph breaks, and its errors."""

import pytest
import torch
from gemm_cases import gpu, randn

import course
from course.check import tolerance
from course.gemm import autograd
from course.runtime import DEVICE, INTERPRET, pick

DTYPES = pick(cpu=[torch.float32, torch.float16], gpu=[torch.float32, torch.float16, torch.bfloat16])


def _rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def _leaf(t):
    return t.detach().requires_grad_()


def _gradients(fn, tensors, grad_out):
    """fn(*tensors) and the gradients of <fn(...), grad_out> for each tensor (None where not needed)."""
    out = fn(*tensors)
    (out * grad_out).sum().backward()
    return out, [t.grad for t in tensors]


def _layout(t, how):
    if how == "transposed":  # the same values, stored column-major
        return t.T.contiguous().T
    if how == "strided":  # every other column of a wider buffer
        wide = torch.zeros(t.shape[0], 2 * t.shape[1], device=t.device, dtype=t.dtype)
        wide[:, ::2] = t
        return wide[:, ::2]
    return t


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("layout", ["row", "transposed", "strided"])
def test_gradients_match_float64(dtype, with_bias, layout):
    M, N, K = pick(cpu=(33, 17, 21), gpu=(333, 257, 519))  # odd sizes, K no multiple of a block
    a = _leaf(_layout(randn(M, K, dtype=dtype), layout))
    b = _leaf(_layout(randn(K, N, dtype=dtype), layout))
    tensors = [a, b] + ([_leaf(randn(N, dtype=torch.float32))] if with_bias else [])
    grad_out = randn(M, N, dtype=dtype)
    out, grads = _gradients(autograd.matmul, tensors, grad_out)
    exact = [_leaf(t.detach().double().cpu()) for t in tensors]
    ref_out, ref_grads = _gradients(lambda a, b, *bias: a @ b + (bias[0] if bias else 0), exact,
                                    grad_out.double().cpu())
    tol = tolerance(dtype)
    assert _rel(out.cpu(), ref_out) <= tol
    for name, g, ref in zip(("a", "b", "bias"), grads, ref_grads):
        assert g is not None and g.dtype == tensors[("a", "b", "bias").index(name)].dtype, name
        assert _rel(g.cpu(), ref) <= tol, f"d{name}: relative error {_rel(g.cpu(), ref):.2e} > {tol:.0e}"


def test_only_the_gradients_needed_are_computed(monkeypatch):
    calls = []
    real = autograd.forward_matmul
    monkeypatch.setattr(autograd, "forward_matmul", lambda a, b, bias=None: calls.append(a.shape) or real(a, b, bias=bias))
    a = randn(9, 7, dtype=torch.float32)
    b = _leaf(randn(7, 5, dtype=torch.float32))
    autograd.matmul(a, b).sum().backward()  # the gradient of .sum() is expanded: strides (0, 0)
    assert calls == [(9, 7), (7, 9)], "the forward and dB = A^T dC only: no dA for an a that needs none"
    assert a.grad is None
    assert _rel(b.grad.cpu(), a.double().cpu().T @ torch.ones(9, 5, dtype=torch.float64)) <= tolerance(torch.float32)


def test_a_gradient_stored_transposed_is_read_as_it_is():
    a, b = _leaf(randn(12, 20, dtype=torch.float32)), _leaf(randn(20, 9, dtype=torch.float32))
    grad_out = randn(9, 12, dtype=torch.float32).T  # column-major
    autograd.matmul(a, b).backward(grad_out)
    g = grad_out.double().cpu()
    assert _rel(a.grad.cpu(), g @ b.double().cpu().T) <= tolerance(torch.float32)
    assert _rel(b.grad.cpu(), a.double().cpu().T @ g) <= tolerance(torch.float32)


@pytest.mark.parametrize("shape", [(0, 4, 8), (8, 0, 4), (5, 6, 0)], ids=["M=0", "N=0", "K=0"])
def test_empty_products_have_zero_gradients(shape):
    M, N, K = shape
    a, b, bias = _leaf(randn(M, K, dtype=torch.float32)), _leaf(randn(K, N, dtype=torch.float32)), _leaf(
        randn(N, dtype=torch.float32))
    autograd.matmul(a, b, bias).sum().backward()
    assert a.grad.shape == (M, K) and b.grad.shape == (K, N) and bias.grad.shape == (N,)
    assert not a.grad.any() and not b.grad.any() and (bias.grad == M).all()


def test_a_second_backward_matches_float64():
    tensors = [randn(8, 16, dtype=torch.float32), randn(16, 4, dtype=torch.float32), randn(4, dtype=torch.float32)]
    results = []
    for mm, dtype in ((autograd.matmul, torch.float32), (lambda a, b, bias: a @ b + bias, torch.float64)):
        x, w, bias = (_leaf(t.to(dtype).cpu() if dtype == torch.float64 else t) for t in tensors)
        (gx,) = torch.autograd.grad(mm(x, w, bias).pow(2).sum(), x, create_graph=True)
        gx.pow(2).sum().backward()  # d/dw and d/dbias of a function of dL/dx
        results.append((gx.detach(), w.grad, bias.grad))
    for name, ours, ref in zip(("dL/dx", "w.grad", "bias.grad"), *results):
        assert _rel(ours.cpu(), ref) <= 10 * tolerance(torch.float32), name


def test_the_op_passes_torchs_own_checks():
    # schema, fake implementation against the real one, autograd registration
    args = (randn(6, 8, dtype=torch.float32).requires_grad_(), randn(8, 5, dtype=torch.float32).requires_grad_(),
            randn(5, dtype=torch.float32).requires_grad_())
    torch.library.opcheck(autograd._matmul_op, args)


def test_linear_is_a_drop_in_for_nn_linear():
    dtype = torch.float32
    ours = autograd.Linear(24, 10, device=DEVICE, dtype=dtype)
    ref = torch.nn.Linear(24, 10, device=DEVICE, dtype=dtype)
    ref.load_state_dict(ours.state_dict())
    x = randn(2, 3, 24, dtype=dtype)
    outs = []
    for layer in (ours, ref):
        xi = _leaf(x)
        y = layer(xi)
        y.pow(2).sum().backward()
        outs.append((y.detach(), xi.grad, layer.weight.grad, layer.bias.grad))
    assert outs[0][0].shape == (2, 3, 10)
    for name, mine, theirs in zip(("y", "x.grad", "weight.grad", "bias.grad"), *outs):
        assert _rel(mine.cpu(), theirs.double().cpu()) <= 10 * tolerance(dtype), name


def test_compiled_model_has_no_graph_break_and_the_same_gradients():
    model = torch.nn.Sequential(autograd.Linear(16, 32, device=DEVICE), torch.nn.ReLU(),
                                autograd.Linear(32, 8, device=DEVICE))
    x = randn(5, 16, dtype=torch.float32)
    model(x).sum().backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    # aot_eager traces forward and backward (the op's fake implementation gives the shapes) without
    # compiling them, so the test needs no C++ compiler; fullgraph=True fails on any graph break
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    compiled(x).sum().backward()
    for mine, theirs in zip((p.grad for p in model.parameters()), eager):
        assert _rel(mine.cpu(), theirs.double().cpu()) <= tolerance(torch.float32)


def test_bad_input_gets_a_clear_error():
    i8 = torch.ones(4, 4, dtype=torch.int8, device=DEVICE)
    with pytest.raises(TypeError, match="not int8: 8-bit products have no gradient here"):
        autograd.matmul(i8, i8)
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None:
        with pytest.raises(TypeError, match="not float8_e4m3fn.*train in bfloat16"):
            autograd.matmul(i8.to(fp8).requires_grad_(), i8.to(fp8))
    layer = autograd.Linear(8, 4, device=DEVICE)
    with pytest.raises(TypeError, match=r"x is float16 but the weight is float32.*layer.to\(x.dtype\)"):
        layer(torch.ones(2, 8, dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match=r"x has shape \(3, 2, 6\), but its last dimension must be in_features = 8"):
        layer(torch.ones(3, 2, 6, device=DEVICE))
    with pytest.raises(ValueError, match=r"inner dimensions differ: a is \(4, 5\)"):  # course.gemm.matmul's checks
        autograd.matmul(_leaf(randn(4, 5, dtype=torch.float32)), randn(6, 3, dtype=torch.float32))


@pytest.mark.parametrize("case", ["1-D x", "expanded x", "no bias", "empty batch"])
def test_linear_takes_what_nn_linear_takes(case):
    ours = autograd.Linear(8, 3, bias=case != "no bias", device=DEVICE)
    ref = torch.nn.Linear(8, 3, bias=case != "no bias", device=DEVICE)
    ref.load_state_dict(ours.state_dict())
    x = {"1-D x": randn(8, dtype=torch.float32), "expanded x": randn(8, dtype=torch.float32).expand(5, 8),
         "no bias": randn(4, 8, dtype=torch.float32), "empty batch": randn(0, 8, dtype=torch.float32)}[case]
    y = ours(x)
    y.sum().backward()
    expected = ref(x)
    expected.sum().backward()
    assert y.shape == expected.shape
    for name, mine, theirs in (("y", y, expected), ("weight.grad", ours.weight.grad, ref.weight.grad)):
        if theirs.any():  # (an empty batch: zeros)
            # float32 runs as TF32 on a GPU, nn.Linear in full float32
            assert _rel(mine.detach().cpu(), theirs.detach().double().cpu()) <= 10 * tolerance(torch.float32), name
        else:
            assert not mine.any(), name


def test_the_forward_only_kernel_points_to_the_differentiable_one():
    with pytest.raises(RuntimeError, match="for gradients call course.gemm.autograd.matmul"):
        course.gemm.matmul(_leaf(randn(4, 5, dtype=torch.float32)), randn(5, 3, dtype=torch.float32))


@gpu
def test_bfloat16_linear_on_the_gpu_matches_torch():
    assert not INTERPRET
    ours = autograd.Linear(4096, 1000, device=DEVICE, dtype=torch.bfloat16)
    ref = torch.nn.Linear(4096, 1000, device=DEVICE, dtype=torch.bfloat16)
    ref.load_state_dict(ours.state_dict())
    x = randn(7, 129, 4096, dtype=torch.bfloat16)
    grads = []
    for layer in (ours, ref):
        xi = _leaf(x)
        layer(xi).float().pow(2).sum().backward()
        grads.append((xi.grad, layer.weight.grad, layer.bias.grad))
    for mine, theirs in zip(*grads):
        assert _rel(mine, theirs.double()) <= 2 * tolerance(torch.bfloat16)


def test_course_linear_is_the_drop_in():
    assert course.Linear is autograd.Linear
    with pytest.raises(AttributeError, match="no attribute 'Linearr'"):
        course.Linearr  # noqa: B018
