"""Is a kernel's output right? Relative error against a float64 reference, with one clear line.

The course's rule for every kernel:

1. allocate the output with :func:`poisoned` (NaN everywhere), so an element the kernel forgot
   to write cannot pass by accident;
2. compute the reference in float64 (int64 for integers) from the same inputs;
3. compare with :func:`check`, which measures ``||out - ref|| / ||ref||`` and allows a tolerance
   set by the output dtype (:data:`TOLERANCES`).

    >>> import torch
    >>> x = torch.randn(100, dtype=torch.float16)
    >>> check("copy", x.clone(), x.double())
    ✓ copy: relative error below 2e-03 (float16)
"""

from __future__ import annotations

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
_INT_SENTINEL = -(2**31) + 7  # an unlikely value marks unwritten integer outputs


def tolerance(dtype: torch.dtype) -> float:
    """The relative-error budget for outputs of ``dtype`` (0.0 for integers: exact)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"tolerance(dtype): pass a torch.dtype such as torch.float16, got {dtype!r}")
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:  # the fp8 family
        return FP8_TOLERANCE
    return 0.0


def poisoned(shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """A tensor that no correct kernel leaves as it is: NaN for floats, a sentinel for integers."""
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, _INT_SENTINEL if torch.iinfo(dtype).min <= _INT_SENTINEL else -1,
                      dtype=dtype, device=device)


def _require_tensor(name: str, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` computed in float64 (NaN if ``out`` has a NaN): on the device
    both tensors are on, else on the CPU."""
    _require_tensor("out", out)
    _require_tensor("ref", ref)
    if out.shape != ref.shape:
        raise ValueError(f"out has shape {tuple(out.shape)} but ref has {tuple(ref.shape)}: "
                         "compare tensors of the same shape")
    device = out.device if out.device == ref.device else "cpu"  # big GPU results need not cross to the host
    o = out.detach().to(device, torch.float64)
    r = ref.detach().to(device, torch.float64)
    diff = torch.linalg.vector_norm(o - r).item()
    scale = torch.linalg.vector_norm(r).item()
    return diff / scale if scale > 0 else diff


def check(name: str, out: torch.Tensor, ref: torch.Tensor, *, tol: float | None = None) -> None:
    """Print one line if ``out`` matches ``ref``; raise ``AssertionError`` saying what failed if not.

    ``ref`` should be computed in float64/int64. ``tol`` defaults to :func:`tolerance` of
    ``out.dtype``. The printed line holds no measured number, so it reads the same on every machine.
    """
    _require_tensor("out", out)
    _require_tensor("ref", ref)
    if out.shape != ref.shape:
        raise AssertionError(f"✗ {name}: output has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    tol = tolerance(out.dtype) if tol is None else tol
    o = out.detach().to("cpu")
    if o.dtype.is_floating_point:
        nans = torch.isnan(o).sum().item()
        if nans:
            first = tuple(torch.nonzero(torch.isnan(o))[0].tolist())
            raise AssertionError(
                f"✗ {name}: {nans} of {o.numel()} elements are NaN (first at {first}): the kernel did not "
                "write them (outputs start as NaN) or computed NaN"
            )
    elif o.numel() and (o == _INT_SENTINEL).any():
        missed = (o == _INT_SENTINEL).sum().item()
        raise AssertionError(f"✗ {name}: {missed} of {o.numel()} elements were never written")
    err = rel_error(o, ref)
    if not err <= tol:
        d = (o.double() - ref.detach().to("cpu", torch.float64)).abs()
        worst = tuple(int(i) for i in torch.unravel_index(torch.argmax(d), d.shape)) if d.numel() else ()
        got = o[worst].item() if worst else None
        want = ref.detach().to("cpu")[worst].item() if worst else None
        raise AssertionError(
            f"✗ {name}: relative error {err:.2e} exceeds the tolerance {tol:.0e} for {out.dtype}; "
            f"worst element at {worst}: got {got}, expected {want}"
        )
    kind = "exact" if tol == 0 else f"relative error below {tol:.0e}"
    print(f"✓ {name}: {kind} ({str(out.dtype).replace('torch.', '')})")
