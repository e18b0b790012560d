"""Epilogues and quantized GEMM (notebook 08): what a tile goes through between its K loop and its store.

    y = linear(x, w, bias, activation=silu)        # silu(x @ w.T + bias), fused into the GEMM's epilogue
    wq, w_scale = quantize(w)                      # int8 values, one float32 scale per row of w
    y = linear(xq, wq, bias, a_scale=x_scale, w_scale=w_scale)   # int8 x int8 -> int32, then the epilogue

``fused_linear_kernel`` is notebook 07's ``linear_kernel`` with an epilogue in the order every
quantized GEMM of the course keeps: **scale** (int32 sums times ``a_scale[row] * w_scale[col]``, to
float32), **bias** (per output column, in the scaled units), **activation** (a ``@triton.jit``
function of the float32 tile), **convert** to C's dtype, **store**. ``w`` is an ``(N, K)`` weight, as
``torch.nn.Linear`` keeps it, read as the K-major ``w.T`` that int8 tensor cores want (notebook 05).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course.persistent import programs
from course.stages import (GemmContext, ScheduleContext, make_bias_view, make_output_view, make_scale_view,
                           make_tensor_view)


@triton.jit
def relu(x):
    return tl.maximum(x, 0.0)


@triton.jit
def stable_tanh(u):
    """``tanh(u)`` from ``exp(-2|u|)``, which stays in (0, 1]: no overflow for any u."""
    e = tl.exp(-2.0 * tl.abs(u))  # at most 1: no overflow for any u
    t = (1.0 - e) / (1.0 + e)
    return tl.where(u < 0, -t, t)


@triton.jit
def silu(x):
    """``x * sigmoid(x)``, with sigmoid(x) = (1 + tanh(x / 2)) / 2, which no x overflows."""
    return x * 0.5 * (1.0 + stable_tanh(0.5 * x))


@triton.jit
def gelu(x):
    """The tanh approximation of GELU: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@triton.jit
def gelu_grad(x):
    """The derivative of :func:`gelu` at ``x``: ``0.5 (1 + t) + 0.5 x (1 - t^2) u'`` with ``t = tanh(u)``,
    ``u = sqrt(2/pi) (x + 0.044715 x^3)`` and ``u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)``."""
    t = stable_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * x * x)


@triton.jit
def fused_linear_kernel(A, W, C, bias, a_scale, w_scale, M, N, K, stride_am, stride_ak, stride_wn, stride_wk,
                        stride_cm, stride_cn, stride_bias, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr,
                        QUANTIZED: tl.constexpr, ACTIVATION: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(W, K, N, stride_wk, stride_wn)  # w.T, K-major
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, even_k=EVEN_K, quantized=QUANTIZED)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        if QUANTIZED:  # int32 sums -> float32, in the units of the unquantized product
            acc = make_scale_view(a_scale, w_scale, M, N).apply(acc, out_tile)
        if HAS_BIAS:
            acc = make_bias_view(bias, N, stride_bias).apply(acc, out_tile)
        if ACTIVATION is not None:
            acc = ACTIVATION(acc)
        tensorC.store(acc, out_tile)


def linear(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, *, activation=None,
           a_scale: torch.Tensor | None = None, w_scale: torch.Tensor | None = None, out_dtype=None,
           num_programs: int | None = None, block_m: int = 128, block_n: int = 128, block_k: int | None = None,
           num_warps: int = 8, num_stages: int = 3) -> torch.Tensor:
    """``activation(x @ w.T (* a_scale[:, None] * w_scale[None, :]) + bias)`` by :func:`fused_linear_kernel`.

    ``x``: (M, K), ``w``: (N, K), both float16/float32, or both int8 with ``a_scale`` (length M) and
    ``w_scale`` (length N) given (float32). ``bias``: length N. ``activation``: a ``@triton.jit``
    function of a float32 tile (:func:`relu`, :func:`silu`, :func:`gelu`) or None. ``out_dtype``:
    default ``x.dtype`` (float32 for int8)."""
    quantized = x.dtype == torch.int8
    for name, t in (("x", x), ("w", w)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            raise ValueError(f"linear: {name} must be a 2-D tensor")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"linear: x is {tuple(x.shape)} and w is {tuple(w.shape)}: w must be (N, K) with K = "
                         f"x.shape[1] = {x.shape[1]} (nn.Linear's layout)")
    if x.dtype != w.dtype or x.dtype not in (torch.float16, torch.float32, torch.int8):
        raise TypeError(f"linear: x and w must share a dtype of float16, float32 or int8; got {x.dtype}, {w.dtype}")
    if quantized != (a_scale is not None and w_scale is not None):
        raise ValueError("linear: int8 x and w need a_scale (length M) and w_scale (length N); float ones take none")
    if activation is not None and not hasattr(activation, "fn"):
        raise TypeError("linear: activation must be a @triton.jit function of one tile (e.g. epilogues.silu)")
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), device=x.device, dtype=out_dtype or (torch.float32 if quantized else x.dtype))
    if not (M and N):
        return out
    block_k = block_k or (128 if quantized else 64)
    count = programs("linear", num_programs)
    dummy = out  # for the absent bias and scales
    fused_linear_kernel[(count,)](
        x, w, out, dummy if bias is None else bias, dummy if a_scale is None else a_scale,
        dummy if w_scale is None else w_scale, M, N, K, *x.stride(), *w.stride(), *out.stride(),
        1 if bias is None else bias.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        NUM_SMS=count, EVEN_K=K % block_k == 0, HAS_BIAS=bias is not None, QUANTIZED=quantized,
        ACTIVATION=activation, num_warps=num_warps, num_stages=num_stages)
    return out


