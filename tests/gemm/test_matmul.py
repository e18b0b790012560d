"""Tests of course.gemm's results (matmul, matmul_int8): against float64 in every mode, layout and dtype,
int8 with scales, Stream-K sharing and the tail split, edges (overlapping outputs, empty products,
offsets past 2^31) and every error message.

Under the interpreter (CI, no GPU) the problems are tiny and blocks are 16; on a GPU the same tests
run compiled on larger problems (``course.pick``). bf16 and fp8 need a GPU (``@pytest.mark.gpu``).
"""

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gemm_cases import MODES, TAIL_CASES, gpu, int8_case, randn, reference

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import gemm
from course.check import check, poisoned, tolerance
from course.gemm import Config, matmul, matmul_int8
from course.gemm import config as gemm_config
from course.gemm import inputs as gemm_inputs
from course.gemm import layout as gemm_layout
from course.runtime import DEVICE, INTERPRET, pick

FLOAT_DTYPES = [torch.float16, torch.float32]

_rng = random.Random(20261121)
_RANDOM_SHAPES = [tuple(_rng.randint(1, pick(cpu=40, gpu=700)) for _ in range(3)) for _ in range(3)]
SHAPES = pick(
    cpu=[(1, 1, 1), (33, 47, 19), (16, 64, 48)] + _RANDOM_SHAPES,
    # (13, 10200, 1000) and (40, 14000, 520): decode with the 128-wide TMA tiles of wide weights, ragged N and K
    gpu=[(1, 1, 1), (127, 255, 63), (1000, 1000, 1000), (1024, 512, 2048), (16, 4096, 300), (64, 1536, 520),
         (13, 10200, 1000), (40, 14000, 520)] + _RANDOM_SHAPES,
)


# --- results ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=["fp16", "fp32"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_matches_float64(shape, dtype, mode):
    M, N, K = shape
    a, b = randn(M, K, dtype=dtype), randn(K, N, dtype=dtype)
    out = poisoned((M, N), dtype, DEVICE)
    matmul(a, b, mode=mode, out=out)
    check(f"matmul {M}x{N}x{K} {mode}", out, reference(a, b))


@pytest.mark.parametrize("a_layout", ["row", "transposed", "strided"])
@pytest.mark.parametrize("b_layout", ["row", "transposed", "strided"])
def test_any_strides_without_copies(a_layout, b_layout, monkeypatch):
    # the kernel itself reads every layout: no operand is copied into aligned rows here
    monkeypatch.setattr(gemm_layout, "MACS_PER_COPIED_ELEMENT", float("inf"))
    M, N, K = pick(cpu=(35, 29, 41), gpu=(777, 555, 333))

    def make(rows, cols, layout):
        if layout == "row":
            return randn(rows, cols)
        if layout == "transposed":
            return randn(cols, rows).T
        return randn(rows, 3 * cols)[:, ::3]  # every third column: strides (3*cols, 3)

    a, b = make(M, K, a_layout), make(K, N, b_layout)
    out = poisoned((N, M), torch.float16, DEVICE).T  # a transposed output view
    result = matmul(a, b, out=out)
    assert result.data_ptr() == out.data_ptr()
    check(f"A {a_layout}, B {b_layout}, C transposed", out, reference(a, b))


def test_strided_output_rows():
    M, N, K = pick(cpu=(20, 24, 18), gpu=(300, 256, 200))
    a, b = randn(M, K), randn(K, N)
    big = poisoned((2 * M, N + 8), torch.float16, DEVICE)
    out = big[::2, 4:4 + N]  # every other row of a wider matrix
    matmul(a, b, out=out)
    check("C with a row stride", out, reference(a, b))
    assert torch.isnan(big[1::2]).all(), "rows between the output rows were overwritten"


def test_short_products_with_unaligned_weights_take_narrow_k_steps():
    # M < MACS_PER_COPIED_ELEMENT: b is not copied, so its odd rows take 2-byte pointer loads, where
    # the heuristic's K step of 256 measured 10x slower than 64 (H100): 16 x 128 x 64 tiles instead
    meta = lambda *shape, dtype=torch.bfloat16: torch.empty(*shape, dtype=dtype, device="meta")  # noqa: E731
    along_k = gemm.unaligned_decode_config(meta(1, 4095), meta(4096, 4095).T)  # K-major, K = 4095
    along_n = gemm.unaligned_decode_config(meta(8, 768), meta(768, 50257))  # row-major, N = 50257
    for cfg, stages in [(along_k, 1), (along_n, 3)]:
        assert (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.tma) == (16, 128, 64, stages, False)
    assert gemm.unaligned_decode_config(meta(16, 4095), meta(4096, 4095).T) is None  # b is copied from M = 16
    assert gemm.unaligned_decode_config(meta(1, 4096), meta(4096, 4096).T) is None  # TMA reads b
    assert gemm.unaligned_decode_config(meta(1, 4095, dtype=torch.int8), meta(4096, 4095, dtype=torch.int8).T) is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bias_dtype", [torch.float32, torch.float16], ids=["bias32", "bias16"])
def test_bias_per_output_column(mode, bias_dtype):
    M, N, K = pick(cpu=(21, 37, 30), gpu=(700, 900, 500))
    a, b = randn(M, K), randn(K, N)
    bias = randn(N, dtype=bias_dtype)
    out = poisoned((M, N), torch.float16, DEVICE)
    matmul(a, b, bias=bias, mode=mode, out=out)
    check(f"bias {mode}", out, reference(a, b, bias))


