"""Notebook 13: training. Two exercises: a Linear layer's three gradients computed on views
(``linear_grads``), then the dK/dV update of flash attention's backward for one block of queries
(``dkdv_step``)."""

from __future__ import annotations

import contextlib
import math

import torch
import triton
import triton.language as tl

from course import runtime
from course.exercises.core import (
    Failed,
    close,
    exercise,
    require_function,
    require_jit,
    user_error,
)
from course.exercises.nb11 import (
    DTYPE_NAMES,
    Bfloat16Dot,
    borrowed_from,
    dtype_code,
    explain_error,
)

__all__ = ['check_dkdv_step', 'check_linear_grads']

LOG2E = 1.4426950408889634


# --- exercise 2: dkdv_step, the dK/dV update for one block of queries -------------------------------------

_STEP_ARGS = ("k", "v", "dk", "dv", "q", "do", "lse", "delta", "cols", "rows", "qk_scale", "MASKED")
_STEP_SHAPES = ("k, v, dk and dv are [BLOCK_N, d], q and do [BLOCK_M, d], lse, delta and rows [BLOCK_M], cols "
                "[BLOCK_N]: Pᵀ = 2^(k qᵀ · qk_scale − lse) is [BLOCK_N, BLOCK_M], so lse and delta broadcast "
                "along axis 0 (lse[None, :])")
_BM, _BN, _D = 16, 32, 64  # all different: a product taken the wrong way round fails to compile


@triton.jit
def _step_harness(K, V, DK, DV, Q, DO, LSE, DELTA, DTYPES, col0, row0, S_Q, qk_scale, STEP: tl.constexpr,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """One call of the learner's step on blocks read as the course's kernel reads them (rows from ``row0``,
    those past ``S_Q`` with q = dO = 0, lse = +inf, delta = 0); DTYPES gets the dtypes of dk and dv returned."""
    n, m, d = tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_M), tl.arange(0, HEAD_DIM)
    block_n = n[:, None] * HEAD_DIM + d[None, :]
    block_m = m[:, None] * HEAD_DIM + d[None, :]
    inside = (row0 + m) < S_Q
    dk, dv = STEP(tl.load(K + block_n), tl.load(V + block_n), tl.load(DK + block_n), tl.load(DV + block_n),
                  tl.load(Q + block_m, mask=inside[:, None], other=0.0),
                  tl.load(DO + block_m, mask=inside[:, None], other=0.0),
                  tl.load(LSE + m, mask=inside, other=float("inf")), tl.load(DELTA + m, mask=inside, other=0.0),
                  col0 + n, row0 + m, qk_scale, MASKED)
    tl.store(DK + block_n, dk)
    tl.store(DV + block_n, dv)
    dtype_code(DTYPES + 0, dk)
    dtype_code(DTYPES + 1, dv)


# The usual mistakes, each as the float64 model computes it, and what to say when a step's result matches one.
_MISTAKES = {
    "no delta": "dS = Pᵀ ∘ (dPᵀ − D): the row's D (delta, broadcast along the keys) is not subtracted",
    "no mask": "with MASKED, a key after a row (col > row) must get P = 0: apply the causal mask to Pᵀ",
    "flipped mask": "the mask is the wrong way round: a row sees the keys at or before it (col <= row), "
                    "and rows index the columns of Pᵀ",
    "strict mask": "the diagonal was masked too: a row sees its own key (col <= row, not <)",
    "mask after dV": "the mask must apply to Pᵀ before dV uses it: dV got the masked keys' probabilities",
    "overwritten": "dk and dv come in holding the earlier blocks' sums: add this block's update to them",
    "natural exp": "lse and the scores are in base 2 (qk_scale includes log2 e): use tl.exp2",
    "no scale": "the scores are k qᵀ times qk_scale, before lse is subtracted",
    "dV from dS": "dV = Pᵀ dO: it takes the probabilities, not dS",
    "dK from P": "dK = dSᵀ Q: it takes dS, not the probabilities",
    "swapped": "return (dk, dv) in that order",
    "dK scaled": "leave the factor scale out of dk: the kernel multiplies by it once, at the end (qk_scale also "
                 "holds log2 e, which dK must not)",
}


