"""Notebook 08: epilogues and quantized GEMM."""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import inspect
import math
import textwrap

import torch

from course import runtime
from course.exercises.core import (
    Failed,
    close,
    compiles_for_a_gpu,
    exercise,
    require_jit,
    user_error,
)

__all__ = ['check_gelu', 'check_quantize_rows']


# --- what a learner's function takes from elsewhere ----------------------------------------------------------

_MISSING = object()


def _borrowed(name: str, kernel) -> str | None:
    """A ✗ message when the learner's ``@triton.jit`` function ``kernel``, or a ``@triton.jit`` helper of
    theirs, uses torch, the course's own code, the reference solution, libdevice or a plain Python global
    number; None when it uses only Triton and helpers of its own. Read from the source with ``ast``, names
    resolved in the function's globals (local names and comments are never taken for a call)."""
    fn = getattr(kernel, "fn", kernel)
    module = getattr(fn, "__module__", None) or ""
    if module == "course.solutions":
        return None  # the answer key itself
    if module.startswith("course."):
        return (f"{name} is the course's own {module.rsplit('.', 1)[-1]}.{fn.__name__}: the exercise is to write "
                "it yourself")
    seen: set = set()

    def visit(f) -> str | None:
        if f in seen:
            return None
        seen.add(f)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        except (OSError, TypeError, SyntaxError):
            return None
        local = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)) or node.id in local:
                continue
            chain, up = [node.id], parents.get(node)
            while isinstance(up, ast.Attribute):
                chain.append(up.attr)
                up = parents.get(up)
            obj = f.__globals__.get(node.id, getattr(builtins, node.id, _MISSING))
            if obj is _MISSING:
                continue
            if type(obj) in (int, float) and len(chain) == 1:
                return (f"{name} reads the Python global {node.id} = {obj!r}: the interpreter allows it, but a kernel "
                        "compiled for a GPU can only read globals made with tl.constexpr: write "
                        f"{node.id} = tl.constexpr({obj!r}), or the number itself in the function")
            objs = [obj]  # what each prefix of the chain names: tl, tl.extra, tl.extra.cuda, ...
            for attr in chain[1:]:
                nxt = getattr(objs[-1], attr, _MISSING)
                if nxt is _MISSING:
                    if attr == "tanh" and getattr(objs[-1], "__name__", "").startswith("triton"):
                        return (f"{'.'.join(chain[:len(objs) + 1])} does not exist: triton.language has no tanh "
                                "that runs everywhere. Build it from tl.exp, as the exercise says")
                    break
                objs.append(nxt)
            for depth in reversed(range(len(objs))):  # the most precise name first: epilogues.gelu, not epilogues
                said = _foreign(name, ".".join(chain[:depth + 1]), objs[depth])
                if said:
                    return said
            last = objs[-1]
            if hasattr(last, "fn") and hasattr(last, "arg_names"):  # a @triton.jit helper of the learner's
                if not (getattr(last.fn, "__module__", None) or "").startswith("triton"):
                    said = visit(last.fn)
                    if said:
                        return said
        return None

    return visit(fn)


def _foreign(name: str, dotted: str, obj) -> str | None:
    """The ✗ message for one name a learner's function uses, if it comes from where it must not."""
    if inspect.ismodule(obj):
        where = obj.__name__
    elif hasattr(obj, "fn") and hasattr(obj, "arg_names"):
        where = getattr(obj.fn, "__module__", None) or ""
    elif isinstance(obj, torch.Tensor):
        where = "torch"
    elif inspect.isroutine(obj) or inspect.isclass(obj):
        where = getattr(obj, "__module__", None) or ""
    else:
        return None
    real = getattr(getattr(obj, "fn", obj), "__name__", None)
    if not inspect.ismodule(obj) and real and where and f"{where.rsplit('.', 1)[-1]}.{real}" != dotted:
        dotted = f"{where.rsplit('.', 1)[-1]}.{real}, as {dotted}"  # imported under another name
    if "libdevice" in where:
        return (f"{name} uses libdevice ({dotted}), which runs only compiled on a GPU: under the CPU interpreter "
                "its functions return nothing (None). Build it from tl functions (tl.exp, tl.where, tl.abs, "
                "tl.floor, ...) so that it runs everywhere")
    if where == "torch" or where.startswith("torch."):
        return (f"{name} uses torch ({dotted}): torch runs outside kernels, on whole tensors. Inside a "
                "@triton.jit function write it with triton.language (tl.*)")
    if where == "course.solutions":
        return (f"{name} calls the reference solution ({dotted}): write it yourself (exercises.solution(...) "
                "shows the reference, to read)")
    if where == "course" or where.startswith("course."):
        return f"{name} uses the course's own {dotted}: the exercise is to write it yourself"
    return None


# Triton's words for // on a float tile; core's hint for them is about indices, which these kernels divide
# nowhere: here // met a float (a scale, a peak) that / divides.
_FLOOR_DIVISION_OF_A_FLOAT = "unexpected type fp32"


def _user_error(what: str, err: BaseException) -> Failed:
    """:func:`core.user_error`, with a hint for a value that is None (a helper without ``return``) and for
    ``//`` on a float tile."""
    failure = user_error(what, err)
    text = str(failure)
    if _FLOOR_DIVISION_OF_A_FLOAT in text:
        message = text.split("\n  hint:", 1)[0]
        failure = Failed(message + "\n  hint: // is integer division, which Triton refuses on a float tile: the "
                                   "values here are floats (a largest magnitude over 127 is no whole number), "
                                   "so divide them with /")
    elif "NoneType" in text and "hint:" not in text:
        failure = Failed(text + "\n  hint: a value is None: does every @triton.jit helper of yours end "
                                "with return?")
    return failure


# --- gelu ---------------------------------------------------------------------------------------------------

