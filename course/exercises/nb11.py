"""Notebook 11: fusion and flash attention. Two exercises: the online-softmax update (``softmax_step``),
then the whole forward loop of flash attention for one block of queries (``flash_forward``)."""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import inspect
import math
import re
import textwrap

import torch
import triton
import triton.language as tl

from course import runtime
from course.exercises.core import (
    Failed,
    NotAttempted,
    close,
    compiles_for_a_gpu,
    exercise,
    launches,
    module_of,
    plural,
    require_jit,
    user_error,
    watching_loads,
)

__all__ = ['check_softmax_step', 'check_flash_forward']

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
EPS16 = torch.finfo(torch.float16).eps  # 2^-10: p is rounded to float16 before P V
EPS32 = torch.finfo(torch.float32).eps  # 2^-23: m, l and the scores are float32


# --- reading the learner's source (ast, so that comments and strings never count) -------------------

_MISSING = object()


def _resolve(node, scope: dict, local: set):
    """The object a name or a dotted name (``attention.softmax_step``) in a function's source stands
    for, looked up in the function's globals (then the builtins); _MISSING for locals and unknowns."""
    if isinstance(node, ast.Name):
        if node.id in local:
            return _MISSING
        return scope.get(node.id, getattr(builtins, node.id, _MISSING))
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope, local)
        if base is _MISSING:
            return _MISSING
        try:
            return getattr(base, node.attr, _MISSING)
        except Exception:
            return _MISSING
    return _MISSING


def _local_names(tree) -> set:
    """Parameters and assigned names of a function: they hide globals of the same name."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _is_jit(obj) -> bool:
    return callable(getattr(obj, "fn", None)) and hasattr(obj, "arg_names")


def _own_functions(fn):
    """``(function, syntax tree, local names)`` for the learner's function and, recursively, the
    ``@triton.jit`` helpers of the learner's own that it uses (not the course's, not Triton's)."""
    found, seen, todo = [], set(), [getattr(fn, "fn", fn)]
    while todo:
        f = todo.pop(0)
        if id(f) in seen:
            continue
        seen.add(id(f))
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        except (OSError, TypeError, SyntaxError):
            continue
        local = _local_names(tree)
        found.append((f, tree, local))
        scope = getattr(f, "__globals__", {})
        for node in ast.walk(tree):
            if isinstance(node, (ast.Name, ast.Attribute)):
                obj = _resolve(node, scope, local)
                if _is_jit(obj) and not (getattr(obj.fn, "__module__", "") or "").startswith(("course.", "triton")):
                    todo.append(obj.fn)
    return found


def borrowed_from(fn, banned, modules=()) -> str | None:
    """The label of the first thing in ``banned`` (``[(object, label)]``) that the learner's function
    or one of its helpers uses, "the course's <module>.<name>" for any function of a module in
    ``modules`` (its private helpers included, found by where they are defined, not by name), or
    "torch" for anything of torch's; None when it uses none."""
    for f, tree, local in _own_functions(fn):
        scope = getattr(f, "__globals__", {})
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
                continue
            obj = _resolve(node, scope, local)
            if obj is _MISSING:
                continue
            for thing, label in banned:
                if obj is thing or (_is_jit(obj) and _is_jit(thing) and obj.fn is thing.fn):
                    return label
            if not inspect.ismodule(obj) and callable(obj) and module_of(obj) in modules:
                name = getattr(getattr(obj, "fn", obj), "__name__", "function")
                return f"the course's {module_of(obj).removeprefix('course.')}.{name}"
            module = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", None)
            if isinstance(module, str) and (module == "torch" or module.startswith("torch.")):
                return "torch"
    return None


# tl functions that make a block from scalars; other blocks come from these, through names
_BLOCK_MAKERS = {"arange", "load", "full", "zeros", "zeros_like", "full_like", "dot", "rand", "randn"}


def _makes_block(node, blocks: set) -> bool:
    """Whether an expression involves a block: a name known to hold one, or a tl function that makes one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in blocks:
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in _BLOCK_MAKERS:
            return True
    return False


def _block_names(tree, params_are_blocks: bool) -> set:
    """The local names that hold blocks, following the assignments to a fixed point."""
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    blocks = {a.arg for a in func.args.args} if (func and params_are_blocks) else set()
    return _grow_blocks(tree, blocks, _makes_block)


def _grow_blocks(tree, blocks: set, makes_block) -> set:
    """``blocks`` and every name assigned a value that ``makes_block(value, blocks)`` calls a block,
    following the assignments to a fixed point."""
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if makes_block(node.value, blocks):
                    for name in (n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                        if name.id not in blocks:
                            blocks.add(name.id)
                            changed = True
    return blocks


def _builtin_minmax(fn, params_are_blocks: bool) -> str | None:
    """``"max"`` or ``"min"`` if the learner's function (or a helper of theirs) calls Python's builtin of that
    name on a block. On scalars (min(S_K, ...)) it is right, compiled and interpreted; on blocks a GPU's
    compiler turns it into tl.maximum or tl.minimum (deprecated), but the interpreter gets it wrong without a
    word. ``params_are_blocks``: whether the function's parameters are blocks (an update's are, a kernel's are
    pointers and numbers); a helper's always count as blocks."""
    for index, (f, tree, local) in enumerate(_own_functions(fn)):
        scope = getattr(f, "__globals__", {})
        blocks = _block_names(tree, params_are_blocks or index > 0)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min"):
                if _resolve(node.func, scope, local) is getattr(builtins, node.func.id) and \
                        any(_makes_block(a, blocks) for a in node.args):
                    return node.func.id
    return None


# what a block carries besides its values: known when the kernel is built, so a Python `if` on them is right
_BLOCK_META = {"dtype", "shape", "type", "numel", "ndim", "element_ty"}
# A reduction may leave a single value (tl.min of a 1-D block), which Python's if takes: not judged from the source
_REDUCTIONS = {"min", "max", "sum", "reduce", "argmin", "argmax", "xor_sum", "prod"}


def _block_expr(node, blocks: set) -> bool:
    """Whether an expression's value is a block (not its dtype or shape): a name known to hold one, or a tl
    function that makes one, anywhere inside it."""
    if isinstance(node, ast.Attribute) and node.attr in _BLOCK_META:
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REDUCTIONS:
        return False
    if isinstance(node, ast.Name):
        return node.id in blocks
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _BLOCK_MAKERS:
        return True
    return any(_block_expr(child, blocks) for child in ast.iter_child_nodes(node))


def _python_if_on_block(fn, params_are_blocks: bool):
    """``(kind, test)`` for the first Python ``if``, ``while`` or ``... if ... else ...`` whose condition is a
    block, in the learner's function or a helper of theirs; None if there is none. Such a condition has one
    truth value per element: compiled, Triton refuses it; the interpreter takes one truth value for the whole
    block (silently). Parameters annotated tl.constexpr are never blocks; a helper's others always count."""
    for index, (f, tree, local) in enumerate(_own_functions(fn)):
        func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
        if func is None:
            continue
        blocks = set()
        if params_are_blocks or index > 0:
            blocks = {a.arg for a in func.args.args if "constexpr" not in ast.unparse(a.annotation or ast.Constant(""))}
        blocks = _grow_blocks(func, blocks, _block_expr)
        for node in ast.walk(func):
            if isinstance(node, (ast.If, ast.While, ast.IfExp)) and _block_expr(node.test, blocks):
                kind = {ast.If: "if", ast.While: "while", ast.IfExp: "x if c else y"}[type(node)]
                return kind, ast.unparse(node.test)
    return None


def _refuse_python_if_on_block(name: str, fn, params_are_blocks: bool) -> None:
    found = _python_if_on_block(fn, params_are_blocks)
    if found:
        kind, test = found
        raise Failed(f"{name} tests a block with Python's {kind} (condition: {test}): that condition has one truth "
                     f"value per element, but Python's {kind} needs one for the whole block (the interpreter picks "
                     "one silently; compiled, Triton refuses it). Choose element by element: tl.where(condition, a, "
                     "b), or tl.maximum / tl.minimum for the larger / smaller of two blocks")


def _course_attention(*extra):
    """What an answer may not call: the course's attention and the reference solutions."""
    from course import attention, solutions

    things = [(attention.softmax_step, "the course's attention.softmax_step"),
              (attention.key_bounds, "the course's attention.key_bounds"),
              (attention.attention_kernel, "the course's attention.attention_kernel"),
              (attention.attention, "the course's attention.attention"),
              (attention.reference, "the course's attention.reference")]
    things += [(getattr(solutions, name), f"the reference solution solutions.{name}") for name in extra]
    return things


def _refuse_borrowed(name: str, fn, *solution_names) -> None:
    # any other function of course.attention (its key-block helper, the kernel built for any length) counts
    # as the course's too: found by the module that defines it
    used = borrowed_from(fn, _course_attention(*solution_names), modules=("course.attention",))
    if used == "torch":
        raise Failed(f"{name} uses torch: inside a kernel there are only blocks, and tl's functions work on them "
                      "(tl.dot, tl.exp2, tl.max, tl.sum, tl.where)")
    if used:
        raise Failed(f"{name} calls {used}: the exercise is to write it yourself; use only tl's functions "
                      "(and helpers of your own)")


def _refuse_builtin_minmax(name: str, fn, params_are_blocks: bool) -> None:
    builtin = _builtin_minmax(fn, params_are_blocks)
    if builtin:
        raise Failed(f"{name} calls Python's {builtin}(): on blocks use tl.{builtin}imum(a, b) (elementwise) or "
                      f"tl.{builtin}(x, axis) (a reduction); the interpreter does not turn the builtin into either")