def test_strided_bias():
    M, N, K = pick(cpu=(9, 20, 17), gpu=(100, 300, 64))
    a, b = randn(M, K), randn(K, N)
    bias = randn(2 * N, dtype=torch.float32)[::2]
    check("bias with stride 2", matmul(a, b, bias=bias), reference(a, b, bias))


def test_out_dtype_float32_from_float16():
    M, N, K = pick(cpu=(17, 18, 19), gpu=(300, 301, 302))
    a, b = randn(M, K), randn(K, N)
    out = matmul(a, b, out_dtype=torch.float32)
    assert out.dtype == torch.float32
    check("fp16 in, fp32 out", out, reference(a, b))


@pytest.mark.parametrize("K", pick(cpu=[1, 5, 15, 17], gpu=[1, 5, 17, 63, 100]))
def test_k_smaller_than_or_not_a_multiple_of_block_k(K):
    M, N = pick(cpu=(19, 23), gpu=(260, 300))
    assert K < 16 or K % 16, "the test wants a K that is not a multiple of the smallest block"
    a, b = randn(M, K), randn(K, N)
    for mode in ("persistent", "streamk"):
        out = poisoned((M, N), torch.float16, DEVICE)
        matmul(a, b, mode=mode, out=out)
        check(f"K={K} {mode}", out, reference(a, b))


def _tail_plan(M, N, K, config=None):
    plan = gemm.tail_plan_for(M, N, config or gemm.heuristic_config(M, N, K, torch.float16))
    assert plan is not None, f"{M}x{N}x{K}: no tail split here, the test would not test it"
    return plan


@pytest.mark.parametrize("axis", ["m", "n"])
@pytest.mark.parametrize("layouts", ["rrr", "ccr", "rcc", "crc"])
def test_tail_split_matches_float64(axis, layouts):
    """mode="tail": two launches on views of A, B, C and the bias, cut along rows or columns."""
    M, N, K = TAIL_CASES[axis]
    assert _tail_plan(M, N, K).axis == axis
    a_l, b_l, c_l = layouts
    a = randn(M, K) if a_l == "r" else randn(K, M).T
    b = randn(K, N) if b_l == "r" else randn(N, K).T
    bias = randn(N, dtype=torch.float32)
    out = poisoned((M, N), torch.float16, DEVICE) if c_l == "r" else poisoned((N, M), torch.float16, DEVICE).T
    matmul(a, b, bias=bias, mode="tail", out=out)
    check(f"tail split along {axis}, A {a_l} B {b_l} C {c_l}", out, reference(a, b, bias))


@pytest.mark.parametrize("axis", ["m", "n"])
def test_tail_split_int8_scales_follow_the_cut(axis):
    M, N, K = TAIL_CASES[axis]
    cfg = pick(cpu=None, gpu=Config(128, 256, 128, num_warps=8, num_stages=3))  # auto picks no tail for int8
    _tail_plan(M, N, K, cfg)
    a, b, a_scale, b_scale, bias, ref = int8_case(M, N, K)
    out = poisoned((M, N), torch.float32, DEVICE)
    matmul_int8(a, b, a_scale, b_scale, bias, out_dtype=torch.float32, mode="tail", config=cfg, out=out)
    check(f"int8 tail split along {axis}", out, ref, tol=1e-5)


@pytest.mark.parametrize("share", ["none", "some", "all"])
def test_streamk_tile_counts(share):
    """Stream-K with 0 tiles (full waves), a partial last wave, and every tile (fewer tiles than SMs)."""
    sms = gemm_config.sm_count()
    cfg = pick(cpu=Config(16, 16, 16, num_stages=2), gpu=Config(32, 32, 32, num_warps=4, num_stages=3))
    tiles = {"none": 2 * sms, "some": sms + max(1, sms // 3), "all": max(1, sms - 1)}[share]
    M, N = cfg.block_m * tiles - 3, cfg.block_n  # one column of tiles, the last row of tiles ragged
    K = pick(cpu=40, gpu=300)
    sk = gemm.streamk_tiles_for(M, N, cfg)
    expected = {"none": 0, "some": tiles % sms, "all": tiles}[share]
    assert sk == expected, f"{share}: streamk_tiles_for gave {sk} of {tiles} tiles, expected {expected}"
    a, b = randn(M, K), randn(K, N)
    out = poisoned((M, N), torch.float16, DEVICE)
    matmul(a, b, mode="streamk", config=cfg, out=out)
    check(f"Stream-K with {sk} of {tiles} tiles", out, reference(a, b))


def test_streamk_is_deterministic():
    M, N, K = pick(cpu=(40, 20, 64), gpu=(1000, 700, 2000))
    a, b = randn(M, K, dtype=torch.float32), randn(K, N, dtype=torch.float32)
    first = matmul(a, b, mode="streamk")
    again = matmul(a, b, mode="streamk")
    assert torch.equal(first, again), "Stream-K sums partial tiles in a fixed order: results must repeat"


def test_config_as_dict_and_modes_agree():
    M, N, K = pick(cpu=(30, 30, 30), gpu=(500, 500, 500))
    a, b = randn(M, K, dtype=torch.float32), randn(K, N, dtype=torch.float32)
    cfg = dict(block_m=16, block_n=32, block_k=16, num_warps=4, num_stages=2)
    ref = reference(a, b)
    for mode in set(gemm.MODES) - {"gluon"}:  # the Gluon kernel's tiles are fixed: it takes no config
        check(f"config dict, {mode}", matmul(a, b, mode=mode, config=cfg), ref)


# --- int8 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k_major_b", [True, False], ids=["Bkmajor", "Browmajor"])
def test_int8_with_scales_and_bias(mode, k_major_b):
    M, N, K = pick(cpu=(23, 29, 37), gpu=(513, 1000, 1500))
    a, b, a_scale, b_scale, bias, ref = int8_case(M, N, K, k_major_b)
    out = poisoned((M, N), torch.float32, DEVICE)
    matmul_int8(a, b, a_scale, b_scale, bias, out_dtype=torch.float32, mode=mode, out=out)
    check(f"int8 {mode}", out, ref)


def test_int8_accumulates_exactly_in_int32():
    # 127 * 127 * K overflows fp16 and loses bits in fp32-by-step sums; int32 holds it exactly.
    M, N, K = pick(cpu=(16, 16, 48), gpu=(256, 256, 4096))
    a = torch.full((M, K), 127, dtype=torch.int8, device=DEVICE)
    b = torch.full((K, N), -127, dtype=torch.int8, device=DEVICE)
    ones_m, ones_n = torch.ones(M, device=DEVICE), torch.ones(N, device=DEVICE)
    out = matmul_int8(a, b, ones_m, ones_n, out_dtype=torch.float32)
    assert (out.cpu() == -127 * 127 * K).all()


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32, torch.bfloat16], ids=["fp16", "fp32", "bf16"])
def test_int8_output_dtypes(out_dtype):
    if INTERPRET and out_dtype == torch.bfloat16:
        pytest.skip("bf16 needs a GPU")
    M, N, K = pick(cpu=(18, 20, 22), gpu=(300, 400, 500))
    a, b, a_scale, b_scale, bias, ref = int8_case(M, N, K)
    out = matmul_int8(a, b, a_scale, b_scale, bias, out_dtype=out_dtype)
    assert out.dtype == out_dtype
    check(f"int8 -> {out_dtype}", out, ref)