def _model(k, v, dk, dv, q, do, lse, delta, cols, rows, qk_scale, masked, variant="right"):
    """(dk, dv) after the step, in float64: right, or with one of :data:`_MISTAKES`."""
    ex = torch.exp if variant == "natural exp" else torch.exp2
    s = k @ q.T * (1.0 if variant == "no scale" else qk_scale)
    p_t = ex(s - lse[None, :])
    p_t = torch.where(torch.isinf(lse)[None, :], torch.zeros_like(p_t), p_t)  # rows past the end
    seen = {"right": cols[:, None] <= rows[None, :], "flipped mask": cols[:, None] >= rows[None, :],
            "strict mask": cols[:, None] < rows[None, :]}.get(variant, cols[:, None] <= rows[None, :])
    p_masked = torch.where(seen, p_t, 0.0) if masked and variant != "no mask" else p_t
    p_for_dv = p_t if variant == "mask after dV" else p_masked
    ds_t = p_masked * (v @ do.T - (0.0 if variant == "no delta" else delta[None, :]))
    dv_update = (ds_t if variant == "dV from dS" else p_for_dv) @ do
    dk_update = (p_masked if variant == "dK from P" else ds_t) @ q * (qk_scale if variant == "dK scaled" else 1.0)
    keep = 0.0 if variant == "overwritten" else 1.0
    dk, dv = dk * keep + dk_update, dv * keep + dv_update
    return (dv, dk) if variant == "swapped" else (dk, dv)


def _state(gen, dtype, masked, col0, row0, s_q, score_scale, value_scale):
    """A drawn block state: k, v, q, dO in ``dtype``, dk, dv float32 sums, lse the row's base-2 log-sum-exp over
    the keys it sees here and elsewhere (so that no row's probabilities sum past 1), delta of any sign."""
    k = torch.randn(_BN, _D, generator=gen).to(dtype)
    v = (torch.randn(_BN, _D, generator=gen) * value_scale).to(dtype)
    q = (torch.randn(_BM, _D, generator=gen) * score_scale).to(dtype)
    do = (torch.randn(_BM, _D, generator=gen) * value_scale).to(dtype)
    # sums of earlier blocks, large beside this block's update: float16 or bfloat16 on the way would lose it
    dk, dv = (torch.randn(_BN, _D, generator=gen) * 64 for _ in range(2))
    qk_scale = 1.25 / math.sqrt(_D) * LOG2E
    cols, rows = torch.arange(_BN) + col0, torch.arange(_BM) + row0
    s = k.double() @ q.double().T * qk_scale
    visible = cols[:, None] <= rows[None, :] if masked else torch.ones_like(s, dtype=torch.bool)
    elsewhere = s.max(0).values + 2 * torch.rand(_BM, generator=gen, dtype=torch.float64) - 1
    lse = torch.logaddexp2(torch.logsumexp(s.masked_fill(~visible, -math.inf) * math.log(2), 0) / math.log(2),
                           elsewhere).float()
    delta = torch.randn(_BM, generator=gen)
    inside = rows < s_q
    return dict(k=k, v=v, dk=dk, dv=dv, q=q, do=do, lse=lse, delta=delta, cols=cols, rows=rows, qk_scale=qk_scale,
                inside=inside)


def _explain_step(failed: Failed, returns: str | None = None) -> Failed:
    """notebook 11's explanation of an error, its tl.dot dtype hint said in this exercise's words."""
    text = str(explain_error(failed, _STEP_SHAPES, returns))
    if returns and "not iterable" in text:  # one block returned where two are unpacked, or a loop over a block
        text = (f"{text.split(chr(10) + '  hint:')[0]}\n  hint: {returns}; and inside a kernel a block cannot be "
                "looped over or indexed (for r in rows, cols[0]): work on whole blocks")
    return Failed(text.replace("convert p to v's (p.to(v.dtype))", "convert Pᵀ and dSᵀ to the inputs' dtype "
                                                                   "(p_t.to(do.dtype), ds_t.to(q.dtype))"))