def explain_error(failed: Failed, shapes: str, returns: str | None = None) -> Failed:
    """``failed`` (the learner's code raised) with the course's own hint where the error is about shapes,
    dtypes given to tl.dot, or the number of values returned (``returns``: what to return)."""
    text = str(failed)
    bare = text.split("\n  hint:")[0]
    # the last two: compiled (Triton 3.6 and 3.9 unpacking one block into two names)
    if returns and re.search(r"values to unpack|non-iterable|list index out of range|no attribute 'values'", text):
        return Failed(f"{bare}\n  hint: {returns}")
    if re.search(r"same dtype", text):
        return Failed(f"{bare}\n  hint: tl.dot takes two blocks of one dtype: convert p to v's (p.to(v.dtype)); the "
                      "accumulator stays float32")
    if re.search(r"rank|shape|broadcast|incompatible|dimension", text):
        return Failed(f"{bare}\n  hint: {shapes}")
    return failed


# --- exercise 1: softmax_step, the online-softmax update ---------------------------------------------

EPS_BF16 = torch.finfo(torch.bfloat16).eps  # 2^-7: p rounded to bfloat16 when v is


@triton.jit
def dtype_code(PTR, x):
    """Store at PTR what ``x`` is: 1 a float32 block, 2 float16, 3 bfloat16 (0, the buffer's, anything else)."""
    if x.dtype == tl.float32:
        tl.store(PTR, 1)
    if x.dtype == tl.float16:
        tl.store(PTR, 2)
    if x.dtype == tl.bfloat16:
        tl.store(PTR, 3)


@triton.jit
def _step_kernel(M_IN, L_IN, ACC_IN, S, V, M_OUT, L_OUT, ACC_OUT, DTYPES, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, D: tl.constexpr, STEP: tl.constexpr):
    """One call of the learner's update on a state and a block of scores read from memory; DTYPES gets the
    dtype of each value it returns (the stores would convert them silently)."""
    r = tl.arange(0, BLOCK_M)
    c = tl.arange(0, BLOCK_N)
    d = tl.arange(0, D)
    m, l, acc = STEP(tl.load(M_IN + r), tl.load(L_IN + r), tl.load(ACC_IN + r[:, None] * D + d[None, :]),
                     tl.load(S + r[:, None] * BLOCK_N + c[None, :]), tl.load(V + c[:, None] * D + d[None, :]))
    tl.store(M_OUT + r, m)
    tl.store(L_OUT + r, l)
    tl.store(ACC_OUT + r[:, None] * D + d[None, :], acc)
    dtype_code(DTYPES + 0, m)
    dtype_code(DTYPES + 1, l)
    dtype_code(DTYPES + 2, acc)


DTYPE_NAMES = {0: "something other than a float block", 1: "float32", 2: "float16", 3: "bfloat16"}
_STEP_SHAPES = ("s is [BLOCK_M, BLOCK_N], v [BLOCK_N, d]; return (m, l, acc) in that order, m and l of "
                "shape [BLOCK_M] (reduce s along axis 1), acc [BLOCK_M, d]")


@dataclasses.dataclass
class _Step:
    """One call of softmax_step: its inputs (float64 copies) and what it returned."""

    what: str
    m_i: torch.Tensor
    l_i: torch.Tensor
    acc_i: torch.Tensor
    s: torch.Tensor
    v: torch.Tensor
    m: torch.Tensor
    l: torch.Tensor
    acc: torch.Tensor
    dtypes: tuple  # of m, l and acc as returned: codes of DTYPE_NAMES
    eps: float  # the epsilon of v's dtype: p is rounded to it for tl.dot

    def model(self, variant: str = "right"):
        """(m, l, acc) in float64: the update written right, or with one of the usual mistakes."""
        m_i, l_i, acc_i, s, v = self.m_i, self.l_i, self.acc_i, self.s, self.v
        if variant == "scaled twice":  # s multiplied by log2(e) once more, inside the update
            s = s * LOG2E
        ex = torch.exp if variant == "natural exp" else torch.exp2
        m_new = torch.maximum(m_i, s.max(1).values)
        if variant == "block maximum only":
            m_new = s.max(1).values
        if variant == "clamped at 0":
            m_new = m_new.clamp(min=0)
        # a row that has seen no key yet (its maximum still -inf) keeps m = -inf, l = 0, acc = 0: shifted by 0
        finite = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
        alpha = ex(finite - m_i) if variant == "alpha inverted" else ex(m_i - finite)
        shift = m_i if variant == "old maximum" else (torch.zeros_like(m_new) if variant == "no maximum" else finite)
        p = ex(s - shift[:, None])
        if variant == "p rounded":  # l summed from p after its rounding to v's dtype (for tl.dot)
            p = p.to(torch.bfloat16 if self.eps == EPS_BF16 else torch.float16).double()
        l = l_i * (1 if variant == "sum not rescaled" else alpha) + p.sum(1)
        acc = acc_i * (1 if variant == "output not rescaled" else alpha[:, None]) + p @ v
        if variant == "normalized":
            acc = acc / l[:, None]
        return m_new, l, acc

    def matches(self, variant: str = "right", part: str = "mla", rows=None, acc_rtol: float | None = None,
                l_rtol: float = 512 * EPS32) -> bool:
        """Whether the returned values (of ``rows``, a bool per row; all by default) are those of ``variant``
        within what float32 allows for m and l (m exact, l to 2^-14 relative, or ``l_rtol``) and, for acc,
        ``acc_rtol`` of its terms' magnitudes (default: twice the epsilon of v's dtype, to which p is rounded
        before P V)."""
        m, l, acc = self.model(variant)
        rows = torch.ones(len(m), dtype=torch.bool) if rows is None else rows
        with torch.no_grad():
            ok_m = _same(self.m[rows], m[rows], 16 * EPS32)
            ok_l = _same(self.l[rows], l[rows], l_rtol)
            alpha = torch.exp2(self.m_i - m).nan_to_num(0.0, posinf=0.0)
            p = torch.exp2(self.s - m[:, None]).nan_to_num(0.0, posinf=0.0)
            scale = p @ self.v.abs() + alpha[:, None] * self.acc_i.abs() + acc.abs()
            ok_acc = _same(self.acc[rows], acc[rows], 2 * self.eps if acc_rtol is None else acc_rtol, scale[rows])
        return all({"m": ok_m, "l": ok_l, "a": ok_acc}[k] for k in part)


def _same(got: torch.Tensor, want: torch.Tensor, rtol: float, scale: torch.Tensor | None = None) -> bool:
    """Elementwise ``|got - want| <= rtol * scale`` (scale: |want|), infinities equal, no NaN."""
    if got.shape != want.shape or torch.isnan(got).any() or torch.isnan(want).any():
        return False
    inf = torch.isinf(want) | torch.isinf(got)
    if not torch.equal(got[inf], want[inf]):
        return False
    scale = want.abs() if scale is None else scale
    return bool(((got - want).abs()[~inf] <= rtol * scale[~inf] + 1e-30).all())


class Bfloat16Dot(contextlib.AbstractContextManager):
    """Under the interpreter, tl.dot of bfloat16 blocks computed right: Triton 3.6's interpreter keeps bfloat16
    as raw 16-bit integers and multiplies those. Inside the block, a dot with a bfloat16 operand converts
    both to float32 first (a GPU's tensor cores multiply them exactly and add in float32 too)."""

    def __enter__(self):
        self._builder = None
        if not runtime.INTERPRET:
            return self
        import numpy as np
        from triton.runtime import interpreter

        self._builder = builder = interpreter.interpreter_builder
        self._saved = builder.__dict__.get("create_dot")
        original = builder.create_dot

        def as_float32(h):
            if h.dtype.scalar == tl.bfloat16:
                return interpreter._convert_float(h.data, tl.bfloat16, tl.float32, None).view(np.float32)
            return h.data.astype(np.float32)

        def create_dot(a, b, d, *rest):
            if tl.bfloat16 not in (a.dtype.scalar, b.dtype.scalar):
                return original(a, b, d, *rest)
            return interpreter.TensorHandle(np.matmul(as_float32(a), as_float32(b)).astype(d.data.dtype) + d.data,
                                            d.dtype.scalar)

        builder.create_dot = create_dot
        return self

    def __exit__(self, *exc):
        if self._builder is not None:
            if self._saved is None:
                self._builder.__dict__.pop("create_dot", None)
            else:
                self._builder.create_dot = self._saved
        return False


def _one_step(step, what: str, m_i, l_i, acc_i, s, v, v_dtype=torch.float16) -> _Step:
    """Run the learner's update once in ``_step_kernel`` on the given state and block (v in ``v_dtype``)."""
    dev = runtime.DEVICE
    bm, bn, d = s.shape[0], s.shape[1], v.shape[1]
    outs = [torch.full((bm,), float("nan"), device=dev), torch.full((bm,), float("nan"), device=dev),
            torch.full((bm, d), float("nan"), device=dev)]
    dtypes = torch.zeros(3, dtype=torch.int32, device=dev)
    ins = [m_i.float().to(dev), l_i.float().to(dev), acc_i.float().to(dev), s.float().to(dev), v.to(v_dtype).to(dev)]
    try:
        with Bfloat16Dot() if v_dtype == torch.bfloat16 else contextlib.nullcontext():
            _step_kernel[(1,)](*ins, *outs, dtypes, BLOCK_M=bm, BLOCK_N=bn, D=d, STEP=step)
    except Exception as err:
        raise explain_error(user_error(f"on {what}, your softmax_step", err), _STEP_SHAPES,
                            "softmax_step returns three values: (m, l, acc)") from None
    if runtime.DEVICE == "cuda":
        torch.cuda.synchronize()
    m_i, l_i, acc_i, s, v = (t.double().cpu() for t in ins)
    return _Step(what, m_i, l_i, acc_i, s, v, *(t.double().cpu() for t in outs), tuple(dtypes.cpu().tolist()),
                 torch.finfo(v_dtype).eps)