# The check's tolerance for gelu, per element: |got - GELU(x)| <= GELU_TOL * (|x| + |GELU(x)|). Each of the
# dozen float32 operations of a sound formula rounds by at most 2^-24 of its result; the errors of tanh's
# argument and of tanh itself reach the result through 0.5 x (1 + tanh), the last products through GELU(x).
# Measured: the tanh from exp(-2|u|), x * sigmoid(2u) and an exp2 form stay within 1 unit of 2^-24 (|x| +
# |GELU(x)|) under the interpreter; a GPU's tl.exp (ex2.approx) adds about 2. Eight units (2^-21) leave room
# for all of them, and a shortened constant shows: 0.0447 for 0.044715 is 81 units off, 0.79788 for
# sqrt(2 / pi) 19. A constant wrong only in its 6th or 7th digit does not: sqrt(2 / 3.1416) is 4 units off,
# sqrt(2 / 3.14159) 2, 0.797885 2 (the largest effect of a relative slip d of sqrt(2 / pi) is 0.22 d |x|, near
# |x| = 1, so d = 1e-6 is 4 units), no more than a sound formula's own rounding on a GPU: no tolerance and no
# choice of x tells them apart, and the notebook promises only what this tolerance shows.
GELU_TOL = 2.0 ** -21
# Up to this many units off, a formula of the right shape with a constant a little wrong (0.05 for 0.044715 is
# 28000): "close". x * x for x^3 is 500000 units off, sqrt(2 pi) for sqrt(2 / pi) 3 million: not close.
_CLOSE_UNITS = 1e5

# Far from 0, each sign: past 10^13, x^3 overflows float32 (to inf) and tanh's argument with it; 10^30 leaves
# room for a sound formula's last products (0.5 * x * 2). A clamp of x anywhere below 10^30 shows.
_FAR = (50.0, 100.0, 1e3, 1e4, 1e5, 1e10, 1e20, 1e30)
_FAR_WORDS = "10^30"

# Constants mistaken for sqrt(2 / pi) = 0.79788...: (the constant, its name).
_WRONG_FACTORS = [(2.5066282746310002, "sqrt(2 pi)"), (1.2533141373155001, "sqrt(pi / 2)"),
                  (0.3989422804014327, "1 / sqrt(2 pi)"), (0.45015815807855303, "sqrt(2) / pi"),
                  (0.6366197723675814, "2 / pi"), (1.4142135623730951, "sqrt(2)"), (0.7071067811865476, "1 / sqrt(2)")]


_SIXTEEN_BITS = "the values are rounded to 16 bits: keep the tile in float32 (the store converts it)"


def _returns_a_tuple(fn) -> bool:
    """Does ``fn`` itself (not a function inside it) return a tuple, ``return a, b``?"""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(fn, "fn", fn))))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0] if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if body is None:
        return False
    todo, found = list(body.body), False
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            found = True
        todo.extend(ast.iter_child_nodes(node))
    return found


@exercise("gelu", "Write the body of gelu above: the tanh approximation of GELU for a float32 tile x")
def check_gelu(gelu) -> str:
    """Check a ``@triton.jit`` function ``gelu(x)``, the tanh approximation of GELU, at every 1/64 from -12
    to 12 and far out to +-10^30 (each, in a kernel) within 8 units of float32's rounding, then as the
    epilogue of ``epilogues.fused_linear_kernel``."""
    from course import epilogues

    require_jit("gelu", gelu, ("x",))
    borrowed = _borrowed("gelu", gelu)
    if borrowed:
        raise Failed(borrowed)
    if _returns_a_tuple(gelu):
        raise Failed("gelu returns a tuple: an epilogue turns the tile x into one tile, so return one tile, "
                     "the GELU of x")
    near = torch.arange(-12 * 64, 12 * 64 + 1) / 64  # exact in float32; -3 .. -1 is where the constants show
    far = torch.tensor(_FAR)
    x = torch.cat([near, far, -far]).to(runtime.DEVICE)
    try:
        got = epilogues.apply(gelu, x).cpu().double()
    except Exception as err:
        if "cannot convert (" in str(err):  # the interpreter storing a tuple of tiles (a helper's)
            raise Failed("gelu returned a tuple of values: return one tile, the GELU of x") from None
        raise _user_error("applied to a tile, your gelu", err) from None
    xs = x.cpu().double()
    want = torch.nn.functional.gelu(xs, approximate="tanh")

    n = len(near)
    bad = ~torch.isfinite(got)
    if bad.any():
        if torch.isfinite(got[:n]).all() and close(got[:n], want[:n].half().double(), 1e-5):
            raise Failed(_SIXTEEN_BITS + "; float16 ends at 65504, and past it gives inf")
        at = float(xs[bad][0])
        raise Failed(f"gelu({at:g}) is {float(got[bad][0])}: for large |x| an exp overflowed (to inf, and inf / inf "
                      "or inf - inf is nan). Build tanh from an exp that cannot overflow, and mind the sign")
    within = (got - want).abs() <= GELU_TOL * (xs.abs() + want.abs())
    grid = slice(0, n)
    if within[grid].all() and not within[n:].all():
        worst = n + int(torch.nonzero(~within[n:])[0])
        far_x, far_got = xs[n:], got[n:]
        for k in torch.nonzero(~within[n:] & (far_x > 0)).flatten().tolist():  # the same value for another x
            same = (far_got == far_got[k]) & (far_x != far_x[k]) & (far_x > 0)
            if same.any():
                raise Failed(f"right from -12 to 12, but gelu({float(far_x[k]):g}) and gelu({float(far_x[same][0]):g}) "
                             f"are both {float(far_got[k]):.6g}: something in your gelu clamps x, or a value that "
                             "the result follows. An accumulator can hold any float32 value, and the check tries up "
                             f"to {_FAR_WORDS}: clamp nothing that changes the result")
        raise Failed(f"right from -12 to 12, but gelu({float(xs[worst]):g}) is {float(got[worst]):.6g}: far from 0, "
                      "think about what tanh tends to and what your formula does with it")
    if not within.all():
        got, want, xs = got[grid], want[grid], xs[grid]
        if close(got, xs, 1e-5):
            raise Failed("gelu returned its input unchanged: the epilogue must transform the tile")
        if close(got, 2 * want, 1e-5):
            raise Failed("gelu is twice too large: GELU has a factor 0.5 in front")
        if close(got, torch.nn.functional.gelu(xs), 5e-6):
            raise Failed("this is the exact GELU, with erf; write the tanh approximation given above")
        if close(got, want.half().double(), 1e-5):
            raise Failed(_SIXTEEN_BITS)
        if close(got, 0.5 * xs * (1 + torch.tanh(0.7978845608028654 * xs)), 1e-3):
            raise Failed("the cubic term is missing: tanh's argument is sqrt(2 / pi) (x + 0.044715 x^3)")
        u = 0.7978845608028654 * (xs + 0.044715 * xs ** 3)
        if close(got, 0.5 * xs * (1 + torch.tanh(u.abs())), 1e-5):
            raise Failed("wrong for negative x: your tanh lost its sign. tanh is odd, tanh(-u) = -tanh(u): compute "
                          "it for |u| and restore the sign with tl.where")
        if close(got, 0.5 * xs * (1 + torch.tanh(0.7978845608028654 * (xs + 0.044715 * xs * xs))), 1e-5):
            raise Failed("the cubic term is x · x, a square: the formula has x³, x * x * x (odd, like x: negative "
                         "for negative x)")
        for factor, name in _WRONG_FACTORS:
            if close(got, 0.5 * xs * (1 + torch.tanh(factor * (xs + 0.044715 * xs ** 3))), 1e-5):
                raise Failed(f"tanh's argument is multiplied by {name} = {factor:.5g}: read the formula's factor "
                             "again, sqrt(2 / pi)")
        off = (got - want).abs() / (GELU_TOL * (xs.abs() + want.abs())).clamp(min=1e-300)
        worst = int(torch.argmax(off))
        units = float(off[worst]) * 8
        _cut_off(xs, got, want, off * 8)
        if units <= _CLOSE_UNITS:
            raise Failed(f"close, but not GELU's tanh approximation: gelu({float(xs[worst]):g}) is "
                          f"{units:.0f} units of float32's rounding off, where a sound formula stays "
                          "within 8. Check the constants to every digit (0.5, sqrt(2 / pi) = 0.7978845608..., "
                          "0.044715)")
        raise Failed(f"gelu({float(xs[worst]):g}) is {float(got[worst]):.6g}: not GELU's tanh approximation there "
                     f"(off by {abs(float(got[worst] - want[worst])):.2g}, far more than a constant short of a digit "
                     "gives). Compare your formula with the one above, term by term: the powers of x, the "
                     "constants, the signs")
    torch.manual_seed(0)
    a = (30 * torch.randn(50, 70)).half().to(runtime.DEVICE)  # a wide range of accumulator values
    w = torch.randn(40, 70).half().to(runtime.DEVICE)
    bias = torch.randn(40).to(runtime.DEVICE)
    try:
        y = epilogues.linear(a, w, bias, activation=gelu, out_dtype=torch.float32, num_programs=3, block_m=32,
                             block_n=32, block_k=32, num_warps=4, num_stages=2)
    except Exception as err:
        raise _user_error("as the epilogue of fused_linear_kernel, your gelu", err) from None
    if not torch.isfinite(y).all():
        raise Failed("as an epilogue, gelu gave inf or nan on some accumulator values: an exp overflowed. Build "
                      "tanh from an exp that cannot overflow")
    if not close(y, epilogues.reference(a, w, bias, "gelu"), 1e-5):
        raise Failed("right value by value, but wrong as an epilogue: gelu must work on a whole tile at once "
                      "(tl functions, no Python math on single values)")
    return (f"right within 8 units of float32's rounding from -{_FAR_WORDS} to {_FAR_WORDS}, and as the epilogue "
            "of a fused linear layer")


