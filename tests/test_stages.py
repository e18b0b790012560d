"""Tests of course/stages.py: every API of the reference documents, against float64/int64 references.

Under the interpreter (CPU) the sizes are tiny; compiled (GPU) they grow through ``course.pick``.
Outputs start poisoned (NaN, or a sentinel for integers), so an element a kernel forgets to write
fails the check. Scheduling is tested as properties: every (tile, K step) is computed exactly
once, chiplet remaps are permutations, Stream-K ranges are contiguous and balanced.
"""

import course  # noqa: F401  (first: decides interpreter or GPU before any kernel is defined)
import pytest
import torch
import triton
import triton.language as tl

from course import DEVICE, INTERPRET, pick
from course.check import check, poisoned
from course.stages import (
    DescriptorOutputView, DescriptorView, GemmContext, ScheduleContext, Tile,
    chiplet_transform, chiplet_transform_chunked,
    make_bias_view, make_descriptor_output_view, make_descriptor_view, make_input_view, make_output_view,
    make_scale_view, make_tensor_view,
)
import seed_examples

gpu_only = pytest.mark.skipif(INTERPRET, reason="needs a GPU: bf16/fp8 are wrong or missing in the interpreter")

# Blocks: small under the interpreter (about 1 ms per program and K step), GPU-sized compiled.
# A GPU's tl.dot needs every block dimension >= 16 (and block_k >= 32 for int8).
BM, BN, BK = pick(cpu=(16, 16, 16), gpu=(64, 64, 32))
NUM_SMS = pick(cpu=4, gpu=132)


def sizes(cpu, gpu):
    """Problem sizes by mode (interpreter sizes are kept to a few hundred program-steps)."""
    return pick(cpu=cpu, gpu=gpu)


def rand(shape, dtype, *, layout="row", scale=1.0):
    """A random matrix of ``shape`` stored row-major, column-major ("col") or with gaps ("strided")."""
    rows, cols = shape
    if dtype == torch.int8:
        make = lambda r, c: torch.randint(-128, 128, (r, c), dtype=torch.int8, device=DEVICE)  # noqa: E731
    else:
        make = lambda r, c: (torch.randn(r, c, device=DEVICE) * scale).to(dtype)  # noqa: E731
    if layout == "row":
        return make(rows, cols)
    if layout == "col":
        return make(cols, rows).t()
    if layout == "strided":  # every other row and column of a bigger matrix
        return make(2 * rows + 1, 2 * cols + 3)[1::2, ::2][:rows, :cols]
    raise ValueError(layout)


def out_buffer(shape, dtype, layout="row"):
    """A poisoned output (and the whole allocation behind it, to check nothing outside was written)."""
    rows, cols = shape
    if layout == "row":
        whole = poisoned((rows, cols), dtype, DEVICE)
        return whole, whole
    if layout == "col":
        whole = poisoned((cols, rows), dtype, DEVICE)
        return whole.t(), whole
    if layout == "strided":
        whole = poisoned((2 * rows + 1, 2 * cols + 3), dtype, DEVICE)
        return whole[1::2, ::2][:rows, :cols], whole
    raise ValueError(layout)


def assert_only_view_written(view, whole):
    """Every element of ``whole`` outside ``view`` must still hold its poison."""
    mask = torch.ones_like(whole, dtype=torch.bool)
    idx = torch.arange(whole.numel(), device=whole.device).reshape(whole.shape)
    inside = torch.as_strided(idx, view.shape, view.stride(), view.storage_offset() - whole.storage_offset())
    mask.view(-1)[inside.reshape(-1)] = False
    outside = whole[mask]
    if whole.dtype.is_floating_point:
        assert torch.isnan(outside).all(), "the kernel wrote outside the output view"
    else:
        assert (outside == poisoned((1,), whole.dtype)[0].item()).all(), "the kernel wrote outside the output view"


def ref_matmul(a, b):
    if a.dtype == torch.int8:
        return a.cpu().long() @ b.cpu().long()
    return a.cpu().double() @ b.cpu().double()


# ----------------------------------------------------------------------------------------------
# The reference documents' own example kernels (tests/seed_examples.py), unchanged
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", sizes(cpu=[(37, 29, 32), (1, 1, 16), (16, 48, 48)],
                                        gpu=[(300, 200, 256), (1, 1, 32), (64, 4096, 512)]))
def test_seed_quick_example(dtype, shape):
    M, N, K = shape
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    if M * N == 1:  # one output: keep it clear of cancellation, where a relative error means little
        a, b = a.abs(), b.abs()  # (TF32 on a GPU once gave 1.2e-2 for a sum that cancelled to 0.15)
    c = poisoned((M, N), dtype, DEVICE)
    seed_examples.gemm_kernel[(NUM_SMS,)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                          BM, BN, BK, NUM_SMS)
    check(f"quick example {shape}", c, ref_matmul(a, b))


@pytest.mark.parametrize("with_scale,with_bias", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16])
def test_seed_module_example(with_scale, with_bias, out_dtype):
    M = N = sizes(cpu=23, gpu=333)  # M == N: the original passes M to make_bias_view
    K = sizes(cpu=19, gpu=301)  # not a multiple of BLOCK_K: EVEN_K=False
    a, b = rand((M, K), torch.float16), rand((K, N), torch.float16)
    sa = torch.rand(M, device=DEVICE) + 0.5 if with_scale else None
    sb = torch.rand(N, device=DEVICE) + 0.5 if with_scale else None
    bias_whole = torch.randn(2 * N, device=DEVICE)
    bias = bias_whole[::2] if with_bias else None
    c = poisoned((M, N), out_dtype, DEVICE)
    seed_examples.kernel[(NUM_SMS,)](a, b, c, sa, sb, bias, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                     2, BM, BN, BK, 2, NUM_SMS, 1, False, with_bias)
    ref = ref_matmul(a, b)
    if with_scale:
        ref = ref * sa.cpu().double()[:, None] * sb.cpu().double()[None, :]
    if with_bias:
        ref = ref + bias.cpu().double()[None, :]
    check(f"module example scale={with_scale} bias={with_bias}", c, ref)


