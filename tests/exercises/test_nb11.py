"""The catalogue of notebook 11's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import triton
import triton.language as tl

from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet


# --- 11: the online-softmax update -------------------------------------------------------------------

@triton.jit
def _softmax_no_max(m_i, l_i, acc, s, v):
    p = tl.exp2(s)
    return m_i, l_i + tl.sum(p, 1), acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_acc_kept(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * tl.exp2(m_i - m_new) + tl.sum(p, 1), acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_sum_kept(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i + tl.sum(p, 1), acc * tl.exp2(m_i - m_new)[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_natural(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_old_max(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_i[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_swapped(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return l_i * alpha + tl.sum(p, 1), m_new, acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_masked_to_zero(m_i, l_i, acc, s, v):  # replaces -inf by 0: wrong only under the mask
    s = tl.where(s == float("-inf"), 0.0, s)
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


def _softmax_plain(m_i, l_i, acc, s, v):
    return m_i, l_i, acc


@triton.jit
def _softmax_builtin_max(m_i, l_i, acc, s, v):
    m_new = max(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_wrong_axis(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 0))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_acc_first(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return acc * alpha[:, None] + tl.dot(p.to(v.dtype), v), m_new, l_i * alpha + tl.sum(p, 1)


SOFTMAX_WRONG = {
    "no maximum subtracted": (_softmax_no_max, "not shifted by its row's running maximum"),
    "acc not rescaled": (_softmax_acc_kept, "acc is not rescaled"),
    "l not rescaled": (_softmax_sum_kept, "l_i is not rescaled"),
    "exp for exp2": (_softmax_natural, "this is exp, not exp2"),
    "old maximum": (_softmax_old_max, "m_i is -inf before the first block"),
    "m and l swapped": (_softmax_swapped, "(m, l, acc) in that order"),
    "mask replaced": (_softmax_masked_to_zero, "wrong with the causal mask"),
    "no @triton.jit": (_softmax_plain, "forget @triton.jit"),
    "Python's max": (_softmax_builtin_max, "tl.maximum(a, b)"),
    "reduced along the wrong axis": (_softmax_wrong_axis, "reduce s along axis 1"),
    "acc returned first": (_softmax_acc_first, "return (m, l, acc) in that order"),
}


def test_softmax_step_reference_and_wrong_answers():
    assert quiet(exercises.check_softmax_step, solutions.softmax_step).passed
    assert_wrong_answers_named(exercises.check_softmax_step, SOFTMAX_WRONG)