def _cut_off(xs, got, want, units) -> None:
    """A ✗ for a gelu exact (within half the tolerance) for every |x| below some point of 1 or more and wrong
    from there on: a clamp of tanh's argument, a switch to relu or 0 past some |x|. A constant a little wrong
    shows from |x| below 0.8 on, where the error first grows past the tolerance; such a cut-off is exact up
    to the point where it starts, then jumps or drifts off (measured: onsets 1 to 8 with at most 1 unit of
    error below them; shortened constants start to show at 0.02 to 0.77)."""
    wrong = units > 8
    onset = float(xs.abs()[wrong].min())
    if onset < 1 or float(units[xs.abs() < onset].max()) > 4 or float(units.max()) < 30:
        return
    at = torch.nonzero(wrong & (xs.abs() == onset)).flatten().tolist()
    k = max(at, key=lambda i: float(units[i]))
    x, g = float(xs[k]), float(got[k])
    below = float(xs.abs()[xs.abs() < onset].max())
    there = ("there GELU(x) lies a little below x and draws closer to x as x grows" if x > 0 else
             "there GELU(x) is a small negative number that shrinks smoothly toward 0 as x goes further down, "
             "never reaching it")
    raise Failed(f"right for |x| up to {below:g}, then wrong from |x| = {onset:g} on: gelu({x:g}) is {g:.6g}, "
                 f"off by {abs(g - float(want[k])):.2g} ({float(units[k]):.0f} units of float32's rounding); {there}. "
                 "Something in your gelu changes at that point (a clamp, a cut-off, a switch to another formula?): "
                 "the tanh approximation, written once, holds for every x")


# --- quantize_rows --------------------------------------------------------------------------------------------

QUANTIZE_PARAMS = ("X", "Q", "S", "M", "N", "stride_xm", "stride_xn", "stride_qm", "stride_qn", "stride_s",
                   "BLOCK_M", "BLOCK_N")
# Scales: peak / 127 rounded once to float32 is the reference; another order of the same operations (peak *
# (1 / 127), 127 / peak inverted) is at most 2 float32 steps (2^-23 each) away.
SCALE_TOL = 2.0 ** -22
# q: round(x / scale) to the nearest integer, computed in float64 with the reference scale. A float32 x / scale
# (or x * (127 / peak)) is a few float32 steps (2^-24 relative each) from it, so where x / scale lies within
# 2^-20 (relative) of a half-integer, both neighbours are accepted: that is ties (x / scale exactly k + 0.5,
# which may round either way) and the values float32 cannot tell from them; nowhere else.
TIE_BAND = 2.0 ** -20
# Around X: float16 values from 30000 to 58768, larger than most values of the tests and each different from its
# neighbours, so a load from outside X shows in the scale, and where it read shows which mistake it was.
_X_GUARD_LOW = 30000.0
_Q_GUARD = -128  # outside [-127, 127]: never a right answer, so an element still -128 was never stored


