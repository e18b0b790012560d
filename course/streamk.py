"""Stream-K (notebook 09): who computes which K-iterations of which tile, drawn from the schedule itself.

    log = assignment(6, 5, 8, num_programs=4, streamk_tiles=6)   # program of every (tile, k), and counts
    spans = program_spans(log)                                   # per program, its pieces in the order run

A persistent launch of ``num_programs`` programs computes the first ``num_tiles - streamk_tiles``
tiles whole, round-robin; the K-iterations of the last ``streamk_tiles`` tiles (``iters_per_tile``
each) are cut into ``num_programs`` contiguous ranges of global iteration ids, one per program
(``ScheduleContext.iter_range``). ``assignment`` runs ``course.stages.ScheduleContext`` in a kernel
and records, for every (tile, k-iteration), the program that computed it, so the pictures and the
exercise's check see what a kernel would do. ``iter_range`` can be replaced by a function of your
own (``span=``): the exercise.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course import runtime
from course.stages import GemmContext, ScheduleContext


@triton.jit
def _assignment_kernel(owner_ptr, count_ptr, M, N, K, BLOCK: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                       GROUP_M: tl.constexpr, STREAMK_TILES: tl.constexpr, SPAN: tl.constexpr):
    pid = tl.program_id(0)
    ctx = GemmContext(BLOCK, BLOCK, BLOCK, NUM_PROGRAMS, group_size_m=GROUP_M)
    sched = ScheduleContext(M, N, K, ctx, streamk_tiles=STREAMK_TILES)
    iters = sched.iters_per_tile()
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):  # whole tiles: every K-iteration
        for k in range(0, iters):
            tl.store(owner_ptr + tile_id * iters + k, pid)
            tl.atomic_add(count_ptr + tile_id * iters + k, 1)
    first = total * iters  # the Stream-K iterations follow the whole tiles'
    if SPAN is None:
        begin, end = sched.iter_range()
    else:
        begin, end = SPAN(pid, sched.num_tiles() * iters - first, NUM_PROGRAMS)
        begin, end = first + begin, first + end
    for it in range(begin, end):
        inside = (it >= first) & (it < sched.num_tiles() * iters)
        tl.store(owner_ptr + it, pid, mask=inside)
        tl.atomic_add(count_ptr + it, 1, mask=inside)
        tl.atomic_add(count_ptr + sched.num_tiles() * iters, 1, mask=~inside)


def assignment(num_pid_m: int, num_pid_n: int, iters_per_tile: int, *, num_programs: int, streamk_tiles: int,
               group_m: int = 8, span=None) -> dict:
    """What a Stream-K schedule of ``num_programs`` programs does with ``num_pid_m x num_pid_n`` tiles of
    ``iters_per_tile`` K-iterations, the last ``streamk_tiles`` (by tile id, grouped order) shared out:
    ``"owner"`` and ``"count"``, ``(tiles, iters_per_tile)`` int tensors indexed by tile id (the program
    that computed each iteration, the last one if several did; how often it was computed), and
    ``"outside"``, iterations a span gave that lie past the end. ``span``: a ``@triton.jit`` function
    ``(pid, total, sharers) -> (start, end)`` in place of ``ScheduleContext.iter_range``."""
    if min(num_pid_m, num_pid_n, iters_per_tile, num_programs) < 1 or streamk_tiles < 0:
        raise ValueError("assignment: grid, iterations and programs must be >= 1, streamk_tiles >= 0")
    tiles = num_pid_m * num_pid_n
    owner = torch.full((tiles * iters_per_tile,), -1, dtype=torch.int32, device=runtime.DEVICE)
    count = torch.zeros(tiles * iters_per_tile + 1, dtype=torch.int32, device=runtime.DEVICE)
    block = 16
    _assignment_kernel[(num_programs,)](owner, count, block * num_pid_m, block * num_pid_n, block * iters_per_tile,
                                        BLOCK=block, NUM_PROGRAMS=num_programs, GROUP_M=group_m,
                                        STREAMK_TILES=streamk_tiles, SPAN=span)
    count = count.cpu()
    return {"owner": owner.cpu().view(tiles, iters_per_tile), "count": count[:-1].view(tiles, iters_per_tile),
            "outside": int(count[-1]), "streamk_tiles": min(streamk_tiles, tiles), "num_programs": num_programs}


def program_spans(log: dict) -> dict:
    """Per program, the pieces it computes in the order a course kernel runs them: its whole tiles
    first, then its Stream-K range walked from the last piece to the first (notes/stages.md says
    why). Each piece is ``(tile_id, k_begin, k_end)``."""
    owner = log["owner"]
    tiles, iters = owner.shape
    first_shared = tiles - log["streamk_tiles"]
    spans = {p: [] for p in range(log["num_programs"])}
    for tile in range(tiles):
        runs, k = [], 0
        while k < iters:  # runs of one program along the tile's iterations
            p, start = int(owner[tile, k]), k
            while k < iters and int(owner[tile, k]) == p:
                k += 1
            runs.append((p, start, k))
        for p, start, end in runs:
            if p >= 0:
                spans[p].append((tile, start, end))
    for p, pieces in spans.items():
        whole = [piece for piece in pieces if piece[0] < first_shared]
        shared = [piece for piece in pieces if piece[0] >= first_shared]
        spans[p] = whole + shared[::-1]
    return spans


@triton.jit
def _span_kinds_kernel(out_ptr, total, sharers, SPAN: tl.constexpr):
    start, end = SPAN(tl.program_id(0), total, sharers)
    zero = tl.zeros([1], dtype=tl.int32)
    if (start + zero).dtype.is_floating():  # an int32 block plus a float is a float
        tl.store(out_ptr + tl.arange(0, 1), 1 + zero)
    if (end + zero).dtype.is_floating():
        tl.store(out_ptr + 1 + tl.arange(0, 1), 1 + zero)


def span_returns_floats(span) -> tuple:
    """``(start is a float, end is a float)`` for a span function, run once in a kernel: loop bounds must be
    integers when compiled (the interpreter lets floats through)."""
    out = torch.zeros(2, dtype=torch.int32, device=runtime.DEVICE)
    _span_kinds_kernel[(1,)](out, 10, 3, SPAN=span)
    return tuple(bool(v) for v in out.cpu().tolist())