# --- GPU-only dtypes and options ----------------------------------------------------------------

@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (333, 555, 777), (2048, 2048, 2048), (64, 4096, 1024)],
                         ids=lambda s: "x".join(map(str, s)))
def test_bfloat16(shape, mode):
    M, N, K = shape
    a, b = randn(M, K, dtype=torch.bfloat16), randn(K, N, dtype=torch.bfloat16)
    bias = randn(N, dtype=torch.bfloat16)
    out = poisoned((M, N), torch.bfloat16, DEVICE)
    matmul(a, b, bias=bias, mode=mode, out=out)
    check(f"bf16 {M}x{N}x{K} {mode}", out, reference(a, b, bias))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
# (100, 200, 72): rows not 16-byte aligned, so pointer loads with a ragged last K step.
@pytest.mark.parametrize("shape", [(256, 512, 1024), (100, 200, 64), (100, 200, 72), (4096, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fp8(dtype, shape):
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 needs sm_89+")
    dt = getattr(torch, dtype)
    M, N, K = shape
    a = torch.randn(M, K, device=DEVICE).to(dt)
    b = torch.randn(N, K, device=DEVICE).to(dt).T  # K-major B (what fp8 tensor cores read)
    out = poisoned((M, N), torch.bfloat16, DEVICE)
    for mode in ("persistent", "streamk"):
        matmul(a, b, mode=mode, out=out)
        check(f"{dtype} {mode}", out, reference(a, b))


@gpu
@pytest.mark.gpu
def test_tma_and_pointer_paths_agree():
    M, N, K = 1000, 1024, 512
    a, b = randn(M, K, dtype=torch.float32), randn(K, N, dtype=torch.float32)
    ref = reference(a, b)
    for tma in (True, False):
        cfg = Config(128, 128, 32, num_warps=8, num_stages=3, tma=tma)
        check(f"fp32 (TF32) tma={tma}", matmul(a, b, config=cfg), ref, tol=tolerance(torch.float32))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["auto", "streamk", "tail"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int8], ids=["bf16", "fp16", "int8"])
def test_unaligned_rows_are_copied_and_the_result_is_right(dtype, mode):
    # K = 1001 and N = 517: rows of A, B (K-major) and C that TMA cannot read or write, so all
    # three go through 128-byte aligned copies; C is a view into a wider, poisoned matrix
    M, N, K = 1300, 517, 1001
    big = poisoned((M, N + 5), torch.float32 if dtype == torch.int8 else dtype, DEVICE)
    out = big[:, :N]
    if dtype == torch.int8:
        a, b, a_scale, b_scale, bias, ref = int8_case(M, N, K)
        assert gemm.aligned_copies_for(a, b, out) == (True,) * 3
        matmul_int8(a, b, a_scale, b_scale, bias, out_dtype=torch.float32, mode=mode, out=out)
    else:
        a, b, bias = randn(M, K, dtype=dtype), randn(N, K, dtype=dtype).T, randn(N, dtype=dtype)
        ref = reference(a, b, bias)
        assert gemm.aligned_copies_for(a, b, out) == (True,) * 3
        matmul(a, b, bias=bias, mode=mode, out=out)
    check(f"unaligned {M}x{N}x{K} {str(dtype)[6:]} {mode}", out, ref)
    assert torch.isnan(big[:, N:]).all(), "columns past the output view were overwritten"


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["auto", "persistent"])
@pytest.mark.parametrize("shape", [(6144, 6144, 1000), (2560, 10240, 1000)], ids=lambda s: "x".join(map(str, s)))
def test_rows_off_sectors_are_copied_in_big_products(mode, shape):
    # K = 1000: rows of A and B (K-major) 2000 bytes long, 16 bytes into a sector; B is copied (M is at least
    # MACS_PER_REALIGNED_ELEMENT), A too where N is REALIGNED_A_FACTOR times that, in 16-byte words; C is a
    # view of a wider, poisoned matrix whose rows start every 128 bytes, not copied
    M, N, K = shape
    big = poisoned((M, N + 64), torch.bfloat16, DEVICE)
    out = big[:, :N]
    a, b, bias = randn(M, K, dtype=torch.bfloat16), randn(N, K, dtype=torch.bfloat16).T, randn(N)
    assert gemm.aligned_copies_for(a, b, out) == (N >= 10240, True, False)
    matmul(a, b, bias=bias, mode=mode, out=out)
    check(f"rows off sectors {M}x{N}x{K} {mode}", out, reference(a, b, bias))
    assert torch.isnan(big[:, N:]).all(), "columns past the output view were overwritten"


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", [(1, 520, 1001, True), (5, 1003, 264, False), (15, 300, 77, True)],
                         ids=lambda s: "x".join(map(str, s[:3])) + (" K-major" if s[3] else " row-major"))