@dataclasses.dataclass
class _Case:
    what: str
    values: torch.Tensor  # (M, N) float16, on the CPU
    block_m: int
    block_n: int
    x_layout: str = "rows"  # "rows" (row-major, rows padded), "cols" (column-major) or "spaced" (every third)
    q_layout: str = "rows"
    s_stride: int = 1
    rows: dict = dataclasses.field(default_factory=dict)  # row -> what is special about it (for messages)


def _placed(values: torch.Tensor, layout: str, fill, dtype, pad_m: int, pad_n: int):
    """``values`` (M, N) written into a view of ``layout`` inside a buffer of ``fill``, ``pad_m`` rows and ``pad_n``
    columns larger: (buffer, view, the same view of a boolean "inside" map)."""
    M, N = values.shape
    if layout == "rows":
        shape, select = (M + pad_m, N + pad_n), (lambda t: t[:M, :N])
    elif layout == "cols":
        shape, select = (N + pad_n, M + pad_m), (lambda t: t[:N, :M].t())
    else:  # "spaced": row-major with a column stride of 3
        shape, select = (M + pad_m, 3 * (N + pad_n)), (lambda t: t[:M, 1:3 * N + 1:3])
    buffer = torch.full(shape, fill, dtype=dtype, device=runtime.DEVICE)
    view = select(buffer)
    view.copy_(values.to(device=runtime.DEVICE, dtype=dtype))
    inside = torch.zeros(shape, dtype=torch.bool)
    select(inside).fill_(True)
    return buffer, view, inside


def _quantize_cases() -> list[_Case]:
    """The matrices the check quantizes, smallest first: plain values, then rows longer than a block, hard
    values, strided and transposed layouts, and seeded random shapes."""
    g = torch.Generator().manual_seed(8)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    cases = [_Case("a 3 x 10 matrix in one block (BLOCK_M = 4, BLOCK_N = 16)", randn(3, 10).half(), 4, 16)]

    long = randn(5, 70) * 0.5  # row r has its largest magnitude in block r of 16 columns (the last one ragged)
    long[1:, 1] = -2.0  # the largest magnitude of the first block: no row's largest value
    long[:4, 66] = -3.0  # and of the last block
    for r, (j, sign) in enumerate([(3, 1), (20, -1), (37, 1), (54, -1), (68, -1)]):
        long[r, j] = 4.0 * sign
    cases.append(_Case("a 5 x 70 matrix, rows longer than a block (BLOCK_M = 2, BLOCK_N = 16)", long.half(), 2, 16,
                       rows={r: f"its largest magnitude in columns {16 * r} to {min(16 * r + 15, 69)}"
                             for r in range(5)}))

    hard = torch.zeros(8, 40)
    hard[0] = randn(40)
    # hard[1] stays all zero
    hard[2] = 0.01 * randn(40)
    hard[2, 37] = 1000.0  # one outlier, in the last (ragged) block
    hard[3] = torch.sign(randn(40)) * (20000 + 45504 * torch.rand(40, generator=g))
    hard[3, 5] = -65504.0  # float16's largest
    hard[4] = -(randn(40).abs() + 0.25)
    hard[5] = torch.randint(1, 1024, (40,), generator=g) * 2.0 ** -24 * torch.sign(randn(40))  # float16 subnormals
    ties = [127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5, 126.5, -126.5, 0.50048828125, -0.50048828125,
            2.498046875, -2.498046875]
    hard[6, :len(ties)] = torch.tensor(ties)
    hard[6, len(ties):] = torch.randint(-400, 400, (40 - len(ties),), generator=g) / 4.0
    hard[7] = 30 * torch.rand(40, generator=g)
    hard[7, 22] = -100.0  # the largest magnitude is negative, every other value positive
    cases.append(_Case("8 rows of hard values (BLOCK_M = 4, BLOCK_N = 16)", hard.half(), 4, 16, rows={
        0: "plain values", 1: "all zero", 2: "small values and one outlier of 1000 in the last block",
        3: "huge values, up to 65504 in magnitude", 4: "all negative", 5: "tiny values (float16 subnormals)",
        6: "values a half apart, ties", 7: "its largest magnitude negative, every other value positive"}))

    cases.append(_Case("a 7 x 45 X stored transposed (column-major), Q with a column stride of 3, S with a stride "
                       "of 3 (BLOCK_M = 4, BLOCK_N = 32)", (8 * randn(7, 45)).half(), 4, 32, "cols", "spaced", 3))
    cases.append(_Case("a 9 x 33 X with a column stride of 3, Q stored transposed, S with a stride of 2 "
                       "(BLOCK_M = 8, BLOCK_N = 16)", (0.1 * randn(9, 33)).half(), 8, 16, "spaced", "cols", 2))

    cases.append(_wide_rows_case())

    layouts = ("rows", "cols", "spaced")
    for M, N in ((1, 1), (int(torch.randint(2, 13, (1,), generator=g)), int(torch.randint(17, 100, (1,), generator=g))),
                 (int(torch.randint(2, 13, (1,), generator=g)), int(torch.randint(2, 16, (1,), generator=g)))):
        block_m = (1, 2, 4, 8)[int(torch.randint(0, 4, (1,), generator=g))]
        block_n = (16, 32)[int(torch.randint(0, 2, (1,), generator=g))]
        x_layout, q_layout = (layouts[int(i)] for i in torch.randint(0, 3, (2,), generator=g))
        s_stride = int(torch.randint(1, 4, (1,), generator=g))
        magnitude = 10.0 ** (7 * torch.rand(M, 1, generator=g) - 3)  # 10^-3 .. 10^4, one per row
        values = (magnitude * randn(M, N)).clamp(-65000, 65000).half()
        cases.append(_Case(f"a random {M} x {N} matrix (X {x_layout}, Q {q_layout}, S stride {s_stride}; "
                           f"BLOCK_M = {block_m}, BLOCK_N = {block_n})", values, block_m, block_n, x_layout,
                           q_layout, s_stride))
    return cases


