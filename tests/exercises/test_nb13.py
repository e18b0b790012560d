"""The catalogue of notebook 13's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import itertools
import tempfile
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from catalogue import assert_survives, assert_wrong_answers_named, edited_source, module_from_file, quiet

from course import exercises, gemm, solutions

# --- 13 · dkdv_step: the dK/dV update for one block of queries ------------------------------------------

_FOLDER = Path(tempfile.mkdtemp(prefix="nb13_steps_"))
_NUMBERS = itertools.count()


def _step(*edits):
    """The reference dkdv_step with ``edits`` made, in a module file of its own (a compiled kernel and the
    check's reading of the learner's code both need its source)."""
    source = "import triton\nimport triton.language as tl\n\n\n" + edited_source(solutions.dkdv_step, *edits)
    return module_from_file(_FOLDER / f"step_{next(_NUMBERS)}.py", source).dkdv_step


_P = "p_t = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])"
_MASK = "p_t = tl.where(cols[:, None] <= rows[None, :], p_t, 0.0)"
_DV = "dv += tl.dot(p_t.to(do.dtype), do)"
_DS = "ds_t = p_t * (tl.dot(v, tl.trans(do)) - delta[None, :])"
_DK = "dk += tl.dot(ds_t.to(q.dtype), q)"


def _wrong_steps():
    return {
        "no delta": (_step((_DS, "ds_t = p_t * tl.dot(v, tl.trans(do))")), "delta"),
        "no mask": (_step(("    if MASKED:  # a row sees the keys at or before it\n        " + _MASK, "")),
                    "apply the causal mask"),
        "flipped mask": (_step((_MASK, _MASK.replace("<=", ">="))), "the wrong way round"),
        "strict mask": (_step((_MASK, _MASK.replace("<=", "<"))), "its own key"),
        "mask after dV": (_step(("    if MASKED:  # a row sees the keys at or before it\n        " + _MASK + "\n    " + _DV,
                                 "    " + _DV + "\n    if MASKED:\n        " + _MASK)), "before dV uses it"),
        "overwritten": (_step((_DV, _DV.replace("+=", "=")), (_DK, _DK.replace("+=", "="))), "add this block's"),
        "natural exp": (_step((_P, _P.replace("exp2", "exp"))), "tl.exp2"),
        "no scale": (_step((_P, _P.replace(" * qk_scale", ""))), "qk_scale"),
        "dV from dS": (_step(("    " + _DV + "\n", ""), ("    return dk, dv", "    dv += tl.dot(ds_t.to(do.dtype), do)\n"
                                                                   "    return dk, dv")), "not dS"),
        "dK from P": (_step((_DK, "dk += tl.dot(p_t.to(q.dtype), q)")), "not the probabilities"),
        "dK scaled": (_step((_DK, "dk += tl.dot(ds_t.to(q.dtype), q) * qk_scale")), "leave the factor scale out"),
        "swapped": (_step(("return dk, dv", "return dv, dk")), "in that order"),
        "float16 dk": (_step(("return dk, dv", "return dk.to(tl.float16), dv")), "keep the sums float32"),
        "exp2 before subtracting lse": (_step((_P, "p_t = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale) * "
                                                   "tl.exp2(-lse[None, :])")), "NaN"),
        "sums rounded to float16": (_step(("return dk, dv", "return dk.to(tl.float16).to(tl.float32), "
                                                             "dv.to(tl.float16).to(tl.float32)")), "lost in rounding"),
        "float16 hard-coded": (_step((_P, "k, q, v, do = k.to(tl.float16), q.to(tl.float16), v.to(tl.float16), "
                                          "do.to(tl.float16)\n    " + _P)), "float16 cannot"),
        "one block returned": (_step(("return dk, dv", "return dv")), "returns two blocks"),
        "Pᵀ not converted for tl.dot": (_step((_DV, "dv += tl.dot(p_t, do)")), "p_t.to(do.dtype)"),
        "lse along the wrong axis": (_step((_P, _P.replace("lse[None, :]", "lse[:, None]"))), "broadcast"),
        "dPᵀ taken as dP": (_step((_DS, _DS.replace("tl.dot(v, tl.trans(do))", "tl.dot(do, tl.trans(v))"))),
                           "[BLOCK_N, BLOCK_M]"),
    }


def test_dkdv_step_reference_passes():
    assert quiet(exercises.check_dkdv_step, solutions.dkdv_step).passed


def test_dkdv_step_stub_is_not_attempted():
    @triton.jit
    def dkdv_step(k, v, dk, dv, q, do, lse, delta, cols, rows, qk_scale, MASKED: tl.constexpr):
        ...

    assert quiet(exercises.check_dkdv_step, dkdv_step).status == "not attempted"


def test_dkdv_step_wrong_answers_each_get_their_own_message():
    assert_wrong_answers_named(exercises.check_dkdv_step, _wrong_steps())


def test_dkdv_step_refuses_the_course_s_own_and_plain_python():
    from course import attention_backward

    assert "write it yourself" in quiet(exercises.check_dkdv_step, attention_backward.dkdv_step).message
    assert "forget @triton.jit" in quiet(exercises.check_dkdv_step, solutions.dkdv_step.fn).message
    wrapper = _step(("    p_t = tl.exp2", "    return attention_backward.dkdv_step(k, v, dk, dv, q, do, lse, delta, "
                                          "cols, rows, qk_scale, MASKED)\n    p_t = tl.exp2"))
    wrapper.fn.__globals__["attention_backward"] = attention_backward
    assert "write it yourself" in quiet(exercises.check_dkdv_step, wrapper).message


_RIGHT = {
    "masked with -inf before exp2": _step((_P + "\n    if MASKED:  # a row sees the keys at or before it\n        " + _MASK,
                                           "s_t = tl.dot(k, tl.trans(q)) * qk_scale\n    if MASKED:\n"
                                           "        s_t = tl.where(cols[:, None] <= rows[None, :], s_t, float('-inf'))\n"
                                           "    p_t = tl.exp2(s_t - lse[None, :])")),
    "rows by keys, transposed for the products": _step(
        (_P, "p = tl.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])\n    p_t = tl.trans(p)")),
    "tl.dot's accumulator argument": _step((_DV, "dv = tl.dot(p_t.to(do.dtype), do, dv)"),
                                           (_DK, "dk = tl.dot(ds_t.to(q.dtype), q, dk)")),
}


@pytest.mark.parametrize("name", list(_RIGHT))
def test_dkdv_step_correct_alternatives_pass(name):
    verdict = quiet(exercises.check_dkdv_step, _RIGHT[name])
    assert verdict.passed, verdict.line


def test_dkdv_step_a_step_that_raises_is_reported_in_a_few_lines():
    source = edited_source(solutions.dkdv_step, (_DK, "dk += tl.dot(ds_t.to(q.dtype), undefined_name)"))
    assert_survives("check_dkdv_step", source, "dkdv_step", "dkdv_step")


# --- 13 · linear_grads: a Linear layer's gradients as views ---------------------------------------------

def _grads(body):
    scope = {"torch": torch, "gemm": gemm}
    exec("def linear_grads(x, w, dy):\n" + body, scope)
    return scope["linear_grads"]


LINEAR_WRONG = {
    "dw transposed": (_grads("    return gemm.matmul(dy, w), gemm.matmul(x.T, dy), dy.sum(0)\n"), "is yours transposed"),
    "db over the wrong axis": (_grads("    return gemm.matmul(dy, w), gemm.matmul(dy.T, x), dy.sum(1)\n"),
                               "a sum over the tokens"),
    "dw with torch": (_grads("    return gemm.matmul(dy, w), dy.T @ x, dy.sum(0)\n"), "dw did not come from"),
    "matmul called, torch returned": (_grads("    gemm.matmul(dy, w)\n    gemm.matmul(dy.T, x)\n"
                                             "    return dy @ w, dy.T @ x, dy.sum(0)\n"), "dx did not come from"),
    "copies": (_grads("    return gemm.matmul(dy, w), gemm.matmul(dy.T.contiguous(), x), dy.sum(0)\n"),
               "a copy of dy, not a view"),
    "converted to float16": (_grads("    return (gemm.matmul(dy.half(), w.half()).float(), gemm.matmul(dy.T.half(), "
                                    "x.half()).float(), dy.sum(0))\n"), "a copy of dy"),
    "db a mean": (_grads("    return gemm.matmul(dy, w[:, :]), gemm.matmul(dy.T, x), dy.mean(0)\n"),
                             "db is wrong"),
    "two values": (_grads("    return gemm.matmul(dy, w), gemm.matmul(dy.T, x)\n"), "three tensors"),
    "raises": (_grads("    return gemm.matmul(w, dy), gemm.matmul(dy.T, x), dy.sum(0)\n"), "raised"),
}


def test_linear_grads_reference_passes():
    assert quiet(exercises.check_linear_grads, solutions.linear_grads).passed


def test_linear_grads_stub_is_not_attempted():
    def linear_grads(x, w, dy):
        ...

    assert quiet(exercises.check_linear_grads, linear_grads).status == "not attempted"


def test_linear_grads_wrong_answers_each_get_their_own_message():
    assert_wrong_answers_named(exercises.check_linear_grads, LINEAR_WRONG)


_MM = "gemm.matmul"
LINEAR_CHEATS = {  # a second review's: each fails, with these words
    "dy zeroed in place": ("    dy.zero_()\n    return gemm.matmul(dy, w), gemm.matmul(dy.T, x), dy.sum(0)\n",
                           "changed its input dy"),
    "x transposed in place": ("    dx = gemm.matmul(dy, w)\n    x.t_()\n    return dx, gemm.matmul(dy.T, x.T), dy.sum(0)\n",
                              "changed its input x"),
    "a product of zeros overwritten": ("    dx = gemm.matmul(torch.zeros_like(dy), torch.zeros_like(w))\n"
                                       "    dx.copy_(dy @ w)\n    return dx, gemm.matmul(dy.T, x), dy.sum(0)\n",
                                       "an operand that is not dy or w itself"),
    "float16 results": ("    return (gemm.matmul(dy, w, out_dtype=torch.float16), gemm.matmul(dy.T, x, "
                        "out_dtype=torch.float16), dy.sum(0))\n", "a gradient has the dtype"),
    "db in float64": ("    return gemm.matmul(dy, w), gemm.matmul(dy.T, x), dy.double().sum(0)\n", "db is torch.float64"),
    "padded copies": ("    f = torch.nn.functional\n    dx = gemm.matmul(f.pad(dy, (0, 1)), f.pad(w, (0, 0, 0, 1)))\n"
                      "    return dx, gemm.matmul(dy.T, x), dy.sum(0)\n", "not dy or w itself"),
    "a copy one bit off": ("    return gemm.matmul(dy * (1 + 2 ** -22), w), gemm.matmul(dy.T, x), dy.sum(0)\n",
                           "not dy or w itself"),
    "a meta tensor": ("    return gemm.matmul(dy, w), gemm.matmul(dy.T, x), torch.empty(dy.shape[1], device='meta')\n",
                      "dense tensor on x's device"),
    "a sparse dx": ("    return gemm.matmul(dy, w).to_sparse(), gemm.matmul(dy.T, x), dy.sum(0)\n",
                    "dense tensor on x's device"),
}


@pytest.mark.parametrize("label", list(LINEAR_CHEATS))
def test_linear_grads_refuses_what_a_second_review_tried(label):
    body, words = LINEAR_CHEATS[label]
    verdict = quiet(exercises.check_linear_grads, _grads(body))
    assert verdict.status == "failed" and words in verdict.message, verdict.line


def test_linear_grads_takes_a_partial_or_a_callable_object():
    import functools

    right = _grads("    return gemm.matmul(dy, w), gemm.matmul(dy.T, x), dy.sum(0)\n")

    class Grads:
        def __call__(self, x, w, dy):
            return right(x, w, dy)

    for answer in (functools.partial(right), Grads()):
        verdict = quiet(exercises.check_linear_grads, answer)
        assert verdict.passed, verdict.line


def test_linear_grads_finds_matmul_imported_by_name_and_restores_it():
    from course.gemm import matmul

    scope = {"matmul": matmul}
    exec("def linear_grads(x, w, dy):\n    return matmul(dy, w), matmul(dy.T, x), dy.sum(0)\n", scope)
    verdict = quiet(exercises.check_linear_grads, scope["linear_grads"])
    assert verdict.passed, verdict.line
    assert scope["matmul"] is matmul and gemm.matmul is matmul


def test_linear_grads_column_sum_by_a_product_with_ones_passes():
    verdict = quiet(exercises.check_linear_grads, _grads(
        "    ones = torch.ones(1, dy.shape[0], device=dy.device, dtype=dy.dtype)\n"
        "    return gemm.matmul(dy, w), gemm.matmul(dy.T, x), gemm.matmul(ones, dy)[0]\n"))
    assert verdict.passed, verdict.line


def test_linear_grads_transposed_product_of_the_transpose_passes():
    verdict = quiet(exercises.check_linear_grads,
                    _grads("    return gemm.matmul(dy, w), gemm.matmul(x.T, dy).T, dy.sum(0)\n"))
    assert verdict.passed, verdict.line
