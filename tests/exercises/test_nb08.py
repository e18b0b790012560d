"""The catalogue of notebook 08's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import inspect

import pytest

from course import epilogues, exercises, runtime, solutions

import catalogue
from catalogue import assert_survives, assert_wrong_answers_named, edited_source, interpreter_only, quiet, variant


# --- 08: gelu -----------------------------------------------------------------------------------------

# catalogue.check_in_child runs the learner's cell with python -c; compiled, Triton wants @jit functions in a file
in_a_child = pytest.mark.skipif(not runtime.INTERPRET and '"-c"' in inspect.getsource(catalogue.check_in_child),
                                reason="compiled Triton cannot build a kernel defined in python -c")

_GELU = "return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"
_TANH = "@triton.jit\ndef stable_tanh"


def _importing(line):
    """An edit that puts ``line`` (an import) at the top of the variant's module."""
    return (_TANH, line + "\n\n\n" + _TANH)


GELU_WRONG = {  # label: (edits of solutions.stable_tanh and solutions.gelu, words its message must contain)
    # the three
    "0.0447 for 0.044715": ([(_GELU, _GELU.replace("0.044715", "0.0447"))], "Check the constants"),
    "calls epilogues.gelu": ([(_GELU, "return epilogues.gelu(x)"), _importing("from course import epilogues")],
                             "uses the course's own epilogues.gelu"),
    "libdevice.tanh": ([(_GELU, "return 0.5 * x * (1.0 + libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x "
                                "* x)))"), _importing("from triton.language.extra import libdevice")], "libdevice"),
    # and more
    "identity": ([(_GELU, "return x")], "unchanged"),
    "no 0.5": ([(_GELU, _GELU.replace("0.5 * x", "x"))], "factor 0.5"),
    "exact erf": ([(_GELU, "return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))")], "exact GELU"),
    "no cubic term": ([(_GELU, "return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * x))")], "cubic term"),
    "overflowing tanh": ([(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n    e = tl.exp(2.0 * u)\n"
                                  "    return 0.5 * x * (1.0 + (e - 1.0) / (e + 1.0))")], "overflowed"),
    "a sign": ([(_GELU, _GELU.replace("1.0 + stable", "1.0 - stable"))], "not GELU's tanh approximation there"),
    "float16": ([(_GELU, "return (" + _GELU[len("return "):] + ").to(tl.float16)")], "rounded to 16 bits"),
    "a constant 0.05": ([(_GELU, _GELU.replace("0.044715", "0.05"))], "Check the constants"),
    "sqrt(2 / pi) as 0.79788": ([(_GELU, _GELU.replace("0.7978845608028654", "0.79788"))], "Check the constants"),
    "overflow past 12": ([(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n"
                                  "    e, f = tl.exp(u), tl.exp(-u)\n    return 0.5 * x * (1.0 + (e - f) / (e + f))")],
                         "overflowed"),
    "math.tanh": ([(_GELU, "return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"),
                   _importing("import math")], "tl functions"),
    "sign lost": ([("@triton.jit\ndef gelu", "@triton.jit\ndef _tanh_abs(u):\n    return stable_tanh(tl.abs(u))\n\n\n"
                    "@triton.jit\ndef gelu"), (_GELU, _GELU.replace("stable_tanh(", "_tanh_abs("))], "lost its sign"),
    "x ** 3": ([(_GELU, _GELU.replace("x * x * x", "x ** 3"))], "write x * x * x"),
    "float16 maths": ([(_GELU, "x = x.to(tl.float16)\n    " + _GELU)], "keep the tile in float32"),
    "wrong signature": ([("def gelu(x):", "def gelu(x, y):")], "keep the signature"),
    "calls the course's tanh": ([(_GELU, _GELU.replace("stable_tanh(", "epilogues.stable_tanh(")),
                                 _importing("from course import epilogues")], "course's own epilogues.stable_tanh"),
    "imports the course's tanh": ([(_TANH, "from course.epilogues import stable_tanh as course_tanh\n\n\n" + _TANH),
                                   (_GELU, _GELU.replace("stable_tanh(", "course_tanh("))],
                                  "course's own epilogues.stable_tanh, as course_tanh"),
    "calls the solution": ([(_GELU, "return solutions.gelu(x)"), _importing("from course import solutions")],
                           "reference solution"),
    "torch.tanh": ([(_GELU, _GELU.replace("stable_tanh(", "torch.tanh(")), _importing("import torch")], "uses torch"),
    "tl.tanh": ([(_GELU, _GELU.replace("stable_tanh(", "tl.tanh("))], "has no tanh"),
    "a global constant": ([(_GELU, _GELU.replace("0.7978845608028654", "SQRT_2_OVER_PI")),
                           _importing("SQRT_2_OVER_PI = 0.7978845608028654")], "tl.constexpr"),
    "a helper without return": ([("    return tl.where(u < 0, -t, t)", "    t = tl.where(u < 0, -t, t)")],
                                "end with return"),
    # the learner review's (issue 31)
    "x * x for x cubed": ([(_GELU, _GELU.replace("0.044715 * x * x * x", "0.044715 * x * x"))],
                          "the cubic term is x · x"),
    "sqrt(2 pi) for sqrt(2 / pi)": ([(_GELU, _GELU.replace("0.7978845608028654", "2.5066282746310002"))],
                                    "multiplied by sqrt(2 pi)"),
    "a tuple returned": ([(_GELU, "return " + _GELU[len("return "):] + ", x")], "return one tile"),
    "x clamped to 10^4": ([(_GELU, "x = tl.minimum(tl.maximum(x, -10000.0), 10000.0)\n    " + _GELU)], "clamps x"),
    "x clamped to 10^20": ([(_GELU, "x = tl.minimum(tl.maximum(x, -1e20), 1e20)\n    " + _GELU)], "clamps x"),
    # the second review: told "close ... Check the constants", 762 and 19229 units off from |x| = 3.8 and 3 on
    "tanh's argument clamped to 5": ([(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n"
                                              "    u = tl.minimum(tl.maximum(u, -5.0), 5.0)\n"
                                              "    return 0.5 * x * (1.0 + stable_tanh(u))")],
                                     "then wrong from |x| = 3.8"),
    "relu past |x| = 3": ([(_GELU, "return tl.where(tl.abs(x) > 3.0, tl.maximum(x, 0.0), "
                                   + _GELU[len("return "):] + ")")],
                          "then wrong from |x| = 3.01562 on: gelu(-3.01562) is 0"),
}