def _wide_rows_case() -> _Case:
    """A 40 x 70 matrix whose blocks of rows are taller than its blocks of columns are wide (BLOCK_M = 32 >
    BLOCK_N = 16): a loop over the columns that steps by BLOCK_M skips columns 16 to 31 and 48 to 63, and each
    row's largest magnitude lies there, its second largest in the columns such a loop does see."""
    g = torch.Generator().manual_seed(80)  # its own seed: the other cases keep their values
    values = (0.5 * torch.randn(40, 70, generator=g)).clamp(-2.0, 2.0)
    for r in range(40):
        sign = 1.0 if r % 3 else -1.0
        values[r, (16 if r % 2 == 0 else 48) + (5 * r) % 16] = 4.0 * sign
        values[r, (32 + r % 16) if r % 2 == 0 else (64 + r % 6)] = -3.0  # never the row's largest value
    return _Case("a 40 x 70 matrix with BLOCK_M = 32 larger than BLOCK_N = 16", values.half(), 32, 16)


def _stepped_by_block_m(case: _Case, N: int) -> torch.Tensor:
    """The columns (of N) that a loop ``for n0 in range(0, N, BLOCK_M)`` over blocks of BLOCK_N columns reaches."""
    j = torch.arange(N)
    return (j % case.block_m) < case.block_n


_STEP_WORDS = ("steps through the columns by BLOCK_M = {m}, but its blocks are BLOCK_N = {n} columns wide, so it "
               "skips columns when BLOCK_M > BLOCK_N: step by BLOCK_N")


_LAYOUT_WORDS = {"rows": "row-major with rows further apart than N", "cols": "column-major",
                 "spaced": "with a column stride of 3"}


@exercise("quantize_rows", "Write the body of quantize_rows_kernel above: int8 values and one float32 scale per "
                           "row of X")