def quantize(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantization of each row of ``t``: ``(q, scale)`` with ``q`` in [-127, 127] and
    ``t ≈ q * scale[:, None]``; ``scale`` is float32, the row's largest magnitude over 127 (1 for an
    all-zero row). Rows of an activation x (M, K) and of a weight w (N, K) alike."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or not t.dtype.is_floating_point:
        raise ValueError("quantize: pass a 2-D floating-point tensor")
    peak = t.abs().amax(dim=1).float()
    scale = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
    q = torch.round(t.float() / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def reference(x, w, bias=None, activation: str | None = None, a_scale=None, w_scale=None) -> torch.Tensor:
    """:func:`linear` in float64 on the CPU (int8 inputs exactly), ``activation`` by name:
    "relu", "silu", "gelu" (the tanh approximation) or None."""
    y = x.double().cpu() @ w.double().cpu().T
    if a_scale is not None:
        y = y * a_scale.double().cpu()[:, None] * w_scale.double().cpu()[None, :]
    if bias is not None:
        y = y + bias.double().cpu()
    if activation == "relu":
        y = torch.relu(y)
    elif activation == "silu":
        y = torch.nn.functional.silu(y)
    elif activation == "gelu":
        y = torch.nn.functional.gelu(y, approximate="tanh")
    elif activation is not None:
        raise ValueError(f"reference: activation={activation!r}: relu, silu, gelu or None")
    return y


@triton.jit
def _apply_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, FN(x), mask=offs < n)


def apply(fn, x: torch.Tensor) -> torch.Tensor:
    """``fn`` (a ``@triton.jit`` function of a tile, such as :func:`gelu`) applied to every element of the
    float32 tensor ``x``, in a kernel: what it does to each value of an accumulator."""
    x = x.float().contiguous()
    out = torch.full_like(x, float("nan"))
    _apply_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), FN=fn, BLOCK=256)
    return out


@triton.jit
def quantize_rows_kernel(X, Q, S, M, N, stride_xm, stride_xn, stride_qm, stride_qn,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """:func:`quantize` in one kernel: each program reads its ``BLOCK_M`` rows of X twice (the largest
    magnitude, then divide, round, clamp) and writes int8 values and one float32 scale per row."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_in = rows < M
    peak = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_in[:, None] & (cols[None, :] < N)
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
        peak = tl.maximum(peak, tl.max(tl.abs(x.to(tl.float32)), axis=1))
    scale = tl.where(peak > 0, peak / 127.0, 1.0)
    tl.store(S + rows, scale, mask=row_in)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_in[:, None] & (cols[None, :] < N)
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
        q = tl.minimum(tl.maximum(tl.floor(x.to(tl.float32) / scale[:, None] + 0.5), -127.0), 127.0)
        tl.store(Q + rows[:, None] * stride_qm + cols[None, :] * stride_qn, q.to(tl.int8), mask=mask)


def quantize_rows(t: torch.Tensor, *, block_m: int = 1, block_n: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`quantize` by :func:`quantize_rows_kernel`, one kernel instead of torch's six operations
    (what a quantized layer runs on its activations at every call). A value exactly halfway between
    two steps rounds up here, to even in :func:`quantize`."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.dtype not in (torch.float16, torch.float32):
        raise ValueError("quantize_rows: pass a 2-D float16 or float32 tensor")
    M, N = t.shape
    q = torch.empty((M, N), device=t.device, dtype=torch.int8)
    scale = torch.empty(M, device=t.device, dtype=torch.float32)
    if M and N:
        block_n = min(block_n, triton.next_power_of_2(N))
        quantize_rows_kernel[(triton.cdiv(M, block_m),)](t, q, scale, M, N, *t.stride(), *q.stride(),
                                                         BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return q, scale


def bias_gelu_variants(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> dict:
    """The ways notebook 08 computes ``gelu(x @ w.T + bias)`` (GELU's tanh form), by name: what runs
    fused into a GEMM's epilogue and what runs as torch's separate passes over C. ``course.gemm``'s
    epilogue takes a bias (and scales) but no activation, so GELU follows it as a torch kernel."""
    from course import gemm

    def torch_gelu(t):
        return torch.nn.functional.gelu(t, approximate="tanh")

    variants = {
        "course.gemm, bias fused; GELU": lambda: torch_gelu(gemm.matmul(x, w.T, bias=bias)),
        "course.gemm; bias; GELU": lambda: torch_gelu(gemm.matmul(x, w.T) + bias),
        "torch: matmul; bias; GELU": lambda: torch_gelu(torch.matmul(x, w.T) + bias),
        "torch: addmm (bias fused); GELU": lambda: torch_gelu(torch.nn.functional.linear(x, w, bias)),
        "08's fused linear, bias + GELU fused": lambda: linear(x, w, bias, activation=gelu),
    }
    if hasattr(torch, "_addmm_activation") and x.is_cuda:  # cuBLASLt's bias + GELU epilogue (private to torch)
        def cublaslt():
            return torch._addmm_activation(bias, x, w.T, use_gelu=True)
        try:
            cublaslt()
            variants["torch: cuBLASLt, bias + GELU fused"] = cublaslt
        except (RuntimeError, TypeError):  # a torch without it for these dtypes: leave it out
            pass
    return variants