def test_the_gelu_reference_passes_as_given_and_as_a_learners_cell(tmp_path):
    assert quiet(exercises.check_gelu, solutions.gelu).passed
    mine = variant(tmp_path, "gelu_mine", (solutions.stable_tanh, solutions.gelu))
    assert quiet(exercises.check_gelu, mine).passed


def test_every_wrong_gelu_gets_its_own_message(tmp_path):
    table = {label: (variant(tmp_path, f"gelu_{i}", (solutions.stable_tanh, solutions.gelu), *edits), words)
             for i, (label, (edits, words)) in enumerate(GELU_WRONG.items())}
    table["no @triton.jit"] = (lambda x: x, "did you forget @triton.jit")
    table["the course's epilogues.gelu itself"] = (epilogues.gelu, "the course's own epilogues.gelu")
    assert_wrong_answers_named(exercises.check_gelu, table,
                               same_mistake=("overflowing tanh", "overflow past 12"))


def test_gelu_messages_call_close_only_what_is_close(tmp_path):
    """A constant short of digits is "close"; a square for a cube or sqrt(2 pi), hundreds of thousands of
    float32 steps off, is not."""
    for label in ("x * x for x cubed", "sqrt(2 pi) for sqrt(2 / pi)", "a sign", "tanh's argument clamped to 5",
                  "relu past |x| = 3"):
        kernel = variant(tmp_path, "gelu_far_off", (solutions.stable_tanh, solutions.gelu), *GELU_WRONG[label][0])
        message = quiet(exercises.check_gelu, kernel).message
        assert "close" not in message and "Check the constants" not in message, (label, message)
    kernel = variant(tmp_path, "gelu_short", (solutions.stable_tanh, solutions.gelu),
                     *GELU_WRONG["0.0447 for 0.044715"][0])
    assert "close, but" in quiet(exercises.check_gelu, kernel).message


