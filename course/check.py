"""Is a kernel's output right? Relative error against a float64 reference, with one clear line.

The course's rule for every kernel:

1. allocate the output with :func:`poisoned` (NaN everywhere), so an element the kernel forgot
   to write cannot pass by accident;
2. compute the reference in float64 (int64 for integers) from the same inputs;
3. compare with :func:`check`, which measures ``||out - ref|| / ||ref||`` and allows a tolerance
   set by the output dtype (:data:`TOLERANCES`).

Non-finite values: where the reference is NaN, a NaN in the output is the right answer (whether
computed or left unwritten: the two cannot be told apart there), and an infinity equal to the
reference's (same sign) is right too; those elements are left out of the relative error. Any
other NaN in the output fails as unwritten (or computed NaN), and any other infinity, in either
tensor, fails. Complex outputs are compared as complex numbers (both parts), with the tolerance
of their real dtype.

    >>> import torch
    >>> x = torch.randn(100, dtype=torch.float16)
    >>> check("copy", x.clone(), x.double())
    ✓ copy: relative error below 2e-03 (float16)
"""

from __future__ import annotations

import math
import numbers

import torch

# Relative-error budgets, by output dtype. fp32 leaves room for TF32 (the tensor cores' fp32 mode,
# Triton's default for a float32 tl.dot on a GPU: about 3e-4 for a matmul); fp16 and bf16 for
# their rounding (2^-11 and 2^-8 per element); fp8 for e4m3's 3 mantissa bits. Integers are exact.
TOLERANCES = {
    torch.float64: 1e-12,
    torch.float32: 2e-3,
    torch.float16: 2e-3,
    torch.bfloat16: 1.6e-2,
}
FP8_TOLERANCE = 1e-1


def _int_sentinel(dtype: torch.dtype) -> int:
    """The value :func:`poisoned` fills an integer tensor with and :func:`check` reports as never
    written: an unlikely one, near but not at the end of the dtype's range (saturated results sit
    at the ends): -2**31 + 7 for int32, -121 for int8, 248 for uint8."""
    info = torch.iinfo(dtype)
    return info.min + 7 if info.min < 0 else info.max - 7


def tolerance(dtype: torch.dtype) -> float:
    """The relative-error budget for outputs of ``dtype`` (0.0 for integers: exact; a complex
    dtype has its real dtype's)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"tolerance(dtype): pass a torch.dtype such as torch.float16, got {dtype!r}")
    if dtype.is_complex:
        return tolerance(dtype.to_real())
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:  # the fp8 family
        return FP8_TOLERANCE
    return 0.0


def poisoned(shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """A tensor that no correct kernel leaves as it is: NaN for floats (and complex), for integers
    a sentinel :func:`check` reports as never written (see :func:`_int_sentinel`). Bool has no
    such value, so it is refused."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"poisoned(dtype=...): pass a torch.dtype such as torch.float16, got {dtype!r}")
    if dtype == torch.bool:
        raise ValueError("poisoned(dtype=torch.bool): a bool output has no value a kernel could not have "
                         "written (True and False are both answers); allocate it with torch.empty and "
                         "compare it with check(), or poison an int8 output instead")
    dims = (shape,) if isinstance(shape, int) else shape
    if isinstance(dims, torch.Size):
        dims = tuple(dims)
    if not isinstance(dims, (tuple, list)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ValueError(f"poisoned(shape={shape!r}): pass the shape as an int or a tuple of ints >= 0")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"poisoned(device={device!r}): not a torch device ({exc})") from None
    if dtype.is_floating_point or dtype.is_complex:
        return torch.full(tuple(dims), float("nan"), dtype=dtype, device=device)
    return torch.full(tuple(dims), _int_sentinel(dtype), dtype=dtype, device=device)


