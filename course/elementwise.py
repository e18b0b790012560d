"""Host-side helpers for the element-wise notebooks (01 vector add, 02 kernel fusion).

The kernels themselves live in the notebooks, where they are the lesson. What lives here is the
machinery around them: output buffers with guard elements (to *see* a missing mask instead of
crashing), finding runs of unwritten elements, a size sweep that times several implementations,
and the byte counts that put them on a roofline.

    >>> out, buf = guarded(1000)
    >>> out.shape, buf.numel() - out.numel() == GUARD
    (torch.Size([1000]), True)
"""

from __future__ import annotations

from typing import Callable

import torch

from course import runtime
from course.timing import bench, gbps, progress

#: Elements kept after the end of a guarded buffer. Larger than any block size the course uses,
#: so an unmasked store of the last block lands inside the guard, never past the allocation.
GUARD = 1 << 16


def guarded(n: int, *, dtype=torch.float32, device: str | None = None, guard: int = GUARD, fill=None):
    """A 1-D tensor of ``n`` elements that sits at the start of a longer buffer.

    Returns ``(view, buffer)``: ``view`` is what a kernel is given, ``buffer`` holds ``guard``
    more elements after it. With ``fill=None`` the buffer is poisoned (NaN for floats), so you
    can tell afterwards which elements a kernel wrote, inside the view and past its end. Pass
    ``fill=torch.randn`` (any ``fn(size, dtype=, device=)``) to get readable inputs instead.
    """
    if n < 0 or guard < 0:
        raise ValueError(f"guarded(n={n}, guard={guard}): both must be >= 0")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"guarded(dtype={dtype!r}): pass a floating-point torch.dtype such as torch.float32 "
                        "(unwritten elements are marked with NaN, which integers cannot hold)")
    device = device or runtime.DEVICE
    if fill is None:
        buffer = torch.full((n + guard,), float("nan"), dtype=dtype, device=device)
    else:
        buffer = fill(n + guard, dtype=dtype, device=device)
    return buffer[:n], buffer


def runs(flags: torch.Tensor) -> list[tuple[int, int]]:
    """The runs of True in a 1-D bool tensor, as inclusive ``(first, last)`` index pairs.

    >>> runs(torch.tensor([False, True, True, False, True]))
    [(1, 2), (4, 4)]
    """
    flags = flags.detach().to("cpu").reshape(-1).to(torch.int8)
    if not flags.any():
        return []
    edges = torch.diff(flags, prepend=torch.zeros(1, dtype=torch.int8), append=torch.zeros(1, dtype=torch.int8))
    starts = torch.nonzero(edges == 1).flatten().tolist()
    stops = torch.nonzero(edges == -1).flatten().tolist()
    return [(a, b - 1) for a, b in zip(starts, stops)]


def describe_runs(pairs: list[tuple[int, int]], most: int = 3) -> str:
    """``[(1000, 1023), (5, 5)]`` -> ``"1000..1023, 5"`` (at most ``most`` runs, then a count)."""
    text = [f"{a}" if a == b else f"{a}..{b}" for a, b in pairs[:most]]
    if len(pairs) > most:
        text.append(f"and {len(pairs) - most} more runs")
    return ", ".join(text)


def unwritten(out: torch.Tensor) -> list[tuple[int, int]]:
    """Runs of elements of ``out`` (flattened) that are still NaN, i.e. never written."""
    return runs(torch.isnan(out.reshape(-1)))


def overwritten_guard(buffer: torch.Tensor, n: int) -> list[tuple[int, int]]:
    """Runs of positions ``>= n`` in a guarded ``buffer`` that a kernel wrote (no longer NaN)."""
    past = ~torch.isnan(buffer.reshape(-1)[n:])
    return [(n + a, n + b) for a, b in runs(past)]


# --- timing over a sweep of sizes -------------------------------------------------------------

def sweep(sizes, setup: Callable[[int], tuple], impls: dict, *, desc: str = "sizes") -> list[dict]:
    """Time each implementation at each size; return one JSON-ready row per size.

    ``setup(n)`` builds the arguments for size ``n``; ``impls`` maps a label to
    ``(fn, bytes_moved)`` where ``fn(*args)`` runs the operation and ``bytes_moved(n)`` counts the
    bytes it reads plus writes in device memory. Each row holds ``n`` and, per label,
    ``<label>_ms`` and ``<label>_gbps``::

        rows = sweep([2**20, 2**24], lambda n: (torch.randn(n, device="cuda"),),
                     {"copy": (lambda x: x.clone(), lambda n: 8 * n)})
    """
    if not impls:
        raise ValueError("sweep(impls=...): pass at least one {label: (fn, bytes_moved)} entry")
    rows = []
    for n in progress(list(sizes), desc):
        args = setup(n)
        row = {"n": int(n)}
        for label, (fn, bytes_moved) in impls.items():
            ms = bench(lambda: fn(*args))
            row[f"{label}_ms"] = ms
            row[f"{label}_gbps"] = gbps(bytes_moved(n), ms)
        rows.append(row)
        del args  # free the inputs of this size before allocating the next
    return rows


def series(rows: list[dict], labels, field: str = "gbps", size: str = "n") -> dict:
    """``{label: (sizes, values)}`` for :func:`course.plots.throughput`, from :func:`sweep` rows
    (or :func:`course.tiled.time_matmuls` rows, with ``field="tflops", size="M"``)."""
    missing = [lb for lb in labels if f"{lb}_{field}" not in rows[0]]
    if missing:
        raise KeyError(f"series: rows have no {', '.join(f'{m}_{field}' for m in missing)}; "
                       f"they hold {', '.join(k for k in rows[0] if k != size)}")
    return {lb: ([r[size] for r in rows], [r[f"{lb}_{field}"] for r in rows]) for lb in labels}


def check_fraction(record, label: str, ceiling: float, *, at_least: float, min_n: int,
                   what: str = "the copy bandwidth") -> None:
    """Print one line if ``label`` reaches ``at_least`` of ``ceiling`` GB/s at every size >= ``min_n``
    in ``record`` (a :class:`course.records.Record`, or its rows).

    Raises ``AssertionError`` naming the sizes that fall short. The line holds no measured number,
    so it reads the same on every GPU; it says "in the recorded GPU run" when the numbers were not
    measured in this run.
    """
    rows = getattr(record, "rows", record)
    recorded = not getattr(record, "measured_here", False)
    where = "in the recorded GPU run, " if recorded else ""
    large = [r for r in rows if r["n"] >= min_n]
    if not large:
        raise ValueError(f"check_fraction: no row has n >= {min_n}")
    short = [r for r in large if r[f"{label}_gbps"] < at_least * ceiling]
    if short:
        detail = ", ".join(f"n=2^{r['n'].bit_length() - 1}: {r[f'{label}_gbps'] / ceiling:.0%}" for r in short)
        raise AssertionError(f"✗ {where}{label} falls below {at_least:.0%} of {what} at {detail}")
    print(f"✓ {where}{label} reaches at least {at_least:.0%} of {what} at every size from "
          f"2^{min_n.bit_length() - 1} up")