@pytest.mark.skipif(not runtime.INTERPRET, reason="the interpreter's words for a stored tuple")
def test_a_tuple_from_a_helper_of_gelu_is_named(tmp_path):
    kernel = variant(tmp_path, "gelu_pair", (solutions.stable_tanh, solutions.gelu),
                     ("@triton.jit\ndef gelu",
                      "@triton.jit\ndef _pair(x):\n    return x, x\n\n\n@triton.jit\ndef gelu"),
                     (_GELU, "return _pair(x)"))
    message = quiet(exercises.check_gelu, kernel).message
    assert "return one tile" in message and "array(" not in message, message


GELU_RIGHT = {  # label: edits of the reference that keep it right
    "x * sigmoid(2u) from exp": [(_GELU, "return x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x "
                                         "* x)))")],
    "tl.sigmoid": [(_GELU, "return x * tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))")],
    "tanh from exp2": [("e = tl.exp(-2.0 * tl.abs(u))", "e = tl.exp2(-2.8853900817779268 * tl.abs(u))")],
    "a clamped argument": [(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n"
                                   "    u = tl.minimum(tl.maximum(u, -15.0), 15.0)\n    e = tl.exp(2.0 * u)\n"
                                   "    return 0.5 * x * (1.0 + (e - 1.0) / (e + 1.0))")],
    "sqrt(2 / pi) from math": [(_GELU, _GELU.replace("0.7978845608028654", "math.sqrt(2 / math.pi)")),
                               _importing("import math")],
    "a tl.constexpr global": [(_GELU, _GELU.replace("0.044715", "CUBIC")),
                              _importing("CUBIC = tl.constexpr(0.044715)")],
    "x cubed as x * x * x, split": [(_GELU, "inner = x + 0.044715 * (x * x) * x\n"
                                            "    t = stable_tanh(0.7978845608028654 * inner)\n"
                                            "    return 0.5 * x + 0.5 * x * t")],
    "a comment naming torch and libdevice": [(_GELU, "# not torch.tanh, not libdevice.tanh, not epilogues.gelu\n    "
                                                     + _GELU)],
    # the second review's right forms, and constants within float32's rounding of the formula's
    "1 - 2 / (exp(2u) + 1)": [("@triton.jit\ndef gelu", "@triton.jit\ndef _tanh2(u):\n"
                               "    return 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)\n\n\n@triton.jit\ndef gelu"),
                              (_GELU, _GELU.replace("stable_tanh(", "_tanh2("))],
    "sqrt(2 / pi) as 0.797885": [(_GELU, _GELU.replace("0.7978845608028654", "0.797885"))],
    "sqrt(2 / pi) as 0.7978846": [(_GELU, _GELU.replace("0.7978845608028654", "0.7978846"))],
    "sqrt(2 / pi) as 2 * 0.3989423": [(_GELU, _GELU.replace("0.7978845608028654", "2.0 * 0.3989423"))],
}


@pytest.mark.parametrize("label", GELU_RIGHT)
def test_a_correct_gelu_written_another_way_passes(tmp_path, label):
    kernel = variant(tmp_path, "gelu_right", (solutions.stable_tanh, solutions.gelu), *GELU_RIGHT[label])
    verdict = quiet(exercises.check_gelu, kernel)
    assert verdict.passed, verdict.line


@in_a_child
@pytest.mark.parametrize("label, edit, words", [
    pytest.param("loops forever", (_GELU, "i = 0\n    while i < 1:\n        x = x + 0.0\n    " + _GELU), "gave up",
                 marks=interpreter_only),
    ("raises inside the kernel", (_GELU, "return x.tanh()"), "no math methods"),
])
def test_a_gelu_that_hangs_or_raises_ends_with_one_line(label, edit, words):
    source = edited_source((solutions.stable_tanh, solutions.gelu), edit)
    assert_survives("check_gelu", source, "gelu", words, time_limit_s=5)