def _require_tensor(name: str, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def _common(out: torch.Tensor, ref: torch.Tensor, device) -> tuple:
    """Both tensors in float64, or complex128 if either is complex (a float64 copy of a complex
    tensor would drop its imaginary part)."""
    dtype = torch.complex128 if (out.is_complex() or ref.is_complex()) else torch.float64
    return out.detach().to(device, dtype), ref.detach().to(device, dtype)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` computed in float64 (complex128 if either is complex; NaN if
    ``out`` has a NaN): on the device both tensors are on, else on the CPU."""
    _require_tensor("out", out)
    _require_tensor("ref", ref)
    if out.shape != ref.shape:
        raise ValueError(f"out has shape {tuple(out.shape)} but ref has {tuple(ref.shape)}: "
                         "compare tensors of the same shape")
    device = out.device if out.device == ref.device else "cpu"  # big GPU results need not cross to the host
    o, r = _common(out, ref, device)
    diff = torch.linalg.vector_norm(o - r).item()
    scale = torch.linalg.vector_norm(r).item()
    return diff / scale if scale > 0 else diff


def _check_tol(tol) -> float:
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise TypeError(f"check(tol={tol!r}): pass the relative-error budget as a number such as 1e-3 "
                        f"(or None for the output dtype's), not a {type(tol).__name__}")
    if not math.isfinite(tol) or tol < 0:
        raise ValueError(f"check(tol={tol!r}): pass a finite relative-error budget >= 0 such as 1e-3 "
                         "(or None for the output dtype's)")
    return float(tol)


def _first(mask: torch.Tensor) -> tuple:
    return tuple(torch.nonzero(mask)[0].tolist()) if mask.dim() else ()


def check(name: str, out: torch.Tensor, ref: torch.Tensor, *, tol: float | None = None) -> None:
    """Print one line if ``out`` matches ``ref``; raise ``AssertionError`` saying what failed if not.

    ``ref`` should be computed in float64/int64. ``tol`` defaults to :func:`tolerance` of
    ``out.dtype``. The printed line holds no measured number, so it reads the same on every machine.
    NaN and infinities: see the module's docstring (matching non-finite values pass).
    """
    _require_tensor("out", out)
    _require_tensor("ref", ref)
    tol = tolerance(out.dtype) if tol is None else _check_tol(tol)
    if out.shape != ref.shape:
        raise AssertionError(f"✗ {name}: output has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    o = out.detach().to("cpu")
    r = ref.detach().to("cpu")
    inexact = o.is_floating_point() or o.is_complex()
    if inexact:
        o_nan = torch.isnan(o)
        r_nan = torch.isnan(r) if (r.is_floating_point() or r.is_complex()) else torch.zeros_like(o_nan)
        unexpected = o_nan & ~r_nan
        if unexpected.any():
            nans = int(unexpected.sum())
            where = " where the reference is not NaN" if r_nan.any() else ""
            raise AssertionError(
                f"✗ {name}: {nans} of {o.numel()} elements are NaN{where} (first at {_first(unexpected)}): "
                "the kernel did not write them (outputs start as NaN) or computed NaN"
            )
    elif o.numel() and o.dtype != torch.bool:
        sentinel = _int_sentinel(o.dtype)
        unwritten = (o == sentinel) & (r != sentinel)  # the sentinel is right where the reference has it
        if unwritten.any():
            missed = int(unwritten.sum())
            raise AssertionError(f"✗ {name}: {missed} of {o.numel()} elements were never written "
                                 f"(still {sentinel}, poisoned()'s marker; first at {_first(unwritten)})")
    o64, r64 = _common(o, r, "cpu")
    o_bad, r_bad = ~torch.isfinite(o64), ~torch.isfinite(r64)
    agree = (torch.isnan(o64) & torch.isnan(r64)) | (o_bad & r_bad & (o64 == r64))  # NaN/NaN, inf/inf
    disagree = (o_bad | r_bad) & ~agree
    if disagree.any():
        at = _first(disagree)
        raise AssertionError(
            f"✗ {name}: {int(disagree.sum())} of {o.numel()} elements are infinite or NaN in one tensor "
            f"but not the same in the other (first at {at}: got {o[at].item()}, expected {r[at].item()})"
        )
    if agree.any():  # matching non-finite values are right; measure the rest
        o64, r64 = o64[~agree], r64[~agree]
    err = rel_error(o64, r64)
    if not err <= tol:
        d = (o64 - r64).abs()
        keep = (~agree).nonzero()
        worst = tuple(int(i) for i in keep[torch.argmax(d)]) if d.numel() and o.dim() else ()
        got = o[worst].item() if o.numel() else None
        want = r[worst].item() if r.numel() else None
        raise AssertionError(
            f"✗ {name}: relative error {err:.2e} exceeds the tolerance {tol:.0e} for {out.dtype}; "
            f"worst element at {worst}: got {got}, expected {want}"
        )
    kind = "exact" if tol == 0 else f"relative error below {tol:.0e}"
    print(f"✓ {name}: {kind} ({str(out.dtype).replace('torch.', '')})")