@pytest.mark.parametrize("even_k", [True, False])
@pytest.mark.parametrize("b_layout", ["row", "col"])
@pytest.mark.parametrize("has_bias", [True, False])
def test_seed_quantized_example(even_k, b_layout, has_bias):
    M = N = sizes(cpu=21, gpu=257)
    K = 64 if even_k else sizes(cpu=45, gpu=333)
    a, b = rand((M, K), torch.int8), rand((K, N), torch.int8, layout=b_layout)
    sa, sb = torch.rand(M, device=DEVICE) / 64, torch.rand(N, device=DEVICE) / 64
    bias = torch.randn(N, device=DEVICE)
    c = poisoned((M, N), torch.float32, DEVICE)
    seed_examples.quantized_gemm_kernel[(NUM_SMS,)](
        a, b, c, sa, sb, bias, M, N, K, *a.stride(), *b.stride(), *c.stride(),
        BM, BN, 32, NUM_SMS, 1, even_k, has_bias)
    ref = ref_matmul(a, b).double() * sa.cpu().double()[:, None] * sb.cpu().double()[None, :]
    if has_bias:
        ref = ref + bias.cpu().double()[None, :]
    check("quantized example", c, ref, tol=1e-6)  # int32 accumulation is exact: only fp32 rounding


# ----------------------------------------------------------------------------------------------
# One flexible kernel for dtypes, sizes, layouts and options
# ----------------------------------------------------------------------------------------------
@triton.jit
def stages_matmul_kernel(A, B, C, bias_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn, s_bias,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr, CHUNK_SIZE: tl.constexpr,
                         GROUP_SIZE_M: tl.constexpr, EVEN_K: tl.constexpr, ALLOW_TF32: tl.constexpr,
                         HAS_BIAS: tl.constexpr, PER_STEP: tl.constexpr, ACCUMULATE: tl.constexpr,
                         LOAD_BOUNDARY: tl.constexpr):
    tensorA = make_input_view(A, M, K, s_am, s_ak)
    tensorB = make_input_view(B, K, N, s_bk, s_bn)
    tensorC = make_output_view(C, M, N, s_cm, s_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, num_xcds=NUM_XCDS, group_size_m=GROUP_SIZE_M,
                      chunk_size=CHUNK_SIZE, allow_tf32=ALLOW_TF32, even_k=EVEN_K)
    sched = ScheduleContext(M, N, K, ctx)
    bias_view = make_bias_view(bias_ptr, N, s_bias) if HAS_BIAS else None
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        if PER_STEP:  # the seed's one-step API, masking every step when K is ragged
            acc = ctx.init_accumulator()
            for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
                acc = ctx.reduce_tile(tensorA, tensorB, out_tile, k_idx, acc, boundary=not EVEN_K)
        else:
            acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        if ACCUMULATE:  # C += A @ B through OutputView.load
            acc += tensorC.load(out_tile, boundary=LOAD_BOUNDARY).to(tl.float32)
        tensorC.store(acc, out_tile, bias=bias_view)


def run_matmul(a, b, c, *, bias=None, blocks=(BM, BN, BK), num_sms=NUM_SMS, num_xcds=1, chunk_size=1,
               group_size_m=8, allow_tf32=True, per_step=False, accumulate=False, load_boundary=True,
               even_k=None):
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk = blocks
    even_k = (K % bk == 0) if even_k is None else even_k
    stages_matmul_kernel[(num_sms,)](
        a, b, c, bias, M, N, K, *a.stride(), *b.stride(), *c.stride(), bias.stride(0) if bias is not None else 1,
        bm, bn, bk, num_sms, num_xcds, chunk_size, group_size_m, even_k, allow_tf32,
        bias is not None, per_step, accumulate, load_boundary)