def _run_step(step, what, state, masked, col0, row0, s_q):
    """The learner's step once in the harness: (dk, dv) float64, and their dtypes as returned."""
    dev = runtime.DEVICE
    names = ("k", "v", "dk", "dv", "q", "do", "lse", "delta")
    ins = [state[n].clone().to(dev) for n in names]  # clone: on a CPU, .to() would hand over the same memory
    dtypes = torch.zeros(2, dtype=torch.int32, device=dev)
    try:
        with Bfloat16Dot() if state["k"].dtype == torch.bfloat16 else contextlib.nullcontext():
            _step_harness[(1,)](*ins, dtypes, col0, row0, s_q, state["qk_scale"], STEP=step, HEAD_DIM=_D,
                                BLOCK_M=_BM, BLOCK_N=_BN, MASKED=masked)
    except Exception as err:
        raise _explain_step(user_error(f"on {what}, your dkdv_step", err), "dkdv_step returns two blocks: (dk, dv)") \
            from None
    codes = tuple(dtypes.cpu().tolist())
    return ins[2].double().cpu(), ins[3].double().cpu(), codes


def _model_inputs(state):
    """The state as the kernel saw it, in float64: rows past the end zeroed, their lse +inf and delta 0."""
    inside = state["inside"]
    q, do = (state[n].double() * inside[:, None] for n in ("q", "do"))
    lse = torch.where(inside, state["lse"].double(), torch.tensor(math.inf, dtype=torch.float64))
    return (state["k"].double(), state["v"].double(), state["dk"].double(), state["dv"].double(), q, do, lse,
            state["delta"].double() * inside, state["cols"], state["rows"], state["qk_scale"])


_CASES = (  # (what, dtype, MASKED, first key, first row, seq_q, score scale, scale of v and dO)
    ("an unmasked block", torch.float16, False, 0, 0, 10**6, 1.0, 1.0),
    ("the diagonal block under the causal mask (keys 0-31, rows 0-15)", torch.float16, True, 0, 0, 10**6, 1.0, 1.0),
    ("a masked block further down (keys 32-63, rows 40-55)", torch.float16, True, 32, 40, 10**6, 1.0, 1.0),
    ("a block whose last 6 rows are past the sequence's end (q = dO = 0, lse = +inf)", torch.float16, False, 0, 0,
     10, 1.0, 1.0),
    ("scores in the hundreds (2^score would overflow float32: subtract lse before exp2)", torch.float16, False, 0, 0,
     10**6, 40.0, 1.0),
    ("bfloat16 blocks whose v and dO reach 10^5 (past float16's range)", torch.bfloat16, False, 0, 0, 10**6, 1.0,
     1e5),
)


def _tolerance(dtype):
    return 4 * torch.finfo(dtype).eps  # Pᵀ and dS are rounded to the inputs' dtype before their products


def _updated(got, want, start, tol):
    """Whether ``got`` is ``want``, both sums ``start`` + this block's update, the updates compared (so that
    the sums' own rounding, or a large ``start``, cannot hide an update off by more than ``tol``)."""
    return close(got - start, want - start, tol)


def _diagnose(what, got_dk, got_dv, inputs, masked, tol, dtype=torch.float16):
    """A Failed naming the mistake the step's (dk, dv) match, or which of them is wrong."""
    dk0, dv0 = inputs[2], inputs[3]
    for variant, message in _MISTAKES.items():
        want_dk, want_dv = _model(*inputs, masked, variant)
        start_dk, start_dv = (dv0, dk0) if variant == "swapped" else (dk0, dv0)  # each sum's own start
        if _updated(got_dk, want_dk, start_dk, tol) and _updated(got_dv, want_dv, start_dv, tol):
            return Failed(f"on {what}: {message}")
    want_dk, want_dv = _model(*inputs, masked)
    wrong = [name for name, got, want, start in (("dv", got_dv, want_dv, dv0), ("dk", got_dk, want_dk, dk0))
             if not _updated(got, want, start, tol)]
    rounded = any(_updated(got_dk, want_dk.to(half).double(), dk0, tol) and
                  _updated(got_dv, want_dv.to(half).double(), dv0, tol) for half in (torch.float16, torch.bfloat16))
    nan = any(torch.isnan(t).any() for t in (got_dk, got_dv))
    if dtype == torch.bfloat16 and not all(torch.isfinite(t).all() for t in (got_dk, got_dv)):
        return Failed(f"on {what}: {' and '.join(wrong)} came out inf or NaN: bfloat16 holds values float16 cannot; "
                      "convert tl.dot's operands to the inputs' own dtype (do.dtype, q.dtype), not to tl.float16")
    hint = (" (NaN: an inf times 0? subtract lse inside the exponent, and mask with tl.where)" if nan else
            ": this block's update is lost in rounding: keep dk and dv float32 all the way, adding the update to "
            "them (only tl.dot's operands are converted)" if rounded else
            " (dV = Pᵀ dO needs only Pᵀ; dK = (Pᵀ ∘ (dPᵀ − D)) Q with dPᵀ = v dOᵀ)" if wrong == ["dk"] else
            " (Pᵀ = 2^(k qᵀ · qk_scale − lse), masked where col > row when MASKED)")
    return Failed(f"on {what}: {' and '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong{hint}")


