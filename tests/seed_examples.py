"""The example kernels of the stages API's reference documents, copied as they are.

Only the import line differs (``course.stages`` instead of the original package), plus, in
``kernel``, the original's placeholder ``...`` at the end of the parameter list is dropped (it
is not valid Python). ``tests/test_stages.py`` runs all three against float64/int64 references.
Note the originals pass ``M`` to ``make_bias_view``: the course's bias is per output column
(length N), so the tests use M == N wherever a bias is given.
"""

import triton
import triton.language as tl

from course.stages import (
    GemmContext, ScheduleContext,
    make_tensor_view, make_output_view,
    make_scale_view, make_bias_view,
)


# Guide, "Quick Example"
@triton.jit
def gemm_kernel(A, B, C, M, N, K, 
                stride_am, stride_ak, stride_bk, stride_bn, 
                stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, 
                BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr):
    
    # Create matrix views - describe your matrices
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    
    # Create GEMM context with configuration
    ctx = GemmContext(
        block_m=BLOCK_M, block_n=BLOCK_N, block_k=BLOCK_K,
        num_sms=NUM_SMS, num_xcds=1, group_size_m=8,
    )
    
    # Create scheduler
    sched = ScheduleContext(M, N, K, ctx)
    
    # Persistent tile loop
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        
        # Compute GEMM
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        
        # Store result
        tensorC.store(acc, out_tile)


# Reference, module example (the trailing `...` parameter removed)
@triton.jit
def kernel(A, B, C, A_scale_ptr, B_scale_ptr, bias_ptr, M, N, K,
stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
stride_bias, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr,
EVEN_K: tl.constexpr, BIAS: tl.constexpr):
    # Create matrix views - just describe your matrices
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    # Create epilogue views (optional scale and bias)
    scale_view = make_scale_view(A_scale_ptr, B_scale_ptr, M, N) if A_scale_ptr is not None else None
    bias_view = make_bias_view(bias_ptr, M, stride_bias) if BIAS else None
    # Construct GemmContext on device with ALL parameters
    ctx = GemmContext(
    BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, NUM_XCDS, GROUP_SIZE_M,
    even_k=EVEN_K,
    )
    # Create schedule from GemmContext
    sched = ScheduleContext(M, N, K, ctx)
    # Persistent loop
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        # Compute GEMM
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        # Store with epilogue: scale -> bias -> convert -> store
        tensorC.store(acc, out_tile, scale=scale_view, bias=bias_view)


# Guide, "Complete Example: Quantized GEMM"
@triton.jit
def quantized_gemm_kernel(
    A, B, C, A_scale, B_scale, bias,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr,
    EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr,
):
    # Create matrix views
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    
    # Create epilogue views
    scale_view = make_scale_view(A_scale, B_scale, M, N)
    bias_view = make_bias_view(bias, M) if HAS_BIAS else None
    
    # Create context and scheduler
    ctx = GemmContext(
        block_m=BLOCK_M, block_n=BLOCK_N, block_k=BLOCK_K,
        num_sms=NUM_SMS, num_xcds=NUM_XCDS,
        even_k=EVEN_K, quantized=True,
    )
    sched = ScheduleContext(M, N, K, ctx)
    
    # Persistent tile loop
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        
        # Compute GEMM with int32 accumulation
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        
        # Store with full epilogue: scale -> bias -> convert -> store
        tensorC.store(acc, out_tile, scale=scale_view, bias=bias_view)
