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
    ctx.save_for_backward(a, b)
    ctx.bias_dtype = None if bias is None else bias.dtype


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    if 0 in grad.stride():  # an expanded gradient (from .sum(), say): no rows to read in place
        grad = grad.contiguous()
    need_a, need_b, need_bias = ctx.needs_input_grad
    grad_a = _matmul_op(grad, b.T, None) if need_a else None
    grad_b = _matmul_op(a.T, grad, None) if need_b else None
    grad_bias = grad.sum(0, dtype=torch.float32).to(ctx.bias_dtype) if need_bias else None
    return grad_a, grad_b, grad_bias


_matmul_op.register_autograd(_backward, setup_context=_setup_context)


def matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b (+ bias)`` through ``course.gemm.matmul``, with gradients for whichever of ``a``, ``b``
    and ``bias`` require them (same inputs and errors as ``course.gemm.matmul``; floating-point
    inputs only). Traceable by ``torch.compile(fullgraph=True)``."""
    if a.dtype == torch.int8:
        raise TypeError("course.gemm.autograd.matmul takes floating-point inputs: int8 products have no "
                        "gradient (use course.gemm.matmul_int8 for inference)")
    return _matmul_op(a, b, bias)


class Linear(torch.nn.Linear):
    """A drop-in for ``torch.nn.Linear`` whose forward and backward run ``course.gemm``'s kernels:
    ``y = x @ weight^T + bias`` over the last dimension of ``x``. ``weight^T`` is a view (the
    weight stays (out, in), K-major for the kernel, as ``nn.Linear`` keeps it). Inputs and
    parameters share a dtype: float16 or bfloat16 on a GPU, float16 or float32 on the CPU.

        >>> layer = Linear(16, 4, device=runtime.DEVICE)
        >>> layer(torch.randn(2, 3, 16, device=runtime.DEVICE)).shape
        torch.Size([2, 3, 4])
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.weight.dtype:
            raise TypeError(f"Linear: x is {str(x.dtype).replace('torch.', '')} but the weight is "
                            f"{str(self.weight.dtype).replace('torch.', '')}: convert one (x.to(layer.weight.dtype), "
                            "or layer.to(x.dtype))")
        y = matmul(x.reshape(-1, x.shape[-1]), self.weight.T, self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)