# --- 08: quantize_rows --------------------------------------------------------------------------------

_FIRST_LOAD = ("        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)\n"
               "        peak = tl.maximum(")
_PEAK = "peak = tl.maximum(peak, tl.max(tl.abs(x.to(tl.float32)), axis=1))"
_SCALE = "scale = tl.where(peak > 0, peak / 127.0, 1.0)"
_ROUND = "q = tl.floor(x.to(tl.float32) / scale[:, None] + 0.5)"
_STORE_Q = "tl.store(Q + rows[:, None] * stride_qm + cols[None, :] * stride_qn, q.to(tl.int8), mask=mask)"
_KERNEL = "@triton.jit\ndef quantize_rows_kernel"
_SECOND = "    for start in range(0, N, BLOCK_N):  # second pass"
_FIRST_PASS = "    for start in range(0, N, BLOCK_N):  # first pass"
_BODY = inspect.getsource(solutions.quantize_rows_kernel.fn).split("BLOCK_N: tl.constexpr):\n", 1)[1]


def _imports(line):
    return (_KERNEL, line + "\n\n\n" + _KERNEL)


QUANTIZE_WRONG = {  # label: (edits of solutions.quantize_rows_kernel, words its message must contain)
    "no / 127": ([(_SCALE, "scale = tl.where(peak > 0, peak, 1.0)")], "largest magnitude itself"),
    "/ 128": ([(_SCALE, _SCALE.replace("127.0", "128.0"))], "by 128"),
    "/ 255": ([(_SCALE, _SCALE.replace("127.0", "255.0"))], "by 255"),
    "max, not max of |x|": ([(_PEAK, "peak = tl.maximum(peak, tl.max(x.to(tl.float32), axis=1))"),
                             ("peak = tl.zeros((BLOCK_M,), dtype=tl.float32)",
                              "peak = tl.full((BLOCK_M,), -1e30, dtype=tl.float32)")], "largest value"),
    "first block only": ([("    for start in range(0, N, BLOCK_N):  # first pass",
                           "    for start in range(0, 1):  # first")], "only the first BLOCK_N"),
    "running maximum lost": ([(_PEAK, "peak = tl.max(tl.abs(x.to(tl.float32)), axis=1)")], "only the last block"),
    "no all-zero guard": ([(_SCALE, "scale = peak / 127.0")], "all-zero row"),
    "one scale per matrix, per program": ([(_PEAK, "peak = tl.maximum(peak, tl.max(tl.abs(x.to(tl.float32))))")],
                                          "share one scale"),
    "scale in float16": ([(_SCALE, "scale = tl.where(peak > 0, (peak.to(tl.float16) / 127.0).to(tl.float16), 1.0)")],
                         "rounded to 16 bits"),
    "scale inverted": ([(_SCALE, "scale = tl.where(peak > 0, 127.0 / peak, 1.0)"),
                        (_ROUND, "q = tl.floor(x.to(tl.float32) * scale[:, None] + 0.5)")], "inverted"),
    "truncation": ([(_ROUND, "q = x.to(tl.float32) / scale[:, None]")], "rounds toward zero"),
    "v + 0.5 truncated": ([(_ROUND, "q = (x.to(tl.float32) / scale[:, None] + 0.5).to(tl.int32).to(tl.float32)")],
                          "negative ones are off by one"),
    "floor": ([(_ROUND, "q = tl.floor(x.to(tl.float32) / scale[:, None])")], "rounds down"),
    "multiplied by the scale": ([(_ROUND, "q = tl.floor(x.to(tl.float32) * scale[:, None] + 0.5)")],
                                "multiplies x by the scale"),
    "divided by the peak": ([(_ROUND, "q = tl.floor(x.to(tl.float32) / tl.where(peak > 0, peak, 1.0)[:, None] + 0.5)")],
                            "divides by the row's largest magnitude"),
    "clamped at 0": ([("q = tl.minimum(tl.maximum(q, -127.0), 127.0)", "q = tl.minimum(tl.maximum(q, 0.0), 127.0)")],
                     "clamped to 0"),
    "x * 127 in float16": ([(_ROUND, "q = tl.floor((x * 127.0) / peak[:, None] + 0.5)")], "16 bits"),
    "second pass on the first block only": ([(_SECOND, "    for start in range(0, 1):  # second")],
                                            "in the second pass too"),
    "wrong signature": ([("stride_qm, stride_qn, stride_s,", "stride_qn, stride_qm, stride_s,")], "keep the signature"),
    "calls the course's quantize": ([(_ROUND, "q = epilogues.quantize(x)"), _imports("from course import epilogues")],
                                    "course's own epilogues.quantize"),
    "calls the solution": ([("    rows = tl.program_id(0)", "    solutions.quantize_rows_kernel(X, Q, S, M, N, "
                             "stride_xm, stride_xn, stride_qm, stride_qn, stride_s, BLOCK_M, BLOCK_N)\n    "
                             "rows = tl.program_id(0)"), _imports("from course import solutions")],
                           "reference solution"),
    "torch.round": ([(_ROUND, "q = torch.round(x.to(tl.float32) / scale[:, None])"), _imports("import torch")],
                    "uses torch"),
    "libdevice.rint": ([(_ROUND, "q = libdevice.rint(x.to(tl.float32) / scale[:, None])"),
                        _imports("from triton.language.extra import libdevice")], "libdevice"),
    "a global 127": ([(_SCALE, _SCALE.replace("127.0", "QMAX")), _imports("QMAX = 127.0")], "tl.constexpr"),
    # the learner review's (issue 31): 0 / 0 on the all-zero row, then clamped. The interpreter's tl.maximum keeps
    # the NaN and numpy makes it 0 in int8, the right value; a GPU's drops it and stores -127. Named either way.
    "x * 127 / peak, a zero peak divided": ([(_ROUND, "q = tl.floor(x.to(tl.float32) * 127.0 / peak[:, None] + 0.5)")],
                                            "Never divide by this row's largest magnitude, 0"),
    "peak // 127": ([(_SCALE, "scale = tl.where(peak > 0, peak // 127, 1.0)")], "divide them with /"),
    # the third review: a loop over the columns stepping by the other block size, BLOCK_M (harmless while
    # BLOCK_M <= BLOCK_N: the blocks overlap; it skips columns once BLOCK_M > BLOCK_N)
    "second pass stepping by BLOCK_M": ([(_SECOND, _SECOND.replace("BLOCK_N", "BLOCK_M"))],
                                        "second pass steps through the columns by BLOCK_M"),
    "first pass stepping by BLOCK_M": ([(_FIRST_PASS, _FIRST_PASS.replace("BLOCK_N", "BLOCK_M"))],
                                       "first pass steps through the columns by BLOCK_M"),
    "both passes stepping by BLOCK_M": ([(_FIRST_PASS, _FIRST_PASS.replace("BLOCK_N", "BLOCK_M")),
                                         (_SECOND, _SECOND.replace("BLOCK_N", "BLOCK_M"))],
                                        "first pass steps through the columns by BLOCK_M"),
    # the third review: a filler for the max pass's masked-off lanes that tl.abs turns into the largest magnitude
    # (was told "the first pass reads outside the row")
    "other=float('-inf') in the max pass": ([(_FIRST_LOAD, _FIRST_LOAD.replace("other=0.0", "other=float('-inf')"))],
                                            "filler, of magnitude inf here (other=, or what a load without other= "
                                            "leaves there). The filler matters: for a maximum of |x| give other=0"),
    "other=-float('inf') in the max pass": ([(_FIRST_LOAD, _FIRST_LOAD.replace("other=0.0", "other=-float('inf')"))],
                                            "for a maximum of |x| give other=0"),
    "other=-65504.0 in the max pass": ([(_FIRST_LOAD, _FIRST_LOAD.replace("other=0.0", "other=-65504.0"))],
                                       "filler, of magnitude 65504 here"),
    "other=1.0 in the max pass": ([(_FIRST_LOAD, _FIRST_LOAD.replace("other=0.0", "other=1.0"))],
                                  "filler, of magnitude 1 here"),
}
# the second review: the first pass's load without other= (under a check the interpreter gives the lanes it masks
# off inf, which becomes the scale). Compiled, a GPU's registers decide: not tested there.
_NO_OTHER = ([(_FIRST_LOAD, _FIRST_LOAD.replace(", other=0.0", ""))], "give other=")
if runtime.INTERPRET:
    QUANTIZE_WRONG["the first pass's load without other="] = _NO_OTHER