def check_quantize_rows(quantize_rows_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``solutions.quantize_rows_kernel``, launched on
    ``cdiv(M, BLOCK_M)`` programs: ``S[i] = max_j |X[i, j]| / 127`` (1 for an all-zero row) in float32 and
    ``Q[i, j] = round(X[i, j] / S[i])`` in int8, on ragged rows and columns, rows longer than BLOCK_N, hard
    values (all zero, an outlier, huge, tiny, all negative, ties), transposed and strided X, Q and S, and
    seeded random shapes; the scales to 2 float32 steps, the int8 values exactly (either neighbour at a tie).
    An all-zero row divided by its largest magnitude, 0, is turned down: compiled, from its values (a clamp
    makes the NaN -127); under the interpreter, whose NaN becomes 0, from the NaN converted to int8."""
    kernel = quantize_rows_kernel
    require_jit("quantize_rows_kernel", kernel, QUANTIZE_PARAMS, kind="kernel")
    borrowed = _borrowed("quantize_rows_kernel", kernel)
    if borrowed:
        raise Failed(borrowed)
    cases = _quantize_cases()
    for case in cases:
        _run_quantize_case(kernel, case)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        x, q, s = torch.empty(8, 40, dtype=torch.float16), torch.empty(8, 40, dtype=torch.int8), torch.empty(8)
        compiles_for_a_gpu(kernel, x, q, s, 8, 40, 40, 1, 40, 1, 1, BLOCK_M=4, BLOCK_N=16)
    return (f"right on {len(cases)} matrices: ragged rows and columns, rows longer than BLOCK_N, an all-zero row, "
            "an outlier, huge, tiny and tied values, transposed and strided X, Q and S")


def _run_quantize_case(kernel, case: _Case) -> None:
    import triton

    values = case.values
    M, N = values.shape
    pad_m, pad_n = case.block_m + 1 + N, case.block_n + 1 + M  # room for a missing mask or swapped strides
    x_buf, x, x_inside = _placed(values, case.x_layout, 0.0, torch.float16, pad_m, pad_n)
    guard = _X_GUARD_LOW + 32 * (torch.arange(x_buf.numel()) % 900).view(x_buf.shape)
    x_buf[~x_inside.to(x_buf.device)] = guard[~x_inside].to(device=x_buf.device, dtype=x_buf.dtype)
    q_buf, q, q_inside = _placed(torch.full((M, N), _Q_GUARD), case.q_layout, _Q_GUARD, torch.int8, pad_m, pad_n)
    s_buf = torch.full((case.s_stride * (M + pad_m) + 1,), float("nan"), device=runtime.DEVICE)
    s = s_buf[1:1 + case.s_stride * M:case.s_stride]
    s_inside = torch.zeros(s_buf.shape, dtype=torch.bool)
    s_inside[1:1 + case.s_stride * M:case.s_stride] = True
    x_before = x_buf.clone()
    try:
        with _nan_casts() as nans:
            kernel[(triton.cdiv(M, case.block_m),)](x, q, s, M, N, x.stride(0), x.stride(1), q.stride(0),
                                                    q.stride(1), s.stride(0), BLOCK_M=case.block_m,
                                                    BLOCK_N=case.block_n)
    except Exception as err:
        raise _user_error(f"on {case.what}, your kernel", err) from None
    what = case.what
    if not torch.equal(x_buf, x_before):
        raise Failed(f"on {what}: your kernel wrote into X: X is the input, read it only; the results go to Q and S")
    s_buf, q_buf = s_buf.cpu(), q_buf.cpu()
    stray = ~s_inside & ~torch.isnan(s_buf)
    if stray.any():
        at = torch.nonzero(stray).flatten() - 1
        past_m = bool(((at % case.s_stride == 0) & (at // case.s_stride >= M)).all())
        raise Failed(f"on {what}: your kernel stored scales outside S's M elements: " +
                     ("scales for rows past M; mask that store with rows < M" if past_m else
                      "S has a stride of its own, stride_s: the scale of row i goes to S + i * stride_s"))
    stray = ~q_inside & (q_buf != _Q_GUARD)
    if stray.any():
        raise Failed(f"on {what}: your kernel stored int8 values outside Q's M x N elements: "
                     + _where_stray(q, stray, case))
    scale = s.cpu().double()
    unwritten = torch.isnan(scale)
    if unwritten.any():
        i = int(torch.nonzero(unwritten)[0])
        raise Failed(f"on {what}: the scale of row {i} was never stored: every row, in every program, stores "
                      "its scale (rows < M)")
    _diagnose_scales(case, scale, x_before.cpu(), x, q)
    got = q.cpu().long()
    unwritten = got == _Q_GUARD
    if unwritten.any():
        i, j = (int(v) for v in torch.nonzero(unwritten)[0])
        later = j >= case.block_n
        if later and case.block_m > case.block_n and \
                torch.equal(unwritten, ~_stepped_by_block_m(case, N)[None, :].expand(M, N)):
            raise Failed(f"on {what}: q[{i}, {j}] was never stored: the second pass "
                         + _STEP_WORDS.format(m=case.block_m, n=case.block_n))
        raise Failed(f"on {what}: q[{i}, {j}] was never stored" +
                     (f": rows longer than BLOCK_N = {case.block_n} need a loop over all their blocks in the second "
                      "pass too" if later else ": every program stores all of its rows' values (masked, not "
                      "skipped)"))
    _diagnose_q(case, scale, got, x_before.cpu(), x, q)
    zero = torch.nonzero(values.float().abs().amax(dim=1) == 0).flatten()
    if nans and len(zero):  # right values, but from a NaN that became 0 by chance (the interpreter's cast)
        raise _divided_by_zero(case, int(zero[0]), "your kernel converted a NaN, from 0 / 0 (or 0 · inf), to "
                                                   "int8 on this matrix: only this row makes one")


@contextlib.contextmanager
def _nan_casts():
    """Under the interpreter, a list that gets an entry whenever a kernel launched inside the block converts a
    float tile holding a NaN to an integer type; compiled on a GPU, nothing is watched (the list stays empty).

    What a NaN becomes in int8 is not defined: the interpreter (numpy) gives 0, which for an all-zero row is
    the right value, so a kernel that divides such a row by its largest magnitude, 0, would pass there; on a
    GPU, tl.maximum drops a NaN (it keeps the other operand), and the clamp to [-127, 127] stores -127."""
    import numpy as np

    seen: list = []
    if not runtime.INTERPRET:
        yield seen
        return
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    names = ("create_fp_to_si", "create_fp_to_ui")
    saved = {name: builder.__dict__.get(name) for name in names}  # set on the instance by another guard, if any

    def watched(original):
        def cast(src, dst_type):
            data = np.asarray(src.data)
            if data.dtype.kind == "f" and np.isnan(data).any():
                seen.append(dst_type)
            return original(src, dst_type)
        return cast

    for name in names:
        builder.__dict__[name] = watched(getattr(builder, name))
    try:
        yield seen
    finally:
        for name in names:
            if saved[name] is None:
                builder.__dict__.pop(name, None)  # back to the class's method
            else:
                builder.__dict__[name] = saved[name]


def _divided_by_zero(case: _Case, i: int, seen: str) -> Failed:
    """The ✗ for an all-zero row ``i`` divided by its largest magnitude, 0: ``seen`` says how it showed."""
    return Failed(f"on {case.what}: {_row_words(case, i)}: {seen}. What a NaN becomes in int8 is not defined (0 "
                  "under the interpreter; on a GPU tl.maximum drops a NaN, so a clamp gives -127). Never divide "
                  "by this row's largest magnitude, 0: divide by its scale, which is 1 here")


def _where_stray(q, stray: torch.Tensor, case: _Case) -> str:
    """Why stores landed at ``stray`` (a boolean map of Q's buffer) outside Q: past a row's end, past the last
    row, or off Q's strides."""
    M, N = q.shape
    sm, sn, base = q.stride(0), q.stride(1), q.storage_offset()
    rows = torch.arange(M + case.block_m)[:, None]
    cols = torch.arange(N + case.block_n)[None, :]
    at = base + rows * sm + cols * sn
    flat = stray.flatten()

    def positions(where) -> torch.Tensor:  # the buffer's elements that a store of those (row, col) reaches
        chosen = torch.zeros_like(flat)
        reach = at[where]
        chosen[reach[(reach >= 0) & (reach < flat.numel())]] = True
        return chosen

    past_n = positions((rows < M) & (cols >= N))
    past_m = positions((rows >= M) & (cols < N))
    corner = positions((rows >= M) & (cols >= N))
    missed = bool((q.cpu() == _Q_GUARD).any())  # a missing mask alone leaves no element of Q unwritten
    if missed or (flat & ~past_n & ~past_m & ~corner).any():
        return ("off Q's strides: element (i, j) of Q is at Q + i * stride_qm + j * stride_qn (Q's own strides, "
                f"Q {_LAYOUT_WORDS[case.q_layout]} here)")
    if not (flat & (past_m | corner)).any():
        return "past the end of a row (columns N and beyond): mask the store with the columns too, cols < N"
    if not (flat & (past_n | corner)).any():
        return "in rows past M: mask the store with the rows too, rows < M"
    return "past the last row and past the ends of rows: mask the store with rows < M and cols < N"


def _row_words(case: _Case, i: int) -> str:
    return f"row {i}" + (f" ({case.rows[i]})" if i in case.rows else "")


def _diagnose_scales(case: _Case, scale: torch.Tensor, x_buf: torch.Tensor, x: torch.Tensor, q) -> None:
    values = case.values.double()
    M, N = values.shape
    peak = values.abs().amax(dim=1)
    ref = torch.where(peak > 0, (peak / 127).float().double(), torch.ones_like(peak))
    wrong = ~((scale - ref).abs() <= SCALE_TOL * ref)
    if not wrong.any():
        return
    _misread(case, scale, x_buf, x, q)
    _filled(case, scale, peak)
    i = int(torch.nonzero(wrong)[0])
    g, p, row = float(scale[i]), float(peak[i]), values[i]
    where = f"on {case.what}: {_row_words(case, i)}"

    def near(value) -> bool:
        value = float(value)
        return abs(g - value) <= 1e-6 * abs(value) if value == value else False

    if p == 0:
        raise Failed(f"{where}: its scale is {g:g}. Dividing by it would give {'0 / 0, NaN' if g == 0 else 'nonsense'}"
                     ": give an all-zero row the scale the exercise says, 1")
    for k in (128.0, 255.0, 256.0, 127.5, 126.0):
        if near(p / k):
            raise Failed(f"{where}: the scale divides the largest magnitude by {k:g}: the exercise's symmetric "
                         "range is [-127, 127], so the largest magnitude becomes exactly 127")
    blocks = [row[j:j + case.block_n].abs().max() for j in range(0, N, case.block_n)]
    program = case.block_m * (i // case.block_m)
    candidates = [
        (p, "the scale is the row's largest magnitude itself: divide it by 127, so that the largest value becomes "
            "±127"),
        (127 / p, "the scale is inverted: Q = X / S, so S is the size of one int8 step (large values, large S)"),
        (row.max() / 127, "the scale follows the row's largest value, not its largest magnitude: take |x| "
                          "(tl.abs) before the maximum"),
        (row[_stepped_by_block_m(case, N)].abs().max() / 127 if case.block_m > case.block_n else ref[i],
         "the first pass " + _STEP_WORDS.format(m=case.block_m, n=case.block_n)),
        (blocks[0] / 127, f"the scale sees only the first BLOCK_N = {case.block_n} columns: the first pass must "
                          "loop over the whole row, block after block"),
        (blocks[-1] / 127, "the scale sees only the last block of the row: keep a running maximum across the "
                           "blocks (tl.maximum of the old one and this block's)"),
        (values[program:program + case.block_m].abs().max() / 127,
         "the rows of a program share one scale: take the maximum along each row only (axis=1), not over the "
         "whole block"),
        (values.abs().max() / 127, "every row got the whole matrix's scale: one scale per row, a maximum along "
                                   "each row only (axis=1)"),
        (ref[i:i + 1].half().double()[0], "the scale is rounded to 16 bits: compute and store it in float32"),
    ]
    for value, words in candidates:
        if near(value) and not near(ref[i]):
            raise Failed(f"{where}: {words}")
    if g >= _X_GUARD_LOW / 127 > 1.01 * float(ref[i]):
        raise Failed(f"{where}: the scale is larger than any value of the row: the first pass reads outside the row "
                     "(past its end, or off X's strides). Mask the loads with rows < M and cols < N (other=0), and "
                     "use stride_xm and stride_xn")
    if abs(g - float(ref[i])) <= 1e-3 * float(ref[i]):
        raise Failed(f"{where}: the scale is a little off ({abs(g / float(ref[i]) - 1):.0e} relative, more than "
                     "float32's rounding): was it computed in 16 bits somewhere, or from a value rounded on the way?")
    if "tiny" in case.rows.get(i, ""):
        raise Failed(f"{where}: the scale is {g:.3g}: tiny values lose their scale in float16 arithmetic; compute "
                     "in float32 (x.to(tl.float32)) before dividing")
    raise Failed(f"{where}: its scale is {g:.7g}, not the row's largest magnitude over 127")


def _misread(case: _Case, scale: torch.Tensor, x_buf: torch.Tensor, x: torch.Tensor, q) -> None:
    """A ✗ if every row's scale is what a kernel that reads X at the wrong places would find: without a column
    mask, with X's strides swapped, as if X were contiguous, or with other steps (``_other_reads``)."""
    import triton

    M, N = x.shape
    flat = x_buf.flatten().double()
    sm, sn, base = x.stride(0), x.stride(1), x.storage_offset()
    i = torch.arange(M)[:, None]
    reads = [
        (base + i * sn + torch.arange(N)[None, :] * sm, "X's strides are swapped: element (i, j) of X is at X + i * "
                                                         "stride_xm + j * stride_xn"),
        (base + i * N + torch.arange(N)[None, :],
         f"X is read as if contiguous, but it is {_LAYOUT_WORDS[case.x_layout]} here: use its strides, stride_xm "
         "and stride_xn"),
        (base + i * sm + torch.arange(triton.cdiv(N, case.block_n) * case.block_n)[None, :] * sn,
         "the first pass reads past the row's end (columns N and beyond): mask the loads with cols < N, and other=0"),
    ]
    reads += [(at, f"the first pass reads X at other places than X's elements (i, j), as if element (i, j) were at "
                   f"X + i * {row} + j * {col} (X {_LAYOUT_WORDS[case.x_layout]} here): element (i, j) of X is at "
                   "X + i * stride_xm + j * stride_xn") for at, row, col in _other_reads(x, q)]
    for at, words in reads:
        if bool(((at < 0) | (at >= flat.numel())).any()):
            continue
        seen = flat[at].abs().amax(dim=1)
        guess = torch.where(seen > 0, (seen / 127).float().double(), torch.ones_like(seen))
        if bool(((scale - guess).abs() <= 1e-6 * guess).all()):
            raise Failed(f"on {case.what}: {words}")


def _filled(case: _Case, scale: torch.Tensor, peak: torch.Tensor) -> None:
    """A ✗ if every row's scale is what the first pass finds when the lanes its mask turns off (the columns past
    N of the last block) hold one filler of some magnitude f > 0 that counts in the maximum of |x|: max(peak, f)
    / 127 on every row (other=-inf, which tl.abs makes +inf; other=1.0; no other= at all, which the interpreter
    fills with inf under a check). An f that is the largest magnitude of the matrix, or of a program's rows, is
    a value of X: the scale shared across rows, which other hints name."""
    M, N = case.values.shape
    if N % case.block_n == 0:
        return  # no lane masked off inside a row
    ref = torch.where(peak > 0, (peak / 127).float().double(), torch.ones_like(peak))
    wrong = ~((scale - ref).abs() <= SCALE_TOL * ref)
    f = float(scale[wrong][0]) * 127
    if not f > 0 or f != f:
        return
    shared = {float(peak.max())} | {float(peak[r:r + case.block_m].max()) for r in range(0, M, case.block_m)}
    if any(abs(f - v) <= 1e-6 * v for v in shared):
        return
    filled = peak.clamp(min=f)
    guess = (filled / 127).float().double()
    if not bool(((scale == guess) | ((scale - guess).abs() <= SCALE_TOL * guess)).all()):
        return
    i = int(torch.nonzero(wrong)[0])
    raise Failed(f"on {case.what}: {_row_words(case, i)}: its scale is {float(scale[i]):g}, from the lanes the first "
                 f"pass's mask turns off (the columns past N): they count in the maximum of |x| with their filler, "
                 f"of magnitude {f:g} here (other=, or what a load without other= leaves there). The filler matters: "
                 "for a maximum of |x| give other=0, the smallest |x| there is"
                 + (" (not -inf, which tl.abs makes +inf, and not a load without other=, whose masked-off lanes "
                    "are undefined)" if math.isinf(f) else ""))


def _other_reads(x, q):
    """Where a pass that reads X with other steps than stride_xm, stride_xn would read element (i, j), inside X's
    buffer: (offsets (M, N), the row step's name, the column step's name) for each pair of steps among X's
    strides, Q's, N, 1 and (for rows) 0, that reads somewhere else than X's own elements."""
    M, N = x.shape
    steps = {"stride_xm": x.stride(0), "stride_xn": x.stride(1), "stride_qm": q.stride(0), "stride_qn": q.stride(1),
             "N": N, "1": 1, "0": 0}
    i, j = torch.arange(M)[:, None], torch.arange(N)[None, :]
    right = x.storage_offset() + i * x.stride(0) + j * x.stride(1)
    size = x.untyped_storage().nbytes() // x.element_size()
    for row_name, row_step in steps.items():
        for col_name, col_step in steps.items():
            at = x.storage_offset() + i * row_step + j * col_step
            if col_name == "0" or bool(((at < 0) | (at >= size)).any()) or bool((at == right).all()):
                continue
            yield at, row_name, col_name


def _misread_second(case: _Case, got: torch.Tensor, ref_scale: torch.Tensor, x_buf: torch.Tensor, x, q) -> None:
    """A ✗ if every int8 value is what a second pass that reads X at other places than (i, j) would store (the
    scales being right): a stride for another (stride_xn on both axes, swapped, Q's), N for stride_xm, no row."""
    flat = x_buf.flatten().double()
    for at, row_name, col_name in _other_reads(x, q):
        v = flat[at] / ref_scale
        lo = torch.floor(v)
        tie = (v - lo - 0.5).abs() <= TIE_BAND * v.abs().clamp(min=1)
        fits = (got == torch.floor(v + 0.5).clamp(-127, 127)) | (tie & ((got == lo) | (got == lo + 1)))
        if bool(fits.all()):
            raise Failed(f"on {case.what}: the scales are right, but the int8 values are not those of X's rows: "
                         "the second pass reads X at other places than the first, as if element (i, j) were at "
                         f"X + i * {row_name} + j * {col_name} (X {_LAYOUT_WORDS[case.x_layout]} here). Both passes "
                         "read the same row: X + i * stride_xm + j * stride_xn")


def _diagnose_q(case: _Case, scale: torch.Tensor, got: torch.Tensor, x_buf: torch.Tensor = None, x=None,
                q=None) -> None:
    values = case.values.double()
    peak = values.abs().amax(dim=1, keepdim=True)
    ref_scale = torch.where(peak > 0, (peak / 127).float().double(), torch.ones_like(peak))
    v = values / ref_scale
    lo, hi = torch.floor(v), torch.ceil(v)
    tie = (v - lo - 0.5).abs() <= TIE_BAND * v.abs().clamp(min=1)
    nearest = torch.floor(v + 0.5)
    ok = (got == nearest) | (tie & ((got == lo) | (got == hi)))
    if ok.all():
        return
    if x is not None:
        _misread_second(case, got, ref_scale, x_buf, x, q)
    i, j = (int(k) for k in torch.nonzero(~ok)[0])
    where = f"on {case.what}"
    if float(peak[i, 0]) == 0:
        raise _divided_by_zero(case, i, f"q[{i}, {j}] is {int(got[i, j])} for x = 0, as a NaN from 0 / 0 (or "
                                        "0 · inf) may become")

    def matches(base, rule) -> bool:
        """Does ``rule`` applied to ``base`` (or to ``base`` moved by float32's rounding, either way) give every
        value but the ties, which may round either way?"""
        fits = ok & tie
        for moved in (base, base * (1 - TIE_BAND), base * (1 + TIE_BAND)):
            fits = fits | (got == rule(moved))
        return bool(fits.all())

    safe_peak = torch.where(peak > 0, peak, torch.ones_like(peak))
    half_up = lambda t: torch.floor(t + 0.5)  # noqa: E731
    candidates = [
        (v, torch.trunc, "q rounds toward zero (converting a float to an integer truncates): round to the nearest "
                         "integer before converting, e.g. from tl.floor"),
        (v, torch.floor, "q rounds down (tl.floor of x / scale): round to the nearest integer instead"),
        (v, torch.ceil, "q rounds up (tl.ceil of x / scale): round to the nearest integer instead"),
        (v, lambda t: torch.trunc(t + 0.5), "positive values are right, but negative ones are off by one: "
                                            "converting v + 0.5 to an integer truncates toward zero, which is not "
                                            "rounding below 0. Round with tl.floor before converting"),
        (values * ref_scale, half_up, "q multiplies x by the scale: the scale is one int8 step, so q = x / scale"),
        (values / safe_peak, half_up, "q divides by the row's largest magnitude, not by its scale: q spans only "
                                      "-1 .. 1"),
        (v, lambda t: half_up(t).clamp(0, 127), "negative values are clamped to 0: int8's range here is "
                                                "[-127, 127]"),
    ]
    for base, rule, words in candidates:
        if matches(base, rule):
            raise Failed(f"{where}: {words}")
    wrong = ~ok
    if bool(((got - nearest).abs()[wrong] == 1).all()) and \
            bool(((v - lo - 0.5).abs() <= 2.0 ** -10 * v.abs().clamp(min=1))[wrong].all()):
        raise Failed(f"{where}: q is off by one at a few values whose x / scale lies close to a half: the division, "
                     "or a product before it, was rounded to 16 bits. Compute in float32 (x.to(tl.float32))")
    x = float(values[i, j])
    overflow = (": an intermediate overflowed float16? Compute in float32 (x.to(tl.float32))"
                if "huge" in case.rows.get(i, "") else "")
    raise Failed(f"{where}: q[{i}, {j}] is {int(got[i, j])} for x = {x:.6g} in {_row_words(case, i)}, whose scale "
                 f"is right: not x / scale rounded to the nearest integer{overflow}")
