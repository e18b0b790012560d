"""Notebook 07: kernels written with the stages."""

from __future__ import annotations


import torch

from course import runtime
from course.exercises.core import Failed, close, compiles_for_a_gpu, exercise, require_jit, user_error

__all__ = ['check_linear']


_LINEAR_PARAMS = ("A", "W", "C", "M", "N", "K", "stride_am", "stride_ak", "stride_wn", "stride_wk", "stride_cm",
                  "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_SMS", "EVEN_K")


@exercise("linear", "Write the body of linear_kernel above with the stages: C = A @ W.T for a weight W of (N, K)")
def check_linear(linear_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``solutions.linear_kernel``: ``C = A @ W.T``
    for ``W`` of shape (N, K), on whole and ragged tiles, a ragged K, a transposed A and a sliced W,
    launched on a few programs (``stages_kernels.launch_linear``)."""
    from course import stages_kernels

    require_jit("linear_kernel", linear_kernel, _LINEAR_PARAMS, kind="kernel")
    cases = [("whole tiles (64 x 64 x 64)", 64, 64, 64, {}), ("ragged tiles (50 x 70 x 64)", 50, 70, 64, {}),
             ("a ragged K (64 x 64 x 40)", 64, 64, 40, {}),
             ("a transposed A and a sliced W (48 x 40 x 32)", 48, 40, 32, {"strided": True})]
    for what, M, N, K, options in cases:
        torch.manual_seed(0)
        a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
        w = torch.randn(N, K, device=runtime.DEVICE, dtype=torch.float16)
        if options.get("strided"):
            a = a.T.contiguous().T  # column-major
            w = torch.cat([w, w], dim=1)[:, :K]  # rows 2K apart
        buffer = torch.full((M * N + max(M, N, K) ** 2,), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
        c = buffer[:M * N].view(M, N)  # the rest catches stores past C (a wrong view would corrupt memory)
        try:
            stages_kernels.launch_linear(linear_kernel, a, w, c, num_programs=3, block_m=32, block_n=32, block_k=32,
                                         num_warps=4, num_stages=2)
        except Exception as err:
            raise user_error(f"on {what}, your kernel", err) from None
        if not torch.isnan(buffer[M * N:]).all():
            raise Failed(f"on {what}: the kernel stored past the end of C: C's output view is M x N (M rows, "
                          "N columns) with C's strides, stride_cm and stride_cn")
        _diagnose_linear(what, a, w, c)
    _each_program_its_own_tiles(linear_kernel)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t = torch.empty(64, 64, dtype=torch.float16)
        compiles_for_a_gpu(linear_kernel, t, t, t, 64, 64, 64, 64, 1, 64, 1, 64, 1, BLOCK_M=32, BLOCK_N=32,
                            BLOCK_K=16, NUM_SMS=4, EVEN_K=True)
    return f"right on {len(cases)} products: whole and ragged tiles, a ragged K, a transposed A and a sliced W"


def _diagnose_linear(what: str, a, w, c) -> None:
    K, N = a.shape[1], w.shape[0]
    ref = a.double().cpu() @ w.double().cpu().T
    missing = int(torch.isnan(c).sum())
    if missing == c.numel():
        raise Failed(f"on {what}: nothing was stored into C: for every tile of the schedule, reduce it over K and "
                      "store the accumulator through an output view of C")
    if missing:
        holes = torch.isnan(c).cpu()
        rows, cols = holes.all(dim=1), holes.all(dim=0)
        if rows.any() and torch.equal(holes, rows[:, None].expand_as(holes)) or \
                cols.any() and torch.equal(holes, cols[None, :].expand_as(holes)):
            raise Failed(f"on {what}: whole rows or columns of C were never stored: check the sizes you give "
                          "ScheduleContext and the output view (M rows, N columns, K the shared dimension)")
        raise Failed(f"on {what}: {missing} of {c.numel()} elements of C were never stored: take every tile "
                      "that ScheduleContext.persistent_tile_range gives this program (the kernel runs on 3 programs)")
    if close(c, ref):
        return
    try:  # W's own memory read with its strides the wrong way round (as the kernel would)
        wrong_strides = torch.as_strided(w, (K, N), w.stride()).double().cpu()
    except RuntimeError:  # that view would reach past W's memory
        wrong_strides = None
    if K == N and close(c, a.double().cpu() @ w.double().cpu()):
        raise Failed(f"on {what}: you computed A @ W, not A @ W.T: B must be W's transpose, a K x N view of W's "
                      "own memory. Which of W's two strides moves you along k, and which along n?")
    if wrong_strides is not None and close(c, a.double().cpu() @ wrong_strides):
        raise Failed(f"on {what}: B's view walks W with the strides the wrong way round: element (k, n) of W.T is "
                      "W[n, k], so B's row stride is stride_wk and its column stride stride_wn")
    truncated = (K // 32) * 32
    if K % 32 and close(c, a.double().cpu()[:, :truncated] @ w.double().cpu()[:, :truncated].T):
        raise Failed(f"on {what}: the last, partial step of K is missing or zero: tell GemmContext whether K is a "
                      "multiple of BLOCK_K (even_k=EVEN_K)")
    if "transposed" in what:  # right on every contiguous case before it
        raise Failed(f"on {what}: wrong values, where the contiguous cases were right: build each view from the "
                      "stride arguments you are given (stride_am, stride_ak, stride_wn, stride_wk), not from K and 1")
    raise Failed(f"on {what}: wrong values. A is M x K (stride_am, stride_ak), B = W.T is K x N, C is M x N "
                  "(stride_cm, stride_cn); check each view's sizes and strides")


def _each_program_its_own_tiles(linear_kernel) -> None:
    """Launch one program of NUM_SMS = 3: only the tiles of program 0 (ids 0, 3, 6, ...) may be written;
    a kernel whose programs all compute every tile is right, and three times too slow."""
    M = N = K = 64  # 2 x 2 tiles of 32: program 0 of 3 owns tile ids 0 and 3
    a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
    w = torch.randn(N, K, device=runtime.DEVICE, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
    linear_kernel[(1,)](a, w, c, M, N, K, *a.stride(), *w.stride(), *c.stride(), BLOCK_M=32, BLOCK_N=32,
                        BLOCK_K=32, NUM_SMS=3, EVEN_K=True, num_warps=4, num_stages=2)
    written = (~torch.isnan(c)).cpu().view(2, 32, 2, 32).all(dim=3).all(dim=1).flatten().tolist()
    if sum(written) > 2:
        raise Failed("right, but each program computes tiles that belong to other programs: with NUM_SMS "
                      "programs, program pid takes only the tile ids of persistent_tile_range (pid, pid + NUM_SMS, "
                      "...), with NUM_SMS given to GemmContext")