def test_the_quantize_reference_passes_as_given_and_as_a_learners_cell(tmp_path):
    assert quiet(exercises.check_quantize_rows, solutions.quantize_rows_kernel).passed
    mine = variant(tmp_path, "quantize_mine", solutions.quantize_rows_kernel)
    assert quiet(exercises.check_quantize_rows, mine).passed


def test_every_wrong_quantization_gets_its_own_message(tmp_path):
    table = {label: (variant(tmp_path, f"quantize_{i}", solutions.quantize_rows_kernel, *edits), words)
             for i, (label, (edits, words)) in enumerate(QUANTIZE_WRONG.items())}
    table["no @triton.jit"] = (solutions.quantize_rows_kernel.fn, "did you forget @triton.jit")
    table["not a kernel"] = (None, "got NoneType")
    assert_wrong_answers_named(exercises.check_quantize_rows, table,
                               same_mistake=("both passes stepping by BLOCK_M",  # the first pass's, named first
                                             "other=-float('inf') in the max pass"))  # -inf, written another way


def test_a_filler_that_tl_abs_makes_the_largest_is_not_blamed_on_reads_outside_the_row(tmp_path):
    """The third review: other=float('-inf') in the max pass was told the first pass reads outside the row."""
    kernel = variant(tmp_path, "quantize_minus_inf", solutions.quantize_rows_kernel,
                     *QUANTIZE_WRONG["other=float('-inf') in the max pass"][0])
    message = quiet(exercises.check_quantize_rows, kernel).message
    assert "reads outside the row" not in message and "other=0" in message, message


