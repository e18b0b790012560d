"""The catalogue of the machinery every check shares (verdicts, stubs, solutions, bad arguments) and the element-wise helpers."""

import pytest
import torch
import triton
import triton.language as tl

import course
from course import elementwise, exercises, solutions

from catalogue import BAD_ARGUMENTS, quiet, stub, stub_kernel


# --- elementwise helpers ------------------------------------------------------------------------

def test_guarded_is_a_poisoned_view_at_the_start_of_a_longer_buffer():
    out, buf = elementwise.guarded(10, guard=5)
    assert out.shape == (10,) and buf.shape == (15,)
    assert out.data_ptr() == buf.data_ptr() and torch.isnan(buf).all()
    x, _ = elementwise.guarded(10, guard=5, fill=torch.randn)
    assert not torch.isnan(x).any()
    with pytest.raises(ValueError, match="must be >= 0"):
        elementwise.guarded(-1)
    with pytest.raises(TypeError, match="floating-point torch.dtype"):
        elementwise.guarded(4, dtype=torch.int32)


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
    from course.records import Record

    rows = elementwise.sweep([16, 32], lambda n: (torch.randn(n),),
                             {"copy": (lambda x: x.clone(), lambda n: 8 * n)}, desc="test")
    assert [r["n"] for r in rows] == [16, 32] and all(r["copy_ms"] > 0 and r["copy_gbps"] > 0 for r in rows)
    sizes, values = elementwise.series(rows, ["copy"])["copy"]
    assert sizes == [16, 32] and len(values) == 2
    with pytest.raises(KeyError, match="no fast_gbps"):
        elementwise.series(rows, ["fast"])
    fake = [{"n": 2**20, "k_gbps": 50.0}, {"n": 2**24, "k_gbps": 90.0}, {"n": 2**26, "k_gbps": 80.0}]
    elementwise.check_fraction(Record(fake, {}, measured_here=True), "k", 100.0, at_least=0.8, min_n=2**24)
    assert capsys.readouterr().out.startswith("✓ k reaches at least 80%")
    elementwise.check_fraction(Record(fake, {}), "k", 100.0, at_least=0.8, min_n=2**24)
    assert capsys.readouterr().out.startswith("✓ in the recorded GPU run, k reaches")
    with pytest.raises(AssertionError, match=r"n=2\^26: 80%"):
        elementwise.check_fraction(fake, "k", 100.0, at_least=0.85, min_n=2**24)
    with pytest.raises(ValueError):
        elementwise.check_fraction(fake, "k", 100.0, at_least=0.85, min_n=2**30)



# --- the machinery: stubs, verdicts, solutions -----------------------------------------------------

def test_stubs_are_recognised():
    assert exercises.core.is_stub(stub) and exercises.core.is_stub(lambda n: None) and exercises.core.is_stub(stub_kernel)
    assert not exercises.core.is_stub(solutions.saxpy_cost) and not exercises.core.is_stub(solutions.axpy_kernel)
    assert not exercises.core.is_stub(print) and not exercises.core.is_stub(None)


@pytest.mark.parametrize("name", sorted(solutions.EXERCISES))
def test_every_reference_solution_passes_its_check(name):
    pieces, check_line = solutions.EXERCISES[name]
    check = getattr(exercises, check_line.split("(")[0].split(".")[1])
    args = [getattr(solutions, a.strip()) for a in check_line.split("(")[1].rstrip(")").split(",")]
    verdict = quiet(check, *args)
    assert verdict.passed, verdict.line


@pytest.mark.parametrize("name", sorted(solutions.EXERCISES))
def test_solution_source_is_a_runnable_cell(name):
    """What exercises.solution() loads into a cell defines every piece and ends with the check."""
    source = solutions.source(name)
    pieces, check_line = solutions.EXERCISES[name]
    assert source.rstrip().endswith(check_line)
    for piece in pieces:
        assert f"def {piece}(" in source


def test_solution_prints_outside_jupyter_and_names_the_exercises_for_an_unknown_one(capsys):
    exercises.solution("axpy")
    out = capsys.readouterr().out
    assert "@triton.jit" in out and "def axpy(" in out
    exercises.solution("saxpy")
    assert capsys.readouterr().out.startswith("✗ solution('saxpy'): no exercise of that name; the exercises are")


