"""course.compile builds kernels for an H100 (sm_90) and an A100 (sm_80) on any machine, GPU or not."""

import importlib.util
import textwrap

import pytest
import torch

from course import compile as cc
from course import solutions

# A kernel as a notebook defines it: in __main__, with a helper and a constant beside it.
NOTEBOOK_CELL = '''
import triton
import triton.language as tl

SCALE = tl.constexpr(2)


@triton.jit
def twice(x):
    return x * SCALE


@triton.jit
def small_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], twice(acc).to(tl.float16))
'''


@pytest.fixture(scope="module")
def notebook_kernel(tmp_path_factory):
    path = tmp_path_factory.mktemp("nb") / "cell.py"
    path.write_text(textwrap.dedent(NOTEBOOK_CELL))
    spec = importlib.util.spec_from_file_location("__main__", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.small_matmul


def test_an_importable_kernel_builds_for_an_h100_with_wide_loads():
    x = torch.zeros(4096)
    h100 = cc.build(solutions.axpy_kernel, 2.0, x, x, x, 4096, BLOCK_SIZE=1024)
    summary = h100.summary()
    assert summary["global loads"] == summary["128-bit global loads"] > 0 and summary["global stores"] > 0
    assert ".target sm_90a" in h100.text("ptx") and "tt.func" in h100.text("ttir")
    assert h100.count("sass", r"LDG\.E\.128") > 0


def test_a_notebook_kernel_travels_as_source_and_uses_tensor_cores(notebook_kernel):
    a = torch.zeros(256, 256, dtype=torch.float16)
    h100 = cc.build(notebook_kernel, a, a, a, 256, 256, 256, BM=128, BN=128, BK=64, num_warps=8)
    assert h100.summary()["tensor-core wgmma (Hopper)"] > 0 and "#ttg.nvidia_mma" in h100.text("ttgir")
    a100 = cc.build(notebook_kernel, a, a, a, 256, 256, 256, BM=128, BN=128, BK=64, arch=80)
    assert a100.summary()["tensor-core mma (sm_80 style)"] > 0 and a100.summary()["tensor-core wgmma (Hopper)"] == 0


def test_a_constexpr_with_a_default_may_be_left_out():
    from course import persistent

    x, log = torch.zeros(256, 256, dtype=torch.float16), torch.zeros(4, dtype=torch.int32)
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, NUM_PROGRAMS=4, LOG=False, num_warps=4)
    sizes = (256, 256, 256, 256, 1, 256, 1, 256, 1)
    plain = cc.build(persistent.persistent_matmul_kernel, x, x, x, log, *sizes, **blocks)  # FLATTEN=False
    assert plain.text("ptx") == cc.build(persistent.persistent_matmul_kernel, x, x, x, log, *sizes, FLATTEN=False,
                                         **blocks).text("ptx")


GLUON_CELL = '''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def copy_tile(src, dst, LAYOUT: gl.constexpr):
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, LAYOUT))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, LAYOUT))
    offsets = rows[:, None] * 64 + cols[None, :]
    gl.store(dst + offsets, gl.load(src + offsets))
'''


def test_a_gluon_kernel_builds_with_its_layout(tmp_path):
    gl = pytest.importorskip("triton.experimental.gluon.language")
    path = tmp_path / "gluon_cell.py"
    path.write_text(GLUON_CELL)
    spec = importlib.util.spec_from_file_location("__main__", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.empty(64 * 64, dtype=torch.float16)
    vectors = cc.build(module.copy_tile, x, x, LAYOUT=gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]))
    scalars = cc.build(module.copy_tile, x, x, LAYOUT=gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0]))
    assert vectors.count("sass", r"LDG\.E\.128") == 4 and scalars.count("sass", r"LDG\.E\.128") == 0
    assert scalars.summary()["global loads"] == 32  # one 2-byte load per element: 4096 / 128 threads


def test_show_prints_matches_with_context(capsys):
    x = torch.zeros(64)
    h100 = cc.build(solutions.axpy_kernel, 2.0, x, x, x, 64, BLOCK_SIZE=64)
    h100.show("ptx", r"st\.global", context=1, most=5)
    out = capsys.readouterr().out
    assert "st.global" in out and len(out.splitlines()) <= 6
    h100.show("ttir", "no such instruction")
    assert "no line matches" in capsys.readouterr().out


def test_misuse_is_named():
    x = torch.zeros(64)
    with pytest.raises(TypeError, match="takes 5 run-time arguments"):
        cc.build(solutions.axpy_kernel, x, x, BLOCK_SIZE=64)
    with pytest.raises(TypeError, match="BLOCK_SIZE missing"):
        cc.build(solutions.axpy_kernel, 2.0, x, x, x, 64)
    with pytest.raises(TypeError, match="pass a @triton.jit function"):
        cc.build(solutions.axpy, 2.0, x, x, x, 64)
    with pytest.raises(ValueError, match="choose one of"):
        cc.Build("k", 90, {}).text("sass2")


def test_a_compile_error_comes_back_readable():
    x = torch.zeros(64)
    with pytest.raises(RuntimeError, match="power of 2"):
        cc.build(solutions.axpy_kernel, 2.0, x, x, x, 64, BLOCK_SIZE=100)


def test_resources_read_registers_and_spills():
    x = torch.zeros(64)
    used = cc.build(solutions.axpy_kernel, 2.0, x, x, x, 64, BLOCK_SIZE=64).resources()
    assert 8 <= used["registers"] <= 255 and used["spilled bytes"] == 0


def test_outline_collapses_runs_and_fills_groups():
    from course.compile import Build

    b = Build("k", 90, {"ptx": "wgmma.mma_async a\nwgmma.mma_async b\nwgmma.wait_group.sync.aligned 1;\nex2.approx x\n"
                               "mov.u32 y\nex2.approx z\nwgmma.wait_group.sync.aligned 0;\n"})
    events = {"wgmma": r"wgmma\.mma_async", "wait {0}": r"wgmma\.wait_group\S* (\d+)", "exp2": r"ex2\.approx"}
    assert b.outline("ptx", events) == "wgmma ×2 → wait 1 → exp2 ×2 → wait 0"
    assert b.outline("ptx", events, most=2) == "wgmma ×2 → wait 1 → … (2 more)"