@exercise("dkdv_step", "Write dkdv_step above: dk and dv after one block of queries (Pᵀ recomputed from lse)")
def check_dkdv_step(dkdv_step) -> str:
    """Check ``dkdv_step(k, v, dk, dv, q, do, lse, delta, cols, rows, qk_scale, MASKED) -> (dk, dv)`` on drawn
    blocks (:data:`_CASES`: unmasked, on and below the diagonal under the causal mask, rows past the end, scores
    in the hundreds, bfloat16) against float64, naming the usual mistakes (:data:`_MISTAKES`); then the course's
    backward with it on grouped-query heads of ragged lengths, causal and not, against torch's autograd."""
    from course import attention, attention_backward

    require_jit("dkdv_step", dkdv_step, _STEP_ARGS)
    if getattr(dkdv_step, "fn", None) is attention_backward.dkdv_step.fn:
        raise Failed("that is the course's attention_backward.dkdv_step: the exercise is to write it yourself")
    used = borrowed_from(dkdv_step, [(attention_backward.dkdv_step, "the course's attention_backward.dkdv_step")],
                         modules=("course.attention_backward",))
    if used:
        raise Failed(f"dkdv_step calls {used}: the exercise is to write it yourself with tl's functions (tl.dot, "
                     "tl.trans, tl.exp2, tl.where)" if used != "torch" else "dkdv_step uses torch: inside a kernel "
                     "there are only blocks, and tl's functions work on them (tl.dot, tl.trans, tl.exp2, tl.where)")
    gen = torch.Generator().manual_seed(13)
    for what, dtype, masked, col0, row0, s_q, score_scale, value_scale in _CASES:
        state = _state(gen, dtype, masked, col0, row0, s_q, score_scale, value_scale)
        got_dk, got_dv, codes = _run_step(dkdv_step, what, state, masked, col0, row0, s_q)
        for name, code in zip(("dk", "dv"), codes):
            if code != 1:
                got = DTYPE_NAMES[code] if code else "something other than a float32 block"
                raise Failed(f"on {what}: {name} came back as {got}: keep the sums float32 (convert "
                             "only the operands of tl.dot, e.g. p_t.to(do.dtype))")
        inputs = _model_inputs(state)
        want_dk, want_dv = _model(*inputs, masked)
        tol = _tolerance(dtype)
        if not (_updated(got_dk, want_dk, inputs[2], tol) and _updated(got_dv, want_dv, inputs[3], tol)):
            raise _diagnose(what, got_dk, got_dv, inputs, masked, tol, dtype)
    problems = ((1, 4, 2, 45, 45, 16, True), (1, 2, 1, 33, 50, 32, False))
    for B, H, H_KV, S_Q, S_K, D, causal in problems:
        what = f"the course's backward with your step ({H} query heads over {H_KV}, {S_Q} x {S_K}, causal={causal})"
        dev = runtime.DEVICE
        q = torch.randn(B, H, S_Q, D, generator=gen).half().to(dev)
        k, v = (torch.randn(B, H_KV, S_K, D, generator=gen).half().to(dev) for _ in range(2))
        grad_out = torch.randn(B, H, S_Q, D, generator=gen).half().to(dev)
        out, lse = attention.forward(q, k, v, causal=causal, with_lse=True)
        try:
            _, dk, dv = attention_backward.backward(q, k, v, out, lse, grad_out, causal=causal, step=dkdv_step)
        except Exception as err:
            raise _explain_step(user_error(f"in {what}, your dkdv_step", err)) from None
        exact = [t.double().cpu().requires_grad_() for t in (q, k, v)]
        attention.reference(*exact, causal=causal).backward(grad_out.double().cpu())
        for name, got, ref in (("dv", dv, exact[2].grad), ("dk", dk, exact[1].grad)):
            if not close(got.double().cpu(), ref, 4 * torch.finfo(torch.float16).eps):
                raise Failed(f"{what}: {name} is wrong, though the single blocks were right: does your step read "
                             "only its arguments (rows and cols are absolute indices, MASKED a constexpr)?")
    return ("dK and dV right on unmasked, masked, ragged and large-score blocks in float16 and bfloat16, and in the "
            "course's backward on grouped-query heads, causal and not")


