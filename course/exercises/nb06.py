"""Notebook 06: persistent kernels."""

from __future__ import annotations


import torch

from course import runtime
from course.exercises.core import Failed, close, compiles_for_a_gpu, exercise, plural, require_jit, user_error

__all__ = ['check_persistent_loop']


_PERSISTENT_PARAMS = ("a_ptr", "b_ptr", "c_ptr", "log_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                      "stride_bn", "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
                      "NUM_PROGRAMS", "LOG")


# (num_pid_m, num_pid_n, programs, GROUP_M): a ragged last turn, fewer tiles than programs, a short last group
_SCHEDULE_CASES = [(6, 9, 4, 3), (2, 3, 8, 2), (5, 7, 3, 2)]


@exercise("persistent_loop", "Write the body of persistent_matmul_kernel above: the loop over program pid's tiles")
def check_persistent_loop(persistent_matmul_kernel) -> str:
    """Check a kernel with the signature of ``course.persistent.persistent_matmul_kernel``: run on a
    few programs with ``LOG=True``, every tile must be computed once, by the program the round-robin
    gives it, in grouped order, and the product must be right (also with ``LOG=False``, on ragged
    edges)."""
    from course import persistent, plots

    kernel = persistent_matmul_kernel
    require_jit("persistent_matmul_kernel", kernel, _PERSISTENT_PARAMS, kind="kernel")
    for num_pid_m, num_pid_n, programs, group_m in _SCHEDULE_CASES:
        case = f"{num_pid_m} x {num_pid_n} tiles on {programs} programs, GROUP_M = {group_m}"
        torch.manual_seed(0)
        try:
            mine = persistent.schedule(num_pid_m, num_pid_n, num_programs=programs, group_m=group_m, kernel=kernel)
        except Exception as err:
            raise user_error(f"on {case}, your kernel", err) from None
        torch.manual_seed(0)
        ref = persistent.schedule(num_pid_m, num_pid_n, num_programs=programs, group_m=group_m)
        picture = lambda: plots.schedules({"yours": mine, "the reference": ref}, title=case)  # noqa: E731
        _diagnose_schedule(case, mine, ref, programs, picture)
    M, N, K = 70, 90, 40  # ragged tiles of 32, a ragged last step of K, LOG=False
    a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
    b = torch.randn(K, N, device=runtime.DEVICE, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
    try:
        persistent.launch(kernel, a, b, c, num_programs=3, group_m=2, block_m=32, block_n=32, block_k=32,
                          num_warps=4, num_stages=2)
    except Exception as err:
        raise user_error(f"on {M} x {N} x {K} with LOG=False, your kernel", err) from None
    ref = a.double().cpu() @ b.double().cpu()
    if not close(c, ref):
        raise Failed(f"on {M} x {N} x {K} with LOG=False the product is wrong, though it was right with LOG=True: "
                      "only the call of log_tile belongs under `if LOG:`, the tile's work runs either way")
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t = torch.empty(64, 64, dtype=torch.float16)
        compiles_for_a_gpu(kernel, t, t, t, torch.empty(64, dtype=torch.int32), 64, 64, 64, 64, 1, 64, 1, 64, 1,
                            BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_PROGRAMS=4, LOG=True)
    return (f"right on {len(_SCHEDULE_CASES)} schedules (a ragged last turn, fewer tiles than programs, a short "
            "last group) and a ragged product")


def _diagnose_schedule(case: str, mine: dict, ref: dict, programs: int, picture) -> None:
    """What a persistent loop's log says is wrong, from the likeliest mistake to the least."""
    count, c = mine["count"], mine["c"]
    tiles = count.numel()
    written = not torch.isnan(c).all()
    product_right = close(c, mine["ref"])
    if mine["outside"]:
        if product_right and not bool((count == 1).all()):  # computed right, logged under swapped coordinates
            raise Failed(f"on {case}: the product is right, but {plural(mine['outside'], 'tile')} were logged outside "
                          "the grid: grouped_tile returns (pid_m, pid_n), and log_tile takes (log_ptr, tile_id, "
                          "pid_m, pid_n, num_tiles, num_pid_n) in that order")
        raise Failed(f"on {case}: your loop went past the grid: {plural(mine['outside'], 'tile')} logged outside it. "
                      "Tile ids run from 0 to num_tiles - 1 (num_tiles = num_pid_m * num_pid_n); grouped_tile "
                      "takes (tile_id, num_pid_m, num_pid_n, GROUP_M) and returns (pid_m, pid_n), in that order")
    if int(count.sum()) == 0:
        if not written:
            raise Failed(f"on {case}: no tile was computed. Each program loops over its own tile ids (tl.range "
                          "works like range); for each id, grouped_tile gives the tile and matmul_tile computes it")
        if product_right:
            raise Failed(f"on {case}: the product is right, but no tile was logged: after computing a tile, "
                          "call log_tile when LOG is set")
    ids = ref["tile_id"]  # each tile's id in grouped order
    never, twice = int((count == 0).sum()), int((count > 1).sum())
    if never or twice:
        missed = sorted(ids[count == 0].tolist())
        if twice == 0 and torch.equal(count == 0, ids >= programs):
            why = ("each program computed only its first tile: a program must go on to the ids NUM_PROGRAMS "
                   "further on, and so on to the end")
        elif never == 0 and torch.equal(count, torch.clamp(ids, max=programs - 1) + 1):
            why = "program pid took every tile from pid on: step from one id to the next by the number of programs"
        elif bool((count[ids % programs == 0] == programs).all()) and torch.equal(count == 0, ids % programs != 0):
            why = "every program started at tile 0: each one starts at its own id"
        elif never == 0 and bool((count == programs).all()):
            why = ("every program computed every tile: program pid starts at tile id pid and steps by "
                   "NUM_PROGRAMS")
        elif int(count.max()) >= 2 and never:
            why = ("several programs computed the same tiles: map the loop's tile id, not the program id, to a "
                   "tile with grouped_tile")
        elif twice == 0 and missed == list(range(tiles - never, tiles)):
            why = (f"the last tile ids ({_ids(missed)}) were never taken: the loop stops early; it runs up to "
                   "num_tiles, the tiles of the whole grid")
        elif twice == 0 and missed == list(range(never)):
            why = f"the first tile ids ({_ids(missed)}) were never taken: check where each program's loop starts"
        else:
            why = f"tile ids {_ids(missed)} were never taken: each id from 0 to num_tiles - 1 needs exactly one program"
        raise Failed(f"on {case}: {plural(twice, 'tile')} computed more than once and {never} never "
                      f"(of {tiles}): {why}", picture())
    if not written:
        raise Failed(f"on {case}: every tile was logged once, but C was never written: compute each tile with "
                      "matmul_tile")
    if not product_right:
        raise Failed(f"on {case}: every tile was computed once, but the product is wrong: call matmul_tile with "
                      "the tile's pid_m, pid_n from grouped_tile (in that order) and the kernel's own arguments")
    if not torch.equal(mine["program"], ref["program"]):
        row_major = torch.arange(tiles).view_as(ids)
        if torch.equal(mine["tile_id"], row_major):
            why = "the tile ids go row by row: map each id to its tile with grouped_tile, as in notebook 04"
        else:
            why = ("program pid must take every NUM_PROGRAMS-th tile id from its own id on, and map each to a "
                   "tile with grouped_tile")
        raise Failed(f"on {case}: every tile was computed once and the product is right, but not by the "
                      f"programs of the grouped round-robin: {why}", picture())
    if not torch.equal(mine["tile_id"], ids):
        raise Failed(f"on {case}: right, but log_tile got other tile ids than the loop's: pass the loop's tile "
                      "id, then pid_m and pid_n", picture())


def _ids(ids: list) -> str:
    return ", ".join(map(str, ids[:4])) + (f", … ({len(ids)} in all)" if len(ids) > 4 else "")
