"""Automatic checks for the notebooks' exercises.

Each ``check_*`` function runs your code on fresh random inputs, prints one ``✓`` line when it is
right, and otherwise raises ``AssertionError`` saying what went wrong and where to look, e.g.
"your kernel left elements 1000..1023 of out unwritten: does the grid cover every element
(triton.cdiv) and does the mask let the last block through?".

    >>> check_saxpy_cost(lambda n: (2 * n, 12 * n))
    ✓ saxpy cost: 2n FLOPs and 12n bytes (intensity 1/6 FLOP per byte)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

import torch

from course import runtime
from course.check import check
from course.elementwise import describe_runs, guarded, overwritten_guard, unwritten

# Odd sizes on purpose: 1 element, less than a block, a block and one more, not a multiple of 2.
ELEMENTWISE_SIZES = (1, 100, 1000, 1025, 4099)


# --- 00: counting FLOPs and bytes --------------------------------------------------------------

def check_saxpy_cost(saxpy_cost: Callable[[int], tuple]) -> None:
    """Check ``saxpy_cost(n) -> (flops, bytes_moved)`` for ``y = a * x + y`` on ``n`` float32 values.

    FLOPs: a multiply and an add per element. Bytes: the fewest a kernel must move through device
    memory, each input read once and the output written once.
    """
    for n in (1, 1000, 3 * 2**20):
        result = saxpy_cost(n)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise AssertionError(f"✗ saxpy_cost({n}) returned {result!r}: return a pair (flops, bytes_moved)")
        flops, nbytes = result
        if flops != 2 * n:
            hint = ("count both the multiply and the add" if flops == n else
                    "a * x + y is one multiply and one add per element, nothing more")
            raise AssertionError(f"✗ saxpy_cost({n}) gives {flops} FLOPs, expected {2 * n}: {hint}")
        if nbytes != 12 * n:
            per = Fraction(nbytes, n) if n else nbytes
            hints = {8: "you counted the two reads; y is also written back: 3 arrays of n values",
                     16: "the scalar a lives in a register, and y is read once and written once: 3 arrays",
                     3: "a float32 takes 4 bytes: count bytes, not elements",
                     2: "a float32 takes 4 bytes, and y is written as well as read"}
            hint = hints.get(per, "x is read, y is read, y is written: 3 arrays of n float32 values")
            raise AssertionError(f"✗ saxpy_cost({n}) gives {nbytes} bytes ({per}n), expected {12 * n} (12n): {hint}")
    print("✓ saxpy cost: 2n FLOPs and 12n bytes (intensity 1/6 FLOP per byte)")


# --- 01 and 02: element-wise kernels ------------------------------------------------------------

def _inputs(n: int, count: int, dtype) -> list[torch.Tensor]:
    """``count`` random inputs of ``n`` elements, each a view into a longer buffer, so that an
    unmasked load of the last block reads allocated memory instead of crashing the process."""
    return [guarded(n, dtype=dtype, fill=torch.randn)[0] for _ in range(count)]


def _check_elementwise(name: str, call: Callable, reference: Callable, n_inputs: int, *,
                       dtype=torch.float32, sizes=ELEMENTWISE_SIZES, shapes=None) -> None:
    """Run ``call(*inputs, out)`` over odd sizes and compare with ``reference(*inputs)`` in float64.

    ``out`` is poisoned (NaN) and followed by NaN guard elements, so the check can tell
    "never written" from "written past the end" from "wrong value".
    """
    shapes = shapes or [(n,) for n in sizes]
    for shape in shapes:
        n = int(torch.Size(shape).numel())
        inputs = [t.view(shape) for t in _inputs(n, n_inputs, dtype)]
        before = [t.clone() for t in inputs]
        out_flat, buffer = guarded(n, dtype=dtype)
        out = out_flat.view(shape)
        result = call(*inputs, out)
        if runtime.DEVICE == "cuda":
            torch.cuda.synchronize()
        if result is not None and result is not out and result.data_ptr() != out.data_ptr():
            raise AssertionError(f"✗ {name}: your function returned a new tensor; write into the `out` "
                                 "argument it is given (and return it or nothing)")
        past = overwritten_guard(buffer, n)
        if past:
            count = sum(b - a + 1 for a, b in past)
            raise AssertionError(
                f"✗ {name}: with n={n}, your kernel wrote {count} elements past the end of out "
                f"(positions {describe_runs(past)}): mask the store with offsets < n")
        holes = unwritten(out)
        if holes:
            raise AssertionError(
                f"✗ {name}: with n={n}, your kernel left {_elements(holes)} of out unwritten: "
                "does the grid cover every element (triton.cdiv(n, BLOCK_SIZE) programs) and does the "
                "mask let the last block through?")
        for i, (t, b) in enumerate(zip(inputs, before)):
            if not torch.equal(t, b):
                raise AssertionError(f"✗ {name}: input {i} changed: a kernel must only write its output")
        ref = reference(*[t.double() for t in inputs])
        try:
            check(f"{name}, shape {tuple(shape)}", out, ref, tol=None)
        except AssertionError as err:
            raise AssertionError(f"{err}\n  (the output is complete, so the arithmetic or the indexing "
                                 "of the inputs is off)") from None
    print(f"✓ {name}: right on all {len(shapes)} sizes tried, nothing written out of bounds")


def _elements(pairs) -> str:
    """``[(5, 5)]`` -> "element 5", ``[(1000, 1023)]`` -> "elements 1000..1023"."""
    single = len(pairs) == 1 and pairs[0][0] == pairs[0][1]
    return f"{'element' if single else 'elements'} {describe_runs(pairs)}"


def _quiet(fn):
    """Run ``fn`` with the per-size ✓ lines of :func:`course.check.check` hidden."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as buf:
        fn()
    lines = buf.getvalue().strip().splitlines()
    print(lines[-1])  # the summary line


