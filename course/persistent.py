"""Persistent kernels (notebook 06): one program per SM, each looping over the tiles of C.

    c = persistent_matmul(a, b)                       # as many programs as SMs, tiles in grouped order
    log = schedule(6, 9, num_programs=4, group_m=3)   # which program took each tile, and when
    table = chiplet_table(304, 8)                     # stages.chiplet_transform of every program id

Notebooks 03-05 launch one program per tile. A persistent kernel launches ``num_programs`` (the
SM count) and program ``p`` computes tiles ``p, p + num_programs, p + 2 num_programs, ...``, the
tile ids taken in grouped order (``tiled.grouped_tile``) and each tile's work done by notebook 03's
``tiled.matmul_tile``. Run with ``LOG=True`` the kernel records, per tile, how often it was
computed, by which program and under which tile id (``log_tile``): the pictures of notebook 06 and
the check of its exercise read that record, so they show what the kernel did.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course import runtime
from course.gemm.config import sm_count
from course.stages import chiplet_transform, chiplet_transform_chunked
from course.tiled import grouped_tile, matmul_tile, prepare


@triton.jit
def log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n):
    """Record that this program computed tile ``(pid_m, pid_n)`` as tile id ``tile_id``: the log holds,
    per tile (row-major), a count of computations, the program and the tile id, and last a count of
    tiles outside the grid (see :func:`schedule`), which are not written anywhere else."""
    tile = pid_m * num_pid_n + pid_n
    inside = (pid_m >= 0) & (pid_n >= 0) & (pid_n < num_pid_n) & (tile < num_tiles)
    tl.atomic_add(log_ptr + tile, 1, mask=inside)
    tl.store(log_ptr + num_tiles + tile, tl.program_id(0), mask=inside)
    tl.store(log_ptr + 2 * num_tiles + tile, tile_id, mask=inside)
    tl.atomic_add(log_ptr + 3 * num_tiles, 1, mask=~inside)


@triton.jit
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, log_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                             stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                             LOG: tl.constexpr, FLATTEN: tl.constexpr = False):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    # Program pid takes tiles pid, pid + NUM_PROGRAMS, ... FLATTEN asks the compiler to merge this loop
    # with the K loop inside, to overlap tiles; with matmul_tile's masked loads it loses the pipeline
    # instead (0.4x on an H100, notebook 06), so it is off unless asked for.
    for tile_id in tl.range(pid, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)
        if LOG:
            log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n)


def programs(where: str, num_programs: int | None) -> int:
    """The programs of a persistent launch: ``num_programs``, or one per SM (``course.gemm.config.sm_count``:
    4 under the interpreter) for None; anything but an int >= 1 is refused, naming ``where``."""
    if num_programs is None:
        return sm_count()
    if isinstance(num_programs, bool) or not isinstance(num_programs, int) or num_programs < 1:
        raise ValueError(f"{where}: num_programs={num_programs!r} must be an int >= 1 (or None: the SMs)")
    return num_programs


def launch(kernel, a, b, c, log=None, *, num_programs: int | None = None, group_m: int = 8, block_m: int = 128,
           block_n: int = 128, block_k: int = 64, num_warps: int = 8, num_stages: int = 4,
           flatten: bool = False) -> None:
    """Launch ``kernel`` (``persistent_matmul_kernel``'s signature) on ``num_programs`` programs for
    ``c = a @ b``; with a ``log`` (int32, 3 x the tiles of C, zeros) it records each tile's work.
    ``flatten=True`` passes ``FLATTEN=True``, for kernels that take it."""
    M, K = a.shape
    N = b.shape[1]
    count = programs("persistent.launch", num_programs)
    kernel[(count,)](a, b, c, c if log is None else log, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                     BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, NUM_PROGRAMS=count,
                     LOG=log is not None, num_warps=num_warps, num_stages=num_stages,
                     **({"FLATTEN": True} if flatten else {}))


def persistent_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *,
                      num_programs: int | None = None, group_m: int = 8, block_m: int = 128, block_n: int = 128,
                      block_k: int = 64, num_warps: int = 8, num_stages: int = 4,
                      flatten: bool = False) -> torch.Tensor:
    """``a @ b`` by :func:`persistent_matmul_kernel` on ``num_programs`` programs (default: one per
    SM). The default blocks are ``tiled.grouped_matmul``'s, so the two differ only in the loop;
    ``flatten=True`` builds the loop with ``tl.range(..., flatten=True)``."""
    count = programs("persistent_matmul", num_programs)
    out, work = prepare("persistent_matmul", a, b, out, block_m=block_m, block_n=block_n, block_k=block_k)
    if work:
        launch(persistent_matmul_kernel, a, b, out, num_programs=count, group_m=group_m, block_m=block_m,
               block_n=block_n, block_k=block_k, num_warps=num_warps, num_stages=num_stages, flatten=flatten)
    return out


def schedule(num_pid_m: int, num_pid_n: int, *, num_programs: int, group_m: int = 8, kernel=None) -> dict:
    """Run ``kernel`` (default :func:`persistent_matmul_kernel`) with ``LOG=True`` on a C of
    ``num_pid_m x num_pid_n`` tiles of 16 x 16 (K = 16, so it is quick anywhere) and return what it
    recorded, each a ``num_pid_m x num_pid_n`` int tensor: ``"count"`` (how often each tile was
    computed), ``"program"`` (which program computed it, the last one if several did), ``"tile_id"``
    (under which id) and ``"step"`` (``tile_id // num_programs``: the turn of the loop). Also
    ``"outside"`` (how many logged tiles lay outside the grid), ``"c"`` and ``"ref"`` (the product
    and its float64 reference)."""
    M, N, K, block = 16 * num_pid_m, 16 * num_pid_n, 16, 16
    a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
    b = torch.randn(K, N, device=runtime.DEVICE, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
    tiles = num_pid_m * num_pid_n
    log = torch.zeros(3 * tiles + 1, dtype=torch.int32, device=runtime.DEVICE)
    log[tiles:3 * tiles] = -1
    launch(kernel or persistent_matmul_kernel, a, b, c, log, num_programs=num_programs, group_m=group_m,
           block_m=block, block_n=block, block_k=block, num_warps=4, num_stages=2)
    log = log.cpu()
    count, program, tile_id = log[:3 * tiles].view(3, num_pid_m, num_pid_n)
    return {"count": count, "program": program, "tile_id": tile_id, "outside": int(log[-1]),
            "step": torch.where(tile_id >= 0, tile_id // num_programs, -1), "c": c,
            "ref": a.double().cpu() @ b.double().cpu()}


# --- chiplets -----------------------------------------------------------------------------------------

@triton.jit
def _chiplet_kernel(out_ptr, NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    if CHUNK == 0:
        tl.store(out_ptr + pid, chiplet_transform(pid, NUM_SMS, NUM_XCDS))
    else:
        tl.store(out_ptr + pid, chiplet_transform_chunked(pid, NUM_SMS, NUM_XCDS, CHUNK))


def chiplet_table(num_sms: int, num_xcds: int, chunk: int = 0) -> torch.Tensor:
    """``table[p]``: the id that ``stages.chiplet_transform`` (``chunk=0``) or
    ``chiplet_transform_chunked`` gives program ``p`` of ``num_sms``, computed by those functions
    in a kernel."""
    if min(num_sms, num_xcds) < 1 or chunk < 0:
        raise ValueError(f"chiplet_table({num_sms}, {num_xcds}, chunk={chunk}): sizes >= 1, chunk >= 0")
    table = torch.full((num_sms,), -1, dtype=torch.int32, device=runtime.DEVICE)
    _chiplet_kernel[(num_sms,)](table, NUM_SMS=num_sms, NUM_XCDS=num_xcds, CHUNK=chunk)
    return table.cpu()


def xcd_map(num_pid_m: int, num_pid_n: int, num_xcds: int, table: torch.Tensor | None = None,
            group_m: int = 8) -> torch.Tensor:
    """The chiplet (XCD) that computes each tile of a ``num_pid_m x num_pid_n`` grid, one tile per
    program, tile ids in grouped order (``tiled.grouped_tile``). The hardware deals program ``p``
    to XCD ``p % num_xcds``; with a ``table`` (``chiplet_table``) program ``p`` takes tile id
    ``table[p]`` instead of ``p``."""
    from course import tiled

    programs = num_pid_m * num_pid_n
    pid_m, pid_n = tiled.launch_order(num_pid_m, num_pid_n, group_m)  # tile of each tile id
    tile_of = torch.arange(programs) if table is None else table.long()
    if sorted(tile_of.tolist()) != list(range(programs)):
        raise ValueError("xcd_map: the table is no permutation of the tile ids")
    xcds = torch.full((num_pid_m, num_pid_n), -1, dtype=torch.int64)
    xcds[pid_m[tile_of].long(), pid_n[tile_of].long()] = torch.arange(programs) % num_xcds
    return xcds


def xcd_footprint(xcds: torch.Tensor) -> list:
    """Per chiplet of an :func:`xcd_map`, ``(rows, columns)``: the distinct rows of tiles (strips of
    A) and columns (strips of B) its tiles need, which its own L2 has to hold."""
    return [(len(torch.unique(torch.nonzero(xcds == x)[:, 0])), len(torch.unique(torch.nonzero(xcds == x)[:, 1])))
            for x in range(int(xcds.max()) + 1)]