def _step_cases(step) -> list[_Step]:
    """The update on seven states: a later block (some rows' maximum grows, some not), the first block, a block
    with masked scores (-inf; one row wholly masked), a first block of all-negative scores, a block whose
    exponentials are exact powers of two (so that acc can be held to float32's precision), a later block with
    bfloat16 values, and last the masked block as a first block (the wholly masked row has seen no key yet: it
    must keep m = -inf, l = 0, acc = 0). Each runs only once the ones before are right."""
    gen = torch.Generator().manual_seed(11)
    bm, bn, d = 32, 16, 64  # all different, so that a reduction along the wrong axis cannot pass
    rnd = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    v = rnd(bn, d).half().double()
    s = (rnd(bm, bn) * 3).float().double()
    # later block: half the rows had a larger maximum before, half get a larger one now
    m_i = (s.max(1).values + torch.where(torch.arange(bm) % 2 == 0, 2.5, -2.5)).float().double()
    l_i = (1 + 10 * torch.rand(bm, generator=gen, dtype=torch.float64)).float().double()
    acc_i = (rnd(bm, d) * l_i[:, None]).float().double()
    yield _one_step(step, "a later block (the maximum grows in some rows only)", m_i, l_i, acc_i, s, v)
    yield _one_step(step, "the first block (m_i = -inf, l_i = 0, acc = 0)", torch.full((bm,), -math.inf),
                    torch.zeros(bm), torch.zeros(bm, d), s, v)
    masked_s = s.clone()
    masked_s[torch.arange(bn)[None, :] > torch.arange(bm)[:, None] % bn] = -math.inf  # a causal-like diagonal
    masked_s[3] = -math.inf  # a row wholly masked in this block (above a diagonal block's keys): it keeps its state
    yield _one_step(step, "a block with masked scores (-inf, a whole row of them in row 3)", m_i, l_i, acc_i,
                    masked_s, v)
    yield _one_step(step, "a first block of all-negative scores (every score about -1000)",
                    torch.full((bm,), -math.inf), torch.zeros(bm), torch.zeros(bm, d), s - 1000, v)
    # whole-number scores and maxima: every exp2 is a power of two, exact in float16, so the only rounding left
    # in acc is float32's (and a float16 one, if acc or tl.dot's result passes through float16, shows)
    exact_s = (torch.randint(-6, 7, (bm, 1), generator=gen) + torch.randint(-10, 1, (bm, bn), generator=gen)).double()
    exact_m = exact_s.max(1).values + torch.where(torch.arange(bm) % 2 == 0, 3.0, -3.0)
    yield _one_step(step, "a block whose exponentials are exact powers of two (acc held to float32's precision)",
                    exact_m, l_i, rnd(bm, d).float().double(), exact_s, v)
    yield _one_step(step, "a later block whose values v are bfloat16", m_i, l_i, acc_i, s, v, torch.bfloat16)
    # the same block first: row 3 has seen no key yet, as when a loop visits the key blocks last first
    yield _one_step(step, "the first block with masked scores (m_i = -inf; row 3 all -inf, so it sees no key yet)",
                    torch.full((bm,), -math.inf), torch.zeros(bm), torch.zeros(bm, d), masked_s, v)


def _l_rounded(step: _Step) -> None:
    """A ✗ if l is off by the rounding of p to 16 bits: summed from the p that was converted for tl.dot (or summed
    in 16 bits)."""
    if step.matches("p rounded", "l") or step.matches("right", "l", l_rtol=4 * step.eps):
        raise Failed(f"on {step.what}: l is off by a 16-bit rounding: it sums p after p was rounded to v's dtype "
                      "(or sums it in 16 bits). Sum the float32 p into l; only the copy of p that goes to tl.dot "
                      "is converted")


def _diagnose_step(cases) -> None:
    """Name the first wrong thing the update does, from its outputs on the states of _step_cases (each run
    only when the ones before are right)."""
    later = next(cases)
    for name, code in zip(("m", "l", "acc"), later.dtypes):
        if code != 1:
            why = ("keep the accumulator in float32: it sums a new block every step, and float16 rounds each sum; "
                   "only p is converted (to v's dtype), for tl.dot, which adds in float32" if name == "acc" else
                   "m and l stay float32, as they came in")
            raise Failed(f"on {later.what}: softmax_step returns {name} as {DTYPE_NAMES[code]}: {why}")
    m_want, l_want, _ = later.model()
    if _same(later.m, l_want, 512 * EPS32) and _same(later.l, m_want, 16 * EPS32):
        raise Failed("m and l come back swapped: return (m, l, acc) in that order")
    if not later.matches("right", "m"):
        if _same(later.m, later.m_i, 0.0):
            raise Failed(f"on {later.what}: m is returned unchanged: return the new running maximum, m_i combined "
                          "with this block's row maxima")
        if later.matches("block maximum only", "m"):
            raise Failed(f"on {later.what}: m forgets the old maximum: where a block's scores are all below m_i, "
                          "the running maximum stays m_i (combine the two with tl.maximum)")
        if later.matches("scaled twice", "m"):
            raise Failed(f"on {later.what}: m is the maximum of the scores times log2(e): s comes already in base 2 "
                          "(the kernel multiplied it by log2(e)), so use it as it is; scaled again, every "
                          "exponential changes")
        raise Failed(f"on {later.what}: m is not the running maximum: the larger of m_i and the row's largest score "
                      "in this block (tl.max(s, 1), one value per row)")
    if not later.matches("right", "l"):
        for variant, message in (
                ("sum not rescaled", "l_i is not rescaled when the maximum grows: it is a sum of exp2(s - m_i), so "
                                     "it shrinks by the same factor as acc"),
                ("alpha inverted", "the old terms grow instead of shrinking: under a larger maximum every "
                                   "exp2(s - m) gets smaller, so the factor for l_i and acc is at most 1"),
                ("natural exp", "this is exp, not exp2 (or the scores are scaled by log2(e) once more): the "
                                "kernel's scores are already in base 2 (multiplied by log2(e)), so exp2 undoes "
                                "them exactly"),
                ("old maximum", "the new scores are shifted by the old maximum m_i: shift them by the new one, "
                                "the same maximum that l and acc are kept against"),
                ("no maximum", "exp2 of a score not shifted by its row's running maximum overflows for large "
                               "scores: subtract the new maximum from s first")):
            if later.matches(variant, "l"):
                raise Failed(f"on {later.what}: {message}")
        _l_rounded(later)
        raise Failed(f"on {later.what}: l is wrong: the old sum, rescaled to the new maximum, plus this block's "
                      "exponentials (summed along each row)")
    if not later.matches("right", "a"):
        for variant, message in (
                ("output not rescaled", "acc is not rescaled when the maximum grows: the old terms were weighted "
                                        "by exp2(s - m_i), and under the new maximum they must shrink by the same "
                                        "factor as l"),
                ("normalized", "acc is divided by l: keep it unnormalized (the kernel divides by l once, at "
                               "the end)")):
            if later.matches(variant, "a"):
                raise Failed(f"on {later.what}: {message}")
        raise Failed(f"on {later.what}: m and l are right, acc is not: the old acc, rescaled like l, plus this "
                      "block's exponentials times v (tl.dot(p.to(v.dtype), v))")
    first = next(cases)
    if not first.matches():
        if first.matches(part="ma"):
            _l_rounded(first)
        bad = "inf or nan" if not torch.isfinite(torch.cat([first.l, first.acc.flatten()])).all() else "wrong values"
        raise Failed(f"right on a later block, but {bad} on {first.what}: there m_i is -inf, so exp2(m_i - m_new) "
                      "is 0 (the empty past counts nothing) as long as m_new is finite; never subtract m_i "
                      "from the scores")
    masked = next(cases)
    if not masked.matches():
        hidden = torch.isinf(masked.s).all(1)  # rows whose every score in this block is -inf
        if not masked.matches(rows=~hidden):
            raise Failed(f"wrong on {masked.what}: masked scores are -inf and must drop out (exp2(-inf) is 0), "
                          "in the maximum too. Don't replace -inf by a number")
        rows = _row_span(hidden)
        if not torch.isfinite(torch.cat([masked.l[hidden], masked.acc[hidden].flatten()])).all():
            raise Failed(f"wrong on {masked.what}: {rows}, whose every score is -inf in this block, comes out nan. "
                          "There the block's own maximum is -inf too, and s minus it is -inf - (-inf), nan. Shift "
                          "the scores by the new running maximum, which stays finite once an earlier block had a "
                          "visible key")
        raise Failed(f"wrong on {masked.what}: {rows}, whose every score is -inf in this block, must come out as it "
                      "went in (the same m, l and acc): nothing in the block counts for it")
    negative = next(cases)
    if not negative.matches():
        if negative.matches("clamped at 0", "m") or bool((negative.m >= 0).all()):
            raise Failed(f"wrong on {negative.what}: the running maximum must be the scores' own maximum, "
                          "negative here; a maximum held at 0 (or above the scores) turns every exp2 into 0 and "
                          "the sum l into 0")
        raise Failed(f"wrong on {negative.what}: softmax does not change when every score moves by the same "
                      "amount, so your update must not either: shift by the running maximum, whatever its sign")
    exact = next(cases)
    if not exact.matches(acc_rtol=64 * EPS32):
        if exact.matches():
            raise Failed(f"on {exact.what}: acc is off by float16's rounding: it passes through float16 on the way "
                          "(tl.dot(..., out_dtype=tl.float16), or a float16 sum). Keep acc and tl.dot's result in "
                          "float32; only p is converted, to v's dtype, for the product")
        raise Failed(f"wrong on {exact.what}: right on random scores, but not here: does your update depend on "
                      "anything but its five arguments?")
    bf16 = next(cases)
    if not bf16.matches():
        raise Failed(f"right with float16 values, wrong on {bf16.what}: convert p to v's own dtype "
                      "(p.to(v.dtype)), whatever it is, and keep acc in float32")
    unseen = next(cases)
    if not unseen.matches():
        hidden = torch.isinf(unseen.s).all(1)
        rows = _row_span(hidden)
        if not unseen.matches(rows=~hidden):
            raise Failed(f"wrong on {unseen.what}, though right on the same block later: the rows that see a key "
                          "here must not depend on m_i being -inf")
        m, l, acc = unseen.m[hidden], unseen.l[hidden], unseen.acc[hidden]
        if not torch.isfinite(torch.cat([l, acc.flatten()])).all():
            raise Failed(f"on {unseen.what}: {rows}, which has seen no key yet, comes out nan: there the new maximum "
                          "is -inf too, and m_i - m_new and s - m_new are -inf - (-inf). Such a row must come out as "
                          "it went in, m = -inf, l = 0, acc = 0 (a loop may visit the blocks in any order): where the "
                          "new maximum is still -inf, shift by a finite number instead, and return m as it is")
        if torch.isfinite(m).any():
            raise Failed(f"on {unseen.what}: {rows}, which has seen no key yet, comes back with m = "
                          f"{float(m[torch.isfinite(m)][0]):g}, not -inf: a row without a visible key has no maximum "
                          "yet. Returned as a number, it acts as a floor under the next blocks' scores (all-negative "
                          "scores then vanish): shift by a finite number where the maximum is -inf, but return m "
                          "as -inf")
        raise Failed(f"wrong on {unseen.what}: {rows}, which has seen no key yet, must come out as it went in: "
                      "m = -inf, l = 0, acc = 0")


