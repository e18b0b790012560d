"""Tests of course.stages_kernels (notebook 07): the small kernels that show what Tile and ScheduleContext
compute, and the exercise's launcher (the GEMM itself is tested with notebook 06's, in test_persistent.py)."""

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import solutions, stages_kernels, tiled
from course.check import check, poisoned
from course.runtime import DEVICE, pick

SMALL = pick(cpu=dict(block_m=32, block_n=32, block_k=32), gpu={})


def test_stages_matmul_strides_and_bad_input():
    a = torch.randn(40, 50, device=DEVICE, dtype=torch.float16).T
    b = torch.randn(80, 40, device=DEVICE, dtype=torch.float16)[::2]
    check("transposed a, strided b", stages_kernels.stages_matmul(a, b, num_programs=3, **SMALL),
          a.double().cpu() @ b.double().cpu())
    with pytest.raises(ValueError, match="num_programs=0"):
        stages_kernels.stages_matmul(a, b, num_programs=0)


def test_the_tma_kernel_reads_ragged_edges_as_zeros():
    """Descriptors pad the edges with zeros: ragged M, N and K (a multiple of 8 elements, as TMA's 16-byte
    strides need), no masks, no EVEN_K."""
    import triton

    M, N, K = 70, 96, 104  # K is three and a quarter steps of 32
    a = torch.randn(M, K, device=DEVICE, dtype=torch.float16)
    b = torch.randn(K, N, device=DEVICE, dtype=torch.float16)
    c = poisoned((M, N), torch.float16, DEVICE)
    try:  # Triton's default allocator (private): restored after, so other kernels keep its clear error
        from triton.runtime._allocation import _allocator
        before = _allocator.get()
    except (ImportError, AttributeError):
        before = None
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=DEVICE))
    try:
        stages_kernels.stages_tma_kernel[(3,)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BLOCK_M=32,
                                               BLOCK_N=32, BLOCK_K=32, GROUP_M=2, NUM_PROGRAMS=3)
    finally:
        if before is not None:
            triton.set_allocator(before)
    check("through tensor descriptors", c, a.double().cpu() @ b.double().cpu())


def test_tile_indices_wrap_and_mask():
    t = stages_kernels.tile_indices(1, 2, 4, 8, M=6, N=20)
    assert t["rows"].tolist() == [4, 5, 6, 7] and t["cols"].tolist() == list(range(16, 24))
    assert t["wrapped rows"].tolist() == [4, 5, 0, 1] and t["wrapped cols"].tolist() == [16, 17, 18, 19, 0, 1, 2, 3]
    expected = (torch.tensor([4, 5, 6, 7])[:, None] < 6) & (torch.arange(16, 24)[None, :] < 20)
    assert torch.equal(t["mask"], expected)


@pytest.mark.parametrize("num_pid_m,num_pid_n,group_m", [(6, 9, 3), (5, 7, 2), (1, 4, 8)])
def test_schedule_order_is_the_grouped_order(num_pid_m, num_pid_n, group_m):
    mine, ref = stages_kernels.schedule_order(num_pid_m, num_pid_n, group_m), tiled.launch_order(num_pid_m, num_pid_n,
                                                                                                  group_m)
    assert torch.equal(mine[0], ref[0]) and torch.equal(mine[1], ref[1])


def test_the_linear_solution_computes_a_times_w_transposed():
    a = torch.randn(50, 40, device=DEVICE, dtype=torch.float16)
    w = torch.randn(70, 40, device=DEVICE, dtype=torch.float16)
    c = poisoned((50, 70), torch.float16, DEVICE)
    stages_kernels.launch_linear(solutions.linear_kernel, a, w, c, num_programs=3, block_m=32, block_n=32)
    check("A @ W.T", c, a.double().cpu() @ w.double().cpu().T)
