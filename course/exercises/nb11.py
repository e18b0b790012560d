"""Notebook 11: fusion and flash attention."""

from __future__ import annotations

import inspect
import math
import re

import torch

from course import runtime
from course.exercises.core import Failed, close, exercise, require_jit, user_error

__all__ = ['check_softmax_step']


def _online_attention(q, k, v, block: int, variant: str = "right") -> torch.Tensor:
    """Attention of one head computed as the kernel walks the keys, ``block`` at a time, in float64:
    with the online-softmax update written right, or with one of the usual mistakes (``variant``)."""
    s_all = (q @ k.T) / math.sqrt(q.shape[1]) * math.log2(math.e)  # scores in base 2
    ex = torch.exp if variant == "natural exp" else torch.exp2
    m = torch.full((q.shape[0],), float("-inf"), dtype=torch.float64)
    l = torch.zeros(q.shape[0], dtype=torch.float64)
    acc = torch.zeros(q.shape[0], v.shape[1], dtype=torch.float64)
    for start in range(0, k.shape[0], block):
        s = s_all[:, start:start + block]
        m_new = torch.maximum(m, s.max(1).values)
        alpha = ex(m - m_new)
        p = ex(s - m_new[:, None])
        l = l * (1 if variant == "sum not rescaled" else alpha) + p.sum(1)
        acc = acc * (1 if variant == "output not rescaled" else alpha[:, None]) + p @ v[start:start + block]
        m = m_new
    return acc / (1 if variant == "not divided" else l[:, None])


@exercise("softmax_step", "Write softmax_step above: the online-softmax update of one block of keys")
def check_softmax_step(softmax_step) -> str:
    """Check a ``@triton.jit`` ``softmax_step(m_i, l_i, acc, s, v)`` as the update of
    ``attention.attention_kernel``: on ordinary scores whose row maximum grows from block to block, on
    scores in the thousands of both signs (where an exp that is not shifted by the maximum overflows
    or underflows), and under a causal mask."""
    from course import attention
    from course.check import rel_error

    require_jit("softmax_step", softmax_step, ("m_i", "l_i", "acc", "s", "v"))
    source = inspect.getsource(softmax_step.fn)
    builtin = re.search(r"(?<![\w.])(max|min)\(", source)
    if builtin:
        raise Failed(f"softmax_step calls Python's {builtin.group(1)}(): on tensors use tl.{builtin.group(1)}imum(a, b) "
                      f"(elementwise) or tl.{builtin.group(1)}(x, axis) (a reduction); the interpreter does not turn "
                      "the builtin into either")
    # blocks and head dimension all different, so that a reduction along the wrong axis cannot pass
    config = dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1)
    gen = torch.Generator().manual_seed(0)

    def run(q, k, v, causal=False):
        to = lambda t: t[None, None].to(runtime.DEVICE)  # noqa: E731  (one batch, one head)
        try:
            out = attention.attention(to(q), to(k), to(v), causal=causal, step=softmax_step, config=config)
        except Exception as err:
            failed = user_error("inside the attention kernel, your softmax_step", err)
            if re.search(r"rank|shape|broadcast|incompatible", str(failed)):
                failed = Failed(f"{failed}\n  Shapes: s is [BLOCK_M, BLOCK_N], v [BLOCK_N, d]; return (m, l, acc) in that "
                                 "order, m and l of shape [BLOCK_M] (reduce s along axis 1), acc [BLOCK_M, d]")
            raise failed from None
        return out[0, 0].cpu().double()

    # ordinary: 64 queries (2 programs), 64 keys in 4 blocks, later keys larger so that the maximum grows
    q = torch.randn(64, 64, generator=gen).half()
    k = (torch.randn(64, 64, generator=gen) * torch.linspace(0.5, 2.5, 64)[:, None]).half()
    v = torch.randn(64, 64, generator=gen).half()
    got = run(q, k, v)
    want = _online_attention(q.double(), k.double(), v.double(), 16)
    if not torch.isfinite(got).all():
        raise Failed("the output has inf or nan on ordinary scores: does every exp2 subtract the new running "
                      "maximum m_new (m_i is -inf before the first block; the row maximum is tl.max(s, 1)), and is "
                      "l_i a sum of exponentials?")
    if not close(got, want):
        for variant, message in (
                ("output not rescaled", "acc is not rescaled when the maximum grows: the old terms were weighted by "
                                        "exp2(s - m_i), and under the new maximum they must shrink by "
                                        "exp2(m_i - m_new)"),
                ("sum not rescaled", "l_i is not rescaled when the maximum grows: it is a sum of exp2(s - m_i), so it "
                                     "shrinks by the same factor as acc"),
                ("natural exp", "this is exp, not exp2: the kernel's scores are already in base 2 (multiplied by "
                                "log2(e)), so exp2 undoes them exactly"),
                ("not divided", "the output is not divided by the sum: the kernel divides acc by l_i at the end, so "
                                "l_i must be the running sum of the exponentials")):
            if close(got, _online_attention(q.double(), k.double(), v.double(), 16, variant), 2e-2):
                raise Failed(message)
        raise Failed(f"the output differs from softmax(Q Kᵀ / √d) V by {rel_error(got, want):.2g} (relative): "
                      "return (m, l, acc) in that order, and check each of the update's rules in the notebook")
    for sign in (1, -1):  # scores of +-thousands: exp2 of an unshifted score is inf or 0
        big = run(q * 200 * sign, k, v)
        want = _online_attention((q * 200 * sign).double(), k.double(), v.double(), 16)
        if not torch.isfinite(big).all() or not close(big, want):
            raise Failed(f"right on ordinary scores, but with scores of {'+' if sign > 0 else '-'}thousands the "
                          "output is " + ("inf or nan" if not torch.isfinite(big).all() else "wrong") + ": an exp2 "
                          "of a score that is not shifted by its row's running maximum (tl.max(s, 1), combined "
                          "with m_i) overflows, or underflows to 0")
    causal = run(q, k, v, causal=True)
    if not close(causal, attention.reference(q[None, None], k[None, None], v[None, None], causal=True)[0, 0]):
        raise Failed("right without a mask, wrong with the causal mask: masked scores are -inf, so their "
                      "exponentials must come out 0 (exp2(-inf) is 0; don't replace -inf)")
    return "the online softmax matches float64 on ordinary scores, on scores of ±thousands and under a causal mask"
