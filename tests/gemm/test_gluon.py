"""Tests of course.gemm.gluon, the Gluon kernel for Hopper: its tile order, a compile for sm_90 without a
GPU (gluon_compile_check.py, in a fresh process), and on an sm_90 GPU its results against float64 and
where mode="auto" runs it."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gemm_cases import randn, reference

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import gemm
from course.check import check, poisoned
from course.gemm import config as gemm_config
from course.gemm import gluon as gluon_gemm
from course.gemm import matmul
from course.runtime import DEVICE, INTERPRET


@pytest.mark.skipif(gluon_gemm.gluon is None, reason="this Triton has no Gluon")
def test_gluon_group_keeps_the_waves_on_few_operand_rows():
    """gluon_gemm.group_for (132 programs): row-major order (1) where the tiles are few across, as
    GPT-2-XL's 1600 columns in 128 x 144 tiles and Phi-3-mini qkv at M = 1000 with the rows along N;
    the default 8 on the benchmark set's Gluon shapes."""
    assert gluon_gemm.group_for(4096, 1600, (128, 144), 132) == 1
    assert gluon_gemm.group_for(9216, 1000, (192, 128), 132) == 1
    for rows, cols, tile in [(1536, 1536, (128, 144)), (3072, 3072, (192, 128)), (6144, 512, (192, 128)),
                             (512, 10240, (128, 320)), (1000, 4544, (128, 144))]:
        assert gluon_gemm.group_for(rows, cols, tile, 132) == 8, (rows, cols, tile)


def test_gluon_kernel_compiles_for_hopper_without_a_gpu():
    # Gluon has no interpreter, so on a CPU this is the only check of the kernel: Triton compiles it
    # for sm_90 to a cubin (API drift between Triton releases fails here, not on a learner's GPU).
    # A fresh process: one that has interpreted kernels cannot compile Gluon (see the script).
    script = Path(__file__).with_name("gluon_compile_check.py")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{script.name} failed:\n{run.stderr[-3000:]}"
    built = re.findall(r"(\d+) B shared, (\d+) wgmma, (\d+) TMA copies, cubin (\d+) B, \d+ warps, (\d) CTAs", run.stdout)
    pairs = 4 if gluon_gemm.clusters_here() else 0  # on Triton 3.9, four variants on pairs of CTAs too
    assert len(built) == 2 * len(gluon_gemm.TILES) + pairs, run.stdout  # every tile shape, both orientations
    assert [ctas for *_, ctas in built].count("2") == pairs, run.stdout
    for shared, wgmmas, copies, cubin, _ in built:  # the ring of stages fits Hopper's 227 KB
        assert 200_000 < int(shared) <= 227 * 1024 and int(wgmmas) and int(copies) and int(cubin), run.stdout


needs_gluon = pytest.mark.skipif(INTERPRET or not gemm_config.gluon_here(), reason="the Gluon kernel needs an sm_90 GPU")


@needs_gluon
@pytest.mark.gpu
def test_gluon_kernel_reads_a_strided_bias():
    # the Gluon kernel reads bias[col] with a unit stride: a strided bias is made contiguous first
    M, N, K = 601, 1000, 136
    a, b = randn(M, K), randn(K, N)
    bias = randn(3 * N, dtype=torch.float32)[::3]
    check("gluon, bias with stride 3", matmul(a, b, bias=bias, mode="gluon"), reference(a, b, bias))