SHAPES = sizes(
    cpu=[(1, 1, 1), (1, 17, 5), (17, 1, 33), (16, 16, 16), (33, 31, 7), (20, 40, 48), (45, 19, 50)],
    gpu=[(1, 1, 1), (1, 257, 100), (257, 1, 129), (64, 64, 32), (333, 271, 17), (256, 512, 1024),
         (1000, 999, 301)],
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", SHAPES)
def test_sizes_and_ragged_k(dtype, shape):
    """Odd sizes, sizes of 1, K < BLOCK_K and K % BLOCK_K != 0 (even_k=False when needed)."""
    M, N, K = shape
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    c = poisoned((M, N), dtype, DEVICE)
    run_matmul(a, b, c)
    check(f"{shape} {dtype}", c, ref_matmul(a, b))


@pytest.mark.parametrize("a_layout,b_layout,c_layout", [
    ("col", "row", "row"), ("row", "col", "row"), ("col", "col", "col"),
    ("strided", "strided", "strided"), ("row", "strided", "col"),
])
def test_layouts(a_layout, b_layout, c_layout):
    """Transposed (column-major) and strided A, B and C; nothing outside C's view is written."""
    M, N, K = sizes(cpu=(29, 35, 40), gpu=(300, 257, 200))
    a, b = rand((M, K), torch.float16, layout=a_layout), rand((K, N), torch.float16, layout=b_layout)
    c, whole = out_buffer((M, N), torch.float16, c_layout)
    run_matmul(a, b, c)
    check(f"layouts A={a_layout} B={b_layout} C={c_layout}", c, ref_matmul(a, b))
    assert_only_view_written(c, whole)


@pytest.mark.parametrize("even_k", [True, False])
def test_reduce_tile_steps(even_k):
    """The seed's step-by-step loop (reduce_tile with boundary masks) gives the same GEMM."""
    M, N = sizes(cpu=(21, 30), gpu=(300, 200))
    K = 2 * BK if even_k else BK + 3
    a, b = rand((M, K), torch.float32, layout="col"), rand((K, N), torch.float32)
    c = poisoned((M, N), torch.float32, DEVICE)
    run_matmul(a, b, c, per_step=True, even_k=even_k)
    check("reduce_tile loop", c, ref_matmul(a, b))


def test_exact_fp32_when_tf32_is_off():
    """allow_tf32=False asks tl.dot for exact fp32 ('ieee'): far tighter than the TF32 tolerance."""
    M, N, K = sizes(cpu=(20, 24, 40), gpu=(256, 256, 512))
    a, b = rand((M, K), torch.float32), rand((K, N), torch.float32)
    c = poisoned((M, N), torch.float32, DEVICE)
    run_matmul(a, b, c, allow_tf32=False)
    check("fp32 ieee", c, ref_matmul(a, b), tol=1e-5)


@pytest.mark.parametrize("load_boundary", [True, False])
def test_output_load_round_trip(load_boundary):
    """OutputView.load then store: C += A @ B (with and without the boundary mask)."""
    M, N, K = sizes(cpu=(19, 27, 16), gpu=(300, 200, 64))
    a, b = rand((M, K), torch.float32), rand((K, N), torch.float32)
    c0 = torch.randn(M, N, device=DEVICE)
    c = c0.clone()
    run_matmul(a, b, c, accumulate=True, load_boundary=load_boundary)
    check("C += A @ B", c, ref_matmul(a, b) + c0.cpu().double())


@pytest.mark.parametrize("group_size_m,num_xcds,chunk_size", [(1, 1, 1), (3, 1, 1), (8, 2, 1), (2, 3, 2)])
def test_schedules_compute_every_tile(group_size_m, num_xcds, chunk_size):
    """Grouped order and chiplet remaps change who computes what, never the result."""
    M, N, K = sizes(cpu=(50, 40, 16), gpu=(1000, 700, 64))
    a, b = rand((M, K), torch.float16), rand((K, N), torch.float16)
    c = poisoned((M, N), torch.float16, DEVICE)
    run_matmul(a, b, c, group_size_m=group_size_m, num_xcds=num_xcds, chunk_size=chunk_size,
               num_sms=pick(cpu=5, gpu=132))
    check(f"group={group_size_m} xcds={num_xcds} chunk={chunk_size}", c, ref_matmul(a, b))


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_bf16_and_fp8_inputs(dtype):
    M, N, K = 300, 257, 512
    a = rand((M, K), torch.float32).to(dtype)
    b = rand((N, K), torch.float32).to(dtype).t()  # K-major B: what fp8 tensor cores want
    out_dtype = torch.bfloat16 if dtype == torch.bfloat16 else torch.float16
    c = poisoned((M, N), out_dtype, DEVICE)
    run_matmul(a, b, c)
    check(f"{dtype} inputs", c, ref_matmul(a, b))


# ----------------------------------------------------------------------------------------------
# Unit strides as Python ints; epilogue views with non-unit strides; int8 -> int32 exact
# ----------------------------------------------------------------------------------------------
@triton.jit
def literal_unit_stride_kernel(A, B, C, M, N, K, s_am, s_bk, s_cm,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, s_am, 1)  # Python int strides
    tensorB = make_tensor_view(B, K, N, s_bk, 1)
    tensorC = make_output_view(C, M, N, s_cm, 1)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, 1, even_k=False)
    sched = ScheduleContext(M, N, K, ctx)
    out_tile = sched.get_tile_from_coord(tl.program_id(0), tl.program_id(1))
    tensorC.store(ctx.reduce_axis(tensorA, tensorB, out_tile), out_tile)


def test_unit_strides_as_python_ints():
    M, N, K = sizes(cpu=(20, 18, 21), gpu=(300, 200, 100))
    a, b = rand((M, K), torch.float16), rand((K, N), torch.float16)
    c = poisoned((M, N), torch.float32, DEVICE)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    literal_unit_stride_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BM, BN, BK)
    check("literal unit strides", c, ref_matmul(a, b))


@triton.jit
def epilogue_kernel(A, B, C, SA, SB, BIAS, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn, s_sa, s_sb, s_bias,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    NUM_SMS: tl.constexpr, QUANTIZED: tl.constexpr, TILE_METHODS: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, s_am, s_ak)
    tensorB = make_tensor_view(B, K, N, s_bk, s_bn)
    tensorC = make_output_view(C, M, N, s_cm, s_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, even_k=False, quantized=QUANTIZED)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        if TILE_METHODS == "tile":  # Tile.scale / Tile.bias
            acc = out_tile.scale(acc, SA, SB, M, N, s_sa, s_sb)
            acc = out_tile.bias(acc, BIAS, N, s_bias)
            tensorC.store(acc, out_tile)
        elif TILE_METHODS == "tile_defaults":  # the same with the default unit strides
            acc = out_tile.scale(acc, SA, SB, M, N)
            acc = out_tile.bias(acc, BIAS, N)
            tensorC.store(acc, out_tile)
        else:
            tensorC.store(acc, out_tile, scale=make_scale_view(SA, SB, M, N, s_sa, s_sb),
                          bias=make_bias_view(BIAS, N, s_bias))