@exercise("softmax_step", "Write softmax_step above: the online-softmax update of one block of keys")
def check_softmax_step(softmax_step) -> str:
    """Check a ``@triton.jit`` ``softmax_step(m_i, l_i, acc, s, v)`` as the update of
    ``attention.attention_kernel``: first one call on seven states (a later block where the maximum grows
    in some rows only, the first block, masked scores with a row all masked, all-negative scores, exact
    powers of two that hold acc to float32's precision, bfloat16 values, the masked block as a first block),
    each returned value and its
    dtype compared with float64 and float32; then inside the course's kernel on ordinary scores, on
    scores of ±thousands, on scores all shifted by about -1000 and under a causal mask."""
    from course import attention

    require_jit("softmax_step", softmax_step, ("m_i", "l_i", "acc", "s", "v"))
    _refuse_borrowed("softmax_step", softmax_step, "softmax_step")
    _refuse_builtin_minmax("softmax_step", softmax_step, params_are_blocks=True)
    _refuse_python_if_on_block("softmax_step", softmax_step, params_are_blocks=True)
    _diagnose_step(_step_cases(softmax_step))

    # then the course's kernel with this update, 64 queries (2 programs) and 64 keys in 4 blocks
    config = dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1)
    gen = torch.Generator().manual_seed(0)

    def run(what, q, k, v, causal=False):
        to = lambda t: t[None, None].to(runtime.DEVICE)  # noqa: E731  (one batch, one head)
        try:
            out = attention.attention(to(q), to(k), to(v), causal=causal, step=softmax_step, config=config)
        except Exception as err:
            raise explain_error(user_error(f"on {what}, inside the attention kernel, your softmax_step", err),
                                _STEP_SHAPES, "softmax_step returns three values: (m, l, acc)") from None
        got = out[0, 0].cpu().double()
        want = attention.reference(q[None, None], k[None, None], v[None, None], causal=causal)[0, 0]
        if not close(got, want):
            raise Failed(f"right on one call, but the course's kernel with your update is "
                          f"{'inf or nan' if not torch.isfinite(got).all() else 'wrong'} on {what}: does it "
                          "depend on anything but its five arguments?")

    q = torch.randn(64, 64, generator=gen).half()
    k = (torch.randn(64, 64, generator=gen) * torch.linspace(0.5, 2.5, 64)[:, None]).half()  # the maximum grows
    v = torch.randn(64, 64, generator=gen).half()
    run("ordinary scores", q, k, v)
    run("scores of +thousands", q * 200, k, v)
    run("scores of -thousands", q * -200, k, v)
    shifted_q, shifted_k = q.clone(), k.clone()  # the last dimension adds about -1000 (base 2) to every score
    shifted_q[:, -1] = -1000 * 8 / LOG2E - torch.arange(64) * 4
    shifted_k[:, -1] = 1
    run("scores all shifted by about -1000", shifted_q, shifted_k, v)
    run("a causal mask", q, k, v, causal=True)
    return ("the online softmax is right on a later block, the first, a masked one (later and first), an "
            "all-negative, an exact and a bfloat16 one (acc kept in float32), and in the course's kernel on "
            "ordinary, ±thousands, shifted and causal scores")


# --- exercise 2: flash_forward, the whole forward loop for one block of queries ----------------------

_FLASH_PARAMS = ("Q", "K", "V", "O", "L", "sm_scale", "S_Q", "S_K", "stride_qs", "stride_qd", "stride_ks",
                 "stride_kd", "stride_vs", "stride_vd", "stride_os", "stride_od", "stride_l", "HEAD_DIM",
                 "BLOCK_M", "BLOCK_N", "CAUSAL")
_O_UNWRITTEN = 30000.0  # what O's buffer holds before the launch (exact in float16; no attention output is near it)
_L_UNWRITTEN = -123456.0  # L's
_GUARD = 64  # rows (or columns) of slack after every operand: NaN after the inputs, the sentinel after O and L
_FLASH_SHAPES = ("q is [BLOCK_M, HEAD_DIM], the block of Kᵀ [HEAD_DIM, BLOCK_N], s [BLOCK_M, BLOCK_N], "
                 "v [BLOCK_N, HEAD_DIM]; m and l [BLOCK_M] (reductions along axis 1), acc [BLOCK_M, HEAD_DIM]")


@dataclasses.dataclass(frozen=True)
class _Case:
    what: str
    S_Q: int
    S_K: int
    d: int
    bm: int
    bn: int
    causal: bool
    kind: str = "plain"  # "thousands", "shifted" (all-negative), "strided"
    seed: int = 0

    @property
    def scale(self) -> float:
        if self.kind == "thousands":  # sm_scale · log2(e) = 1/8: q pre-scaled in float16 (Triton's tutorial's
            return LN2 / 8  # q = (q * qk_scale).to(tl.float16)) stays exact, and the case tests overflow alone
        return 1.25 / math.sqrt(self.d)  # not the default 1/sqrt(d): sm_scale must be used


# Smallest first; block sizes and head dims differ so that a swapped axis cannot pass.
_CASES = [
    _Case("one block of queries and one of keys (32 queries, 16 keys, d = 32)", 32, 16, 32, 32, 16, False),
    _Case("several blocks of keys (64 queries and keys, d = 64)", 64, 64, 64, 32, 16, False, seed=1),
    _Case("lengths no multiple of the blocks (50 queries, 37 keys, d = 32)", 50, 37, 32, 32, 16, False, seed=2),
    _Case("more keys than queries, no mask (40 queries, 100 keys, d = 32)", 40, 100, 32, 32, 16, False, seed=8),
    _Case("a causal mask (70 queries and keys, d = 16, BLOCK_M = 16, BLOCK_N = 32)", 70, 70, 16, 16, 32, True,
          seed=3),
    _Case("a causal mask with more keys than queries (45 queries, 60 keys, d = 32)", 45, 60, 32, 32, 16, True,
          seed=4),
    # the rows past the last key see every key j <= i, the padding of the last key block too, unless S_K masks it
    _Case("a causal mask with fewer keys than queries (60 queries, 40 keys, d = 32)", 60, 40, 32, 32, 16, True,
          seed=9),
    _Case("scores of ±thousands (64 queries and keys, d = 64)", 64, 64, 64, 32, 16, False, "thousands", seed=5),
    _Case("all-negative scores, each row's shifted by about -1000 (causal, 64 queries and keys, d = 16)",
          64, 64, 16, 32, 16, True, "shifted", seed=6),
    _Case("non-unit strides on every operand: Q every other column, K stored transposed, V with padded rows, "
          "O transposed, L every other element (causal, 72 queries, 40 keys, d = 32)", 72, 40, 32, 32, 16, True,
          "strided", seed=7),
]


def _flash_inputs(case: _Case):
    """Q, K, V (float16, CPU) for a case: later keys larger, so that the running maximum grows."""
    gen = torch.Generator().manual_seed(1100 + case.seed)
    q = torch.randn(case.S_Q, case.d, generator=gen)
    k = torch.randn(case.S_K, case.d, generator=gen) * torch.linspace(0.5, 2.5, case.S_K)[:, None]
    v = torch.randn(case.S_K, case.d, generator=gen)
    if case.kind == "thousands":
        q = q * 360
    if case.kind == "shifted":  # softmax does not change when a row's scores all move by one amount
        q[:, -1] = -(1000 + 3 * torch.arange(case.S_Q)) / (case.scale * LOG2E)
        k[:, -1] = 1
    return q.half(), k.half(), v.half()