# --- exercise 1: linear_grads, a Linear layer's gradients as views ------------------------------------------

_LINEAR_CASES = (  # (what, M, K, N, x layout, dy layout): M, K, N all differ, so a transposed result has a wrong shape
    ("5 tokens, 7 inputs, 3 outputs", 5, 7, 3, "row", "row"),
    ("33 tokens, 20 inputs, 17 outputs", 33, 20, 17, "row", "row"),
    ("one token", 1, 16, 9, "row", "row"),
    ("an x stored transposed (x = x_t.T)", 12, 18, 10, "col", "row"),
    ("a dy stored column by column (dy = dy_t.T)", 9, 14, 6, "row", "col"),
)


def _linear_operands(M, K, N, x_layout, dy_layout, gen):
    x = torch.randn(M, K, generator=gen)
    x = x.T.contiguous().T if x_layout == "col" else x
    w = torch.randn(N, K, generator=gen)
    dy = torch.randn(M, N, generator=gen)
    dy = dy.T.contiguous().T if dy_layout == "col" else dy
    return [t.to(runtime.DEVICE) for t in (x, w, dy)]


@contextlib.contextmanager
def _watching_matmul(learner, calls):
    """Route every call of course.gemm.matmul made by the learner's function (as ``course.gemm.matmul``,
    ``gemm.matmul``, a name imported from it, or through ``course.gemm.autograd``) through a recorder of its
    operands and its result: ``calls`` gets ``(a, b, result)`` per call."""
    from course import gemm
    from course.gemm import autograd

    real = gemm.matmul

    def recorded(a, b, *args, **kwargs):
        result = real(a, b, *args, **kwargs)
        calls.append((a, b, result))
        return result

    scopes = [(gemm.__dict__, "matmul"), (autograd.__dict__, "forward_matmul")]
    learner = getattr(learner, "__wrapped__", learner)
    own = getattr(learner, "__globals__", {})  # (a functools.partial or a callable object has none)
    scopes += [(own, name) for name, value in list(own.items()) if value is real]
    for scope, name in scopes:
        scope[name] = recorded
    try:
        yield
    finally:
        for scope, name in scopes:
            scope[name] = real