@pytest.mark.parametrize("quantized", [True, False])
@pytest.mark.parametrize("tile_methods", ["views", "tile", "tile_defaults"])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16])
def test_scale_and_bias_with_strides(quantized, tile_methods, out_dtype):
    """Scales (per row of A, per column of B) and a per-column bias, read with strides 2 and 3
    (contiguous for the Tile methods' default strides)."""
    M, N, K = sizes(cpu=(22, 19, 40), gpu=(300, 257, 333))
    in_dtype = torch.int8 if quantized else torch.float16
    a, b = rand((M, K), in_dtype), rand((K, N), in_dtype, layout="col")
    sa_whole, sb_whole = torch.rand(2 * M, device=DEVICE) + 0.5, torch.rand(3 * N, device=DEVICE) + 0.5
    bias_whole = torch.randn(3 * N, device=DEVICE).to(torch.float16)
    sa, sb, bias = sa_whole[::2], sb_whole[::3], bias_whole[::3]
    if tile_methods == "tile_defaults":
        sa, sb, bias = sa.contiguous(), sb.contiguous(), bias.contiguous()
    if quantized:
        sa, sb = sa / 64, sb / 64
    c = poisoned((M, N), out_dtype, DEVICE)
    epilogue_kernel[(NUM_SMS,)](a, b, c, sa, sb, bias, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                sa.stride(0), sb.stride(0), bias.stride(0), BM, BN, 32, NUM_SMS, quantized,
                                tile_methods)
    ref = ref_matmul(a, b).double() * sa.cpu().double()[:, None] * sb.cpu().double()[None, :]
    ref = ref + bias.cpu().double()[None, :]
    check(f"scale+bias quantized={quantized}", c, ref)


@triton.jit
def int_accumulator_kernel(A, B, C, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           EVEN_K: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, s_am, s_ak)
    tensorB = make_tensor_view(B, K, N, s_bk, s_bn)
    tensorC = make_output_view(C, M, N, s_cm, s_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, 1, even_k=EVEN_K, quantized=True)
    out_tile = Tile(tl.program_id(0), tl.program_id(1), BLOCK_M, BLOCK_N)
    acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
    tl.static_assert(acc.dtype == tl.int32, "quantized accumulators are int32")
    tensorC.store(acc, out_tile)


@pytest.mark.parametrize("K", sizes(cpu=[32, 70, 5], gpu=[256, 1000, 5]))
@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_int8_accumulates_exactly_in_int32(K, b_layout):
    M, N = sizes(cpu=(17, 33), gpu=(300, 257))
    a, b = rand((M, K), torch.int8), rand((K, N), torch.int8, layout=b_layout)
    c = poisoned((M, N), torch.int32, DEVICE)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    int_accumulator_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM, BN, 32, K % 32 == 0)
    check(f"int8 K={K}", c, ref_matmul(a, b))  # tolerance 0 for integers: exact


def error_text(exc):
    """The messages of an exception and of its causes (Triton wraps errors of inner functions)."""
    parts = []
    while exc is not None:
        parts.append(str(exc))
        exc = exc.__cause__
    return "\n".join(parts)


def test_int8_without_quantized_is_named():
    a = torch.zeros(16, 32, device=DEVICE, dtype=torch.int8)
    c = torch.zeros(16, 16, device=DEVICE, dtype=torch.int32)
    with pytest.raises(Exception) as excinfo:
        run_matmul(a, torch.zeros(32, 16, device=DEVICE, dtype=torch.int8), c, blocks=(16, 16, 32))
    assert "need GemmContext(..., quantized=True)" in error_text(excinfo.value)


def test_bad_block_size_is_named():
    a = torch.zeros(16, 16, device=DEVICE, dtype=torch.float16)
    c = torch.zeros(16, 16, device=DEVICE, dtype=torch.float16)
    with pytest.raises(Exception) as excinfo:
        run_matmul(a, a, c, blocks=(48, 16, 16))
    assert "block_m=48 is not a power of two" in error_text(excinfo.value)


interpreter_only = pytest.mark.skipif(not INTERPRET, reason="compiled, the check is a device assertion that "
                                      "only debug mode (TRITON_DEBUG=1) arms, and a failed one ends the CUDA context")


@interpreter_only
@pytest.mark.parametrize("per_step", [False, True])
def test_even_k_with_a_ragged_k_is_caught(per_step):
    # even_k=True promises K % block_k == 0; broken, the K tail was dropped (K > block_k) or C was
    # all zeros (K < block_k) without a word
    for K in (BK + 3, BK - 5):
        a, b = rand((20, K), torch.float32), rand((K, 18), torch.float32)
        c = poisoned((20, 18), torch.float32, DEVICE)
        with pytest.raises(Exception) as excinfo:
            run_matmul(a, b, c, even_k=True)
        assert "GemmContext(even_k=True) promises K % block_k == 0" in error_text(excinfo.value)


