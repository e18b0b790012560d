"""The checks ``course.gemm`` runs on its arguments before anything is launched: each refusal names
the argument and the fix, so a bad input never becomes a crash inside Triton or a wrong answer.

    >>> check_pair(torch.ones(8, 2, 3), torch.ones(3, 5))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: a must be a 2-D matrix, got 3-D with shape (8, 2, 3); for batches, loop over the batch ...
"""

import dataclasses

import torch

from course import runtime
from course.gemm.config import FP8, Config, capability, heuristic_config, supported_dtypes
from course.gemm.layout import INT32_LIMIT


def _check_dense(name: str, t) -> None:
    """A plain strided tensor: not sparse, nested or MKL-DNN (whose raw memory is no matrix)."""
    if t.layout is not torch.strided or t.is_nested:
        kind = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
        raise TypeError(f"{name} is a {kind} tensor, but the kernels read plain (strided) memory: "
                        f"pass {name}.to_dense()")


def _check_matrix(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    _check_dense(name, t)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got {t.dim()}-D with shape {tuple(t.shape)}; "
                         f"for batches, loop over the batch or reshape to 2-D")
    rows, cols = t.shape
    if rows >= INT32_LIMIT or cols >= INT32_LIMIT:
        raise ValueError(f"{name} has shape {(rows, cols)}: each dimension must be below 2^31 (the kernels' "
                         "tile indices are 32-bit); split the product into parts")
    for dim in range(2):
        if t.shape[dim] > 1 and t.stride(dim) <= 0:
            raise ValueError(f"{name} has stride {t.stride(dim)} in dimension {dim} (a broadcast or expanded "
                             f"view): pass {name}.contiguous() instead")
    if t.device.type != runtime.DEVICE:
        raise ValueError(f"{name} is on {t.device.type} but the kernels run on {runtime.DEVICE} "
                         f"(course.DEVICE): move it with {name}.to('{runtime.DEVICE}')")


def check_vector(name: str, t, length: int, length_name: str, dtypes, device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of length {length_name}={length}, got {type(t).__name__}")
    _check_dense(name, t)
    if t.dim() != 1 or t.shape[0] != length:
        raise ValueError(f"{name} must be 1-D of length {length_name}={length}, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} has dtype {str(t.dtype).replace('torch.', '')}: pass one of {names} "
                        f"(e.g. {name}.to(torch.{str(dtypes[0]).replace('torch.', '')}))")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but a is on {device}: put them on the same device")
    if length > 1 and t.stride(0) <= 0:
        raise ValueError(f"{name} has stride {t.stride(0)}: pass {name}.contiguous()")


def resolved(t):
    """``t`` as the kernel may read it: a lazy negation or conjugation view (``torch._neg_view``,
    ``x.conj()``), whose raw memory holds the values before the negation, materialized first."""
    if t is not None and t.is_neg() and t.dtype in FP8:  # CUDA has no fp8 negation: flip the sign bits
        return (torch._neg_view(t).view(torch.uint8) ^ 0x80).view(t.dtype)
    if t is not None and (t.is_neg() or t.is_conj()):
        return t.resolve_conj().resolve_neg()
    return t


def check_pair(a, b) -> None:
    _check_matrix("a", a)
    _check_matrix("b", b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)} (K={a.shape[1]}) but b is "
                         f"{tuple(b.shape)} (K={b.shape[0]}); a must be (M, K) and b (K, N) "
                         f"(did you mean b.T?)")
    if a.dtype != b.dtype:
        raise TypeError(f"a is {str(a.dtype).replace('torch.', '')} but b is {str(b.dtype).replace('torch.', '')}: "
                        f"convert one so both match, e.g. b.to(a.dtype)")
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} but b is on {b.device}: put both on the same device")


def check_dtype(dtype: torch.dtype) -> None:
    if dtype is torch.float16 or dtype is torch.float32 or (dtype is torch.bfloat16 and not runtime.INTERPRET):
        return  # the common case, without asking the GPU what it supports (a host-time saving)
    name = str(dtype).replace("torch.", "")
    if dtype == torch.int8:
        raise TypeError("a and b are int8: use matmul_int8(a, b, a_scale, b_scale) (int32 accumulation "
                        "and per-row/per-column scales)")
    if runtime.INTERPRET and dtype == torch.bfloat16:
        raise TypeError("bfloat16 does not work under Triton's CPU interpreter (it computes garbage there): "
                        "use float16 or float32 on the CPU; bfloat16 runs on a GPU")
    if dtype in FP8:
        if runtime.INTERPRET:
            raise TypeError(f"{name} (fp8) needs a GPU: Triton's interpreter has no fp8 arithmetic; use "
                            "float16 or float32 on the CPU")
        if capability() < (8, 9):
            raise TypeError(f"{name} (fp8) needs an sm_89+ GPU (Ada, Hopper); this one is "
                            f"sm_{''.join(map(str, capability()))}: use float16 or bfloat16")
        return
    if dtype not in supported_dtypes():
        names = ", ".join(str(d).replace("torch.", "") for d in supported_dtypes())
        raise TypeError(f"a and b have dtype {name}, which matmul does not support here: pass one of {names}")


