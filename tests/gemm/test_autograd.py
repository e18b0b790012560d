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


def test_only_the_inputs_that_require_grad_get_one():
    a = randn(9, 7, dtype=torch.float32)
    b = _leaf(randn(7, 5, dtype=torch.float32))
    autograd.matmul(a, b).sum().backward()  # the gradient of .sum() is expanded: strides (0, 0)
    assert a.grad is None
    assert _rel(b.grad.cpu(), a.double().cpu().T @ torch.ones(9, 5, dtype=torch.float64)) <= tolerance(torch.float32)


def test_a_second_backward_matches_torch():
    a, b = randn(8, 16, dtype=torch.float32), randn(16, 4, dtype=torch.float32)
    results = []
    for mm in (autograd.matmul, torch.matmul):
        x, w = _leaf(a), _leaf(b)
        (gx,) = torch.autograd.grad(mm(x, w).pow(2).sum(), x, create_graph=True)
        gx.sum().backward()
        results.append((gx.detach(), w.grad))
    for ours, ref in zip(*results):
        assert _rel(ours.cpu(), ref.double().cpu()) <= 10 * tolerance(torch.float32)


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
    torch.manual_seed(0)
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
    with pytest.raises(TypeError, match="int8 products have no gradient"):
        autograd.matmul(torch.ones(4, 4, dtype=torch.int8, device=DEVICE), torch.ones(4, 4, dtype=torch.int8,
                                                                                     device=DEVICE))
    layer = autograd.Linear(8, 4, device=DEVICE)
    with pytest.raises(TypeError, match=r"x is float16 but the weight is float32.*layer.to\(x.dtype\)"):
        layer(torch.ones(2, 8, dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match=r"inner dimensions differ: a is \(4, 5\)"):  # course.gemm.matmul's own checks
        autograd.matmul(_leaf(randn(4, 5, dtype=torch.float32)), randn(6, 3, dtype=torch.float32))


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