@triton.jit
def two_k_kernel(A, B, C, M, N, K_A, K_B, BLOCK: tl.constexpr):
    tensorA = make_input_view(A, M, K_A, K_A, 1)
    tensorB = make_input_view(B, K_B, N, N, 1)
    tensorC = make_output_view(C, M, N, N, 1)
    ctx = GemmContext(BLOCK, BLOCK, BLOCK, 1, even_k=False)
    out_tile = Tile(0, 0, BLOCK, BLOCK)
    tensorC.store(ctx.reduce_axis(tensorA, tensorB, out_tile), out_tile)


@interpreter_only
def test_views_that_disagree_on_k_are_caught():
    a, b = rand((16, 20), torch.float32), rand((24, 16), torch.float32)
    c = poisoned((16, 16), torch.float32, DEVICE)
    with pytest.raises(Exception) as excinfo:
        two_k_kernel[(1,)](a, b, c, 16, 16, 20, 24, 16)
    assert "A has K columns but B has a different number of rows" in error_text(excinfo.value)
    two_k_kernel[(1,)](a, b[:20].contiguous(), c, 16, 16, 20, 20, 16)
    check("same K", c, ref_matmul(a, b[:20]))


@pytest.mark.parametrize("bad", ["data_ptr", "float stride"])
def test_factory_misuse_is_named(bad):
    a = rand((16, 16), torch.float32)
    c = poisoned((16, 16), torch.float32, DEVICE)
    with pytest.raises(Exception) as excinfo:
        if bad == "data_ptr":
            two_k_kernel[(1,)](a.data_ptr(), a, c, 16, 16, 16, 16, 16)
        else:
            literal_unit_stride_kernel[(1,)](a, a, c, 16, 16, 16, 16.0, 16, 16, 16, 16, 16)
    expected = ("InputView: ptr must be a pointer (pass the torch tensor itself" if bad == "data_ptr"
                else "InputView: stride_row must be an integer")
    assert expected in error_text(excinfo.value)


# ----------------------------------------------------------------------------------------------
# Tensor-descriptor (TMA) views, with descriptors built in the kernel or on the host (GPU only)
# ----------------------------------------------------------------------------------------------
@triton.jit
def descriptor_views_kernel(A, B, C, M, N, K, s_am, s_bk, s_bn, s_cm,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            B_T: tl.constexpr, HALVES: tl.constexpr, HOST: tl.constexpr):
    if HOST:  # A, B and C are TensorDescriptors made by the caller
        tensorA = DescriptorView(A, False)
        tensorB = DescriptorView(B, B_T)
        tensorC = DescriptorOutputView(C, False, HALVES)
    else:
        tensorA = make_descriptor_view(A, M, K, s_am, 1, BLOCK_M, BLOCK_K, False)
        tensorB = make_descriptor_view(B, K, N, s_bk, s_bn, BLOCK_K, BLOCK_N, B_T)
        tensorC = make_descriptor_output_view(C, M, N, s_cm, 1, BLOCK_M, BLOCK_N, False, HALVES)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, 1)
    sched = ScheduleContext(M, N, K, ctx)
    out_tile = sched.get_tile_from_coord(tl.program_id(0), tl.program_id(1))
    acc = ctx.init_accumulator()
    for k in range(tl.cdiv(K, BLOCK_K)):  # the ragged last K step reads zeros past K
        acc = ctx.reduce_tile(tensorA, tensorB, out_tile, k, acc)
    tensorC.store(acc, out_tile)


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("host", [True, False])
@pytest.mark.parametrize("b_layout", ["row", "col"])
@pytest.mark.parametrize("halves", [1, 2])
def test_descriptor_views(host, b_layout, halves):
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, N, K = 300, 264, 200  # edges in M and N, K not a multiple of BLOCK_K
    bm, bn, bk = 64, 128, 64
    a, b = rand((M, K), torch.float16), rand((K, N), torch.float16, layout=b_layout)
    c = poisoned((M, N), torch.float16, DEVICE)
    b_t = b_layout == "col"
    if host:
        A = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
        B = (TensorDescriptor(b, [N, K], [b.stride(1), 1], [bn, bk]) if b_t
             else TensorDescriptor(b, [K, N], [b.stride(0), 1], [bk, bn]))
        C = TensorDescriptor(c, [M, N], [c.stride(0), 1], [bm, bn // halves])
    else:
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device=DEVICE, dtype=torch.int8))
        A, B, C = a, b, c
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    descriptor_views_kernel[grid](A, B, C, M, N, K, a.stride(0), b.stride(0), b.stride(1), c.stride(0),
                                  bm, bn, bk, b_t, halves, host)
    check(f"descriptor views host={host} B {b_layout} halves={halves}", c, ref_matmul(a, b))