def test_stubs_print_one_not_attempted_line_and_raise_nothing(capsys):
    exercises.check_saxpy_cost(stub)
    out = capsys.readouterr().out
    assert out.startswith("✎ saxpy_cost: not attempted yet") and 'exercises.solution(\'saxpy_cost\')' in out
    assert exercises.last().status == "not attempted"


def test_yours_or_reference(capsys):
    quiet(exercises.check_saxpy_cost, stub)
    borrowed = exercises.yours_or_reference("saxpy_cost", stub)
    assert borrowed.__wrapped__ is solutions.saxpy_cost and borrowed(10) == solutions.saxpy_cost(10)
    assert "using the reference" in capsys.readouterr().out
    mine = lambda n: (2 * n, 12 * n)  # noqa: E731
    quiet(exercises.check_saxpy_cost, mine)
    assert exercises.yours_or_reference("saxpy_cost", mine) is mine


def test_launches_counts_programs():
    x = torch.zeros(100, device=course.DEVICE)
    with exercises.launches() as seen:
        solutions.axpy(1.0, x, x.clone(), torch.empty_like(x), block_size=32)
    assert seen.programs == 4 and seen.kernels[0][0] == "axpy_kernel"



# --- bad arguments never crash a check -----------------------------------------------------------

@pytest.mark.parametrize("check, arity", [(exercises.check_saxpy_cost, 1), (exercises.check_axpy, 1),
                                          (exercises.check_residual_relu, 1),
                                          (exercises.check_residual_relu_bytes, 2)])
@pytest.mark.parametrize("bad, message", BAD_ARGUMENTS)
def test_bad_arguments_get_one_clear_line(check, arity, bad, message):
    verdict = quiet(check, *([bad] * arity))
    assert verdict.status == "failed" and message in verdict.message, verdict.line
    assert "\n" not in verdict.message




def test_an_answer_that_is_calls_or_launches_the_reference_is_refused(monkeypatch):
    monkeypatch.setattr(exercises.core, "REFUSE_REFERENCE", True)

    def launches_it(x, out, block_m=16, block_n=16):
        M, N = x.shape
        grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
        solutions.transpose_kernel[grid](x, out, M, N, *x.stride(), *out.stride(), block_m, block_n)
        return out

    answers = {"is it": solutions.transpose, "calls it": lambda *args: solutions.transpose(*args),
               "launches its kernel": launches_it}
    for label, answer in answers.items():
        verdict = quiet(exercises.check_transpose, answer)
        assert verdict.status == "failed" and "reference solution (course.solutions" in verdict.message, label
    x = torch.arange(6.0, device=course.DEVICE).reshape(2, 3)  # outside the check, the reference works again
    out = torch.empty(3, 2, device=course.DEVICE)
    solutions.transpose(x, out, 16, 16)
    assert torch.equal(out, x.T)
    assert quiet(exercises.check_transpose, solutions.transpose).status == "failed"


@triton.jit
def _copy_masked(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FILL: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if FILL:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x)


@pytest.mark.skipif(not course.INTERPRET, reason="the interpreter's loads")
@pytest.mark.parametrize("dtype, undefined", [(torch.float16, float("inf")), (torch.bfloat16, float("inf")),
                                              (torch.float32, float("inf"))])
def test_a_masked_load_without_other_gives_inf_under_a_check(dtype, undefined):
    x, out = torch.ones(16, dtype=dtype), torch.zeros(16, dtype=dtype)
    exercises.core.UNFILLED_LOADS.clear()
    with exercises.core.bounds_checked():
        _copy_masked[(1,)](x, out, 10, BLOCK=16, FILL=False)
    assert out[:10].eq(1).all() and out[10:].eq(undefined).all() and exercises.core.UNFILLED_LOADS
    exercises.core.UNFILLED_LOADS.clear()
    with exercises.core.bounds_checked():
        _copy_masked[(1,)](x, out, 10, BLOCK=16, FILL=True)
    assert out[10:].eq(0).all() and not exercises.core.UNFILLED_LOADS
    _copy_masked[(1,)](x, out, 10, BLOCK=16, FILL=False)  # outside a check: the interpreter's own zeros
    assert out[10:].eq(0).all()
