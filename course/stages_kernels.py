"""Kernels written with ``course.stages`` (notebook 07), and small kernels that show what its pieces do.

    c = stages_matmul(a, b)                     # notebook 06's persistent GEMM, written with the stages
    tile = tile_indices(1, 2, 4, 8, M=6, N=20)  # what Tile.indices() and Tile.layout() give, per element
    order = schedule_order(6, 9, group_m=3)     # the tile of every id, by ScheduleContext.get_tile_from_idx

``stages_persistent_kernel`` is ``persistent.persistent_matmul_kernel`` said with the stages: views
instead of pointer arithmetic, ``GemmContext.reduce_axis`` instead of ``tiled.matmul_tile``'s K loop,
``ScheduleContext`` instead of the hand-written loop and ``grouped_tile``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course import runtime
from course.persistent import programs
from course.stages import GemmContext, ScheduleContext, Tile, make_descriptor_view, make_output_view, make_tensor_view
from course.tiled import prepare


@triton.jit
def stages_persistent_kernel(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, EVEN_K: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_PROGRAMS, group_size_m=GROUP_M, even_k=EVEN_K)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):  # 1-9% faster on an H100 than tl.range(..., flatten=True)
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        tensorC.store(acc, out_tile)


@triton.jit
def stages_tma_kernel(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    """stages_persistent_kernel with A and B read through tensor descriptors (TMA on Hopper): built in the
    kernel from the same pointers and strides (A's and B's last stride must be 1), out-of-bounds reads are
    zeros, so no masks and no EVEN_K. For the compiler's view (notebook 07); on a GPU a launch needs
    ``triton.set_allocator`` for the descriptors' workspace, which course.gemm's host descriptors avoid."""
    tensorA = make_descriptor_view(A, M, K, stride_am, stride_ak, BLOCK_M, BLOCK_K, False)
    tensorB = make_descriptor_view(B, K, N, stride_bk, stride_bn, BLOCK_K, BLOCK_N, False)
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_PROGRAMS, group_size_m=GROUP_M)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_k_range(tensorA, tensorB, out_tile, 0, tl.cdiv(K, BLOCK_K))  # a descriptor has no K
        tensorC.store(acc, out_tile)


def stages_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *,
                  num_programs: int | None = None, group_m: int = 8, block_m: int = 128, block_n: int = 128,
                  block_k: int = 64, num_warps: int = 8, num_stages: int = 4) -> torch.Tensor:
    """``a @ b`` by :func:`stages_persistent_kernel`, with ``persistent.persistent_matmul``'s defaults."""
    count = programs("stages_matmul", num_programs)
    out, work = prepare("stages_matmul", a, b, out, block_m=block_m, block_n=block_n, block_k=block_k)
    if work:
        M, K = a.shape
        N = b.shape[1]
        stages_persistent_kernel[(count,)](a, b, out, M, N, K, *a.stride(), *b.stride(), *out.stride(),
                                           BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
                                           NUM_PROGRAMS=count, EVEN_K=K % block_k == 0, num_warps=num_warps,
                                           num_stages=num_stages)
    return out


@triton.jit
def _tile_kernel(rm_ptr, rn_ptr, wrapped_m_ptr, wrapped_n_ptr, mask_ptr, pid_m, pid_n, M, N,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tile = Tile(pid_m, pid_n, BLOCK_M, BLOCK_N)
    rm, rn = tile.indices()
    wrapped_m, wrapped_n, mask = tile.layout(M, N)
    rows, cols = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N)
    tl.store(rm_ptr + rows, rm)
    tl.store(rn_ptr + cols, rn)
    tl.store(wrapped_m_ptr + rows, wrapped_m)
    tl.store(wrapped_n_ptr + cols, wrapped_n)
    tl.store(mask_ptr + rows[:, None] * BLOCK_N + cols[None, :], mask.to(tl.int8))


def tile_indices(pid_m: int, pid_n: int, block_m: int, block_n: int, *, M: int, N: int) -> dict:
    """What a ``Tile(pid_m, pid_n, block_m, block_n)`` computes inside a kernel, for an ``M x N``
    matrix: ``"rows"``, ``"cols"`` (``indices()``), ``"wrapped rows"``, ``"wrapped cols"`` and
    ``"mask"`` (``layout(M, N)``), as CPU tensors."""
    def empty(*shape, dtype=torch.int32):
        return torch.full(shape, -1, dtype=dtype, device=runtime.DEVICE)

    out = [empty(block_m), empty(block_n), empty(block_m), empty(block_n), empty(block_m, block_n, dtype=torch.int8)]
    _tile_kernel[(1,)](*out, pid_m, pid_n, M, N, BLOCK_M=block_m, BLOCK_N=block_n)
    names = ("rows", "cols", "wrapped rows", "wrapped cols", "mask")
    return {name: t.cpu() if name != "mask" else t.cpu().bool() for name, t in zip(names, out)}


@triton.jit
def _order_kernel(m_ptr, n_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    tile_id = tl.program_id(0)
    ctx = GemmContext(BLOCK_M, BLOCK_N, 16, 1, group_size_m=GROUP_M)
    tile = ScheduleContext(M, N, 16, ctx).get_tile_from_idx(tile_id)
    tl.store(m_ptr + tile_id, tile.pid_m)
    tl.store(n_ptr + tile_id, tile.pid_n)


def schedule_order(num_pid_m: int, num_pid_n: int, group_m: int) -> tuple:
    """``(pid_m, pid_n)`` of every tile id by ``ScheduleContext.get_tile_from_idx`` (tiles of 16 x
    16), indexed by tile id: comparable with ``tiled.launch_order``."""
    tiles = num_pid_m * num_pid_n
    pid_m = torch.full((tiles,), -1, dtype=torch.int32, device=runtime.DEVICE)
    pid_n = torch.full((tiles,), -1, dtype=torch.int32, device=runtime.DEVICE)
    _order_kernel[(tiles,)](pid_m, pid_n, 16 * num_pid_m, 16 * num_pid_n, BLOCK_M=16, BLOCK_N=16, GROUP_M=group_m)
    return pid_m.cpu(), pid_n.cpu()


def launch_linear(kernel, a, w, c, *, num_programs: int | None = None, block_m: int = 64, block_n: int = 64,
                  block_k: int = 32, num_warps: int = 4, num_stages: int = 3) -> None:
    """Launch ``kernel`` (the signature of notebook 07's exercise, ``linear_kernel``) for
    ``c = a @ w.T`` with ``w`` of shape (N, K), as ``torch.nn.Linear`` keeps its weight."""
    M, K = a.shape
    N = w.shape[0]
    count = programs("launch_linear", num_programs)
    kernel[(count,)](a, w, c, M, N, K, *a.stride(), *w.stride(), *c.stride(), BLOCK_M=block_m, BLOCK_N=block_n,
                     BLOCK_K=block_k, NUM_SMS=count, EVEN_K=K % block_k == 0, num_warps=num_warps,
                        num_stages=num_stages)