def _placed(t: torch.Tensor, layout: str, fill: float):
    """``t`` copied into a view of a larger buffer filled with ``fill``, in ``layout``: "rows" (contiguous rows,
    slack rows after), "every other column", "transposed" (stored column-major), "padded rows"; for a vector
    "contiguous" or "every other element". Returns (view, buffer)."""
    dev = runtime.DEVICE
    if t.dim() == 1:
        n = t.shape[0]
        if layout == "every other element":
            buffer = torch.full((2 * (n + _GUARD),), fill, dtype=t.dtype, device=dev)
            view = buffer[:2 * n:2]
        else:
            buffer = torch.full((n + _GUARD,), fill, dtype=t.dtype, device=dev)
            view = buffer[:n]
    else:
        rows, cols = t.shape
        if layout == "every other column":
            buffer = torch.full((rows + _GUARD, 2 * cols), fill, dtype=t.dtype, device=dev)
            view = buffer[:rows, ::2]
        elif layout == "transposed":
            buffer = torch.full((cols, rows + _GUARD), fill, dtype=t.dtype, device=dev)
            view = buffer[:, :rows].T
        elif layout == "padded rows":
            buffer = torch.full((rows + _GUARD, cols + 8), fill, dtype=t.dtype, device=dev)
            view = buffer[:rows, :cols]
        else:
            buffer = torch.full((rows + _GUARD, cols), fill, dtype=t.dtype, device=dev)
            view = buffer[:rows]
    view.copy_(t)
    return view, buffer


_STRIDED = dict(Q="every other column", K="transposed", V="padded rows", O="transposed", L="every other element")
_STORED = {"every other column": "every other column", "transposed": "transposed", "padded rows": "with padded rows",
           "every other element": "every other element"}  # "Q is stored ..."


@dataclasses.dataclass
class _Flash:
    """One launch of the learner's kernel on a case: what it wrote, and the float64 inputs."""

    case: _Case
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    o: torch.Tensor  # float64, the S_Q x d view
    l: torch.Tensor  # float64, S_Q
    o_spill: int  # elements of O's buffer written outside O
    l_spill: int
    layouts: dict
    stray: tuple | None = None  # the first load outside Q's, K's or V's own elements: (name, "past" or "between", rows)

    def model(self, variant: str = "right", scale: float | None = None, rounding: str | None = None):
        return _flash_model(self.q, self.k, self.v, self.case.scale if scale is None else scale, self.case.causal,
                            self.case.bm, self.case.bn, variant, rounding)

    def o_matches(self, variant: str = "right", scale: float | None = None, rounding: str | None = None) -> bool:
        return _rows_close(self.o, self.model(variant, scale, rounding)[0])

    def l_matches(self, lse: torch.Tensor) -> bool:
        """L within what the computation allows: 64 ulps of float32 of the largest magnitude in the row's sums,
        plus what rounding q (or k) to float16 after scaling it (``q = (q * qk_scale).to(tl.float16)``, a
        legitimate choice) moves it: each score s_ij by up to 2^-11 sm_scale |q_i|·|k_j|, so L_i by up to
        2^-11 sm_scale Σ_j p_ij |q_i|·|k_j| (p: the softmax weights; a quarter more for the second order).
        On scores of ±thousands sm_scale · log2(e) is 1/8, so that rounding is exact: float32's alone there."""
        c = self.case
        size = c.scale * (self.q.abs() @ self.k.abs().T)
        s = (self.q @ self.k.T * c.scale).masked_fill(_hidden(c.S_Q, self.k.shape[0], c.causal), -math.inf)
        scaled_in_float16 = 0.0 if c.kind == "thousands" else 1.25 * 2.0 ** -11 * (torch.softmax(s, 1) * size).sum(1)
        return _same(self.l, lse, 1.0, 64 * EPS32 * (size.max(1).values + lse.abs() + 1) + scaled_in_float16)


    def l_close16(self, lse: torch.Tensor) -> bool:
        """L within what scores rounded to 16 bits allow (a few units of 2^-11 of each row's largest product
        magnitude), but not within float32's: how to tell a precision slip from another mistake in L."""
        size = self.case.scale * (self.q.abs() @ self.k.abs().T)
        return _same(self.l, lse, 1.0, 16 * 2.0 ** -11 * size.max(1).values + 64 * EPS32 * (lse.abs() + 1))


# What rounds to 16 bits on the way (model's ``rounding``), and where the ✗ says it is
_ROUNDINGS = (
    ("scores", "the scores themselves are (a .to(tl.float16) of s): keep them in float32 up to exp2; only p is "
               "converted, to V's dtype, for P V"),
    ("product", "Q Kᵀ is, before its scale (tl.dot(..., out_dtype=tl.float16), or a .to(tl.float16) of its "
                "result): keep tl.dot's result in float32"),
    ("output", "O is rounded to bfloat16 before its store: convert the output to O's own dtype "
               "(O.dtype.element_ty), float16 here"),
    ("output, truncated", "O is rounded to bfloat16 before its store: convert the output to O's own dtype "
                          "(O.dtype.element_ty), float16 here"),
)


def _hidden(S_Q: int, S_K: int, causal: bool) -> torch.Tensor:
    """[S_Q, S_K]: True where query i does not see key j (j > i under the causal mask)."""
    i, j = torch.arange(S_Q)[:, None], torch.arange(S_K)[None, :]
    return (j > i) if causal else torch.zeros(S_Q, S_K, dtype=torch.bool)


def _rows_close(got: torch.Tensor, want: torch.Tensor, tol: float | None = None) -> bool:
    """Every row within float16's tolerance of ``want``'s (relative, row by row), no NaN or inf."""
    from course.check import tolerance

    if got.shape != want.shape or not torch.isfinite(got).all() or not torch.isfinite(want).all():
        return False
    tol = tolerance(torch.float16) if tol is None else tol
    err = torch.linalg.vector_norm(got - want, dim=1)
    return bool((err <= tol * torch.linalg.vector_norm(want, dim=1) + 1e-12).all())