def check_axpy(axpy: Callable) -> None:
    """Check ``axpy(alpha, x, y, out)``, which must write ``alpha * x + y`` into ``out``.

    Tries several values of ``alpha`` (it is a run-time argument, not a constant of the kernel)
    and odd sizes.
    """
    for alpha in (2.5, -0.75):
        _quiet(lambda: _check_elementwise(
            f"axpy (alpha={alpha})", lambda x, y, out: axpy(alpha, x, y, out),
            lambda x, y: alpha * x + y, 2))


def check_residual_relu(fused: Callable) -> None:
    """Check ``fused(x, residual, out)``, which must write ``relu(x + residual)`` into ``out``.

    Tries 1-D and 2-D shapes (a kernel may treat a contiguous tensor as flat memory).
    """
    shapes = [(n,) for n in ELEMENTWISE_SIZES] + [(3, 333), (64, 65)]
    _quiet(lambda: _check_elementwise("fused residual + relu", fused, lambda x, r: torch.relu(x + r), 2,
                                      shapes=shapes))


def check_residual_relu_bytes(unfused_bytes: Callable[[int], int], fused_bytes: Callable[[int], int]) -> None:
    """Check the byte counts of ``relu(x + residual)`` on ``n`` float32 values.

    Unfused (two torch ops): ``t = x + residual`` reads 2n and writes n values, ``relu(t)``
    reads n and writes n. Fused: read x and residual, write the result.
    """
    for n in (1, 4096, 10**6):
        got_u, got_f = unfused_bytes(n), fused_bytes(n)
        if got_u != 20 * n:
            per = Fraction(got_u, n)
            hint = {12: "that is the fused count: unfused, the intermediate x + residual is written and read back",
                    16: "relu also writes its output: 2 reads + 1 write, then 1 read + 1 write",
                    5: "count bytes (4 per float32), not elements"}.get(per, "x + residual: 2 reads + 1 write; "
                                                                        "relu: 1 read + 1 write; 4 bytes each")
            raise AssertionError(f"✗ unfused_bytes({n}) = {got_u} ({per}n), expected {20 * n} (20n): {hint}")
        if got_f != 12 * n:
            per = Fraction(got_f, n)
            hint = {3: "count bytes (4 per float32), not elements",
                    8: "the fused kernel reads x and residual (two arrays) and writes one"}.get(
                per, "fused: read x, read residual, write the result: 3 arrays of 4-byte values")
            raise AssertionError(f"✗ fused_bytes({n}) = {got_f} ({per}n), expected {12 * n} (12n): {hint}")
    print("✓ byte counts: unfused 20n, fused 12n: fusion moves 40% fewer bytes")