def test_floor_division_of_a_float_is_not_told_to_use_floor_division(tmp_path):
    kernel = variant(tmp_path, "quantize_floordiv", solutions.quantize_rows_kernel, *QUANTIZE_WRONG["peak // 127"][0])
    message = quiet(exercises.check_quantize_rows, kernel).message
    assert "use integer division" not in message and "not /" not in message, message


@interpreter_only  # compiled, a NaN converted to int8 without a clamp may well store 0: nothing shows it there
def test_a_zero_peak_divided_without_a_clamp_is_caught_under_the_interpreter(tmp_path):
    kernel = variant(tmp_path, "quantize_nan", solutions.quantize_rows_kernel,
                     (_ROUND, "q = tl.floor(x.to(tl.float32) * 127.0 / peak[:, None] + 0.5)"),
                     ("q = tl.minimum(tl.maximum(q, -127.0), 127.0)", "q = q"))
    verdict = quiet(exercises.check_quantize_rows, kernel)
    assert not verdict.passed and "converted a NaN" in verdict.message, verdict.line


def test_the_nan_watch_leaves_the_interpreter_as_it_was(tmp_path):
    if not runtime.INTERPRET:
        pytest.skip("the watch is the interpreter's")
    from triton.runtime import interpreter

    kernel = variant(tmp_path, "quantize_nan_watch", solutions.quantize_rows_kernel,
                     *QUANTIZE_WRONG["x * 127 / peak, a zero peak divided"][0])
    quiet(exercises.check_quantize_rows, kernel)
    assert not {"create_fp_to_si", "create_fp_to_ui"} & set(vars(interpreter.interpreter_builder))


