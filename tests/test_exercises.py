"""Unit tests of course/elementwise.py and course/exercises.py (the notebooks' exercise checks).

Each check must pass a right answer and fail each typical wrong one with a message that names the mistake.
Kernels run under the interpreter on CPU (or compiled on a GPU) at small sizes: fast.
"""

import pytest
import torch
import triton
import triton.language as tl

import course
from course import elementwise, exercises


# --- elementwise helpers ------------------------------------------------------------------------

def test_guarded_is_a_poisoned_view_at_the_start_of_a_longer_buffer():
    out, buf = elementwise.guarded(10, guard=5)
    assert out.shape == (10,) and buf.shape == (15,)
    assert out.data_ptr() == buf.data_ptr() and torch.isnan(buf).all()
    x, _ = elementwise.guarded(10, guard=5, fill=torch.randn)
    assert not torch.isnan(x).any()
    with pytest.raises(ValueError, match="must be >= 0"):
        elementwise.guarded(-1)


def test_runs_and_their_description():
    assert elementwise.runs(torch.tensor([False, True, True, False, True])) == [(1, 2), (4, 4)]
    assert elementwise.runs(torch.zeros(4, dtype=torch.bool)) == []
    assert elementwise.runs(torch.ones(3, dtype=torch.bool)) == [(0, 2)]
    assert elementwise.describe_runs([(1000, 1023), (5, 5)]) == "1000..1023, 5"
    assert elementwise.describe_runs([(i, i) for i in range(5)], most=2) == "0, 1, and 3 more runs"


def test_unwritten_and_overwritten_guard():
    out, buf = elementwise.guarded(8, guard=4)
    out[:5] = 1.0
    assert elementwise.unwritten(out) == [(5, 7)]
    buf[9:11] = 2.0
    assert elementwise.overwritten_guard(buf, 8) == [(9, 10)]


def test_sweep_series_and_check_fraction(capsys):
    rows = elementwise.sweep([16, 32], lambda n: (torch.randn(n),),
                             {"copy": (lambda x: x.clone(), lambda n: 8 * n)}, desc="test")
    assert [r["n"] for r in rows] == [16, 32] and all(r["copy_ms"] > 0 and r["copy_gbps"] > 0 for r in rows)
    sizes, values = elementwise.series(rows, ["copy"])["copy"]
    assert sizes == [16, 32] and len(values) == 2
    with pytest.raises(KeyError, match="no fast_gbps"):
        elementwise.series(rows, ["fast"])
    fake = [{"n": 2**20, "k_gbps": 50.0}, {"n": 2**24, "k_gbps": 90.0}, {"n": 2**26, "k_gbps": 80.0}]
    elementwise.check_fraction(fake, "k", 100.0, at_least=0.8, min_n=2**24)
    assert "✓ k reaches at least 80%" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"n=2\^26: 80%"):
        elementwise.check_fraction(fake, "k", 100.0, at_least=0.85, min_n=2**24)
    with pytest.raises(ValueError):
        elementwise.check_fraction(fake, "k", 100.0, at_least=0.85, min_n=2**30)


# --- 00: saxpy cost ------------------------------------------------------------------------------

def test_saxpy_cost_right_and_wrong(capsys):
    exercises.check_saxpy_cost(lambda n: (2 * n, 12 * n))
    assert "✓ saxpy cost" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="y is also written back"):
        exercises.check_saxpy_cost(lambda n: (2 * n, 8 * n))
    with pytest.raises(AssertionError, match="count both the multiply and the add"):
        exercises.check_saxpy_cost(lambda n: (n, 12 * n))
    with pytest.raises(AssertionError, match="count bytes, not elements"):
        exercises.check_saxpy_cost(lambda n: (2 * n, 3 * n))
    with pytest.raises(AssertionError, match="return a pair"):
        exercises.check_saxpy_cost(lambda n: 2 * n)


# --- 01: axpy -------------------------------------------------------------------------------------

@triton.jit
def _axpy_kernel(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MASKED: tl.constexpr, SIGN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        mask = offs < n
        tl.store(out_ptr + offs, SIGN * alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
                 mask=mask)
    else:
        tl.store(out_ptr + offs, SIGN * alpha * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def _axpy(masked=True, floor_grid=False, sign=1.0, block=256):
    def axpy(alpha, x, y, out):
        n = x.numel()
        programs = n // block if floor_grid else triton.cdiv(n, block)
        if programs:
            _axpy_kernel[(programs,)](alpha, x, y, out, n, BLOCK=block, MASKED=masked, SIGN=sign)
        return out
    return axpy


def test_axpy_passes_a_right_kernel(capsys):
    exercises.check_axpy(_axpy())
    out = capsys.readouterr().out
    assert out.count("✓ axpy") == 2


def test_axpy_catches_a_missing_mask():
    with pytest.raises(AssertionError, match=r"wrote \d+ elements past the end of out .*mask the store"):
        exercises.check_axpy(_axpy(masked=False))


def test_axpy_catches_a_grid_too_small():
    with pytest.raises(AssertionError, match=r"with n=1, your kernel left element 0 of out unwritten.*triton.cdiv"):
        exercises.check_axpy(_axpy(floor_grid=True))
    with pytest.raises(AssertionError, match=r"with n=1000, .* left elements 768\.\.999 of out unwritten"):
        exercises._check_elementwise("axpy", lambda x, y, out: _axpy(floor_grid=True)(2.0, x, y, out),
                                     lambda x, y: 2.0 * x + y, 2, sizes=(1000,))


def test_axpy_catches_wrong_arithmetic():
    with pytest.raises(AssertionError, match="relative error .* exceeds"):
        exercises.check_axpy(_axpy(sign=-1.0))


def test_axpy_rejects_a_new_output_tensor():
    with pytest.raises(AssertionError, match="returned a new tensor"):
        exercises.check_axpy(lambda alpha, x, y, out: alpha * x + y)


# --- 02: residual + relu --------------------------------------------------------------------------

def test_residual_relu_bytes(capsys):
    exercises.check_residual_relu_bytes(lambda n: 20 * n, lambda n: 12 * n)
    assert "✓ byte counts" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="that is the fused count"):
        exercises.check_residual_relu_bytes(lambda n: 12 * n, lambda n: 12 * n)
    with pytest.raises(AssertionError, match="reads x and residual"):
        exercises.check_residual_relu_bytes(lambda n: 20 * n, lambda n: 8 * n)


@triton.jit
def _residual_relu_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr, RELU: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask) + tl.load(r_ptr + offs, mask=mask)
    if RELU:
        s = tl.maximum(s, 0.0)
    tl.store(out_ptr + offs, s, mask=mask)


def _residual_relu(relu=True):
    def fused(x, r, out):
        n = x.numel()
        _residual_relu_kernel[(triton.cdiv(n, 512),)](x, r, out, n, BLOCK=512, RELU=relu)
    return fused


def test_residual_relu_right_and_wrong(capsys):
    exercises.check_residual_relu(_residual_relu())
    assert "✓ fused residual + relu: right on all 7 sizes" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="relative error"):
        exercises.check_residual_relu(_residual_relu(relu=False))


def test_inputs_changed_is_reported():
    def clobber(x, r, out):
        out.copy_(torch.relu(x + r))
        x.zero_()
    with pytest.raises(AssertionError, match="input 0 changed"):
        exercises.check_residual_relu(clobber)


def test_device_is_the_courses():
    out, _ = elementwise.guarded(3)
    assert out.device.type == torch.device(course.DEVICE).type