# ----------------------------------------------------------------------------------------------
# Scheduling properties
# ----------------------------------------------------------------------------------------------
@triton.jit
def coverage_kernel(COUNTS, OWNERS, RANGES, WHO, M, N, K,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr, CHUNK_SIZE: tl.constexpr,
                    GROUP_SIZE_M: tl.constexpr, STREAMK_TILES: tl.constexpr, PER_ITER: tl.constexpr,
                    STREAMK_PROGRAMS: tl.constexpr):
    """Counts, per output tile (by its coordinates) and K step, how often a program visits it."""
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, NUM_XCDS, GROUP_SIZE_M, CHUNK_SIZE)
    sched = ScheduleContext(M, N, K, ctx, streamk_tiles=STREAMK_TILES, streamk_programs=STREAMK_PROGRAMS)
    iters = sched.iters_per_tile()
    num_pid_n = tl.cdiv(N, BLOCK_N)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        tile = sched.get_tile_from_idx(tile_id)
        for k in range(0, iters):
            tl.atomic_add(COUNTS + (tile.pid_m * num_pid_n + tile.pid_n) * iters + k, 1)
        tl.atomic_add(OWNERS + tile.pid_m * num_pid_n + tile.pid_n, 1)
        tl.store(WHO + tile_id, tl.program_id(0))
    it, end = sched.iter_range()
    tl.store(RANGES + 2 * tl.program_id(0), it)
    tl.store(RANGES + 2 * tl.program_id(0) + 1, end)
    if PER_ITER:  # the seed's iteration-at-a-time walk
        for g in range(it, end):
            pid_m, pid_n, k = sched.get_iter(g)
            tl.atomic_add(COUNTS + (pid_m * num_pid_n + pid_n) * iters + k, 1)
            if k == iters - 1:
                tl.atomic_add(OWNERS + pid_m * num_pid_n + pid_n, 1)
    else:  # piece by piece, as a Stream-K kernel does
        while end > it:  # from the end of the range back
            tile_id, k_begin, k_end = sched.streamk_span(it, end)
            tile = sched.get_tile_from_idx(tile_id)
            for k in range(k_begin, k_end):
                tl.atomic_add(COUNTS + (tile.pid_m * num_pid_n + tile.pid_n) * iters + k, 1)
            if k_end == iters:
                tl.atomic_add(OWNERS + tile.pid_m * num_pid_n + tile.pid_n, 1)
            end -= k_end - k_begin


# (M, N, K, block_m, block_n, block_k, num_sms, streamk_tiles, num_xcds, chunk_size, group_size_m)
SCHEDULES = [
    (64, 64, 64, 16, 16, 16, 4, 0, 1, 1, 8),     # data-parallel only, even split
    (50, 70, 33, 16, 16, 16, 3, 0, 1, 1, 2),     # ragged edges, K not a multiple of block_k
    (50, 70, 33, 16, 32, 16, 3, 2, 1, 1, 2),     # a few Stream-K tiles
    (50, 70, 33, 16, 32, 16, 3, 8, 1, 1, 2),     # all tiles Stream-K (8 tiles)
    (50, 70, 33, 16, 32, 16, 3, 99, 1, 1, 2),    # more asked than there are: all
    (48, 48, 80, 16, 16, 16, 5, 4, 1, 1, 1),     # 20 Stream-K iterations over 5 programs
    (48, 48, 80, 16, 16, 16, 7, 4, 1, 1, 3),     # 20 over 7: uneven
    (16, 16, 48, 16, 16, 16, 8, 1, 1, 1, 8),     # fewer iterations (3) than programs (8)
    (40, 40, 16, 8, 8, 16, 1, 3, 1, 1, 4),       # a single program
    (96, 80, 32, 16, 16, 16, 8, 5, 2, 1, 4),     # chiplet remap (2 XCDs) + Stream-K
    (96, 80, 32, 16, 16, 16, 12, 0, 4, 1, 8),    # 4 XCDs
    (96, 80, 32, 16, 16, 16, 12, 7, 4, 2, 8),    # chunked remap
    (96, 80, 32, 16, 16, 16, 10, 3, 3, 2, 8),    # 10 programs over 3 XCDs, chunks of 2 (ragged)
    (1, 1, 1, 16, 16, 16, 3, 1, 1, 1, 8),        # one tile, one iteration
    (33, 65, 100, 16, 16, 8, 6, 13, 2, 3, 2),    # everything odd
    # (..., streamk_programs): the Stream-K iterations shared by fewer programs than launched
    (48, 48, 80, 16, 16, 16, 7, 4, 1, 1, 3, 4),  # 20 iterations over 4 of 7 programs: one tile each
    (48, 48, 80, 16, 16, 16, 7, 3, 1, 1, 3, 6),  # 15 over 6 of 7: half tiles (2 or 3 iterations)
    (50, 70, 33, 16, 32, 16, 5, 8, 1, 1, 2, 3),  # all 8 tiles over 3 of 5 programs
    (16, 16, 48, 16, 16, 16, 8, 1, 1, 1, 8, 99),  # more asked than launched: all 8
]


@pytest.mark.parametrize("per_iter", [False, True])
@pytest.mark.parametrize("schedule", SCHEDULES, ids=[str(s) for s in SCHEDULES])
def test_every_tile_and_k_step_once(schedule, per_iter):
    M, N, K, bm, bn, bk, num_sms, sk, xcds, chunk, group, *rest = schedule
    sharers = min(rest[0], num_sms) if rest else num_sms
    num_m, num_n, iters = triton.cdiv(M, bm), triton.cdiv(N, bn), triton.cdiv(K, bk)
    tiles = num_m * num_n
    counts = torch.zeros(tiles * iters, dtype=torch.int32, device=DEVICE)
    owners = torch.zeros(tiles, dtype=torch.int32, device=DEVICE)
    ranges = torch.full((num_sms, 2), -1, dtype=torch.int32, device=DEVICE)
    who = torch.full((tiles,), -1, dtype=torch.int32, device=DEVICE)
    coverage_kernel[(num_sms,)](counts, owners, ranges, who, M, N, K, bm, bn, bk, num_sms, xcds, chunk, group, sk,
                                per_iter, rest[0] if rest else 0)
    counts = counts.cpu().reshape(tiles, iters)
    assert (counts == 1).all(), f"(tile, k) visits should all be 1, got\n{counts}"
    assert (owners.cpu() == 1).all(), "every tile must be finished (its last K step) exactly once"
    # Stream-K ranges: contiguous, in program order, sizes differing by at most one.
    sk_tiles = min(sk, tiles)
    ranges = ranges.cpu()
    starts, ends = ranges[:, 0].tolist(), ranges[:, 1].tolist()
    assert starts[0] == (tiles - sk_tiles) * iters and ends[-1] == tiles * iters
    assert all(ends[p] == starts[p + 1] for p in range(num_sms - 1)), f"ranges not contiguous: {ranges}"
    lengths = [e - s for s, e in zip(starts, ends)]
    shared, idle = lengths[:sharers], lengths[sharers:]
    assert max(shared) - min(shared) <= 1 and shared == sorted(shared, reverse=True), lengths
    assert all(n == 0 for n in idle), f"programs past streamk_programs={sharers} got iterations: {lengths}"
    # Data-parallel tiles: program p starts at its chiplet-remapped id (chunked when chunk_size > 1).
    remap = torch.full((num_sms,), -1, dtype=torch.int32, device=DEVICE)
    chiplet_kernel[(1,)](remap, num_sms, xcds, chunk, chunk > 1, triton.next_power_of_2(num_sms))
    who = who.cpu().tolist()
    for p, first_tile in enumerate(remap.cpu().tolist()):
        if first_tile < tiles - sk_tiles:
            assert who[first_tile] == p, f"tile {first_tile} should be program {p}'s first, got {who[first_tile]}"