QUANTIZE_RIGHT = {  # label: edits of the reference that keep it right
    "ties to even (the 1.5 * 2^23 trick)": [(_ROUND, "q = (x.to(tl.float32) / scale[:, None] + 12582912.0) "
                                                     "- 12582912.0")],
    "ties away from zero": [(_ROUND, "v = x.to(tl.float32) / scale[:, None]\n        "
                                     "q = tl.where(v >= 0, tl.floor(v + 0.5), tl.ceil(v - 0.5))")],
    "a reciprocal, multiplied": [(_SCALE, "inv = tl.where(peak > 0, 127.0 / peak, 0.0)\n    "
                                          "scale = tl.where(peak > 0, peak * (1.0 / 127.0), 1.0)"),
                                 (_ROUND, "q = tl.floor(x.to(tl.float32) * inv[:, None] + 0.5)")],
    "no clamp": [("q = tl.minimum(tl.maximum(q, -127.0), 127.0)", "q = q")],
    "while loops": [("    for start in range(0, N, BLOCK_N):  # first pass: each row's largest magnitude, block after "
                     "block\n", "    start = 0\n    while start < N:\n"),
                    ("        peak = tl.maximum(peak, tl.max(tl.abs(x.to(tl.float32)), axis=1))\n",
                     "        peak = tl.maximum(peak, tl.max(tl.abs(x.to(tl.float32)), axis=1))\n"
                     "        start += BLOCK_N\n")],
    "one row at a time, in a helper": [(_BODY, """
    for r in tl.static_range(BLOCK_M):
        row = tl.program_id(0) * BLOCK_M + r
        if row < M:
            _one_row(X + row * stride_xm, Q + row * stride_qm, S + row * stride_s, N, stride_xn, stride_qn, BLOCK_N)
"""), (_KERNEL, """@triton.jit
def _one_row(x_ptr, q_ptr, s_ptr, N, sx, sq, BLOCK_N: tl.constexpr):
    peak = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):  # the largest magnitude in each lane, then across the lanes
        cols = start + tl.arange(0, BLOCK_N)
        peak = tl.maximum(peak, tl.abs(tl.load(x_ptr + cols * sx, mask=cols < N, other=0.0).to(tl.float32)))
    top = tl.max(peak, axis=0)
    scale = tl.where(top > 0, top / 127.0, 1.0)
    tl.store(s_ptr, scale)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + cols * sx, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(q_ptr + cols * sq, tl.floor(x / scale + 0.5).to(tl.int8), mask=cols < N)


""" + _KERNEL)],
    "a comment naming torch.round": [(_ROUND, "# torch.round would do this outside a kernel\n        " + _ROUND)],
    "the second pass's load without other= (its lanes are never stored)": [
        ("mask=mask, other=0.0)\n        q = ", "mask=mask)\n        q = ")],
    "0 / 0 computed, but dropped by tl.where": [(_ROUND, "q = tl.where(peak[:, None] > 0, tl.floor(x.to(tl.float32) "
                                                         "* 127.0 / peak[:, None] + 0.5), 0.0)")],
}


@pytest.mark.parametrize("label", QUANTIZE_RIGHT)
def test_a_correct_quantization_written_another_way_passes(tmp_path, monkeypatch, label):
    monkeypatch.syspath_prepend(str(tmp_path))  # so that the build for a GPU imports the variant's helpers
    kernel = variant(tmp_path, "quantize_right", solutions.quantize_rows_kernel, *QUANTIZE_RIGHT[label])
    verdict = quiet(exercises.check_quantize_rows, kernel)
    assert verdict.passed, verdict.line


