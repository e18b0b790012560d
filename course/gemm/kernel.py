"""The device side of ``course.gemm``: one kernel, built from the stages of ``course.stages``.

``matmul_kernel`` computes ``C = epilogue(A @ B)``: first whole tiles in a persistent loop, then (when
``STREAMK_TILES > 0``) the tiles of the last, partial wave split along K among several programs,
which add their partial sums (Stream-K). A and B arrive either as pointers with strides (any layout,
any GPU, the interpreter) or as tensor descriptors built on the host (Hopper's TMA);
``GemmContext.reduce_k_range`` runs the K loop of either kind of view. The host side (``course.gemm.plans``)
chooses the constants; ``course.gemm.config`` explains the choices.
"""

import triton
import triton.language as tl

from course.stages import (
    DescriptorOutputView,
    DescriptorView,
    GemmContext,
    ScheduleContext,
    make_bias_view,
    make_output_view,
    make_scale_view,
    make_tensor_view,
)


@triton.jit
def _widened(stride, WIDEN: tl.constexpr):
    # index * stride in int64 where the host set the stride's bit (never for a unit stride, which
    # Triton passes as the constant 1)
    if WIDEN:
        stride = stride.to(tl.int64)
    return stride


@triton.jit
def matmul_kernel(A, B, C, A_scale, B_scale, bias, partials, flags,
                   M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_bias,
                   stride_sa, stride_sb,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr, STREAMK_TILES: tl.constexpr,
                   STREAMK_PROGRAMS: tl.constexpr,
                   EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, QUANTIZED: tl.constexpr,
                   ALLOW_TF32: tl.constexpr, USE_TMA: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr,
                   TMA_STORE: tl.constexpr, C_T: tl.constexpr, C_HALVES: tl.constexpr, FLATTEN: tl.constexpr,
                   WIDE: tl.constexpr):
    """C = epilogue(A @ B): persistent tiles first, then (STREAMK_TILES > 0) the Stream-K tiles.

    With USE_TMA, A and B are tensor descriptors (TMA) instead of pointers; with TMA_STORE, C is.
    WIDE: a bit per stride (``course.gemm.layout.WIDE_BITS``) that the host widened to 64 bits, because the operand's
    element offsets reach 2^31 (``course.gemm.layout.wide_strides``); 0, the usual case, leaves every offset 32-bit.
    """
    # bit i of WIDE widens the i-th stride of course.gemm.layout.WIDE_BITS
    stride_am = _widened(stride_am, WIDE & 1)
    stride_ak = _widened(stride_ak, WIDE & 2)
    stride_bk = _widened(stride_bk, WIDE & 4)
    stride_bn = _widened(stride_bn, WIDE & 8)
    stride_cm = _widened(stride_cm, WIDE & 16)
    stride_cn = _widened(stride_cn, WIDE & 32)
    stride_sa = _widened(stride_sa, WIDE & 64)
    stride_sb = _widened(stride_sb, WIDE & 128)
    stride_bias = _widened(stride_bias, WIDE & 256)
    if USE_TMA:  # A and B arrive as tensor descriptors built on the host (see host_descriptor)
        tensorA = DescriptorView(A, A_T)
        tensorB = DescriptorView(B, B_T)
    else:
        tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
        tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    if TMA_STORE:  # so does C
        tensorC = DescriptorOutputView(C, C_T, C_HALVES)
    else:
        tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    scale = make_scale_view(A_scale, B_scale, M, N, stride_sa, stride_sb) if QUANTIZED else None
    bias_view = make_bias_view(bias, N, stride_bias) if HAS_BIAS else None

    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, 1, GROUP_SIZE_M,
                      allow_tf32=ALLOW_TF32, even_k=EVEN_K, quantized=QUANTIZED)
    sched = ScheduleContext(M, N, K, ctx, streamk_tiles=STREAMK_TILES, streamk_programs=STREAMK_PROGRAMS)

    # Data-parallel part: whole tiles, round-robin over the programs.
    num_k = tl.cdiv(K, BLOCK_K)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in tl.range(start, total, stride, flatten=FLATTEN):
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_k_range(tensorA, tensorB, out_tile, 0, num_k)
        tensorC.store(acc, out_tile, scale=scale, bias=bias_view)

    # Stream-K part. The pieces of this program's iteration range are walked from the LAST to
    # the first: the last piece (the head of a tile that a higher program finishes) is published
    # at once, and the first piece (the tail of a tile that lower programs started) is done last,
    # when their partials are most likely ready. Walking forward chains every program to the one
    # below it (measured: 0.1-0.5x of cuBLAS instead of ~1x).
    if STREAMK_TILES > 0:
        first_iter, end_iter = sched.iter_range()
        iters = sched.iters_per_tile()
        piece_end = end_iter
        while piece_end > first_iter:
            piece_start = tl.maximum(first_iter, ((piece_end - 1) // iters) * iters)
            tile_id, k_begin, k_end = sched.streamk_span(piece_start, piece_end)
            out_tile = sched.get_tile_from_idx(tile_id)
            acc = ctx.reduce_k_range(tensorA, tensorB, out_tile, k_begin, k_end)
            acc, owner = sched.streamk_fixup(acc, tile_id, k_begin, k_end, partials, flags)
            if owner:
                tensorC.store(acc, out_tile, scale=scale, bias=bias_view)
            piece_end = piece_start