def _copied(t, originals) -> str | None:
    """The name of the input that ``t`` copies (its values, or its transpose's, in memory of its own, maybe
    converted to another dtype), or None:
    a view of an input (its memory) or a tensor of other values is no copy."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.layout != torch.strided:
        return None
    if any(_shares_memory(t, o) for o in originals.values()):
        return None
    values = t.detach().double().cpu()
    for name, o in originals.items():
        for candidate in (o, o.T):
            if values.shape == candidate.shape and torch.equal(values, candidate.to(t.dtype).double().cpu()):
                return name if t.dtype == o.dtype else f"{name} converted to {str(t.dtype).removeprefix('torch.')}"
    return None


def _judge_linear_grads(what, result, inputs, before, calls) -> None:
    """Raise a Failed for what is wrong with ``result`` of one call of linear_grads (see its check)."""
    x, w = inputs["x"], inputs["w"]
    (M, K), N = x.shape, w.shape[0]
    for name, t in inputs.items():
        if tuple(t.shape) != tuple(before[name].shape) or not torch.equal(t.double().cpu(), before[name]):
            raise Failed(f"on {what}: linear_grads changed its input {name}: gradients are new tensors; never write "
                         "into x, w or dy (no in-place operations on them)")
    if not (isinstance(result, (tuple, list)) and len(result) == 3):
        raise Failed("linear_grads must return three tensors: (dx, dw, db)")
    dx, dw, db = result
    for name, got, shape in (("dx", dx, (M, K)), ("dw", dw, (N, K)), ("db", db, (N,))):
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != shape:
            hint = {"dx": " (x's shape)", "dw": " (w's shape, (outputs, inputs): is yours transposed?)",
                    "db": " (one value per output: a sum over the tokens, axis 0)"}[name]
            shown = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            raise Failed(f"on {what}: {name} must have shape {shape}{hint}, got {shown}")
        if got.layout != torch.strided or got.device != x.device:
            raise Failed(f"on {what}: {name} must be a dense tensor on x's device ({x.device}), not {got.layout} on "
                         f"{got.device}")
        if got.dtype != x.dtype:
            raise Failed(f"on {what}: {name} is {got.dtype}: a gradient has the dtype of what it is the gradient of "
                         f"({x.dtype} here)")
    copies = [_copied(t, inputs) for a, b, _ in calls for t in (a, b)]
    copied = next((c for c in copies if c), None)
    if copied:
        raise Failed(f"on {what}: course.gemm.matmul got a copy of {copied}, not a view: it reads any strides, so .T is "
                     "all it needs (no .contiguous(), .clone(), conversion or arithmetic first)")
    for name, got, operands in (("dx", dx, ("dy", "w")), ("dw", dw, ("dy", "x"))):
        product = next(((a, b, r) for a, b, r in calls if _shares_memory(got, r)), None)
        if product is None:
            raise Failed(f"on {what}: {name} did not come from course.gemm.matmul (it was called {len(calls)} "
                         f"time{'' if len(calls) == 1 else 's'}): compute each product with it, and return what it "
                         "returns (a view of it, such as .T, is fine)")
        a, b, r = product
        if not torch.equal(got, r if got.shape == r.shape else r.T):
            raise Failed(f"on {what}: {name} was changed after course.gemm.matmul returned it: return its result")
        taken = sorted(next((n for n in operands if _shares_memory(t, inputs[n])), "?") for t in (a, b))
        if taken != sorted(operands):
            raise Failed(f"on {what}: course.gemm.matmul got an operand that is not {operands[0]} or {operands[1]} "
                         f"itself for {name}: it takes views of {operands[0]} and {operands[1]} (matmul reads any "
                         "strides, so .T is all it needs: no copies, padding or arithmetic first)")
    x64, w64, dy64 = before["x"], before["w"], before["dy"]
    for name, got, want, how in (("dx", dx, dy64 @ w64, "dy (M x N) times w (N x K)"),
                                 ("dw", dw, dy64.T @ x64, "dyᵀ (N x M) times x (M x K)"),
                                 ("db", db, dy64.sum(0), "a sum of dy over the tokens")):
        if not close(got.double().cpu(), want):
            raise Failed(f"on {what}: {name} is wrong: it is {how}")


def _shares_memory(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.layout == b.layout == torch.strided
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


@exercise("linear_grads", "Write linear_grads above: (dx, dw, db) of y = x @ w.T + b, with course.gemm.matmul "
                          "on views of x, w and dy")
def check_linear_grads(linear_grads) -> str:
    """Check ``linear_grads(x, w, dy) -> (dx, dw, db)`` for ``y = x wᵀ + b`` against float64 on odd shapes, an x
    and a dy stored transposed: the inputs left as they were, the gradients dense, of x's dtype and device, and
    dx and dw the results of ``course.gemm.matmul`` calls whose operands are views of (dy, w) and (dy, x)."""
    require_function("linear_grads", linear_grads, ("x", "w", "dy"))
    gen = torch.Generator().manual_seed(13)
    for what, M, K, N, x_layout, dy_layout in _LINEAR_CASES:
        inputs = dict(zip(("x", "w", "dy"), _linear_operands(M, K, N, x_layout, dy_layout, gen)))
        before = {name: t.double().cpu() for name, t in inputs.items()}
        calls = []
        try:
            with _watching_matmul(linear_grads, calls), torch.no_grad():
                result = linear_grads(*inputs.values())
        except Failed:
            raise
        except Exception as err:
            raise user_error(f"on {what}, linear_grads", err) from None
        try:
            _judge_linear_grads(what, result, inputs, before, calls)
        except Failed:
            raise
        except Exception as err:  # something returned that the checks below cannot read
            raise Failed(f"on {what}: the check could not read what linear_grads returned ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''}): return three dense tensors") from None
    return ("dx = dy·w and dw = dyᵀ·x on views of the inputs, db a column sum: right on odd shapes, x and dy stored "
            "transposed")