_X_AT = "X + rows[:, None] * stride_xm + cols[None, :] * stride_xn"
_SECOND_LOAD = f"x = tl.load({_X_AT}, mask=mask, other=0.0)\n        q = "
QUANTIZE_CRASHES = {  # label: (edits, words of the one ✗ line): wrong addresses, run in a child process
    "store without a column mask": ([(_STORE_Q, _STORE_Q.replace("mask=mask", "mask=row_in[:, None]"))],
                                    "past the end of a row"),
    "store without a row mask": ([(_STORE_Q, _STORE_Q.replace("mask=mask", "mask=cols[None, :] < N"))],
                                 "rows past M"),
    "loads without masks": ([(f"{_X_AT}, mask=mask, other=0.0)", f"{_X_AT})")], "reads past the row's end"),
    "loads without a column mask": ([(f"{_X_AT}, mask=mask, other=0.0)", f"{_X_AT}, mask=row_in[:, None], other=0.0)")],
                                    "mask the loads with cols < N"),
    "S without its stride": ([("tl.store(S + rows * stride_s", "tl.store(S + rows")], "stride_s"),
    "S without its row mask": ([("tl.store(S + rows * stride_s, scale, mask=row_in)", "tl.store(S + rows * stride_s, "
                                                                                       "scale)")], "rows past M"),
    "a store into X": ([(_FIRST_LOAD, _FIRST_LOAD.replace("        peak = tl.maximum(", "        tl.store(" + _X_AT
                                                          + ", x * 0.5, mask=mask)\n        peak = tl.maximum("))],
                       "wrote into X"),
    "Q's strides swapped": ([(_STORE_Q, _STORE_Q.replace("rows[:, None] * stride_qm + cols[None, :] * stride_qn",
                                                         "rows[:, None] * stride_qn + cols[None, :] * stride_qm"))],
                            "outside"),
    "X's strides swapped": ([(_X_AT, "X + rows[:, None] * stride_xn + cols[None, :] * stride_xm")],
                            "X's strides are swapped"),
    "X taken as contiguous": ([(_X_AT, "X + rows[:, None] * N + cols[None, :]")], "as if contiguous"),
    # the third review: the second pass's addresses wrong (was told the rounding was wrong), and cousins
    "the second pass with stride_xn on both axes": (
        [(_SECOND_LOAD, _SECOND_LOAD.replace("stride_xm", "stride_xn"))],
        "the second pass reads X at other places than the first, as if element (i, j) were at X + i * stride_xn + "
        "j * stride_xn"),
    "the second pass with stride_xm on both axes": ([(_SECOND_LOAD, _SECOND_LOAD.replace("stride_xn", "stride_xm"))],
                                                    "X + i * stride_xm + j * stride_xm"),
    "the second pass with X's strides swapped": (
        [(_SECOND_LOAD, _SECOND_LOAD.replace("rows[:, None] * stride_xm + cols[None, :] * stride_xn",
                                             "rows[:, None] * stride_xn + cols[None, :] * stride_xm"))],
        "the second pass reads X at other places than the first"),
    "the second pass with Q's strides": ([(_SECOND_LOAD, _SECOND_LOAD.replace("_x", "_q"))],
                                         "X + i * stride_qm + j * stride_qn"),
    "the second pass without the row": ([(_SECOND_LOAD, _SECOND_LOAD.replace("rows[:, None] * stride_xm + ", ""))],
                                        "X + i * 0 + j * stride_xn"),
    "the first pass with stride_xn on both axes": ([(_FIRST_LOAD, _FIRST_LOAD.replace("stride_xm", "stride_xn"))],
                                                   "the first pass reads X at other places than X's elements"),
    "an endless loop": ([("    for start in range(0, N, BLOCK_N):  # first pass: each row's largest magnitude, block "
                          "after block\n", "    start = 0\n    while start < N:\n")], "gave up"),
}


@in_a_child
@pytest.mark.parametrize("label", [pytest.param(label, marks=interpreter_only) if words == "gave up" else label
                                   for label, (edits, words) in QUANTIZE_CRASHES.items()])
def test_a_quantization_with_wrong_addresses_or_no_end_gets_one_line(label):
    edits, words = QUANTIZE_CRASHES[label]
    source = edited_source(solutions.quantize_rows_kernel, *edits)
    assert_survives("check_quantize_rows", source, "quantize_rows_kernel", words, time_limit_s=10)


def test_the_stubs_are_not_attempted():
    import triton
    import triton.language as tl

    @triton.jit
    def gelu(x):
        ...

    @triton.jit
    def quantize_rows_kernel(X, Q, S, M, N, stride_xm, stride_xn, stride_qm, stride_qn, stride_s,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        ...

    assert quiet(exercises.check_gelu, gelu).status == "not attempted"
    assert quiet(exercises.check_quantize_rows, quantize_rows_kernel).status == "not attempted"