def _flash_model(q, k, v, scale, causal, bm, bn, variant="right", rounding=None):
    """(out, lse) in float64, the keys walked ``bn`` at a time as the kernel does: written right, or with
    one of the usual mistakes (``variant``), or with something rounded to 16 bits on the way (``rounding``):
    "product" Q Kᵀ to float16 before its scale, "scores" the scaled scores to float16, "output" O to bfloat16
    before the store (to nearest; "output, truncated" toward 0)."""
    (S_Q, d), S_K = q.shape, k.shape[0]
    if variant == "Q masked with S_K":  # Q's load masked with the keys' length: its rows past S_K are 0
        q = torch.where(torch.arange(S_Q)[:, None] < S_K, q, torch.zeros_like(q))
    if variant == "Q's last row dropped":  # Q's load masked with rows < S_Q - 1: the last query is 0
        q = torch.where(torch.arange(S_Q)[:, None] < S_Q - 1, q, torch.zeros_like(q))
    if variant == "keys past S_K":  # the last block's padding keys loaded as 0 and never masked: score 0, value 0
        pad = -k.shape[0] % bn
        k, v = torch.cat([k, k.new_zeros(pad, d)]), torch.cat([v, v.new_zeros(pad, d)])
    i, j = torch.arange(S_Q)[:, None], torch.arange(k.shape[0])[None, :]
    visible = torch.ones(S_Q, k.shape[0], dtype=torch.bool)
    if variant == "keys up to S_Q":  # the loop over the keys runs to S_Q: the keys of its blocks, whole
        visible = j < -(-S_Q // bn) * bn
    if variant == "last key block dropped":  # the loop runs to S_K // BLOCK_N * BLOCK_N
        visible = j < S_K // bn * bn
    if causal:
        read = -(-(i // bm + 1) * bm // bn) * bn  # the keys of the blocks up to the diagonal's, whole
        read_skipping = -(-torch.clamp((i // bm + 1) * bm, max=S_K) // bn) * bn  # the same, the loop ending at S_K
        visible = visible & {
            "no causal mask": visible, "diagonal unmasked": j < read, "mask transposed": j >= i,
            "bottom-right": j <= i + S_K - S_Q,
            "bottom-right, blocks skipped": (j <= i + S_K - S_Q) & (j < read_skipping),
            "causal end in BLOCK_N": (j <= i) & (j < (i // bm + 1) * bn)}.get(variant, j <= i)
    if rounding == "product":
        s = (q @ k.T).half().double() * (scale * LOG2E)
    elif rounding == "scores":
        s = (q @ k.T * scale * LOG2E).half().double()
    else:
        s = q @ k.T * scale * LOG2E
    s = s.masked_fill(~visible, -math.inf)
    m = torch.full((S_Q,), -math.inf, dtype=torch.float64)
    l = torch.zeros(S_Q, dtype=torch.float64)
    acc = torch.zeros(S_Q, d, dtype=torch.float64)
    for start in range(0, k.shape[0], bn):
        block = s[:, start:start + bn]
        m_new = torch.maximum(m, block.max(1).values)
        alpha = torch.exp2(m - m_new)
        p = torch.exp2(block - m_new[:, None])
        l = l * (1 if variant == "sum not rescaled" else alpha) + p.sum(1)
        acc = acc * (1 if variant == "output not rescaled" else alpha[:, None]) + p @ v[start:start + bn]
        if variant in ("normalized in the loop", "normalized twice"):  # acc divided by l at every block
            acc = acc / l[:, None]
        m = m_new
    out = acc if variant in ("not divided", "normalized in the loop") else acc / l[:, None]
    if rounding == "output":  # to nearest, as a GPU converts
        out = out.bfloat16().double()
    if rounding == "output, truncated":  # toward 0, as Triton's interpreter converts float32 to bfloat16
        out = (out.float().view(torch.int32) & -65536).view(torch.float32).double()
    return out, (m + torch.log2(l)) * LN2


def _float32_scalar(x: float):
    """``x`` as the kernel gets a float argument: compiled, a float32 scalar; under the interpreter a Python float
    stays one (no ``.to``, and ``q * x`` stays float16), so it is given as a float32 scalar there too."""
    if not runtime.INTERPRET:
        return x
    import numpy as np
    from triton.runtime import interpreter

    return tl.tensor(interpreter.TensorHandle(np.array([x], dtype=np.float32), tl.float32), tl.float32)


class _InputReads(contextlib.AbstractContextManager):
    """Under the interpreter (on the CPU), watch a launch's loads from the buffers of Q, K and V and keep the first
    that reads an element of a buffer that is not its operand's: past its last row (a missing mask: the whole
    rows are read), or anywhere else (a wrong stride). Results can still be right when those values never
    reach O, but on a GPU such a read may fault. ``buffers``: {name: (buffer, view)}."""

    def __init__(self, buffers: dict):
        self.buffers = buffers
        self.stray = None  # (name, "past" or "between", how many rows past the end)

    def __enter__(self):
        import numpy as np

        self._watch = watching_loads(self._see)
        self._regions = []
        if runtime.INTERPRET and runtime.DEVICE == "cpu":
            for name, (buffer, view) in self.buffers.items():
                rows, cols = view.shape
                lattice = np.full(buffer.numel(), -1, dtype=np.int64)  # each element's row, past the end too
                i, j = torch.arange(rows + _GUARD)[:, None], torch.arange(cols)[None, :]
                where = view.storage_offset() - buffer.storage_offset() + i * view.stride(0) + j * view.stride(1)
                inside = where < buffer.numel()
                lattice[where[inside].numpy()] = i.expand_as(where)[inside].numpy()
                start = buffer.data_ptr()
                self._regions.append((name, start, start + buffer.numel() * buffer.element_size(),
                                      buffer.element_size(), lattice, rows, cols))
        self._watch.__enter__()
        return self

    def _see(self, addresses):
        import numpy as np

        if self.stray is not None:
            return
        for name, start, end, size, lattice, rows, cols in self._regions:
            index = ((addresses[(addresses >= start) & (addresses < end)] - np.uint64(start))
                     // np.uint64(size)).astype(np.int64)
            row = lattice[index]
            stray = (row < 0) | (row >= rows)
            if stray.any():
                past = np.unique(row[stray])
                whole = past.min() >= 0 and all(np.unique(index[row == r]).size == cols for r in past)
                self.stray = (name, "past" if whole else "between", int(past.size))
                break

    def __exit__(self, *exc):
        return self._watch.__exit__(*exc)


def _launch(kernel, case: _Case, layouts: dict | None = None, guard: float = math.nan) -> _Flash:
    """Launch the learner's kernel on ``case`` (grid: one program per BLOCK_M queries), every operand in a
    buffer with slack (``guard`` after the inputs, a sentinel after O and L)."""
    layouts = layouts or {}
    q, k, v = _flash_inputs(case)
    qv, q_buf = _placed(q, layouts.get("Q", "rows"), guard)
    kv, k_buf = _placed(k, layouts.get("K", "rows"), guard)
    vv, v_buf = _placed(v, layouts.get("V", "rows"), guard)
    ov, o_buf = _placed(torch.full((case.S_Q, case.d), _O_UNWRITTEN, dtype=torch.float16),
                        layouts.get("O", "rows"), _O_UNWRITTEN)
    lv, l_buf = _placed(torch.full((case.S_Q,), _L_UNWRITTEN), layouts.get("L", "contiguous"), _L_UNWRITTEN)
    reads = _InputReads(dict(Q=(q_buf, qv), K=(k_buf, kv), V=(v_buf, vv)))
    try:
        with launches() as seen, reads:
            kernel[(triton.cdiv(case.S_Q, case.bm),)](
                qv, kv, vv, ov, lv, _float32_scalar(case.scale), case.S_Q, case.S_K, *qv.stride(), *kv.stride(),
                *vv.stride(), *ov.stride(), lv.stride(0), HEAD_DIM=case.d, BLOCK_M=case.bm, BLOCK_N=case.bn,
                CAUSAL=case.causal)
        if runtime.DEVICE == "cuda":
            torch.cuda.synchronize()
    except Exception as err:
        raise explain_error(user_error(f"on {case.what}, your kernel", err), _FLASH_SHAPES) from None
    if seen.stubs:
        raise NotAttempted
    o_spill = int((o_buf != _O_UNWRITTEN).sum()) - int((ov != _O_UNWRITTEN).sum())
    l_spill = int((l_buf != _L_UNWRITTEN).sum()) - int((lv != _L_UNWRITTEN).sum())
    return _Flash(case, q.double(), k.double(), v.double(), ov.double().cpu(), lv.double().cpu(), o_spill, l_spill,
                  layouts, reads.stray)


def _row_span(rows: torch.Tensor) -> str:
    """Row numbers (a bool per row) in words: "row 5", "rows 48 to 69", "12 rows from row 3"."""
    idx = rows.nonzero().flatten().tolist()
    if len(idx) == 1:
        return f"row {idx[0]}"
    if idx[-1] - idx[0] + 1 == len(idx):
        return f"rows {idx[0]} to {idx[-1]}"
    return f"{len(idx)} rows from row {idx[0]}"


_OWN_STRIDES = {"Q": "stride_qs, stride_qd", "K": "stride_ks, stride_kd", "V": "stride_vs, stride_vd",
                "O": "stride_os, stride_od", "L": "stride_l"}


def _diagnose_reads(r: _Flash) -> None:
    """A load read an element of Q's, K's or V's buffer that is not the operand's (under the interpreter)."""
    if r.stray is None:
        return
    c = r.case
    name, kind, rows = r.stray
    if kind == "past":
        what, mask = {"Q": (f"{plural(rows, 'row')} past S_Q", "mask Q's load with rows < S_Q, other=0.0"),
                      "K": (f"{plural(rows, 'key')} past S_K", "mask K's load with the key index < S_K, other=0.0"),
                      "V": (f"{plural(rows, 'row')} past S_K",
                            "mask V's load with the key index < S_K, other=0.0")}[name]
        raise Failed(f"on {c.what}: the load of {name} reads {what}, which do not exist: {mask}. Here NaN lies "
                      "beyond; on a GPU such a read may fault, even where its values never reach O")
    layout = r.layouts.get(name, "rows")
    stored = f" ({name} is stored {_STORED[layout]} here)" if layout != "rows" else ""
    raise Failed(f"on {c.what}: the load of {name} reads places that are not {name}'s elements{stored}: address {name} "
                  f"with its own strides ({_OWN_STRIDES[name]}), each with its own index (rows or keys, then columns), "
                  "never with HEAD_DIM, the lengths, 1 or another operand's strides")


def _diagnose_writes(r: _Flash) -> None:
    c = r.case
    if r.o_spill:
        raise Failed(f"on {c.what}: the store wrote {plural(r.o_spill, 'element')} outside O (rows past S_Q, or "
                      "another layout's places): mask the store with rows < S_Q and use stride_os, stride_od")
    if r.l_spill:
        raise Failed(f"on {c.what}: {plural(r.l_spill, 'value')} of L landed outside L: mask its store with "
                      "rows < S_Q, at L + rows * stride_l")
    unwritten = (r.o == _O_UNWRITTEN).any(1)
    if unwritten.all():
        raise Failed(f"on {c.what}: nothing was stored into O: end with tl.store of acc / l (converted to O's dtype) "
                      "at O + rows * stride_os + columns * stride_od")
    past_keys = torch.arange(c.S_Q) >= c.S_K  # the rows a mask with the keys' length leaves out
    if unwritten.any() and torch.equal(unwritten, past_keys):
        raise Failed(f"on {c.what}: {_row_span(unwritten)} of O were never stored: they are the rows from S_K on; "
                      "the store is masked with the keys' length, S_K. O has S_Q rows: mask its store with "
                      "rows < S_Q")
    if unwritten.any():
        last_block = torch.arange(c.S_Q) >= c.S_Q // c.bm * c.bm
        why = (" (the last, partial block of queries: store it with the mask rows < S_Q)"
               if torch.equal(unwritten, last_block) else ": each program owns rows "
               "tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M) and stores all of them that are < S_Q")
        raise Failed(f"on {c.what}: {_row_span(unwritten)} of O were never stored{why}")
    if (r.l == _L_UNWRITTEN).all():
        raise Failed(f"on {c.what}: O is stored but L is not: store each row's log-sum-exp at L + rows * stride_l")
    if (r.l == _L_UNWRITTEN).any() and torch.equal(r.l == _L_UNWRITTEN, past_keys):
        raise Failed(f"on {c.what}: L of {_row_span(r.l == _L_UNWRITTEN)} was never stored: they are the rows from "
                      "S_K on; L's store is masked with the keys' length, S_K. L has S_Q rows: mask its store with "
                      "rows < S_Q")
    if (r.l == _L_UNWRITTEN).any():
        raise Failed(f"on {c.what}: L of {_row_span(r.l == _L_UNWRITTEN)} was never stored")


def _diagnose_nan(kernel, r: _Flash) -> None:
    """The output has inf or NaN in some rows: say why."""
    from course.exercises import core

    c = r.case
    bad = ~torch.isfinite(r.o).all(1)
    if core.UNFILLED_LOADS:  # under the interpreter the masked-off lanes of a load without other= are inf
        raise Failed(f"on {c.what}: inf or nan in {_row_span(bad)}: a load is masked without other=, and the lanes it "
                      "masks off reach tl.dot (a masked score gives p = 0, but 0 × inf is NaN; on a GPU they hold anything)")
    zeros = _launch(kernel, c, r.layouts, guard=0.0)  # the same with 0 instead of NaN past every input
    if torch.isfinite(zeros.o).all():
        if _rows_close(zeros.o, r.model()[0]) and (c.S_Q % c.bm or c.S_K % c.bn):
            raise Failed(f"on {c.what}: inf or nan in {_row_span(bad)}: a load reads past the last key (or query) "
                          "without a mask; here NaN lies beyond. Mask the loads of K and V with cols < S_K and Q's "
                          "with rows < S_Q, other=0.0")
        raise Failed(f"on {c.what}: inf or nan in {_row_span(bad)}: a load reads past the end of Q, K or V (here NaN "
                      "lies beyond them). Check the loads' offsets: rows and columns of each operand with its own "
                      "strides, and the block of Kᵀ as [HEAD_DIM, BLOCK_N]")
    if c.causal:
        i = torch.arange(c.S_Q)
        if torch.equal(bad, i == 0):
            raise Failed(f"on {c.what}: row 0 is inf or nan: it sees key 0, itself. Query i sees the keys j <= i, "
                          "its own included")
        if torch.equal(bad, i < min(c.bm, c.S_Q)):
            raise Failed(f"on {c.what}: the first block of queries is inf or nan: its keys lie on the diagonal. The "
                          "block on the diagonal must be read (with the mask j <= i); only the blocks past it can "
                          "be skipped")
        out = r.model("mask transposed")[0]
        if torch.equal(~torch.isfinite(out).all(1), bad) and _rows_close(r.o[~bad], out[~bad]):
            raise Failed(f"on {c.what}: the causal mask is the wrong way round: query i sees the keys j <= i (the "
                          f"past), not j >= i; {_row_span(bad)} see no key in their first block, hence the nan")
    if c.kind == "thousands":
        raise Failed(f"on {c.what}: inf or nan in {_row_span(bad)}: exp2 of a score that is not shifted by its "
                      "row's running maximum overflows (or underflows to 0); shift by the new maximum before "
                      "every exp2")
    if c.kind == "shifted":
        raise Failed(f"on {c.what}: inf or nan in {_row_span(bad)}, so l came out 0: the running maximum must "
                      "start at -inf and follow the scores wherever they are (not be held at 0 or any other "
                      "floor): every exp2 then sees at least one term of 1")
    raise Failed(f"on {c.what}: inf or nan in {_row_span(bad)}: m starts at -inf, l and acc at 0; every exp2 "
                  "subtracts the new running maximum, and where that is still -inf (a row that has seen no key yet, "
                  "as when the loop reads a block past the diagonal first) a finite number instead; masked scores "
                  "are -inf (never masked to -inf - -inf)")


_CAUSAL_ONLY = ("no causal mask", "diagonal unmasked", "mask transposed", "bottom-right",
                "bottom-right, blocks skipped", "causal end in BLOCK_N")


def _diagnose_values(r: _Flash) -> None:
    """O is finite but wrong, or O is right and L is not: name the mistake."""
    c = r.case
    ln2, sqrt_d = LN2, math.sqrt(c.d)
    if not r.o_matches():
        for variant, scale, message in (
                ("right", 1 / sqrt_d, "the scores are scaled by 1/sqrt(HEAD_DIM), not by sm_scale: use the "
                                      "sm_scale the kernel is given"),
                ("right", 1.0, "the scores are not scaled: multiply Q Kᵀ by sm_scale"),
                ("right", c.scale * LOG2E, "the scores are in base 2 and then exponentiated with exp: use "
                                           "tl.exp2 with scores times log2(e), or tl.exp without the log2(e)"),
                ("right", c.scale * ln2, "exp2 of scores not converted to base 2: exp2(x) is 2^x, so multiply "
                                         "the scores by log2(e) first (or use tl.exp)"),
                ("right", c.scale ** 2, "the scores are scaled by sm_scale twice (by sm_scale² in all): qk_scale "
                                        "already holds sm_scale, so Q Kᵀ is multiplied by one of them, once"),
                ("output not rescaled", None, "acc is not rescaled when the running maximum grows: its old terms "
                                              "shrink by exp2(m_old - m_new), like l"),
                ("sum not rescaled", None, "l is not rescaled when the running maximum grows: it is a sum of "
                                           "exp2(s - m), so it shrinks by the same factor as acc"),
                ("not divided", None, "the output is not divided by l: acc is a sum weighted by exponentials, "
                                      "normalized once, at the end"),
                ("normalized in the loop", None, "acc is divided by l inside the loop over the keys: the next "
                                                 "blocks then add unnormalized terms to a normalized sum. In the loop "
                                                 "acc is only rescaled (by exp2(m_old - m_new), like l); divide it "
                                                 "by l once, after the loop"),
                ("normalized twice", None, "acc is divided by l inside the loop over the keys, and again after "
                                           "it: in the loop acc is only rescaled (by exp2(m_old - m_new), like "
                                           "l); divide it by l once, after the loop"),
                ("Q masked with S_K", None, f"the rows of Q from S_K on ({c.S_K} here) are loaded as 0: Q's load "
                                            "is masked with the keys' length, S_K. Q has S_Q rows: mask its load "
                                            "with rows < S_Q"),
                ("Q's last row dropped", None, f"the last row of Q (row S_Q - 1 = {c.S_Q - 1} here) is loaded as 0: "
                                               "Q's load mask leaves it out (rows < S_Q - 1?). Q's rows run from 0 "
                                               "to S_Q - 1: mask its load with rows < S_Q"),
                ("keys past S_K", None, "the keys past S_K take part in the softmax (with a score of 0): mask "
                                        "their scores to -inf, not only their loads" + (
                                            ", under the causal mask too: the rows past S_K see the padding of the "
                                            "last block of keys (j <= i), unless the mask also holds j < S_K"
                                            if c.causal else "")),
                ("no causal mask", None, "the causal mask is missing: query i sees only keys j <= i"),
                ("diagonal unmasked", None, "the blocks past the diagonal are skipped, but the block on the "
                                            "diagonal needs the mask j <= i inside it"),
                ("mask transposed", None, "the causal mask is the wrong way round: query i sees the keys j <= i "
                                          "(the past), not j >= i"),
                ("keys up to S_Q", None, "the keys past the first S_Q are never read: the loop over the keys runs "
                                         "over all S_K of them (there may be more keys than queries, or fewer)"),
                ("last key block dropped", None, "the last, partial block of keys is never read: the loop over the "
                                                 "keys must reach every key, its last block only partly full (the "
                                                 "keys past S_K masked)"),
                ("bottom-right", None, "the causal mask is aligned to the last key (j <= i + S_K - S_Q): here query "
                                       "i sees the keys j <= i, counted from the first key whatever the lengths "
                                       "(as torch's is_causal)"),
                ("bottom-right, blocks skipped", None, "the causal mask is aligned to the last key (j <= i + S_K - "
                                                       "S_Q): here query i sees the keys j <= i, counted from the "
                                                       "first key whatever the lengths (as torch's is_causal)"),
                ("causal end in BLOCK_N", None, "under the causal mask the loop over the keys stops before the keys "
                                                "the block's last rows see: its end counts blocks of BLOCK_N keys, "
                                                "but the rows come BLOCK_M to a program")):
            if (variant == "right" or c.causal or variant not in _CAUSAL_ONLY) and r.o_matches(variant, scale):
                raise Failed(f"on {c.what}: {message}")
        want = r.model()[0]
        err = torch.linalg.vector_norm(r.o - want, dim=1) / torch.linalg.vector_norm(want, dim=1)
        bad = err > 2e-3
        for rounding, where16 in _ROUNDINGS:
            if r.o_matches(rounding=rounding):
                raise Failed(f"on {c.what}: O is close to softmax(sm_scale · Q Kᵀ) V (worst row off by "
                              f"{err.max().item():.2g}, relative), but less precise than float32 scores allow: "
                              f"something rounds to 16 bits on the way. Here {where16}")
        if err.max() <= 4 * 2e-3:  # within 4 times float16's tolerance, and no other mistake's replay: precision
            raise Failed(f"on {c.what}: O is close to softmax(sm_scale · Q Kᵀ) V (worst row off by "
                          f"{err.max().item():.2g}, relative), but less precise than float32 scores allow: "
                          "something rounds to 16 bits on the way (Q Kᵀ, the scores, l or O before its store): keep "
                          "everything in float32 up to the store, but the copy of p that goes to tl.dot with V")
        where = ""
        if c.S_Q % c.bm and torch.equal(bad, torch.arange(c.S_Q) >= c.S_Q // c.bm * c.bm):
            where = " (the last, partial block of queries)"
        if err.max() > 8 * 2e-3 and torch.allclose(r.o.flatten().sort().values, want.flatten().sort().values, rtol=0.0,
                          atol=2e-3 * want.abs().max().item()):  # float16's rounding, and a little
            raise Failed(f"on {c.what}: O holds the right values, in the wrong places: the store's addresses are off. "
                          "Element (i, j) of O is at O + i * stride_os + j * stride_od: rows with stride_os, columns "
                          "with stride_od")
        if c.kind == "strided":
            raise Failed(f"on {c.what}: wrong values in {_row_span(bad)}, though contiguous operands are right: "
                          "every address comes from the strides (stride_qs, stride_qd, ...), never from HEAD_DIM "
                          "or the lengths")
        if c.causal:
            likely = ("under the causal mask, query i sees the keys j <= i, counted from the first key whatever "
                      "S_Q and S_K, and every block of keys that holds one of them must be read")
        elif c.kind == "thousands":
            likely = ("at scores of ±thousands every rounding of a score shows: keep q·k and its scale in float32 "
                      "(or scale q by exactly sm_scale · log2(e) before rounding it to float16)")
        elif c.S_K % c.bn:
            likely = "every key must be read, the last, partial block too, with the keys past S_K masked"
        elif c.S_K != c.S_Q:
            likely = "the loop over the keys covers all S_K keys, whatever S_Q"
        else:
            likely = "check the loads' offsets and masks, the scores' scale and each rule of the update"
        verb = "differs" if int(bad.sum()) == 1 else "differ"
        raise Failed(f"on {c.what}: {_row_span(bad)}{where} of O {verb} from softmax(sm_scale · Q Kᵀ) V (worst by "
                      f"{err.max().item():.2g}, relative): {likely}")
    out, lse = r.model()
    if not r.l_matches(lse):
        m_nat = (r.q @ r.k.T * c.scale).masked_fill(_hidden(c.S_Q, r.k.shape[0], c.causal), -math.inf).max(1).values
        for wrong, message in (
                (lse * LOG2E, "L is in base 2: the log-sum-exp is a natural logarithm; m and l count powers of 2, "
                              "so convert their log to base e"),
                (lse - m_nat, "L leaves out the running maximum: l sums exp2(s - m), so log2(l) alone is the "
                              "log-sum-exp minus m"),
                ((lse - m_nat) * LOG2E, "L leaves out the running maximum, and is in base 2: l sums exp2(s - m)"),
                (m_nat * LOG2E + (lse - m_nat), "L adds m in base 2 to a natural log: m counts powers of 2, so "
                                                "convert it to base e too"),
                (m_nat + (lse - m_nat) * LOG2E, "L adds log2(l) to a natural-log maximum: convert log2(l) to base "
                                                "e too")):
            if r.l_matches(wrong):
                raise Failed(f"on {c.what}: O is right, L is not: {message}")
        factor = float((r.l * lse).sum() / (lse * lse).sum())  # L a multiple of the right one: a constant cut short
        if abs(factor - 1) > 1e-6 and r.l_matches(lse * factor):
            raise Failed(f"on {c.what}: O is right, L is not: it is off by a constant factor, about {factor:.5f}: the "
                          "constant that takes a base-2 logarithm back to base e (ln 2) is not exact; write it to "
                          "float32's precision")
        if any(r.l_matches(r.model(rounding=rounding)[1]) for rounding in ("product", "scores")) or r.l_close16(lse):
            raise Failed(f"on {c.what}: O is right, L is not: L is less precise than float32 scores allow: the "
                          "scores pass through 16 bits on the way (tl.dot's out_dtype=tl.float16, or a "
                          ".to(tl.float16) of Q Kᵀ or of the scores). At scores of ±thousands a 16-bit score is off "
                          "by whole units: keep tl.dot's result and the scores in float32")
        raise Failed(f"on {c.what}: O is right, L is not: L[i] is the natural log of Σ exp(sm_scale · q_i·k_j) "
                      "over the keys row i sees, from the final m and l")


def _passes(r: _Flash) -> bool:
    """Whether a launch wrote the right O and L, and read only its operands' elements."""
    try:
        _diagnose_reads(r)
        _diagnose_writes(r)
    except Failed:
        return False
    return bool(torch.isfinite(r.o).all()) and r.o_matches() and r.l_matches(r.model()[1])


def _right(kernel, c: _Case, layouts: dict) -> bool:
    """Whether the kernel is right on ``c`` with ``layouts`` (the other operands contiguous)."""
    return _passes(_launch(kernel, c, layouts))


def _diagnose(kernel, r: _Flash) -> None:
    """A ✗ naming the first thing wrong with what a launch wrote; nothing if it is right."""
    _diagnose_writes(r)
    if not torch.isfinite(r.o).all():
        _diagnose_nan(kernel, r)
    _diagnose_values(r)


def _which_stride(kernel, c: _Case) -> None:
    """The strided case failed: find the operand whose strides are misused, one at a time. When one operand's
    layout alone makes it wrong, but giving another operand the same layout (so the same strides) makes it right
    again, that other operand is addressed with the first one's strides."""
    for name, layout in _STRIDED.items():
        r = _launch(kernel, c, {name: layout})
        _diagnose_reads(r)  # under the interpreter: the operand whose load reads outside its own elements
        if _passes(r):
            continue
        if name != "L":
            for other in ("Q", "K", "V", "O"):
                if other != name and _right(kernel, c, {name: layout, other: layout}):
                    action = "stored" if other == "O" else "loaded"
                    raise Failed(f"on {c.what}: {other} is {action} with {name}'s strides (right when both are "
                                  f"stored {_STORED[layout]}, wrong when only {name} is): address {other} with its own "
                                  f"strides ({_OWN_STRIDES[other]})")
        raise Failed(f"on {c.what}: wrong when {name} is stored {_STORED[layout]} (the other operands contiguous): "
                      f"address {name} with its own strides ({_OWN_STRIDES[name]}), never with HEAD_DIM, the "
                      "lengths, 1 or another operand's strides")


def _skips_above_diagonal(kernel) -> bool:
    """Whether the kernel leaves the key blocks past the diagonal unread: one block of 32 queries, 96 keys,
    causal, the values of keys 32 on NaN (read and masked, they still poison P V with 0 x NaN)."""
    c = _Case("", 32, 96, 32, 32, 16, True)
    q, k, v = _flash_inputs(c)
    v[32:] = math.nan
    dev = runtime.DEVICE
    o = torch.full((32, 32), _O_UNWRITTEN, dtype=torch.float16, device=dev)
    lse = torch.full((32,), _L_UNWRITTEN, device=dev)
    q, k, v = (t.to(dev) for t in (q, k, v))
    try:
        kernel[(1,)](q, k, v, o, lse, _float32_scalar(c.scale), 32, 96, *q.stride(), *k.stride(), *v.stride(),
                     *o.stride(), 1, HEAD_DIM=32, BLOCK_M=32, BLOCK_N=16, CAUSAL=True)
    except Exception:
        return False
    return bool(torch.isfinite(o.float()).all())


@exercise("flash_forward", "Write the body of flash_forward above: one block of queries, the loop over the keys "
                           "with the online softmax, the causal mask, the stores of O and L")
def check_flash_forward(flash_forward) -> str:
    """Check a ``@triton.jit`` kernel ``flash_forward(Q, K, V, O, L, sm_scale, S_Q, S_K, <strides>, HEAD_DIM,
    BLOCK_M, BLOCK_N, CAUSAL)`` that computes one head's attention for BLOCK_M queries a program, and each
    row's log-sum-exp: against float64 on one block, several blocks, ragged lengths, causal masks (lengths
    equal and not), scores of ±thousands, all-negative shifted scores and non-unit strides on every
    operand, head dims 16, 32 and 64, float16. The check launches it itself."""
    require_jit("flash_forward", flash_forward, _FLASH_PARAMS, kind="kernel")
    _refuse_borrowed("flash_forward", flash_forward, "flash_forward", "softmax_step")
    for f, _, _ in _own_functions(flash_forward)[1:]:
        from course.exercises.core import is_stub

        if is_stub(f):
            raise Failed(f"flash_forward calls {f.__name__}, which is still a stub: write it first (or load its "
                          f"solution)")
    _refuse_builtin_minmax("flash_forward", flash_forward, params_are_blocks=False)
    _refuse_python_if_on_block("flash_forward", flash_forward, params_are_blocks=False)
    for case in _CASES:
        r = _launch(flash_forward, case, _STRIDED if case.kind == "strided" else None)
        _diagnose_reads(r)  # under the interpreter: names the operand whose load strays, its layout included
        try:
            _diagnose(flash_forward, r)
        except Failed:
            if case.kind == "strided":
                # first the same sizes with every operand contiguous: a mistake there is not about the strides
                plain = dataclasses.replace(case, kind="plain", what=(
                    f"the strided case's sizes with every operand contiguous ({'causal, ' if case.causal else ''}"
                    f"{case.S_Q} queries, {case.S_K} keys, d = {case.d})"))
                contiguous = _launch(flash_forward, plain)
                _diagnose_reads(contiguous)
                _diagnose(flash_forward, contiguous)
                _which_stride(flash_forward, case)
            raise
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t, lse = torch.empty(128, 64, dtype=torch.float16), torch.empty(128)
        compiles_for_a_gpu(flash_forward, t, t, t, t, lse, 0.125, 128, 128, 64, 1, 64, 1, 64, 1, 64, 1, 1,
                           HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=True)
    skip = ("it skips the key blocks past the diagonal" if _skips_above_diagonal(flash_forward) else
            "it reads the key blocks past the diagonal and masks them: right, though skipping them (as "
            "attention.key_bounds does) saves about half the work")
    return (f"O and L match float64 on {len(_CASES)} cases (one block to ragged lengths, causal, ±thousands, "
            f"all-negative, non-unit strides, head dims 16 to 64); under the causal mask {skip}")
