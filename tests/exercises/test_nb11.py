"""The catalogue of notebook 11's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import pytest
import triton
import triton.language as tl

from course import attention, exercises, runtime, solutions
from course.exercises import nb11

import catalogue
from catalogue import assert_survives, assert_wrong_answers_named, edited_source, quiet, variant

# The crash tests run a check on a kernel that hangs or reaches outside its tensors: under the interpreter the
# check's time limit and bounds check stop it; compiled on a GPU nothing can (a kernel that never ends hangs the GPU).
interpreter_only = pytest.mark.skipif(not runtime.INTERPRET, reason="a compiled kernel that hangs or faults "
                                      "cannot be stopped by the check")


# --- 11 · softmax_step: the online-softmax update ----------------------------------------------------

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
def _softmax_unshifted(m_i, l_i, acc, s, v):  # keeps m right, but exponentiates the raw scores
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s)
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


@triton.jit
def _softmax_clamped(m_i, l_i, acc, s, v):  # the issue's: right unless a row's scores are all negative
    m_new = tl.maximum(tl.maximum(m_i, tl.max(s, 1)), 0.0)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_alpha_inverted(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_new - m_i)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_block_max(m_i, l_i, acc, s, v):  # forgets m_i: overflows once a block's scores fall far below it
    m_new = tl.max(s, 1)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_normalized(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_new = l_i * alpha + tl.sum(p, 1)
    return m_new, l_new, (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)) / l_new[:, None]


@triton.jit
def _softmax_m_kept(m_i, l_i, acc, s, v):  # updates l and acc with the new maximum, returns the old one
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_i, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_two_values(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp2(s - m_new[:, None])
    return m_new, acc * tl.exp2(m_i - m_new)[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_p_not_converted(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p, v)


@triton.jit
def _softmax_sum_of_block(m_i, l_i, acc, s, v):  # l sums the whole block, not each row
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(tl.sum(p, 1), 0), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_float16_acc(m_i, l_i, acc, s, v):  # the review's: a float16 accumulator, converted on the way out
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    acc_new = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)).to(tl.float16)
    return m_new, l_i * alpha + tl.sum(p, 1), acc_new


@triton.jit
def _softmax_float16_dot(m_i, l_i, acc, s, v):  # the review's: tl.dot's result in float16, acc float32 after
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, out_dtype=tl.float16)


@triton.jit
def _softmax_p_float16(m_i, l_i, acc, s, v):  # right for float16 values only
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)


@triton.jit
def _softmax_block_shift(m_i, l_i, acc, s, v):  # FlashAttention-1's order: nan on a row all -inf in the block
    m_block = tl.max(s, 1)
    p = tl.exp2(s - m_block[:, None])
    m_new = tl.maximum(m_i, m_block)
    alpha = tl.exp2(m_i - m_new)
    beta = tl.exp2(m_block - m_new)
    l_new = alpha * l_i + beta * tl.sum(p, 1)
    return m_new, l_new, acc * alpha[:, None] + beta[:, None] * tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_scaled_twice(m_i, l_i, acc, s, v):  # multiplies the base-2 scores by log2(e) once more
    s = s * 1.4426950408889634
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_float16_l(m_i, l_i, acc, s, v):  # the sum kept in float16
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, (l_i * alpha + tl.sum(p, 1)).to(tl.float16), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_unguarded(m_i, l_i, acc, s, v):  # the textbook update (the course's own): nan on a row with no key yet
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_m_floored(m_i, l_i, acc, s, v):  # the review's: the -inf maximum replaced by 0, and returned so
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_new = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, alpha * l_i + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_l_of_rounded_p(m_i, l_i, acc, s, v):  # the review's: p rounded for tl.dot, l summed from that
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None]).to(v.dtype)
    return m_new, alpha * l_i + tl.sum(p.to(tl.float32), 1), acc * alpha[:, None] + tl.dot(p, v)


@triton.jit
def _softmax_l_summed_in_float16(m_i, l_i, acc, s, v):  # the review's: tl.sum of a float16 p sums in float16
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None]).to(v.dtype)
    return m_new, alpha * l_i + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p, v)


@triton.jit
def _softmax_python_if(m_i, l_i, acc, s, v):  # the third review's: Python's if on a block of row maxima
    m_new = m_i
    m_block = tl.max(s, 1)
    if m_block > m_i:
        m_new = m_block
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_conditional_expression(m_i, l_i, acc, s, v):  # the same choice as a conditional expression
    m_block = tl.max(s, 1)
    m_new = m_block if m_block > m_i else m_i
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_if_guard(m_i, l_i, acc, s, v):  # the guard for a row with no key yet as Python's if
    m_new = tl.maximum(m_i, tl.max(s, 1))
    shift = m_new
    if m_new == float("-inf"):
        shift = tl.zeros_like(m_new)
    alpha = tl.exp2(m_i - shift)
    p = tl.exp2(s - shift[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_course_step(m_i, l_i, acc, s, v):
    return attention.softmax_step(m_i, l_i, acc, s, v)


@triton.jit
def _softmax_solution_step(m_i, l_i, acc, s, v):
    return solutions.softmax_step(m_i, l_i, acc, s, v)


SOFTMAX_WRONG = {
    "no maximum subtracted, m never updated": (_softmax_no_max, "m is returned unchanged"),
    "acc not rescaled": (_softmax_acc_kept, "acc is not rescaled"),
    "l not rescaled": (_softmax_sum_kept, "l_i is not rescaled"),
    "exp for exp2": (_softmax_natural, "this is exp, not exp2"),
    "scores shifted by the old maximum": (_softmax_old_max, "shifted by the old maximum m_i"),
    "scores not shifted": (_softmax_unshifted, "not shifted by its row's running maximum"),
    "m and l swapped": (_softmax_swapped, "(m, l, acc) in that order"),
    "mask replaced": (_softmax_masked_to_zero, "Don't replace -inf"),
    "float16 accumulator": (_softmax_float16_acc, "returns acc as float16"),
    "tl.dot's result in float16": (_softmax_float16_dot, "acc is off by float16's rounding"),
    "p converted to float16 whatever v is": (_softmax_p_float16, "convert p to v's (p.to(v.dtype))"),
    "FlashAttention-1's shift by the block's maximum": (_softmax_block_shift, "whose every score is -inf in this "
                                                                              "block, comes out nan"),
    "scores scaled by log2(e) again": (_softmax_scaled_twice, "m is the maximum of the scores times log2(e)"),
    "l returned as float16": (_softmax_float16_l, "returns l as float16"),
    "no @triton.jit": (_softmax_plain, "forget @triton.jit"),
    "Python's max": (_softmax_builtin_max, "tl.maximum(a, b)"),
    "reduced along the wrong axis": (_softmax_wrong_axis, "reduce s along axis 1"),
    "acc returned first": (_softmax_acc_first, "return (m, l, acc) in that order"),
    "maximum clamped at 0": (_softmax_clamped, "all-negative scores"),
    "rescale factor inverted": (_softmax_alpha_inverted, "the old terms grow instead of shrinking"),
    "maximum of the block only": (_softmax_block_max, "m forgets the old maximum"),
    "acc normalized every step": (_softmax_normalized, "acc is divided by l"),
    "the old maximum returned": (_softmax_m_kept, "m is returned unchanged"),
    "two values returned": (_softmax_two_values, "returns three values"),
    "p not converted for tl.dot": (_softmax_p_not_converted, "p.to(v.dtype)"),
    "l summed over the whole block": (_softmax_sum_of_block, "summed along each row"),
    "no guard for a row that has seen no key yet": (_softmax_unguarded, "which has seen no key yet, comes out nan"),
    "the -inf maximum replaced by 0 and returned": (_softmax_m_floored, "comes back with m = 0, not -inf"),
    "l summed from p rounded to float16": (_softmax_l_of_rounded_p, "l is off by a 16-bit rounding"),
    "l summed in float16": (_softmax_l_summed_in_float16, "l is off by a 16-bit rounding"),
    "calls the course's softmax_step": (_softmax_course_step, "attention.softmax_step"),
    # the third review's: a Python if on a block (was "m is returned unchanged"), and its cousins
    "Python's if on a block": (_softmax_python_if, "tests a block with Python's if (condition: m_block > m_i)"),
    "a conditional expression on a block": (_softmax_conditional_expression,
                                            "tests a block with Python's x if c else y"),
    "the -inf guard as Python's if": (_softmax_if_guard, "tests a block with Python's if (condition: m_new =="),
    "calls the reference solution": (_softmax_solution_step, "solutions.softmax_step"),
}


# Each right answer keeps a row that has seen no key yet (its new maximum -inf) as it came: m = -inf, l = 0, acc = 0,
# each with a guard of its own kind.

@triton.jit
def _softmax_comment(m_i, l_i, acc, s, v):
    # not Python's max(a, b): tl.maximum works element by element; "min(" in a string is no call either
    m_new = tl.maximum(m_i, tl.max(s, 1))
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # "max(" in a comment is no call
    alpha = tl.exp2(m_i - shift)  # max(old, new) in words
    p = tl.exp2(s - shift[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_dot_accumulates(m_i, l_i, acc, s, v):  # tl.dot adding into the rescaled accumulator
    m_new = tl.maximum(m_i, tl.max(s, 1))
    shift = tl.maximum(m_new, -1.0e30)  # a finite floor far below any score: -inf - (-1e30) is still -inf
    alpha = tl.exp2(m_i - shift)
    p = tl.exp2(s - shift[:, None])
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc


@triton.jit
def _softmax_exp_of_ln2(m_i, l_i, acc, s, v):  # exp(x ln 2) is 2^x: another way to the same numbers
    m_new = tl.maximum(m_i, tl.max(s, 1))
    seen = m_new > float("-inf")
    alpha = tl.where(seen, tl.exp((m_i - m_new) * 0.6931471805599453), 1.0)
    p = tl.where(seen[:, None], tl.exp((s - m_new[:, None]) * 0.6931471805599453), 0.0)
    acc *= alpha[:, None]
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i * alpha + tl.sum(p, 1), acc


@triton.jit
def _softmax_guarded_block_shift(m_i, l_i, acc, s, v):  # FlashAttention-1's order, the all -inf rows guarded
    m_block = tl.max(s, 1)
    m_safe = tl.where(m_block == float("-inf"), 0.0, m_block)
    p = tl.exp2(s - m_safe[:, None])
    m_new = tl.maximum(m_i, m_block)
    new_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - new_safe)
    beta = tl.exp2(m_safe - new_safe)
    acc = acc * alpha[:, None] + beta[:, None] * tl.dot(p.to(v.dtype), v)
    return m_new, alpha * l_i + beta * tl.sum(p, 1), acc


@triton.jit
def _softmax_where_max(m_i, l_i, acc, s, v):
    block = tl.max(s, axis=1)
    m_new = tl.where(block > m_i, block, m_i)
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_ref)
    p = tl.exp2(s - m_ref[:, None])
    return m_new, alpha * l_i + tl.sum(p, axis=1), alpha[:, None] * acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_guarded_dot_accumulates(m_i, l_i, acc, s, v):  # the review's: a guard, tl.dot accumulating
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_new = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_new, acc


@triton.jit
def _softmax_if_on_dtype(m_i, l_i, acc, s, v):  # Python's if on a block's dtype: known when built, right
    m_new = tl.maximum(m_i, tl.max(s, 1))
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - shift)
    p = tl.exp2(s - shift[:, None])
    if v.dtype == tl.bfloat16:
        q = p.to(tl.bfloat16)
    else:
        q = p.to(tl.float16)
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(q, v)


@triton.jit
def _softmax_if_on_a_reduction(m_i, l_i, acc, s, v):  # the fourth review's: Python's if on one value, right
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if tl.min(m_new, 0) == float("-inf"):
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_safe = m_new
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


SOFTMAX_RIGHT = [_softmax_comment, _softmax_dot_accumulates, _softmax_exp_of_ln2, _softmax_where_max,
                 _softmax_guarded_block_shift, _softmax_guarded_dot_accumulates, _softmax_if_on_dtype,
                 _softmax_if_on_a_reduction]


def test_softmax_step_reference_passes():
    assert quiet(exercises.check_softmax_step, solutions.softmax_step).passed


def test_softmax_step_stub_is_not_attempted():
    @triton.jit
    def softmax_step(m_i, l_i, acc, s, v):
        ...

    assert quiet(exercises.check_softmax_step, softmax_step).status == "not attempted"


def test_softmax_step_wrong_answers_each_get_their_own_message():
    assert_wrong_answers_named(exercises.check_softmax_step, SOFTMAX_WRONG,
                               same_mistake=("no maximum subtracted, m never updated", "the old maximum returned"))


@pytest.mark.parametrize("right", SOFTMAX_RIGHT, ids=lambda f: f.fn.__name__)
def test_softmax_step_correct_alternatives_pass(right):
    verdict = quiet(exercises.check_softmax_step, right)
    assert verdict.passed, verdict.line


@catalogue.interpreter_only
def test_softmax_step_an_endless_while_loop_ends_with_the_time_limit():
    # the review's: a while loop whose counter never moves; the check gives up after its time limit (60 s in a
    # notebook), with one line
    source = ("@triton.jit\ndef softmax_step(m_i, l_i, acc, s, v):\n    m_new = tl.maximum(m_i, tl.max(s, 1))\n"
              "    i = 0\n    while i < 1:\n        m_new = m_new + 0.0\n    alpha = tl.exp2(m_i - m_new)\n"
              "    p = tl.exp2(s - m_new[:, None])\n"
              "    return m_new, alpha * l_i + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)\n")
    verdict = assert_survives("check_softmax_step", source, "softmax_step", "the check gave up after 4 s",
                              "a while loop must advance its counter", time_limit_s=4)
    assert verdict["message"].count("\n") == 0, verdict["message"]


@interpreter_only
def test_softmax_step_survives_an_endless_loop():
    source = edited_source(solutions.softmax_step, ("    m_new = tl.maximum(m_i, tl.max(s, 1))",
                                                    "    i = 0\n    while i < 1:  # forgot i += 1\n"
                                                    "        m_new = tl.maximum(m_i, tl.max(s, 1))"))
    assert_survives("check_softmax_step", source, "softmax_step", "gave up", time_limit_s=5)


# --- 11 · flash_forward: the whole forward loop for one block of queries ------------------------------

def _flash(tmp_path, name, *edits):
    return variant(tmp_path, name, solutions.flash_forward, *edits)


_SCALE = "qk_scale = sm_scale * 1.4426950408889634"
_SKIP = "end = tl.minimum(S_K, (tl.program_id(0) + 1) * BLOCK_M)"
_CAUSAL = "visible = visible & (cols[None, :] <= rows[:, None])"
_L_STORE = "tl.store(L + rows * stride_l, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=rows < S_Q)"
_O_MASK = "out.to(O.dtype.element_ty),\n             mask=rows[:, None] < S_Q)"
_Q_MASK = "mask=rows[:, None] < S_Q, other=0.0)"
_K_LOAD = "cols[None, :] * stride_ks + d[:, None] * stride_kd"
_V_LOAD = "cols[:, None] * stride_vs + d[None, :] * stride_vd"
_REVERSED = ("    for start in range(0, end, BLOCK_N):\n",  # the key blocks read last first
             "    for ib in range(0, tl.cdiv(end, BLOCK_N)):\n"
             "        start = (tl.cdiv(end, BLOCK_N) - 1 - ib) * BLOCK_N\n")
_GUARDED = ("        alpha = tl.exp2(m_i - m_new)\n        p = tl.exp2(s - m_new[:, None])\n",
            "        shift = tl.where(m_new == float(\"-inf\"), 0.0, m_new)\n        alpha = tl.exp2(m_i - shift)\n"
            "        p = tl.exp2(s - shift[:, None])\n")


def _where(interpreted: str, compiled: str) -> str:
    """The words a message holds: under the interpreter the check watches every load and names the one that strays;
    compiled, it finds the same mistake from what the kernel wrote."""
    return interpreted if runtime.INTERPRET else compiled


def _rounds_on_the_way(where: str) -> str:
    """The words of a 16-bit precision slip: where it happened is told under the interpreter, whose tl.dot is
    exact float32; compiled, tf32 and the tensor cores' own rounding blur the replays, and the message names
    the candidates instead."""
    return f"something rounds to 16 bits on the way. {where}" if runtime.INTERPRET else \
        "something rounds to 16 bits on the way"


FLASH_WRONG = {  # label: (edits, words)
    "sm_scale ignored": ([(_SCALE, "qk_scale = 1.4426950408889634 / HEAD_DIM ** 0.5")], "not by sm_scale"),
    "no scale": ([(_SCALE, "qk_scale = 1.4426950408889634")], "the scores are not scaled"),
    "exp2 of natural scores": ([(_SCALE, "qk_scale = sm_scale")], "exp2 of scores not converted to base 2"),
    "exp of base-2 scores": ([("tl.exp2(", "tl.exp(")], "then exponentiated with exp"),
    "acc not rescaled": ([("acc = acc * alpha[:, None] +", "acc = acc +")], "acc is not rescaled"),
    "l not rescaled": ([("l_i = l_i * alpha +", "l_i = l_i +")], "l is not rescaled"),
    "not divided by l": ([("out = acc / l_i[:, None]", "out = acc")], "not divided by l"),
    "maximum starts at 0": ([('m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)',
                              "m_i = tl.zeros([BLOCK_M], tl.float32)")], "l came out 0"),
    "maximum clamped at 0": ([("m_new = tl.maximum(m_i, tl.max(s, 1))",
                               "m_new = tl.maximum(tl.maximum(m_i, tl.max(s, 1)), 0.0)")], "not be held at 0"),
    "no causal mask inside the diagonal block": ([(_CAUSAL, "pass")], "the block on the diagonal needs the mask"),
    "no causal mask at all": ([(_CAUSAL, "pass"), (_SKIP, "pass")], "the causal mask is missing"),
    "causal mask without the diagonal": ([("cols[None, :] <= rows[:, None]", "cols[None, :] < rows[:, None]")],
                                         "row 0 is inf or nan"),
    "causal mask the wrong way round": ([("cols[None, :] <= rows[:, None]", "cols[None, :] >= rows[:, None]"),
                                         (_SKIP, "pass")], "the wrong way round"),
    "diagonal block skipped": ([(_SKIP, "end = tl.minimum(S_K, tl.program_id(0) * BLOCK_M)")],
                               "The block on the diagonal must be read"),
    "keys past S_K not masked": ([("visible = cols[None, :] < S_K", "visible = cols[None, :] >= 0")],
                                 "the keys past S_K take part"),
    "values read past S_K": ([("mask=cols[:, None] < S_K, other=0.0)", ")")],
                             _where("the load of V reads", "a load reads past the last key")),
    "O stored without a mask": ([(_O_MASK, "out.to(O.dtype.element_ty))")], "outside O"),
    "L stored without a mask": ([(", mask=rows < S_Q)  # back", ")  # back")], "outside L"),
    "last block of queries not stored": ([("mask=rows[:, None] < S_Q)", "mask=rows[:, None] < S_Q // BLOCK_M * BLOCK_M)")],
                                         "the last, partial block of queries"),
    "L left in base 2": ([(_L_STORE, "tl.store(L + rows * stride_l, m_i + tl.log2(l_i), mask=rows < S_Q)")],
                         "L is in base 2"),
    "L without the maximum": ([(_L_STORE, "tl.store(L + rows * stride_l, tl.log(l_i), mask=rows < S_Q)")],
                              "L leaves out the running maximum:"),
    "L with m in base 2": ([(_L_STORE, "tl.store(L + rows * stride_l, m_i + tl.log(l_i), mask=rows < S_Q)")],
                           "L adds m in base 2"),
    "L not stored": ([(_L_STORE, "pass")], "L is not"),
    "ln 2 cut short to 0.693": ([("* 0.6931471805599453, mask", "* 0.693, mask")], "off by a constant factor"),
    "O's column stride taken as 1": ([("d[None, :] * stride_od", "d[None, :]")], "wrong when O is stored transposed"),
    "Q's column stride taken as 1": ([("d[None, :] * stride_qd", "d[None, :]")], "Q is stored every other column"),
    "L's stride taken as 1": ([("L + rows * stride_l", "L + rows")], "wrong when L is stored every other element"),
    "key loop steps by BLOCK_M": ([("range(0, end, BLOCK_N)", "range(0, end, BLOCK_M)")], "of O differ from"),
    "rows counted in BLOCK_N": ([("rows = tl.program_id(0) * BLOCK_M", "rows = tl.program_id(0) * BLOCK_N")],
                                "were never stored"),
    "K's block not transposed": ([("k = tl.load(K + cols[None, :] * stride_ks + d[:, None] * stride_kd, "
                                   "mask=cols[None, :] < S_K",
                                   "k = tl.load(K + cols[:, None] * stride_ks + d[None, :] * stride_kd, "
                                   "mask=cols[:, None] < S_K")], "the block of Kᵀ [HEAD_DIM, BLOCK_N]"),
    "Python's max on blocks": ([("m_new = tl.maximum(m_i, tl.max(s, 1))", "m_new = max(m_i, tl.max(s, 1))")],
                               "calls Python's max()"),
    "key loop bounded by S_Q": ([("    end = S_K\n", "    end = S_Q\n")], "the keys past the first S_Q are never read"),
    "last, partial block of keys dropped": ([("    end = S_K\n", "    end = S_K // BLOCK_N * BLOCK_N\n")],
                                            "the last, partial block of keys is never read"),
    "causal mask aligned bottom-right": ([(_CAUSAL, "visible = visible & "
                                                    "(cols[None, :] <= rows[:, None] + S_K - S_Q)")],
                                         "the causal mask is aligned to the last key"),
    "causal end counted in BLOCK_N": ([(_SKIP, "end = tl.minimum(S_K, (tl.program_id(0) + 1) * BLOCK_N)")],
                                      "its end counts blocks of BLOCK_N keys"),
    "O stored with swapped strides": ([("rows[:, None] * stride_os + d[None, :] * stride_od",
                                        "rows[:, None] * stride_od + d[None, :] * stride_os")],
                                      "O holds the right values, in the wrong places"),
    "V loaded with K's strides": ([(_V_LOAD, "cols[:, None] * stride_ks + d[None, :] * stride_kd")],
                                  _where("the load of V reads places that are not V's elements",
                                         "V is loaded with K's strides")),
    "K loaded with Q's strides": ([(_K_LOAD, "cols[None, :] * stride_qs + d[:, None] * stride_qd")],
                                  _where("the load of K reads places that are not K's elements",
                                         "K is loaded with Q's strides")),
    "calls the course's softmax_step": ([("m_new = tl.maximum(m_i, tl.max(s, 1))",
                                          "m_i, l_i, acc = attention.softmax_step(m_i, l_i, acc, s, v)\n"
                                          "        m_new = m_i")], "the course's attention.softmax_step"),
    # the review's: causal without the S_K bound, right wherever S_K >= S_Q (wrongly put down to Q's strides before)
    "the causal mask without the bound S_K": ([("        visible = cols[None, :] < S_K\n        if CAUSAL:\n"
                                                "            visible = visible & (cols[None, :] <= rows[:, None])\n",
                                                "        if CAUSAL:\n"
                                                "            visible = cols[None, :] <= rows[:, None]\n"
                                                "        else:\n            visible = cols[None, :] < S_K\n")],
                                              "on a causal mask with fewer keys than queries (60 queries, 40 keys, "
                                              "d = 32): the keys past S_K take part in the softmax (with a score of "
                                              "0): mask their scores to -inf, not only their loads, under the causal "
                                              "mask too"),
    # the review's precision slips: each is close to right, and told that something rounds to 16 bits
    "the scores rounded to float16": ([("tl.dot(q, k) * qk_scale, float", "(tl.dot(q, k) * qk_scale).to(tl.float16)"
                                                                          ".to(tl.float32), float")],
                                      _rounds_on_the_way("Here the scores themselves")),
    "O stored as bfloat16": ([("out.to(O.dtype.element_ty)", "out.to(tl.bfloat16)")],
                             _rounds_on_the_way("Here O is rounded to bfloat16")),
    "tl.dot's result in float16": ([("tl.dot(q, k) * qk_scale", "tl.dot(q, k, out_dtype=tl.float16).to(tl.float32) "
                                                                "* qk_scale")],
                                   "less precise than float32 scores allow"),
    "Q Kᵀ rounded to float16": ([("tl.dot(q, k) * qk_scale",
                                  "tl.dot(q, k).to(tl.float16).to(tl.float32) * qk_scale")],
                                "less precise than float32 scores allow"),
    "sm_scale applied twice": ([("tl.dot(q, k) * qk_scale", "tl.dot(q, k) * qk_scale * sm_scale")],
                               "the scores are scaled by sm_scale twice"),
    # the review's: the key blocks read last first with the textbook update: rows that see no key of the first block
    "key blocks read last first, no guard": ([_REVERSED], "a row that has seen no key yet"),
    # the third review's (both were put down to the loop over the keys before), and cousins
    "acc divided by l inside the key loop": ([("        m_i = m_new\n",
                                               "        m_i = m_new\n        acc = acc / l_i[:, None]\n"),
                                              ("out = acc / l_i[:, None]", "out = acc")],
                                             "acc is divided by l inside the loop over the keys: the next blocks"),
    "acc divided by l in its update": ([("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
                                         "acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)) / l_i[:, None]"),
                                        ("out = acc / l_i[:, None]", "out = acc")],
                                       "acc is divided by l inside the loop over the keys: the next blocks"),
    "acc divided by l inside the key loop and after it": ([("        m_i = m_new\n",
                                                            "        m_i = m_new\n        acc = acc / l_i[:, None]\n")],
                                                          "and again after it"),
    "Q's rows masked with S_K": ([(_Q_MASK, "mask=rows[:, None] < S_K, other=0.0)")],
                                 "Q's load is masked with the keys' length"),
    "Q's last row masked off": ([(_Q_MASK, "mask=rows[:, None] < S_Q - 1, other=0.0)")],
                                "the last row of Q (row S_Q - 1"),
    "O's store masked with S_K": ([(_O_MASK, "out.to(O.dtype.element_ty),\n             mask=rows[:, None] < S_K)")],
                                  "the store is masked with the keys' length"),
    "L's store masked with S_K": ([(", mask=rows < S_Q)  # back", ", mask=rows < S_K)  # back")],
                                  "L's store is masked with the keys' length"),
    "Python's if on a block in the key loop": ([("        m_new = tl.maximum(m_i, tl.max(s, 1))\n",
                                                 "        m_new = m_i\n        if tl.max(s, 1) > m_i:\n"
                                                 "            m_new = tl.max(s, 1)\n")],
                                               "flash_forward tests a block with Python's if"),
}


def _flash_table(tmp_path):
    table = {}
    for i, (label, (edits, words)) in enumerate(FLASH_WRONG.items()):
        kernel = _flash(tmp_path, f"flash_wrong_{i}", *edits)
        if label == "calls the course's softmax_step":
            kernel.fn.__globals__["attention"] = attention
        table[label] = (kernel, words)
    return table


def test_flash_forward_reference_passes_and_skips_the_blocks_past_the_diagonal():
    verdict = quiet(exercises.check_flash_forward, solutions.flash_forward)
    assert verdict.passed and "skips the key blocks past the diagonal" in verdict.message, verdict.line


def test_flash_forward_stub_is_not_attempted():
    @triton.jit
    def flash_forward(Q, K, V, O, L, sm_scale, S_Q, S_K, stride_qs, stride_qd, stride_ks, stride_kd, stride_vs,
                      stride_vd, stride_os, stride_od, stride_l, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
        ...

    assert quiet(exercises.check_flash_forward, flash_forward).status == "not attempted"


def test_flash_forward_wrong_answers_each_get_their_own_message(tmp_path):
    assert_wrong_answers_named(exercises.check_flash_forward, _flash_table(tmp_path),
                               same_mistake=("maximum starts at 0", "maximum clamped at 0",
                                             "acc divided by l inside the key loop", "acc divided by l in its update",
                                             "tl.dot's result in float16", "Q Kᵀ rounded to float16")
                               + (() if runtime.INTERPRET else ("the scores rounded to float16",
                                                                "O stored as bfloat16")))


@interpreter_only
def test_flash_forward_refuses_masked_loads_of_k_and_v_without_other(tmp_path):
    # the review's: the interpreter gives 0 to the masked-off lanes, a GPU may give anything: the check gives NaN
    kernel = _flash(tmp_path, "flash_no_other", ("mask=cols[None, :] < S_K, other=0.0)", "mask=cols[None, :] < S_K)"),
                    ("mask=cols[:, None] < S_K, other=0.0)", "mask=cols[:, None] < S_K)"))
    verdict = quiet(exercises.check_flash_forward, kernel)
    assert verdict.status == "failed" and "a load is masked without other=" in verdict.message, verdict.line
    assert "other=" in verdict.message.split("hint:")[-1], verdict.line


def test_flash_forward_refuses_torch_the_course_and_the_solution(tmp_path):
    calls_solution = _flash(tmp_path, "flash_calls_solution", ("rows = tl.program_id(0)", "solutions.flash_forward("
                            "Q, K, V, O, L, sm_scale, S_Q, S_K, stride_qs, stride_qd, stride_ks, stride_kd, stride_vs,"
                            " stride_vd, stride_os, stride_od, stride_l, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL)\n"
                            "    rows = tl.program_id(0)"))
    calls_solution.fn.__globals__["solutions"] = solutions
    calls_bounds = _flash(tmp_path, "flash_calls_bounds", (_SKIP, "_, end = attention.key_bounds("
                          "tl.program_id(0), S_K, BLOCK_M, BLOCK_N, CAUSAL)"))
    calls_bounds.fn.__globals__["attention"] = attention
    uses_torch = _flash(tmp_path, "flash_uses_torch", ("out.to(O.dtype.element_ty)", "out.to(torch.float16)"))
    import torch

    uses_torch.fn.__globals__["torch"] = torch
    assert_wrong_answers_named(exercises.check_flash_forward, {
        "calls the solution": (calls_solution, "the reference solution solutions.flash_forward"),
        "calls the course's key_bounds": (calls_bounds, "the course's attention.key_bounds"),
        "uses torch": (uses_torch, "uses torch"),
    })


@interpreter_only
def test_flash_forward_refuses_an_unmasked_load_of_q_whose_extra_rows_are_never_stored(tmp_path):
    # the rows past S_Q never reach O, so only the loads themselves show it (watched under the interpreter)
    unmasked = _flash(tmp_path, "flash_q_unmasked", ("mask=rows[:, None] < S_Q, other=0.0)", ")"))
    verdict = quiet(exercises.check_flash_forward, unmasked)
    assert verdict.status == "failed" and "mask Q's load with rows < S_Q" in verdict.message, verdict.line


def test_flash_forward_refuses_the_course_s_private_helpers_found_by_their_module(tmp_path):
    helper = getattr(attention, "_key_block")  # not named in the check: it finds course.attention's functions
    kernel = _flash(tmp_path, "flash_calls_helper", ("rows = tl.program_id(0)", "helper(Q, K)\n    rows = "
                                                                               "tl.program_id(0)"))
    kernel.fn.__globals__["helper"] = helper
    verdict = quiet(exercises.check_flash_forward, kernel)
    assert verdict.status == "failed" and "the course's attention._key_block" in verdict.message, verdict.line


def test_flash_forward_refuses_a_kernel_that_only_runs_under_the_interpreter(tmp_path):
    # `break` in a loop: the interpreter runs it, Triton refuses to compile it for a GPU
    breaks = _flash(tmp_path, "flash_breaks", ("        m_i = m_new\n", "        m_i = m_new\n"
                                               "        if start > S_K:\n            break\n"))
    verdict = quiet(exercises.check_flash_forward, breaks)
    assert verdict.status == "failed" and "compile" in verdict.message, verdict.line


@triton.jit
def _attend(q, K, V, start, rows, S_K, stride_ks, stride_kd, stride_vs, stride_vd, qk_scale, m_i, l_i, acc,
            HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    cols = start + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    if MASKED:
        k = tl.load(K + cols[None, :] * stride_ks + d[:, None] * stride_kd, mask=cols[None, :] < S_K, other=0.0)
        v = tl.load(V + cols[:, None] * stride_vs + d[None, :] * stride_vd, mask=cols[:, None] < S_K, other=0.0)
        s = tl.dot(q, k) * qk_scale
        s = tl.where((cols[None, :] < S_K) & (cols[None, :] <= rows[:, None]), s, -1.0e30)
    else:
        k = tl.load(K + cols[None, :] * stride_ks + d[:, None] * stride_kd)
        v = tl.load(V + cols[:, None] * stride_vs + d[None, :] * stride_vd)
        s = tl.dot(q, k) * qk_scale
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc


@triton.jit
def _flash_two_loops(Q, K, V, O, L, sm_scale, S_Q, S_K, stride_qs, stride_qd, stride_ks, stride_kd, stride_vs,
                     stride_vd, stride_os, stride_od, stride_l, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """As the course's kernel: whole blocks without a mask, then the diagonal (or the ragged end) with one."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + rows[:, None] * stride_qs + d[None, :] * stride_qd, mask=rows[:, None] < S_Q, other=0.0)
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)  # finite: exp2 of it less anything is 0 all the same
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    whole = S_K // BLOCK_N * BLOCK_N
    end = S_K
    if CAUSAL:
        whole = min(whole, pid * BLOCK_M // BLOCK_N * BLOCK_N)
        end = min(S_K, (pid + 1) * BLOCK_M)
    for start in range(0, whole, BLOCK_N):
        m_i, l_i, acc = _attend(q, K, V, start, rows, S_K if CAUSAL else S_K, stride_ks, stride_kd, stride_vs,
                                stride_vd, qk_scale, m_i, l_i, acc, HEAD_DIM, BLOCK_N, False)
    for start in tl.range(whole, end, BLOCK_N):
        m_i, l_i, acc = _attend(q, K, V, start, tl.where(CAUSAL, rows, S_K), S_K, stride_ks, stride_kd, stride_vs,
                                stride_vd, qk_scale, m_i, l_i, acc, HEAD_DIM, BLOCK_N, True)
    tl.store(O + rows[:, None] * stride_os + d[None, :] * stride_od, (acc / l_i[:, None]).to(O.dtype.element_ty),
             mask=rows[:, None] < S_Q)
    tl.store(L + rows * stride_l, m_i * 0.6931471805599453 + tl.log(l_i), mask=rows < S_Q)


FLASH_RIGHT = {  # label: edits of the reference
    "natural exp and log": [(_SCALE, "qk_scale = sm_scale"), ("tl.exp2(", "tl.exp("),
                            (_L_STORE, "tl.store(L + rows * stride_l, m_i + tl.log(l_i), mask=rows < S_Q)")],
    "the causal mask alone, no blocks skipped": [(_SKIP, "pass")],
    "K loaded as rows, then tl.trans": [("k = tl.load(K + cols[None, :] * stride_ks + d[:, None] * stride_kd, "
                                         "mask=cols[None, :] < S_K", "k = tl.load(K + cols[:, None] * stride_ks + "
                                         "d[None, :] * stride_kd, mask=cols[:, None] < S_K"),
                                        ("tl.dot(q, k)", "tl.dot(q, tl.trans(k))")],
    "tl.dot adding into the rescaled accumulator": [("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
                                                     "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])")],
    "a finite start for the maximum, -1e9 for masked scores": [('float("-inf"), tl.float32)', "-1.0e30, tl.float32)"),
                                                               ('qk_scale, float("-inf"))', "qk_scale, -1.0e9)")],
    "Python's min on scalars, tl.range": [(_SKIP, "end = min(S_K, (tl.program_id(0) + 1) * BLOCK_M)"),
                                          ("range(0, end, BLOCK_N)", "tl.range(0, end, BLOCK_N)")],
    "L from ln 2 times m plus ln l": [(_L_STORE, "tl.store(L + rows * stride_l, m_i * 0.6931471805599453 + "
                                                 "tl.log(l_i), mask=rows < S_Q)")],
    # the review's: Triton's older tutorial scales q once, in float16, so L carries float16's rounding of the scores
    "q scaled once and rounded to float16": [("    m_i = tl.full(", "    q = (q * qk_scale).to(tl.float16)\n"
                                                                    "    m_i = tl.full("),
                                             ("tl.dot(q, k) * qk_scale", "tl.dot(q, k)")],
    # the review's: sm_scale is a float32 scalar compiled; the check gives it as one under the interpreter too
    "sm_scale converted with .to": [(_SCALE, "qk_scale = sm_scale.to(tl.float32) * 1.4426950408889634")],
    # the review's: the key blocks read last first, the update guarded for a row that has seen no key yet
    "key blocks read last first, the update guarded": [_REVERSED, _GUARDED],
    # the review's: l may start at any number, since the first block's factor exp2(-inf - m) is 0
    "l starts at 1": [("l_i = tl.zeros([BLOCK_M], tl.float32)", "l_i = tl.full([BLOCK_M], 1.0, tl.float32)")],
    "a while loop that advances": [("    for start in range(0, end, BLOCK_N):\n",
                                    "    start = 0\n    while start < end:\n"),
                                   ("        m_i = m_new\n", "        m_i = m_new\n        start += BLOCK_N\n")],
    "L divided by log2(e)": [("* 0.6931471805599453, mask=rows < S_Q)", "/ 1.4426950408889634, mask=rows < S_Q)")],
    "key blocks of BLOCK_M keys": [("range(0, end, BLOCK_N)", "range(0, end, BLOCK_M)"),
                                   ("cols = start + tl.arange(0, BLOCK_N)", "cols = start + tl.arange(0, BLOCK_M)")],
    # the review's: tl.dot on float32 operands at full precision
    "Q and K in float32, tl.dot at ieee precision": [
        ("mask=rows[:, None] < S_Q, other=0.0)", "mask=rows[:, None] < S_Q, other=0.0).to(tl.float32)"),
        ("tl.dot(q, k) * qk_scale", "tl.dot(q, k.to(tl.float32), input_precision=\"ieee\") * qk_scale")],
}


@pytest.mark.parametrize("label", FLASH_RIGHT)
def test_flash_forward_correct_alternatives_pass(tmp_path, monkeypatch, label):
    # building each for an H100 takes seconds: the reference's test and the helpers' tests below do it
    monkeypatch.setattr(nb11, "compiles_for_a_gpu", lambda *args, **kwargs: None)
    verdict = quiet(exercises.check_flash_forward, _flash(tmp_path, "flash_right", *FLASH_RIGHT[label]))
    assert verdict.passed, verdict.line
    if label == "the causal mask alone, no blocks skipped":  # right, and the ✓ line says what skipping would save
        assert "reads the key blocks past the diagonal and masks them" in verdict.message, verdict.line


def test_flash_forward_passes_with_the_learners_own_softmax_step(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))  # the build for an H100 imports the helper's module
    own = variant(tmp_path, "flash_own_step", (solutions.softmax_step, solutions.flash_forward),
                  ("        m_new = tl.maximum(m_i, tl.max(s, 1))\n        alpha = tl.exp2(m_i - m_new)\n"
                   "        p = tl.exp2(s - m_new[:, None])\n        l_i = l_i * alpha + tl.sum(p, 1)\n"
                   "        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)\n        m_i = m_new\n",
                   "        m_i, l_i, acc = softmax_step(m_i, l_i, acc, s, v)\n"))
    verdict = quiet(exercises.check_flash_forward, own)
    assert verdict.passed, verdict.line


