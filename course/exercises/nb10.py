"""Notebook 10: layouts."""

from __future__ import annotations

import math


from course.exercises.core import Failed, exercise, require_function, user_error

__all__ = ['check_vector_layout']


@exercise("vector_layout", "Write vector_layout above: a BlockedLayout in which every thread loads 16 bytes at once")
def check_vector_layout(vector_layout) -> str:
    """Check ``vector_layout() -> gl.BlockedLayout`` for a 64 x 64 float16 tile, row-major in memory, on
    4 warps: every element held by exactly one thread; each thread's elements in runs of 8 consecutive
    float16 of a row (16 bytes: one vectorized load each); neighbouring lanes side by side along a row,
    so that a warp's load uses whole 32-byte sectors."""
    from course import layouts

    require_function("vector_layout", vector_layout, ())
    try:
        layout = vector_layout()
    except AssertionError as err:
        if str(err):
            raise user_error("your vector_layout", err) from None
        raise Failed("gl.BlockedLayout refused its arguments (an assertion without a message): its four lists "
                      "must have the same length, and each has two here, one for the rows and one for the "
                      "columns") from None
    except Exception as err:
        raise user_error("your vector_layout", err) from None
    if type(layout).__name__ != "BlockedLayout":
        raise Failed(f"vector_layout returned {type(layout).__name__ if layout is not None else 'None'}: return "
                      "gl.BlockedLayout(size_per_thread, threads_per_warp, warps_per_cta, order)")
    names = ("size_per_thread", "threads_per_warp", "warps_per_cta", "order")
    lists = [getattr(layout, name) for name in names]
    for name, values in zip(names, lists):
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                             for v in values):
            raise Failed(f"{name}={values!r}: pass a list of ints, one per dimension")
    size, threads, warps, order = (list(v) for v in lists)
    if len(size) != 2:
        raise Failed(f"the layout has rank {len(size)}: the tile is 2-D, so each list has two entries (rows, "
                      "columns)")
    if not len(threads) == len(warps) == len(order) == 2:
        raise Failed(f"the four lists have {len(size)}, {len(threads)}, {len(warps)} and {len(order)} entries: "
                      "each has two, one for the rows and one for the columns")
    for name, values in zip(names[:3], (size, threads, warps)):
        if any(v < 1 or v & (v - 1) for v in values):
            raise Failed(f"{name}={values}: every entry must be a power of two (1, 2, 4, 8, ...)")
    if math.prod(threads) != 32:
        raise Failed(f"threads_per_warp={threads} makes {math.prod(threads)} threads: a warp has 32")
    if math.prod(warps) != 4:
        raise Failed(f"warps_per_cta={warps} makes {math.prod(warps)} warps: the kernel runs on 4")
    if sorted(order) != [0, 1]:
        raise Failed(f"order={order}: order lists the dimensions, fastest first, each once")
    if order[0] != 1:
        raise Failed(f"order={order} makes dimension 0 (down a column) the fastest: in a row-major tile, which "
                      "dimension is contiguous in memory?")
    tile = [s * t * w for s, t, w in zip(size, threads, warps)]
    if tile[0] > 64 or tile[1] > 64:
        copies = int(layouts.ownership(layout, (64, 64))["copies"].max())
        raise Failed(f"the layout's tile is {tile[0]} x {tile[1]} (size x threads x warps per dimension), larger "
                      f"than the 64 x 64 tile: up to {copies} threads hold the same element. Keep each dimension's "
                      "product within 64")
    run = 2 * size[1]  # bytes of consecutive float16 one thread holds along a row
    if run < 16:
        raise Failed(f"each thread holds {size[1]} consecutive float16 of a row, {run} bytes: the widest load moves "
                      "16 bytes at once. How many float16 is that?")
    if run > 16:
        raise Failed(f"each thread holds {size[1]} consecutive float16 of a row, {run} bytes: that is {run // 16} "
                      f"16-byte loads, and in each the neighbouring lanes start {run} bytes apart, so every 32-byte "
                      "sector comes half used. Make a thread's run exactly one 16-byte load")
    if threads[1] < 2:
        raise Failed(f"threads_per_warp={threads} puts the lanes of a warp on {threads[0]} different rows, 16 "
                      "bytes each: every 32-byte sector a load fetches comes half used. Put neighbouring lanes side "
                      "by side along a row")
    owner = layouts.ownership(layout, (64, 64))
    if (owner["copies"] != 1).any():
        raise Failed("some elements are held by several threads: the layout's tile must divide 64 x 64")
    return (f"every element held once, each thread's in runs of 8 float16 along a row: one 16-byte load (LDG.E.128) "
            f"per run, {int(owner['register'].max()) // 8 + 1} per thread; a warp's load reads {16 * threads[1]} "
            f"contiguous bytes of each of {threads[0]} rows")