def check_out(out, M, N, dtype, device) -> None:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor of shape ({M}, {N}), got {type(out).__name__}")
    _check_dense("out", out)
    if tuple(out.shape) != (M, N):
        raise ValueError(f"out has shape {tuple(out.shape)} but the product is ({M}, {N})")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {str(out.dtype).replace('torch.', '')} but the result is "
                        f"{str(dtype).replace('torch.', '')}: pass out_dtype={dtype} or a matching out")
    if out.device != device:
        raise ValueError(f"out is on {out.device} but a is on {device}")
    for dim in range(2):
        if out.shape[dim] > 1 and out.stride(dim) <= 0:
            raise ValueError(f"out has stride {out.stride(dim)} in dimension {dim}: every element needs its "
                             "own place; pass a fresh tensor")
    if _overlaps_itself(out):
        raise ValueError(f"out (shape {tuple(out.shape)}, strides {out.stride()}) has elements that share one "
                         "memory location: every element needs its own place; pass a fresh tensor")


def check_no_grad(named) -> None:
    """matmul has no backward (``course.gemm.autograd.matmul`` has): refuse tensors that autograd
    would expect it to record."""
    if not torch.is_grad_enabled():
        return
    for name, t in named:
        if t is not None and t.requires_grad:
            raise RuntimeError(f"{name} requires grad, but matmul is a forward-only kernel (no backward): call it "
                               f"under torch.no_grad() (or torch.inference_mode()), or pass {name}.detach(); "
                               "for gradients call course.gemm.autograd.matmul")


def span(t: torch.Tensor) -> tuple:
    """``[first, last)`` byte addresses of a non-empty 1-D or 2-D tensor with non-negative strides."""
    first = t.data_ptr()
    if t.dim() == 2:
        (n0, n1), (s0, s1) = t.shape, t.stride()
        return first, first + t.element_size() * (1 + (n0 - 1) * s0 + (n1 - 1) * s1)
    return first, first + t.element_size() * (1 + (t.shape[0] - 1) * t.stride(0))


def _offsets(t: torch.Tensor) -> torch.Tensor:
    """Every element's offset from ``t.data_ptr()``, in elements (int64, on ``t``'s device)."""
    offs = torch.zeros((), dtype=torch.int64, device=t.device)
    for n, s in zip(t.shape, t.stride()):
        offs = offs[..., None] + torch.arange(n, device=t.device) * s
    return offs.reshape(-1)


def _overlaps_itself(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` (positive strides) share a memory location, e.g. an
    ``as_strided`` view whose rows overlap. Cheap for the usual layouts (one dimension's stride
    spans the other's whole extent); the rare others are checked element by element."""
    (n0, n1), (s0, s1) = t.shape, t.stride()
    if n0 <= 1 or n1 <= 1:
        return False
    s_small, n_small, s_big = (s1, n1, s0) if s0 >= s1 else (s0, n0, s1)
    if s_big > (n_small - 1) * s_small:
        return False
    if s_big == s_small:
        return True
    return _offsets(t).unique().numel() != t.numel()


def check_no_overlap(out: torch.Tensor, inputs) -> None:
    """Refuse an ``out`` that shares memory with an input (``a``, ``b``, ``bias``, a scale): the
    kernel reads its inputs tile by tile while other programs already write C. Refused, as torch
    refuses such ``out=`` arguments, rather than computed through a hidden temporary
    (``notes/gemm-decisions.md``, "Inputs"). Disjoint byte ranges cost a few integer comparisons;
    interleaved views of one buffer (``x[::2]`` and ``x[1::2]``) are checked byte by byte.
    """
    o_first, o_last = span(out)
    for name, t in inputs:
        if t is None or t.numel() == 0:
            continue
        first, last = span(t)
        if first >= o_last or o_first >= last:
            continue  # disjoint address ranges: the usual case
        lo, hi = max(first, o_first), min(last, o_last)

        def touched(x):  # the bytes of x's elements in [lo, hi)
            es = x.element_size()
            start = x.data_ptr() + _offsets(x) * es
            byte = (start[:, None] + torch.arange(es, device=x.device)).reshape(-1)
            return byte[(byte >= lo) & (byte < hi)]

        if torch.isin(touched(t), touched(out)).any():
            raise ValueError(f"out and {name} share memory (out overlaps {name}): the kernel would read {name} "
                             f"while writing out; pass a fresh out, or {name}.clone()")


def resolve_config(config, M, N, K, dtype) -> Config:
    if config is None:
        return heuristic_config(M, N, K, dtype)
    if isinstance(config, dict):
        fields = [f.name for f in dataclasses.fields(Config)]
        unknown = [k for k in config if k not in fields]
        if unknown:
            raise TypeError(f"config has unknown field(s) {', '.join(map(repr, unknown))}: a Config's fields are "
                            f"{', '.join(fields)}")
        return Config(**config)
    if not isinstance(config, Config):
        raise TypeError(f"config must be a course.gemm.Config (or a dict of its fields), got {type(config).__name__}")
    if not runtime.INTERPRET and min(config.block_m, config.block_n, config.block_k) < 16:
        raise ValueError(f"config {config}: compiled, every block size must be at least 16 (tl.dot's minimum)")
    return config