def test_flash_forward_as_two_loops_like_the_course_kernel_passes():
    verdict = quiet(exercises.check_flash_forward, _flash_two_loops)
    assert verdict.passed, verdict.line


# Answers that could crash or hang: each runs in a child process, which must print one ✗ line and exit normally.
FLASH_CRASHY = {  # label: (edits, words)
    "K's strides swapped": ([(_K_LOAD, "cols[None, :] * stride_kd + d[:, None] * stride_ks")],
                            ("the load of K reads places that are not K's elements",)),
    "rows far apart, O stored without a mask": ([("rows = tl.program_id(0) * BLOCK_M", "rows = tl.program_id(0) * "
                                                  "BLOCK_M * 65536"), (_O_MASK, "out.to(O.dtype.element_ty))")],
                                                 ("writes outside",)),
    "keys counted backwards from the block's start": ([("cols = start + tl.arange(0, BLOCK_N)",
                                                        "cols = start - 4096 * tl.arange(0, BLOCK_N)"),
                                                       ("mask=cols[None, :] < S_K, other=0.0)", ")"),
                                                       ("mask=cols[:, None] < S_K, other=0.0)", ")")],
                                                      ("reads outside",)),
    "a while loop that never advances": ([("for start in range(0, end, BLOCK_N):",
                                           "start = 0\n    while start < end:  # forgot start += BLOCK_N")],
                                         ("gave up",)),
}


@interpreter_only
@pytest.mark.parametrize("label", FLASH_CRASHY)
def test_flash_forward_survives_crash_prone_answers(label):
    edits, words = FLASH_CRASHY[label]
    source = edited_source(solutions.flash_forward, *edits)
    assert_survives("check_flash_forward", source, "flash_forward", *words, time_limit_s=5)