def test_short_products_with_unaligned_weights_are_right(shape, dtype):
    # M < 16: the weights are not copied; unaligned_decode_config's tiles (16 x 128 x 64, pointer
    # loads) run past every edge: odd K (K-major b) or odd N (row-major b), K not a multiple of 64
    M, N, K, kmajor = shape
    a = randn(M, K, dtype=dtype)
    b = randn(N, K, dtype=dtype).T if kmajor else randn(K, N, dtype=dtype)
    out = poisoned((M, N), dtype, DEVICE)
    assert gemm.unaligned_decode_config(a, b) is not None
    matmul(a, b, out=out)
    check(f"unaligned decode {M}x{N}x{K} {str(dtype)[6:]}", out, reference(a, b))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layouts", ["rrr", "ccr", "rcc", "crc"])
def test_tensor_descriptors_for_every_layout(layouts, mode):
    # Sizes with 16-byte aligned rows (multiples of 8) but not multiples of any block: every
    # operand goes through a host-built tensor descriptor, stored row- (r) or column-major (c).
    M, N, K = 1000, 776, 1048
    a_l, b_l, c_l = layouts
    a = randn(M, K) if a_l == "r" else randn(K, M).T
    b = randn(K, N) if b_l == "r" else randn(N, K).T
    out = poisoned((M, N), torch.float16, DEVICE) if c_l == "r" else poisoned((N, M), torch.float16, DEVICE).T
    matmul(a, b, mode=mode, out=out)
    check(f"TMA A {a_l} B {b_l} C {c_l} {mode}", out, reference(a, b))


# --- issue 23: edges that gave wrong answers without an error, or a crash ------------------------

def _int8_reference(a, b, a_scale, b_scale, bias=None):
    ref = (a.cpu().long() @ b.cpu().long()).double() * a_scale.cpu().double()[:, None] \
        * b_scale.cpu().double()[None, :]
    return ref if bias is None else ref + bias.cpu().double()


@pytest.mark.parametrize("mode", MODES)
def test_int8_scales_and_bias_with_strides(mode):
    # the kernel once built its scale view with unit strides: a_scale=s[::2] read s[0], s[1], ...
    M, N, K = pick(cpu=(33, 29, 40), gpu=(700, 500, 300))
    a, b, _, _, _, _ = int8_case(M, N, K)
    a_scale = (torch.rand(2 * M, device=DEVICE) / 64 + 1e-3)[::2]
    b_scale = (torch.rand(3 * N, device=DEVICE) / 64 + 1e-3)[::3]
    bias = torch.randn(4 * N, device=DEVICE)[1::4]
    out = poisoned((M, N), torch.float32, DEVICE)
    matmul_int8(a, b, a_scale, b_scale, bias, out_dtype=torch.float32, mode=mode, out=out)
    check(f"int8, scales with strides 2 and 3, bias with stride 4 ({mode})", out,
          _int8_reference(a, b, a_scale, b_scale, bias))