@needs_gluon
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("b_layout", ["kmajor", "row"])
@pytest.mark.parametrize("swap", [False, True], ids=["rows_along_M", "rows_along_N"])
@pytest.mark.parametrize("shape", [(1536, 1536, 1536), (601, 1000, 40), (1, 8, 8), (200, 328, 136), (512, 6144, 520)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("tile", list(gluon_gemm.TILES), ids=lambda t: "x".join(map(str, t)))
def test_gluon_kernel_matches_float64(tile, shape, swap, b_layout, dtype):
    # Odd M, K below and not a multiple of the K step, tiles past every edge (136 columns: the
    # 128 x 144 tile's last 16 are past N); both orientations, both tile shapes.
    M, N, K = shape
    a = randn(M, K, dtype=dtype)
    b = randn(N, K, dtype=dtype).T if b_layout == "kmajor" else randn(K, N, dtype=dtype)
    out = poisoned((M, N), dtype, DEVICE)
    why = gluon_gemm.unsupported(a, b, out, swap)
    if swap and b_layout == "row":
        assert "K-major" in why
        return
    assert why is None
    bias = randn(N, dtype=torch.float32)
    gluon_gemm.matmul_wide(a, b, out, bias, swap, gemm_config.sm_count(), tile=tile)
    check(f"gluon {tile} {M}x{N}x{K} swap={swap} B {b_layout} + bias", out, reference(a, b, bias))


@needs_gluon
@pytest.mark.gpu
@pytest.mark.skipif(not gluon_gemm.clusters_here(), reason="pairs of CTAs need Triton 3.9's Gluon")
@pytest.mark.parametrize("swap, b_layout", [(False, "kmajor"), (False, "row"), (True, "kmajor")],
                         ids=["rows_along_M-kmajor", "rows_along_M-row", "rows_along_N-kmajor"])
@pytest.mark.parametrize("shape", [(601, 1000, 40), (1000, 4544, 1000), (1, 8, 8)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("tile", list(gluon_gemm.TILES), ids=lambda t: "x".join(map(str, t)))
def test_gluon_kernel_on_pairs_of_ctas_matches_float64(tile, shape, swap, b_layout):
    # ctas=2: two CTAs per program, one tile each, B's tiles multicast into both; an odd number of
    # row tiles leaves the second CTA of the last pair past M (its loads read zeros, its stores clip)
    M, N, K = shape
    a = randn(M, K, dtype=torch.bfloat16)
    b = randn(N, K, dtype=torch.bfloat16).T if b_layout == "kmajor" else randn(K, N, dtype=torch.bfloat16)
    out = poisoned((M, N), torch.bfloat16, DEVICE)
    bias = randn(N, dtype=torch.float32) if M % 2 else None
    gluon_gemm.matmul_wide(a, b, out, bias, swap, gemm_config.sm_count(), tile=tile, ctas=2)
    check(f"gluon {tile} on pairs of CTAs {M}x{N}x{K} swap={swap} B {b_layout}", out, reference(a, b, bias))


@needs_gluon
@pytest.mark.gpu
def test_auto_skips_gluon_tiles_that_read_a_row_major_b_badly(monkeypatch):
    M, N, K = 1000, 4544, 4544  # Falcon-7B o: auto's first Gluon tile is 128 x 144, 288-byte rows of B
    a, b = randn(M, K, dtype=torch.bfloat16), randn(K, N, dtype=torch.bfloat16)  # b row-major
    calls = []
    real = gluon_gemm.wide_launch
    monkeypatch.setattr(gluon_gemm, "wide_launch",
                        lambda *args, **kw: calls.append(kw["tile"]) or real(*args, **kw))
    out = poisoned((M, N), torch.bfloat16, DEVICE)
    matmul(a, b, out=out)
    assert (128, 144) not in calls
    check("auto, row-major b, Falcon-7B o at M = 1000", out, reference(a, b))


@needs_gluon
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1536, 1536, 1536), (512, 6144, 4096), (3072, 3072, 3072), (512, 10240, 8192)],
                         ids=lambda s: "x".join(map(str, s)))
def test_auto_runs_the_gluon_kernel_where_it_pays(shape, monkeypatch):
    M, N, K = shape
    a, b = randn(M, K, dtype=torch.bfloat16), randn(N, K, dtype=torch.bfloat16).T
    cfg = gemm.heuristic_config(M, N, K, torch.bfloat16)
    if not gemm.gluon_tiles_for(M, N, K, cfg):  # another SM count (e.g. an H100 PCIe): not this GPU's choice
        pytest.skip(f"auto does not pick the Gluon kernel for {shape} on {gemm_config.sm_count()} SMs")
    expected = gemm.gluon_tiles_for(M, N, K, cfg)[0]  # (tile, swap): b is K-major, all suit
    calls = []
    real = gluon_gemm.wide_launch
    monkeypatch.setattr(gluon_gemm, "wide_launch",
                        lambda *args, **kw: calls.append((kw["tile"], args[4])) or real(*args, **kw))
    out = poisoned((M, N), torch.bfloat16, DEVICE)
    matmul(a, b, out=out)
    assert calls == [expected]
    check(f"auto (gluon) {M}x{N}x{K}", out, reference(a, b))
    matmul(a.T.contiguous().T, b, out=out)  # a column-major a: the Gluon kernel cannot read it, Triton runs
    assert calls == [expected]
    check(f"auto (gluon fallback) {M}x{N}x{K}", out, reference(a, b))