@triton.jit
def tile_layout_kernel(RM, RN, MASK, M, N):
    tile = Tile(1, 2, 16, 8)  # Python int coordinates and sizes
    rm, rn = tile.indices()
    tl.store(RM + tl.arange(0, 16), rm)
    tl.store(RN + tl.arange(0, 8), rn)
    wrapped_m, wrapped_n, mask = tile.layout(M, N)
    tl.store(RM + 16 + tl.arange(0, 16), wrapped_m)
    tl.store(RN + 8 + tl.arange(0, 8), wrapped_n)
    tl.store(MASK + tl.arange(0, 16)[:, None] * 8 + tl.arange(0, 8)[None, :], mask.to(tl.int32))


def test_tile_indices_and_layout():
    """Tile(1, 2, 16, 8) in a 20 x 21 matrix: rows 16..31, columns 16..23, wrapped and masked."""
    M, N = 20, 21
    rm = torch.full((32,), -1, dtype=torch.int32, device=DEVICE)
    rn = torch.full((16,), -1, dtype=torch.int32, device=DEVICE)
    mask = torch.full((16, 8), -1, dtype=torch.int32, device=DEVICE)
    tile_layout_kernel[(1,)](rm, rn, mask, M, N)
    rows, cols = torch.arange(16, 32), torch.arange(16, 24)
    assert rm.cpu().tolist() == rows.tolist() + (rows % M).tolist()
    assert rn.cpu().tolist() == cols.tolist() + (cols % N).tolist()
    assert torch.equal(mask.cpu().bool(), (rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def tile_order_kernel(OUT, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    ctx = GemmContext(BLOCK_M, BLOCK_N, 16, 1, group_size_m=GROUP_SIZE_M)
    sched = ScheduleContext(M, N, 16, ctx)
    for tile_id in range(0, sched.num_tiles()):
        tile = sched.get_tile_from_idx(tile_id)
        tl.store(OUT + 2 * tile_id, tile.pid_m)
        tl.store(OUT + 2 * tile_id + 1, tile.pid_n)


@pytest.mark.parametrize("group,expected", [
    (1, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]),  # row by row
    (2, [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]),  # two rows at a time, column by column
    (8, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]),  # one group: column-major
])
def test_grouped_tile_order(group, expected):
    """On a 3 x 2 grid of tiles, worked out by hand."""
    out = torch.full((6, 2), -1, dtype=torch.int32, device=DEVICE)
    tile_order_kernel[(1,)](out, 3 * 16, 2 * 16, 16, 16, group)
    assert [tuple(r) for r in out.cpu().tolist()] == expected


@triton.jit
def chiplet_kernel(OUT, n, NUM_XCDS: tl.constexpr, CHUNK: tl.constexpr, CHUNKED: tl.constexpr,
                   BLOCK: tl.constexpr):
    pid = tl.arange(0, BLOCK)
    if CHUNKED:
        new = chiplet_transform_chunked(pid, n, NUM_XCDS, CHUNK)
    else:
        new = chiplet_transform(pid, n, NUM_XCDS)
    tl.store(OUT + pid, new, mask=pid < n)


@pytest.mark.parametrize("num_xcds", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("n", [1, 7, 8, 38, 132, 304, 1000])
def test_chiplet_transforms_are_permutations(n, num_xcds):
    for chunked, chunk in [(False, 1), (True, 1), (True, 2), (True, 3), (True, 4)]:
        out = torch.full((n,), -1, dtype=torch.int32, device=DEVICE)
        chiplet_kernel[(1,)](out, n, num_xcds, chunk, chunked, triton.next_power_of_2(n))
        new = out.cpu().tolist()
        assert sorted(new) == list(range(n)), f"not a permutation (n={n}, xcds={num_xcds}, chunk={chunk})"
        # Locality: the ids given to the programs of one XCD (pid % num_xcds) come in runs.
        for xcd in range(num_xcds):
            if not chunked:  # one contiguous run per XCD
                ids = sorted(new[p] for p in range(xcd, n, num_xcds))
                assert not ids or ids[-1] - ids[0] == len(ids) - 1, f"XCD {xcd}: {ids}"
            else:  # runs of `chunk` consecutive ids, in the complete rounds
                full = n // (num_xcds * chunk) * (num_xcds * chunk)
                ids = sorted(new[p] for p in range(xcd, full, num_xcds))
                for i in range(0, len(ids), chunk):
                    assert ids[i + chunk - 1] - ids[i] == chunk - 1, f"XCD {xcd}: {ids} (chunk {chunk})"


# ----------------------------------------------------------------------------------------------
# Stream-K: partial tiles fixed up through the workspace
# ----------------------------------------------------------------------------------------------
@triton.jit
def streamk_kernel(A, B, C, SA, SB, P, FLAGS, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   NUM_SMS: tl.constexpr, STREAMK_TILES: tl.constexpr, EVEN_K: tl.constexpr,
                   QUANTIZED: tl.constexpr, STREAMK_PROGRAMS: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, s_am, s_ak)
    tensorB = make_tensor_view(B, K, N, s_bk, s_bn)
    tensorC = make_output_view(C, M, N, s_cm, s_cn)
    scale_view = make_scale_view(SA, SB, M, N) if QUANTIZED else None
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, group_size_m=2, even_k=EVEN_K, quantized=QUANTIZED)
    sched = ScheduleContext(M, N, K, ctx, streamk_tiles=STREAMK_TILES, streamk_programs=STREAMK_PROGRAMS)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        tensorC.store(acc, out_tile, scale=scale_view)
    it, end = sched.iter_range()
    while end > it:  # from the end of the range back (see course.stages)
        tile_id, k_begin, k_end = sched.streamk_span(it, end)
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_k_range(tensorA, tensorB, out_tile, k_begin, k_end)
        acc, owner = sched.streamk_fixup(acc, tile_id, k_begin, k_end, P, FLAGS)
        if owner:
            tensorC.store(acc, out_tile, scale=scale_view)
        end -= k_end - k_begin


STREAMK_CASES = sizes(
    # (M, N, K, num_sms, streamk_tiles[, streamk_programs]): with 16x16x16 blocks
    cpu=[(32, 48, 80, 4, 2), (32, 48, 80, 4, 6), (40, 33, 70, 3, 4), (16, 16, 200, 5, 1), (20, 20, 9, 3, 4),
         (32, 48, 80, 4, 3, 2), (40, 33, 70, 5, 3, 3)],
    gpu=[(512, 768, 1024, 132, 2), (512, 768, 1024, 132, 96), (1000, 1000, 999, 132, 30),
         (128, 128, 8192, 132, 4), (300, 300, 9, 7, 25), (1000, 1000, 999, 132, 30, 120),
         (512, 768, 1024, 132, 40, 80)],
)


@pytest.mark.parametrize("case", STREAMK_CASES, ids=[str(c) for c in STREAMK_CASES])
@pytest.mark.parametrize("dtype", [torch.float16, torch.int8])
def test_streamk_fixup(case, dtype):
    M, N, K, num_sms, sk, *rest = case
    bm, bn, bk = pick(cpu=(16, 16, 16), gpu=(64, 64, 32))
    quantized = dtype == torch.int8
    a, b = rand((M, K), dtype), rand((K, N), dtype, layout="col")
    sa, sb = torch.rand(M, device=DEVICE) / 64, torch.rand(N, device=DEVICE) / 64
    acc_dtype = torch.int32 if quantized else torch.float32
    partials = torch.full((num_sms * bm * bn,), 7, dtype=acc_dtype, device=DEVICE)  # stale junk
    flags = torch.zeros(num_sms, dtype=torch.int32, device=DEVICE)
    ref = ref_matmul(a, b).double()
    if quantized:
        ref = ref * sa.cpu().double()[:, None] * sb.cpu().double()[None, :]
    outs = []
    for launch in range(2):  # twice with the same workspace: the flags must come back to zero
        c = poisoned((M, N), torch.float32, DEVICE)
        streamk_kernel[(num_sms,)](a, b, c, sa, sb, partials, flags, M, N, K, *a.stride(), *b.stride(),
                                   *c.stride(), bm, bn, bk, num_sms, sk, K % bk == 0, quantized,
                                   rest[0] if rest else 0)
        check(f"Stream-K {case} launch {launch}", c, ref, tol=1e-6 if quantized else None)
        assert (flags.cpu() == 0).all(), f"flags not cleared after launch {launch}: {flags.tolist()}"
        outs.append(c)
    assert torch.equal(outs[0], outs[1]), "Stream-K results differ between launches (order of sums)"


@triton.jit
def _load_with_defaults(A, C, M, N, BLOCK: tl.constexpr):
    view = make_input_view(A, M, N, N, 1)
    tile = Tile(0, 0, BLOCK, BLOCK)
    x = view.load(tile) + view.load(tile, boundary=True)  # the docstring's calls, every default left out
    rm, rn = tile.indices()
    tl.store(C + rm[:, None] * N + rn[None, :], x, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_view_loads_with_default_arguments_compile_for_a_gpu():
    # A str default of a constexpr parameter of an aggregate's method reached the compiler as a plain
    # str ("'str' object has no attribute 'type'"); the interpreter never noticed.
    from course.compile import build

    x = torch.empty(64, 64, dtype=torch.float16)
    built = build(_load_with_defaults, x, x, 64, 64, BLOCK=32)
    assert built.count("ptx", r"ld\.global") > 0
    a, c = torch.randn(40, 40, device=DEVICE), poisoned((40, 40), torch.float32, DEVICE)
    _load_with_defaults[(1,)](a, c, 40, 40, BLOCK=32)
    check("both loads", c[:32, :32], 2 * a[:32, :32].double().cpu(), tol=1e-6)
