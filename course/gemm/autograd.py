"""``course.gemm`` under autograd: a differentiable ``matmul`` and a ``Linear`` layer built on it.

For ``C = A @ B (+ bias)`` the gradients are two more products and a column sum,

    dA = dC @ B^T      (M x N) @ (N x K): B^T is a transposed *view* of B, no copy
    dB = A^T @ dC      (K x M) @ (M x N): A^T likewise
    dbias = dC summed over its rows,

and ``course.gemm.matmul`` takes any strides, so both products run the same kernels on views. The
op is registered with ``torch.library`` (a fake implementation gives shapes to ``torch.compile``),
and its backward calls the op again, so a second backward (``create_graph=True``) works too.

    >>> a = torch.randn(8, 16, device=runtime.DEVICE, requires_grad=True)
    >>> b = torch.randn(16, 4, device=runtime.DEVICE, requires_grad=True)
    >>> matmul(a, b).sum().backward()
    >>> a.grad.shape, b.grad.shape
    (torch.Size([8, 16]), torch.Size([16, 4]))
"""

import torch

from course import runtime  # noqa: F401  (the docstring's device)
from course.gemm import matmul as forward_matmul

__all__ = ["Linear", "matmul"]


@torch.library.custom_op("course::gemm_matmul", mutates_args=())
def _matmul_op(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    with torch.no_grad():  # the op's own autograd formula is below; the kernel only runs forward
        return forward_matmul(a, b, bias=bias)


@_matmul_op.register_fake
def _(a, b, bias):
    torch._check(a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0],
                 lambda: f"course.gemm.autograd.matmul: a is {tuple(a.shape)} and b {tuple(b.shape)}; pass (M, K) and (K, N)")
    return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16 if a.element_size() == 1 else a.dtype)


def _setup_context(ctx, inputs, output):
    a, b, bias = inputs
    need_a, need_b = a.requires_grad, b.requires_grad  # (the context has no needs_input_grad yet)
    ctx.save_for_backward(a if need_b else None, b if need_a else None)  # dA reads B, dB reads A
    ctx.shapes = a.shape, b.shape
    ctx.bias_dtype = None if bias is None else bias.dtype


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    need_a, need_b, need_bias = ctx.needs_input_grad
    if grad.numel() == 0:  # an empty product (M = 0 or N = 0): the gradients are zeros
        (M, K), (_, N) = ctx.shapes
        zeros = lambda *shape: grad.new_zeros(shape)
        return (zeros(M, K) if need_a else None, zeros(K, N) if need_b else None,
                zeros(N).to(ctx.bias_dtype) if need_bias else None)
    if 0 in grad.stride():  # an expanded gradient (from .sum(), say): no rows to read in place
        grad = grad.contiguous()
    grad_a = _matmul_op(grad, b.T, None) if need_a else None
    grad_b = _matmul_op(a.T, grad, None) if need_b else None
    grad_bias = grad.sum(0, dtype=torch.float32).to(ctx.bias_dtype) if need_bias else None
    return grad_a, grad_b, grad_bias


_matmul_op.register_autograd(_backward, setup_context=_setup_context)


def matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b (+ bias)`` through ``course.gemm.matmul`` (its defaults: ``mode="auto"``, the output
    in the inputs' dtype, float32 as TF32 on a GPU), with gradients for whichever of ``a``, ``b`` and
    ``bias`` require them. ``a`` and ``b``: float16, bfloat16 (GPU) or float32; ``bias``: length N.
    Traceable by ``torch.compile(fullgraph=True)``. No autocast rule is registered: under
    ``torch.autocast`` it runs in the dtype it is given."""
    if a.element_size() == 1:  # int8 and the fp8 types
        raise TypeError(f"course.gemm.autograd.matmul takes float16, bfloat16 or float32 inputs, not "
                        f"{str(a.dtype).replace('torch.', '')}: 8-bit products have no gradient here (train in "
                        "bfloat16; for inference call course.gemm.matmul or matmul_int8 under torch.no_grad())")
    return _matmul_op(a, b, bias)


class Linear(torch.nn.Linear):
    """A drop-in for ``torch.nn.Linear`` whose forward and backward run ``course.gemm``'s kernels:
    ``y = x @ weight^T + bias`` over the last dimension of ``x``. ``weight^T`` is a view (the
    weight stays (out, in), K-major for the kernel, as ``nn.Linear`` keeps it). Inputs and
    parameters share a dtype: float16 or bfloat16 on a GPU, float16 or float32 on the CPU (float32
    runs as TF32 on a GPU, where ``nn.Linear`` does not by default; under ``torch.autocast`` it stays
    in the parameters' dtype).

        >>> layer = Linear(16, 4, device=runtime.DEVICE)
        >>> layer(torch.randn(2, 3, 16, device=runtime.DEVICE)).shape
        torch.Size([2, 3, 4])
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.weight.dtype:
            raise TypeError(f"Linear: x is {str(x.dtype).replace('torch.', '')} but the weight is "
                            f"{str(self.weight.dtype).replace('torch.', '')}: convert one (x.to(layer.weight.dtype), "
                            "or layer.to(x.dtype))")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear: x has shape {tuple(x.shape)}, but its last dimension must be in_features = "
                             f"{self.in_features}")
        rows = x.reshape(-1, self.in_features)
        if 0 in rows.stride() and rows.numel():  # an expanded x: the kernel reads rows of real memory
            rows = rows.contiguous()
        y = matmul(rows, self.weight.T, self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)
