"""course.check: the float64 comparison and its one-line report, tolerances by dtype, unwritten (poisoned)
outputs, non-finite and complex values."""

import pytest
import torch

from course import check


def test_check_passes_and_prints_one_hardware_independent_line(capsys):
    x = torch.randn(64, 32)
    check.check("identity", x.clone(), x.double())
    assert capsys.readouterr().out == "✓ identity: relative error below 2e-03 (float32)\n"


def test_check_integers_are_exact(capsys):
    x = torch.randint(-100, 100, (10,), dtype=torch.int32)
    check.check("ints", x.clone(), x.long())
    assert "exact" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="exceeds the tolerance"):
        check.check("ints", x + 1, x.long())


def test_check_reports_unwritten_outputs():
    out = check.poisoned((8, 8))
    out[:4] = 1.0
    with pytest.raises(AssertionError, match=r"32 of 64 elements are NaN \(first at \(4, 0\)\)"):
        check.check("half written", out, torch.ones(8, 8, dtype=torch.float64))
    ints = check.poisoned((4,), torch.int32)
    with pytest.raises(AssertionError, match="4 of 4 elements were never written"):
        check.check("ints", ints, torch.zeros(4, dtype=torch.int64))


def test_check_names_the_worst_element():
    ref = torch.zeros(4, 4, dtype=torch.float64) + 1
    out = torch.ones(4, 4)
    out[2, 3] = 5.0
    with pytest.raises(AssertionError, match=r"worst element at \(2, 3\): got 5.0, expected 1.0"):
        check.check("one wrong", out, ref)


def test_check_rejects_shape_mismatch_and_non_tensors():
    with pytest.raises(AssertionError, match=r"output has shape \(2, 3\), expected \(3, 2\)"):
        check.check("shape", torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        check.check("list", [1, 2], torch.zeros(2))
    with pytest.raises(ValueError, match="compare tensors of the same shape"):
        check.rel_error(torch.zeros(2), torch.zeros(3))


def test_tolerances_by_dtype():
    assert check.tolerance(torch.int8) == 0.0
    assert check.tolerance(torch.float16) < check.tolerance(torch.bfloat16)
    assert check.tolerance(torch.float8_e4m3fn) == check.FP8_TOLERANCE
    with pytest.raises(TypeError, match="pass a torch.dtype"):
        check.tolerance("fp16")


def test_rel_error_is_relative():
    ref = torch.full((100,), 1000.0, dtype=torch.float64)
    assert check.rel_error(ref * (1 + 1e-3), ref) == pytest.approx(1e-3, rel=1e-6)


def test_poisoned_is_nan():
    assert torch.isnan(check.poisoned((3, 3), torch.float16)).all()


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32,
                                   torch.uint32, torch.int64, torch.uint64])
def test_poisoned_integers_are_reported_unwritten_for_every_integer_dtype(dtype):
    # Issue 23, item 8: int8 and uint8 got -1 / 255, which check() never recognised.
    out = check.poisoned((2, 3), dtype)
    out[0] = 1
    with pytest.raises(AssertionError, match=r"3 of 6 elements were never written .*first at \(1, 0\)"):
        check.check("ints", out, torch.ones(2, 3, dtype=torch.int64))
    # the marker is a right answer where the reference holds it
    same = check.poisoned((4,), dtype)
    check.check("marker value", same, same.clone())


def test_poisoned_refuses_bool_and_non_dtypes():
    with pytest.raises(ValueError, match=r"poisoned\(dtype=torch.bool\): a bool output has no value"):
        check.poisoned((2,), torch.bool)
    with pytest.raises(TypeError, match=r"poisoned\(dtype=...\): pass a torch.dtype"):
        check.poisoned((2,), "float16")
    with pytest.raises(ValueError, match=r"poisoned\(shape=\(2, -1\)\)"):
        check.poisoned((2, -1))
    assert torch.isnan(check.poisoned(3, torch.complex64)).all()


def test_check_compares_complex_outputs_in_both_parts(capsys):
    z = torch.randn(16, dtype=torch.complex64)
    check.check("complex", z.clone(), z.to(torch.complex128))
    assert capsys.readouterr().out == "✓ complex: relative error below 2e-03 (complex64)\n"
    with pytest.raises(AssertionError, match="exceeds the tolerance"):  # was accepted: imaginary part dropped
        check.check("conjugated", z.conj().resolve_conj(), z.to(torch.complex128))
    with pytest.raises(AssertionError, match="exceeds the tolerance"):
        check.check("real part only", z.real.clone(), z.to(torch.complex128))
    # |conj(z) - z| = 2 |Im z|: the relative error sees the imaginary part
    assert check.rel_error(z.conj(), z) == pytest.approx(2 * z.imag.double().norm().item() / z.abs().double().norm().item(),
                                                         rel=1e-5)


def test_check_accepts_matching_nan_and_inf_and_refuses_the_rest(capsys):
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 2.0], dtype=torch.float64)
    check.check("non-finite", ref.float(), ref)  # failed before: NaN and inf - inf
    assert capsys.readouterr().out.startswith("✓ non-finite")
    unwritten = ref.float()
    unwritten[0] = float("nan")  # a NaN where the reference is finite: still unwritten
    with pytest.raises(AssertionError, match=r"1 of 5 elements are NaN where the reference is not NaN \(first at \(0,\)\)"):
        check.check("unwritten", unwritten, ref)
    for position, value in ((1, 0.0), (2, -float("inf")), (3, 7.0), (4, float("inf"))):
        out = ref.float()
        out[position] = value
        with pytest.raises(AssertionError, match=rf"infinite or NaN in one tensor .*first at \({position},\)"):
            check.check("mismatch", out, ref)
    wrong = ref.float()
    wrong[4] = 3.0  # the finite elements are still measured
    with pytest.raises(AssertionError, match=r"worst element at \(4,\): got 3.0, expected 2.0"):
        check.check("finite part", wrong, ref)


@pytest.mark.parametrize("tol, error, message", [
    ("1e-3", TypeError, r"check\(tol='1e-3'\): pass the relative-error budget as a number"),
    (float("nan"), ValueError, r"check\(tol=nan\): pass a finite relative-error budget >= 0"),
    (-1e-3, ValueError, r"check\(tol=-0.001\)"),
    (float("inf"), ValueError, r"check\(tol=inf\)"),
    (True, TypeError, r"check\(tol=True\)"),
])
def test_check_rejects_a_bad_tolerance(tol, error, message):
    x = torch.ones(3)
    with pytest.raises(error, match=message):
        check.check("tol", x + 1, x.double(), tol=tol)  # a wrong output: a NaN tol used to pass it