def _overlap_cases():
    """(name, call, error regex or None for "computes the right product")."""
    n = pick(cpu=24, gpu=256)
    sq = lambda: randn(n, n, dtype=torch.float32)  # noqa: E731
    cases = []
    x = sq()
    cases.append(("out is a", lambda: matmul(x, sq(), out=x), r"out and a share memory"))
    y = sq()
    cases.append(("out is b", lambda: matmul(sq(), y, out=y), r"out and b share memory"))
    big = randn(2 * n, n, dtype=torch.float32)
    cases.append(("out overlaps a in part", lambda: matmul(big[:n], sq(), out=big[n // 2:n // 2 + n]),
                  r"out and a share memory"))
    rows = torch.empty(2 * n, device=DEVICE).as_strided((n, n), (1, 1))  # row i starts at element i
    cases.append(("out overlaps itself", lambda: matmul(sq(), sq(), out=rows), r"out .* share one memory location"))
    odd = torch.empty(64, device=DEVICE).as_strided((4, 4), (2, 3))  # (3, 0) and (0, 2) are both element 6
    cases.append(("out overlaps itself, odd strides", lambda: matmul(randn(4, 8, dtype=torch.float32),
                                                                      randn(8, 4, dtype=torch.float32), out=odd),
                  r"out .* share one memory location"))
    z = sq()
    cases.append(("bias is a row of out", lambda: matmul(sq(), sq(), bias=z[0], out=z), r"out and bias share memory"))
    M, N, K = 24, 16, 32
    c = poisoned((M, N), torch.float32, DEVICE)
    a8, b8 = torch.ones(M, K, dtype=torch.int8, device=DEVICE), torch.ones(K, N, dtype=torch.int8, device=DEVICE)
    cases.append(("a_scale is a column of out", lambda: matmul_int8(a8, b8, c[:, 0], _ones(N), out_dtype=torch.float32,
                                                                    out=c), r"out and a_scale share memory"))
    cases.append(("b_scale is a row of out", lambda: matmul_int8(a8, b8, _ones(M), c[0], out_dtype=torch.float32,
                                                                 out=c), r"out and b_scale share memory"))
    return cases


@pytest.mark.parametrize("name,call,message", _overlap_cases(), ids=[c[0] for c in _overlap_cases()])
def test_output_that_overlaps_an_input_or_itself_is_refused(name, call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_interleaved_views_of_one_buffer_are_not_overlaps():
    # rows 0, 2, 4... are a, rows 1, 3, 5... the output; an odd-strided output whose elements are distinct
    M, N, K = pick(cpu=(12, 12, 12), gpu=(300, 300, 300))
    buf = randn(2 * M, K, dtype=torch.float32)
    a, out = buf[0::2], buf[1::2]
    a_before = a.clone()
    b = randn(K, N, dtype=torch.float32)
    out.fill_(float("nan"))
    matmul(a, b, out=out)
    check("out interleaved with a", out, reference(a_before, b))
    assert torch.equal(a, a_before)
    odd = poisoned((16,), torch.float32, DEVICE).as_strided((3, 3), (3, 2))  # offsets 0, 2, 4, 3, 5, 7, 6, 8, 10
    a, b = randn(3, 5, dtype=torch.float32), randn(5, 3, dtype=torch.float32)
    matmul(a, b, out=odd)
    check("odd strides, distinct elements", odd, reference(a, b))


def test_lazy_negation_views_are_resolved():
    M, N, K = pick(cpu=(20, 18, 24), gpu=(300, 200, 100))
    a, b, bias = randn(M, K), randn(K, N), randn(N, dtype=torch.float32)
    ref = reference(a, b, bias)
    check("-a @ b", matmul(torch._neg_view(a), b, bias=-bias), -ref)
    check("a @ -b", matmul(a, torch._neg_view(b), bias=-bias), -ref)
    check("a @ b - bias", matmul(a, b, bias=torch._neg_view(bias)), reference(a, b, -bias))
    out = torch._neg_view(poisoned((M, N), torch.float16, DEVICE))
    matmul(a, b, bias=bias, out=out)
    check("into a negated out", out, ref)
    a8, b8, sa, sb, bias8, ref8 = int8_case(M, N, K)
    check("int8, negated a and a_scale", matmul_int8(torch._neg_view(a8), b8, torch._neg_view(sa), sb, bias8,
                                                     out_dtype=torch.float32), ref8)


@pytest.mark.parametrize("shape", [(5, 6, 0), (0, 6, 5), (5, 0, 5), (0, 0, 0)], ids=lambda s: "x".join(map(str, s)))
def test_empty_products_are_what_torch_gives(shape):
    # K = 0: C = 0 (+ bias), as torch.mm / torch.addmm; M = 0 or N = 0: an empty C
    M, N, K = shape
    a, b = randn(M, K), randn(K, N)
    check("empty product", matmul(a, b), reference(a, b))
    bias = randn(N, dtype=torch.float32)
    out = poisoned((M, N), torch.float32, DEVICE)
    assert matmul(a, b, bias=bias, out_dtype=torch.float32, out=out) is out
    check("empty product + bias", out, reference(a, b, bias))
    a8, b8 = torch.ones(M, K, dtype=torch.int8, device=DEVICE), torch.ones(K, N, dtype=torch.int8, device=DEVICE)
    check("empty int8 product", matmul_int8(a8, b8, _ones(M), _ones(N), bias, out_dtype=torch.float32),
          _int8_reference(a8, b8, _ones(M), _ones(N), bias))


def test_inputs_that_require_grad_work_under_no_grad():
    M, N, K = pick(cpu=(17, 16, 15), gpu=(300, 200, 100))
    a = randn(M, K, dtype=torch.float32).requires_grad_()
    b = randn(K, N, dtype=torch.float32).requires_grad_()
    with pytest.raises(RuntimeError, match=r"a requires grad"):
        matmul(a, b)
    with torch.no_grad():
        out = matmul(a, b)
    assert not out.requires_grad
    check("requires_grad inputs under no_grad", out, reference(a, b))


def _far_apart(rows, cols, dtype, gap, *, transposed=False):
    """A (rows, cols) matrix whose rows (columns when ``transposed``) start ``gap`` elements apart,
    filled with small random values; the untouched memory between them is never written (on a CPU
    it costs no RAM). Its largest element offset, about ``gap * rows``, reaches past 2^31."""
    lines, length = (cols, rows) if transposed else (rows, cols)
    storage = torch.empty((lines - 1) * gap + length, dtype=dtype, device=DEVICE)
    t = storage.as_strided((rows, cols), (1, gap) if transposed else (gap, 1))
    if dtype == torch.int8:
        t.copy_(torch.randint(-8, 8, (rows, cols), dtype=torch.int8))
    else:
        t.copy_(torch.randn(rows, cols).to(dtype))
    return t


_GAP = 2**30  # elements between rows: 2 rows reach offset 2^31


@pytest.mark.parametrize("operand", ["a", "b", "out", "int8"])
def test_offsets_past_2_31_are_read_and_written_right(operand):
    # row * stride once overflowed int32 in the K loop and the epilogue: a segfault under the
    # interpreter, a read far outside the tensor compiled. Pointer loads and stores here (tma=False);
    # CPU storage is only reserved, never touched but for the rows used.
    M, N, K = 3, 20, 24
    cfg = Config(16, 16, 16, num_warps=4, num_stages=2, tma=False, tma_store=False)
    if operand == "int8":
        a = _far_apart(M, K, torch.int8, _GAP)
        b = torch.randint(-8, 8, (K, N), dtype=torch.int8, device=DEVICE)
        sa = _far_apart(M, 1, torch.float32, _GAP)[:, 0]  # a_scale with stride 2^30
        sb = torch.rand(N, device=DEVICE) + 0.5
        out = matmul_int8(a, b, sa, sb, out_dtype=torch.float32, config=Config(16, 16, 32, tma=False, tma_store=False))
        check("int8 a and a_scale with offsets past 2^31", out, _int8_reference(a, b, sa, sb))
        return
    a = _far_apart(M, K, torch.float16, _GAP) if operand == "a" else randn(M, K)
    b = _far_apart(K, N, torch.float16, _GAP // 8, transposed=True) if operand == "b" else randn(K, N)
    bias = _far_apart(N, 1, torch.float16, _GAP // 8)[:, 0] if operand == "b" else None  # bias with stride 2^27
    if operand == "out":
        out = _far_apart(M, N, torch.float16, _GAP)
        out.fill_(float("nan"))
    else:
        out = poisoned((M, N), torch.float16, DEVICE)
    for mode in ("persistent", "streamk"):
        matmul(a, b, bias=bias, mode=mode, config=cfg, out=out)
        check(f"{operand} with offsets past 2^31 ({mode})", out, reference(a, b, bias))
        if operand != "out":
            break


_COMPILE_WIDE = r"""
import os, re, sys
import torch
torch.cuda.is_available = lambda: True  # compile as for a GPU on this machine without one
torch.cuda.get_device_name = lambda *a: "none"
os.environ["COURSE_DEVICE"] = "gpu"
os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, sys.argv[1])
from course.gemm import kernel as gemm_kernel
from triton import compile as triton_compile
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

def ptx(wide):
    fn = gemm_kernel.matmul_kernel
    sig = dict(A="*i8", B="*i8", C="*fp16", A_scale="*fp32", B_scale="*fp32", bias="*fp32", partials="*i32",
               flags="*i32", M="i32", N="i32", K="i32")
    consts = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_SIZE_M=8, NUM_SMS=132, STREAMK_TILES=0,
                  STREAMK_PROGRAMS=0, EVEN_K=False, HAS_BIAS=True, QUANTIZED=True, ALLOW_TF32=True, USE_TMA=False,
                  A_T=False, B_T=False, TMA_STORE=False, C_T=False, C_HALVES=1, FLATTEN=False, WIDE=wide,
                  stride_ak=1, stride_bk=1, stride_cn=1)
    for n in fn.arg_names:
        sig.setdefault(n, "constexpr" if n in consts else "i32")
    src = ASTSource(fn=fn, signature=sig, constexprs=consts)
    return triton_compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]

for wide in (0, 1 | 8 | 16 | 64 | 128 | 256):  # every stride that is not a unit stride
    code = ptx(wide)
    print(wide, len(re.findall(r"m(?:ul|ad)\.lo\.s64", code)))
"""


def test_64_bit_offsets_compile_for_a_gpu_without_one():
    # The compiled WIDE variant can only run on a GPU; here Triton at least builds it for sm_90, with
    # 64-bit index arithmetic that the 32-bit kernel (WIDE=0) has none of. A fresh process: one that
    # has interpreted kernels cannot compile them.
    run = subprocess.run([sys.executable, "-c", _COMPILE_WIDE, str(Path(__file__).resolve().parents[2])],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = dict(map(int, line.split()) for line in run.stdout.splitlines() if re.fullmatch(r"\d+ \d+", line))
    assert counts[0] == 0 and counts[1 | 8 | 16 | 64 | 128 | 256] > 0, run.stdout


_COMPILE_TMA = r"""
import os, sys
os.environ["_COURSE_COMPILE_ONLY"] = "1"
os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, sys.argv[1])
from course.gemm import kernel as gemm_kernel
from triton import compile as triton_compile
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

fn = gemm_kernel.matmul_kernel
sig = dict(A="tensordesc<bf16[128, 64]>", B="tensordesc<bf16[64, 256]>", C="tensordesc<bf16[128, 128]>",
           A_scale="*fp32", B_scale="*fp32", bias="*fp32", partials="*fp32", flags="*i32", M="i32", N="i32", K="i32")
consts = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_SIZE_M=8, NUM_SMS=132, STREAMK_TILES=12,
              STREAMK_PROGRAMS=132, EVEN_K=False, HAS_BIAS=True, QUANTIZED=False, ALLOW_TF32=True, USE_TMA=True,
              A_T=False, B_T=False, TMA_STORE=True, C_T=False, C_HALVES=2, FLATTEN=True, WIDE=0,
              stride_ak=1, stride_bn=1, stride_cn=1)
for n in fn.arg_names:
    sig.setdefault(n, "constexpr" if n in consts else "i32")
src = ASTSource(fn=fn, signature=sig, constexprs=consts)
ptx = triton_compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 4}).asm["ptx"]
print("wgmma", ptx.count("wgmma.mma_async"), "tma", ptx.count("cp.async.bulk.tensor"))
"""


def test_descriptor_views_compile_for_a_gpu_without_one():
    # GemmContext.reduce_k_range takes a descriptor view's K loop itself (TMA loads, Stream-K, the
    # epilogue's TMA store): Triton builds it for sm_90 here, with wgmma and bulk tensor copies.
    run = subprocess.run([sys.executable, "-c", _COMPILE_TMA, str(Path(__file__).resolve().parents[2])],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = re.search(r"wgmma (\d+) tma (\d+)", run.stdout)
    assert counts and int(counts[1]) > 0 and int(counts[2]) > 0, run.stdout


@gpu
@pytest.mark.gpu
def test_offsets_past_2_31_through_tma():
    # the same operands where TMA reads them (64-bit descriptors), and a decode-sized pointer config
    M, N, K = 3, 64, 256
    a = _far_apart(M, K, torch.float16, _GAP)
    b = randn(N, K).T
    check("a far apart, TMA", matmul(a, b), reference(a, b))
    check("a far apart, pointer decode tiles", matmul(a, b, config=Config(16, 64, 256, tma=False, tma_store=False)),
          reference(a, b))


# --- errors -------------------------------------------------------------------------------------

def _f16(*shape):
    return torch.zeros(*shape, dtype=torch.float16, device=DEVICE)


def _i8(*shape):
    return torch.zeros(*shape, dtype=torch.int8, device=DEVICE)


def _ones(n):
    return torch.ones(n, device=DEVICE)


_OTHER_DEVICE = "meta"
ERRORS = [
    ("inner", lambda: matmul(_f16(4, 5), _f16(6, 7)), ValueError, r"inner dimensions differ.*K=5.*K=6"),
    ("dtype mismatch", lambda: matmul(_f16(4, 5), _f16(5, 6).float()), TypeError, r"a is float16 but b is float32"),
    ("device", lambda: matmul(_f16(4, 5), torch.zeros(5, 6, dtype=torch.float16, device=_OTHER_DEVICE)),
     ValueError, r"b is on meta"),
    ("not 2-D", lambda: matmul(_f16(2, 4, 5), _f16(5, 6)), ValueError, r"a must be a 2-D matrix.*3-D"),
    ("1-D", lambda: matmul(_f16(4, 5), _f16(5)), ValueError, r"b must be a 2-D matrix"),
    ("sparse a", lambda: matmul(_f16(4, 5).to_sparse(), _f16(5, 6)), TypeError,
     r"a is a sparse_coo tensor.*a.to_dense\(\)"),
    ("dimension of 2^31", lambda: matmul(torch.empty(2**31, 1, dtype=torch.float16, device="meta"), _f16(1, 6)),
     ValueError, r"a has shape \(2147483648, 1\): each dimension must be below 2\^31"),
    ("zero stride", lambda: matmul(_f16(1, 5).expand(4, 5), _f16(5, 6)), ValueError,
     r"a has stride 0 in dimension 0.*contiguous"),
    ("not a tensor", lambda: matmul([[1.0]], _f16(1, 1)), TypeError, r"a must be a torch.Tensor"),
    ("int8 to matmul", lambda: matmul(_i8(4, 5), _i8(5, 6)), TypeError, r"use matmul_int8"),
    ("unsupported dtype", lambda: matmul(_f16(4, 5).double(), _f16(5, 6).double()), TypeError,
     r"float64, which matmul does not support.*pass one of"),
    ("bad mode", lambda: matmul(_f16(4, 5), _f16(5, 6), mode="fast"), ValueError, r"mode='fast'.*'streamk'"),
    ("gluon with a config", lambda: matmul(_f16(4, 8), _f16(8, 8), mode="gluon", config=Config(16, 16, 16)),
     ValueError, r"mode='gluon' runs its own fixed tiles \(course.gemm.gluon.TILES\) and takes no config"),
    ("gluon int8", lambda: matmul_int8(_i8(4, 8), _i8(8, 8), _ones(4), _ones(8), mode="gluon"), ValueError,
     r"mode='gluon' takes float16 or bfloat16 inputs, not int8"),
    ("bias length", lambda: matmul(_f16(4, 5), _f16(5, 6), bias=_ones(4)), ValueError,
     r"bias must be 1-D of length N=6"),
    ("bias dtype", lambda: matmul(_f16(4, 5), _f16(5, 6), bias=torch.ones(6, dtype=torch.int32, device=DEVICE)),
     TypeError, r"bias has dtype int32"),
    ("out shape", lambda: matmul(_f16(4, 5), _f16(5, 6), out=_f16(6, 4)), ValueError, r"out has shape \(6, 4\)"),
    ("out dtype", lambda: matmul(_f16(4, 5), _f16(5, 6), out=_f16(4, 6).float()), TypeError,
     r"out has dtype float32 but the result is"),
    ("out_dtype", lambda: matmul(_f16(4, 5), _f16(5, 6), out_dtype=torch.int32), TypeError, r"out_dtype=torch.int32"),
    ("config type", lambda: matmul(_f16(4, 5), _f16(5, 6), config=(16, 16, 16)), TypeError, r"config must be"),
    ("config block", lambda: Config(24, 16, 16), ValueError, r"block_m=24.*power of two"),
    ("config bool block", lambda: matmul(_f16(4, 5), _f16(5, 6), config=Config(block_m=True, block_n=16, block_k=16)),
     ValueError, r"Config.block_m=True: pass a power of two"),
    ("config num_warps", lambda: Config(16, 16, 16, num_warps=3), ValueError, r"num_warps=3: pass a power of two"),
    ("config store_halves", lambda: Config(16, 16, 16, store_halves=3), ValueError, r"store_halves=3: pass 1 or 2"),
    ("config tma", lambda: Config(16, 16, 16, tma="yes"), ValueError, r"Config.tma='yes': pass True, False or None"),
    ("config tile too big", lambda: Config(2048, 16, 1024), ValueError, r"block_m x Config.block_k = 2048 x 1024"),
    ("config dict key", lambda: matmul(_f16(4, 5), _f16(5, 6), config=dict(bm=16, block_n=16, block_k=16)),
     TypeError, r"config has unknown field\(s\) 'bm'"),
    ("out_dtype string", lambda: matmul(_f16(4, 5), _f16(5, 6), out_dtype="float32"), TypeError,
     r"out_dtype='float32' is a str, not a torch.dtype"),
    ("requires_grad a", lambda: matmul(_f16(4, 5).float().requires_grad_(), _f16(5, 6).float()), RuntimeError,
     r"a requires grad, but matmul is a forward-only kernel.*torch.no_grad\(\).*a.detach\(\)"),
    ("requires_grad bias", lambda: matmul(_f16(4, 5), _f16(5, 6), bias=_ones(6).requires_grad_()), RuntimeError,
     r"bias requires grad"),
    ("requires_grad scale", lambda: matmul_int8(_i8(4, 5), _i8(5, 6), _ones(4).requires_grad_(), _ones(6),
                                                      out_dtype=torch.float32),
     RuntimeError, r"a_scale requires grad"),
    ("int8 without scales", lambda: matmul_int8(_i8(4, 5), _i8(5, 6), None, None), TypeError,
     r"needs a_scale.*b_scale"),
    ("a_scale length", lambda: matmul_int8(_i8(4, 5), _i8(5, 6), _ones(5), _ones(6)), ValueError,
     r"a_scale must be 1-D of length M=4"),
    ("b_scale length", lambda: matmul_int8(_i8(4, 5), _i8(5, 6), _ones(4), _ones(5)), ValueError,
     r"b_scale must be 1-D of length N=6"),
    ("scale dtype", lambda: matmul_int8(_i8(4, 5), _i8(5, 6), _ones(4).half(), _ones(6)), TypeError,
     r"a_scale has dtype float16.*float32"),
    ("int8 bias length", lambda: matmul_int8(_i8(4, 5), _i8(5, 6), _ones(4), _ones(6), _ones(7)), ValueError,
     r"bias must be 1-D of length N=6"),
    ("float to matmul_int8", lambda: matmul_int8(_f16(4, 5), _f16(5, 6), _ones(4), _ones(6)), TypeError,
     r"matmul_int8 takes int8"),
]
if INTERPRET:
    ERRORS += [
        ("bf16 on CPU", lambda: matmul(_f16(4, 5).bfloat16(), _f16(5, 6).bfloat16()), TypeError,
         r"bfloat16 does not work under Triton's CPU interpreter"),
        ("fp8 on CPU", lambda: matmul(_f16(4, 5).to(torch.float8_e4m3fn), _f16(5, 6).to(torch.float8_e4m3fn)),
         TypeError, r"fp8\) needs a GPU"),
        ("bf16 out on CPU", lambda: matmul(_f16(4, 5), _f16(5, 6), out_dtype=torch.bfloat16), TypeError,
         r"bfloat16 does not work under Triton's CPU interpreter"),
        ("gluon on CPU", lambda: matmul(_f16(4, 8), _f16(8, 8), mode="gluon"), ValueError,
         r"mode='gluon' cannot run here: Gluon kernels need a GPU"),
    ]
else:
    ERRORS += [
        ("cpu tensor on GPU", lambda: matmul(torch.zeros(4, 5, dtype=torch.float16), _f16(5, 6)), ValueError,
         r"a is on cpu but the kernels run on cuda"),
        ("tiny block compiled", lambda: matmul(_f16(4, 5), _f16(5, 6), config=Config(8, 16, 16)), ValueError,
         r"at least 16"),
    ]
    if gemm_config.gluon_here():
        ERRORS += [
            ("gluon fp32", lambda: matmul(_f16(4, 8).float(), _f16(8, 8).float(), mode="gluon"), ValueError,
             r"mode='gluon' cannot run here: it takes float16 or bfloat16"),
            ("gluon column-major a", lambda: matmul(_f16(8, 4).T, _f16(8, 8), mode="gluon"), ValueError,
             r"mode='gluon' cannot run here: a and the output must be row-major"),
            ("gluon unaligned K", lambda: matmul(_f16(4, 5), _f16(5, 8), mode="gluon"), ValueError,
             r"must be row-major.*16-byte aligned"),
        ]


@pytest.mark.parametrize("call,error,message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


@gpu
@pytest.mark.gpu
def test_fp8_before_sm89_is_explained(monkeypatch):
    monkeypatch.setattr(gemm_inputs, "capability", lambda: (8, 0))
    a = torch.zeros(4, 5, device=DEVICE).to(torch.float8_e4m3fn)
    b = torch.zeros(5, 6, device=DEVICE).to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match=r"needs an sm_89\+ GPU"):
        matmul(a, b)


def test_a_lazily_negated_fp8_view_is_negated_exactly():
    # CUDA has no float8 negation kernel (resolve_neg fails there): the sign bits are flipped instead.
    for dtype in gemm_config.FP8:
        x = torch.randn(6, 9).to(dtype)[:, ::2]
        resolved = gemm_inputs.resolved(torch._neg_view(x))
        assert not resolved.is_neg() and torch.equal(resolved.float(), -x.float())
