"""Notebook 00: counting FLOPs and bytes."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Callable

from course.exercises.core import Failed, exercise, require_function, user_error

__all__ = ['check_saxpy_cost']


def _per_element(name: str, what: str, value, n: int):
    """Check that ``value`` (one of the numbers ``fn(n)`` returned) is a real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Failed(f"{name}({n}) gave {what} = {value!r}: return a number")
    if not math.isfinite(value):
        raise Failed(f"{name}({n}) gave {what} = {value}: return a finite number")
    return Fraction(value).limit_denominator(1000)


def linear_count(name: str, fn, what: str, pick=lambda r: r):
    """``(slope, offset)`` of ``n -> pick(fn(n))``, sampled at several n, or a ✗ if it is not a
    straight line through the samples."""
    samples = {}
    for n in (1000, 2000, 3 * 2**20, 1):
        try:
            result = fn(n)
        except Exception as err:  # the learner's function raised
            raise user_error(f"{name}({n})", err) from None
        samples[n] = _per_element(name, what, pick(result), n)
    if any(samples.values()) and all(abs(v) < n / 100 for n, v in samples.items() if n > 1):
        raise Failed(f"{what} is only {float(samples[3 * 2**20]):.3g} for n={3 * 2**20}: count plain units "
                      "(bytes, FLOPs), not GB, MB or thousands")
    slope = (samples[2000] - samples[1000]) / 1000
    offset = samples[1000] - 1000 * slope
    for n, value in samples.items():
        if value != slope * n + offset:
            raise Failed(f"{what} does not grow in proportion to n (compare {name}(1000) with {name}(2000) "
                          f"and {name}({n})): each element costs the same, so the count is a fixed amount times n")
    return slope, offset


def _pair(name: str, fn, n: int = 1000):
    try:
        result = fn(n)
    except Exception as err:
        raise user_error(f"{name}({n})", err) from None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise Failed(f"{name}({n}) returned {result!r}: return a pair, (flops, bytes_moved)")
    return result


def constant_term(what: str, offset, why: str = "count only what each element costs") -> None:
    if offset:
        raise Failed(f"{what} has a part that does not grow with n ({offset} at every size): {why}")


@exercise("saxpy_cost", "Fill in the body of saxpy_cost above: return (flops, bytes_moved)")
def check_saxpy_cost(saxpy_cost: Callable[[int], tuple]) -> str:
    """Check ``saxpy_cost(n) -> (flops, bytes_moved)`` for ``y = a * x + y`` on ``n`` float32 values.

    FLOPs: the arithmetic per element. Bytes: the fewest a kernel must move through device
    memory, each input read once and each output written once.
    """
    require_function("saxpy_cost", saxpy_cost, ("n",))
    _pair("saxpy_cost", saxpy_cost)
    flops, flops_offset = linear_count("saxpy_cost", saxpy_cost, "flops", lambda r: r[0])
    nbytes, bytes_offset = linear_count("saxpy_cost", saxpy_cost, "bytes_moved", lambda r: r[1])
    if nbytes == 2 and flops > nbytes:
        raise Failed("the first number grows faster than the second: the pair is (flops, bytes_moved), in that order")
    constant_term("flops", flops_offset, "the scalar a is a kernel argument, loaded once; count per-element work")
    hints = {1: "you counted one operation per element: a * x + y is a multiply and an add",
             0: "flops is zero: count the arithmetic done on each element",
             3: "a * x + y has one multiply and one add per element; nothing else is computed",
             4: "that counts bytes, not operations: FLOPs are the multiplies and adds"}
    if flops != 2:
        raise Failed(f"flops grows by {flops} per element: {hints.get(flops, hints[3])}")
    constant_term("bytes_moved", bytes_offset, "the scalar a is a kernel argument held in a register, not an "
                                                "array in memory; count only the arrays")
    hints = {8: "you counted reading x and y, but y is also written back to memory",
             4: "count every array the kernel reads or writes, not only x",
             16: "y is read once and written once; the scalar a is not an array, and nothing else moves",
             3: "that counts elements: each float32 takes 4 bytes",
             2: "that counts elements, and misses the write of y: each float32 takes 4 bytes",
             24: "a float32 takes 4 bytes, not 8",
             6: "a float32 takes 4 bytes, not 2"}
    if nbytes != 12:
        hint = hints.get(nbytes, "which arrays does the kernel read, which does it write, and how many bytes "
                                 "is one float32?")
        raise Failed(f"bytes_moved grows by {nbytes} per element: {hint}")
    return "right: 2n FLOPs and 12n bytes, an intensity of 1/6 FLOP per byte"
