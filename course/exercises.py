"""The notebooks' exercises: checks that say what is wrong without giving the answer away.

Every exercise cell starts as a stub, a signature whose body is ``...``. The check at the bottom of
the cell then prints a short note and raises nothing, so a notebook still runs top to bottom::

    ✎ saxpy_cost: not attempted yet.
      Fill in the body of saxpy_cost above: return (flops, bytes_moved), then run this cell again.
      Stuck? exercises.solution('saxpy_cost') in a new cell loads the reference solution.

Once you write something, the check runs it on fresh inputs and prints either one ``✓`` line or
one ``✗`` line that names what failed and hints at why (never the expected number or formula).
A failing check prints; it does not raise, so there is no traceback to read through. The verdict
is also kept: :func:`last` returns it (the tests read it), and :func:`yours_or_reference` hands
later cells your function once it passed, the reference solution until then.

The reference solutions live in :mod:`course.solutions`, one function per piece you write.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import dis
import inspect
import io
import math
import numbers
import re
import textwrap
import warnings
from fractions import Fraction
from typing import Callable

import torch

from course import runtime
from course.elementwise import describe_runs, guarded, overwritten_guard, runs, unwritten

__all__ = ["check_saxpy_cost", "check_axpy", "check_residual_relu_bytes", "check_residual_relu",
           "check_matmul_kernel", "check_grouped_tile", "check_wave_count", "solution", "last", "yours_or_reference", "Verdict"]


# --- verdicts -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Verdict:
    """The outcome of one check: ``status`` is "passed", "failed" or "not attempted"."""

    exercise: str
    status: str
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def line(self) -> str:
        mark = {"passed": "✓", "failed": "✗", "not attempted": "✎"}[self.status]
        return f"{mark} {self.exercise}: {self.message}"


class _Failed(Exception):
    """Raised inside a check to end it with a ✗ line (caught by :func:`_exercise`)."""

    def __init__(self, message: str, picture=None):
        super().__init__(message)
        self.picture = picture


class _TimedOut(BaseException):
    """Raised by :func:`_time_limit` when a check runs too long."""


class _NotAttempted(Exception):
    """Raised inside a check for a part still to write (the message says which), or with no message
    for a stub."""


_VERDICTS: dict[str, Verdict] = {}  # the latest verdict of each exercise
_LAST: Verdict | None = None


def last() -> Verdict | None:
    """The verdict of the check that ran last (None before any)."""
    return _LAST


def _exercise(name: str, what_to_write: str):
    """Turn a check body into an exercise check: stubs get the "not attempted" line, a ``_Failed``
    gets one ✗ line (and its picture, if any), an error raised by the learner's own code is
    reported in a few lines without the checker's frames, success gets the ✓ line."""

    def wrap(body: Callable[..., str]):
        def check(*args, **kwargs):
            global _LAST
            picture = None
            try:
                if args and all(_is_stub(a) for a in args):
                    raise _NotAttempted
                with _time_limit(_TIME_LIMIT_S), warnings.catch_warnings():
                    # numpy's overflow and divide-by-zero warnings from a wrong kernel under the
                    # interpreter say nothing the verdict does not
                    warnings.simplefilter("ignore", RuntimeWarning)
                    verdict = Verdict(name, "passed", body(*args, **kwargs))
            except _NotAttempted as pending:
                what = str(pending) or what_to_write
                verdict = Verdict(name, "not attempted",
                                  f"not attempted yet.\n  {what}, then run this cell again.\n"
                                  f"  Stuck? exercises.solution({name!r}) in a new cell loads the reference solution.")
            except _Failed as failure:
                verdict, picture = Verdict(name, "failed", str(failure)), failure.picture
            except _TimedOut as timeout:
                verdict = Verdict(name, "failed", f"the check gave up after {timeout.args[0]} s: does every loop in "
                                                  "your kernel end (a while loop must advance its counter)?")
            _VERDICTS[name] = _LAST = verdict
            print(verdict.line)
            if picture is not None:
                _show(picture)

        check.__name__ = body.__name__
        check.__doc__ = body.__doc__
        check.__wrapped__ = body
        return check

    return wrap


# Under the interpreter a kernel whose loop never ends would hang the cell: a check gives up after this.
_TIME_LIMIT_S = 120


@contextlib.contextmanager
def _time_limit(seconds: int):
    """Raise a ✗ if the block runs longer than ``seconds`` (interpreter, main thread, POSIX only:
    a compiled kernel that hangs cannot be stopped from Python)."""
    import signal
    import threading

    usable = (runtime.INTERPRET and hasattr(signal, "SIGALRM")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def give_up(signum, frame):
        raise _TimedOut(seconds)  # not an Exception: the interpreter and the checks must not catch it

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _show(fig) -> None:
    """Display a matplotlib figure once (in Jupyter) and close it."""
    import matplotlib.pyplot as plt

    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display(fig)
    finally:
        plt.close(fig)


def _is_stub(fn) -> bool:
    """True for a function (or ``@triton.jit`` kernel) whose body is only ``...``, ``pass`` or a docstring."""
    fn = getattr(fn, "fn", fn)  # a Triton kernel wraps the Python function
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP", "CACHE")]
    return ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)])


def _user_error(what: str, err: BaseException) -> _Failed:
    """A ✗ for an exception raised by the learner's code: its type and message, a few lines long."""
    refused = _compile_refusal(what, err)
    if refused:
        return refused
    text, name = str(err).strip(), type(err).__name__
    while True:  # the interpreter wraps an error raised inside the kernel, once per call level: show that one
        inner = re.fullmatch(r"""InterpreterError\((['"].*['"])\)""", text, re.S) or \
            re.fullmatch(r"""(?:InterpreterError\()?(\w+Error)\((['"].*['"])\)\)?""", text, re.S)
        if not inner:
            break
        try:
            unquoted = ast.literal_eval(inner.group(inner.lastindex))
        except (ValueError, SyntaxError):
            break
        if inner.lastindex == 2:
            name = inner.group(1)
        text = unquoted.strip()
    lines = text.splitlines()
    if len(lines) > 12:
        lines = lines[:12] + ["  …"]
    body = "\n    ".join(lines) if lines else "(no message)"
    return _Failed(f"{what} raised {name}:\n    {body}" + _hint_for(text))


def _compile_refusal(what: str, err: BaseException) -> _Failed | None:
    """A ✗ for Triton refusing to compile the learner's kernel on a GPU: the innermost reason (a
    helper's error is wrapped in its caller's) and the line it points at; None for other errors."""
    from triton.compiler.errors import CompilationError

    if not isinstance(err, CompilationError):
        return None
    chain = [err]
    while isinstance(chain[-1].__cause__, CompilationError):
        chain.append(chain[-1].__cause__)
    inner = chain[-1]
    reason = (inner.error_message or str(inner.__cause__ or "") or "no reason given").strip()
    excerpt = str(inner)[:len(str(inner)) - len(inner.error_message or "")].rstrip().splitlines()
    where = f"\n    at: {excerpt[-2].strip()}" if len(excerpt) >= 3 else ""
    return _Failed(f"{what} was refused: Triton cannot compile it for a GPU:\n    {reason}{where}"
                   + _hint_for(reason))


_MATH_ON_A_BLOCK = ("a Python function (math.*) got a whole block of values: inside a kernel use tl functions "
                    "(tl.exp, tl.where, ...), which work element by element")
_NO_POWER = "Triton tiles have no ** operator: write x * x * x"
# Errors whose own message does not say what to change: (text in the message, hint).
_ERROR_HINTS = [
    ("only length-1 arrays can be converted", _MATH_ON_A_BLOCK),  # the interpreter's words
    ("must be real number, not tensor", _MATH_ON_A_BLOCK),  # the compiler's
    ("unsupported operand type(s) for ** or pow()", _NO_POWER),  # the interpreter's words
    ("has no attribute '__pow__'", _NO_POWER),  # the compiler's
    ("Expected dtype ['fp32', 'fp64'] but got fp16", "tl.exp and its kind take float32: keep the tile in float32 "
                                                     "(the store converts the result)"),
    ("object of type 'int' has no len()", "the launch grid is a tuple, even with one axis: kernel[(programs,)](...)"),
    ("'int' object is not subscriptable", "the launch grid is a tuple, even with one axis: kernel[(programs,)](...)"),
    ("object has no attribute 'values'", "a function that should return two values returned one: return both, "
                                         "e.g. return pid_m, pid_n"),
    ("has no attribute", "a misspelt name?" + (" (the interpreter cannot say where in the kernel it is)"
                                              if runtime.INTERPRET else "")),
    ("arange's range must be a power of 2", "BLOCK_SIZE must be a power of two; the mask handles the rest"),
    ("AssertionError()", "Triton refused an operation without a reason: check the dtypes given to tl.dot (both "
                         "inputs alike, a float32 accumulator)"),
    ("Cannot make_shape_compatible", "two blocks of different shapes meet: a 2-D block needs 2-D offsets and a "
                                     "2-D mask, e.g. (rows[:, None] < M) & (cols[None, :] < N)"),
    ("is not iterable", "a function that should return two values returned one: return both, e.g. "
                        "return pid_m, pid_n (or start, end)"),
    ("cannot unpack non-iterable NoneType", "a function returned nothing: end it with return (two values here)"),
    ("too many values to unpack", "a function returned more values than asked for: return exactly two"),
    ("unexpected type fp32", "a float where an integer is needed: tile and program indices use integer "
                             "division, //, not /"),
    ("Loop-carried variable", "a variable changed its type or shape in the loop: start the accumulator as a block "
                              "of the tile's shape, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)"),
]


def _hint_for(error_text: str) -> str:
    """The ``hint:`` line for an error message that matches one of :data:`_ERROR_HINTS`, or ""."""
    hint = next((h for pattern, h in _ERROR_HINTS if pattern in error_text), "")
    return f"\n  hint: {hint}" if hint else ""


def _callable(name: str, fn, params: tuple[str, ...]) -> None:
    """Fail clearly when ``fn`` is not a function taking ``params``."""
    if fn is None:
        raise _Failed(f"got None instead of your function: pass {name} itself (no parentheses)")
    if not callable(fn):
        kind = type(fn).__name__
        raise _Failed(f"got {'an' if kind[0] in 'aeiou' else 'a'} {kind} instead of a function: "
                      f"pass {name} itself (no parentheses)")
    if hasattr(fn, "run") and hasattr(fn, "fn"):  # a @triton.jit kernel
        raise _Failed(f"got a Triton kernel: pass the Python function {name}({', '.join(params)}) that launches it")
    try:
        inspect.signature(fn).bind(*params)
    except TypeError:
        raise _Failed(f"{name} must take {len(params)} argument{'s' if len(params) > 1 else ''} "
                      f"({', '.join(params)}); "
                      f"yours takes {_describe_signature(fn)}") from None
    except ValueError:  # builtins without a signature: let the call decide
        pass


def _jit_function(name: str, fn, params: tuple[str, ...], kind: str = "function") -> None:
    """Fail clearly when ``fn`` is not a ``@triton.jit`` function (a ``kind``) with exactly ``params``."""
    if inspect.isfunction(fn):
        raise _Failed(f"{name} is a plain Python function: did you forget @triton.jit above its def?")
    if not (hasattr(fn, "fn") and hasattr(fn, "arg_names")):
        raise _Failed(f"got {type(fn).__name__}: pass the @triton.jit {kind} {name} itself (the check launches it)")
    given = inspect.signature(fn.fn).parameters.values()
    required = tuple(p.name for p in given if p.default is inspect.Parameter.empty)
    if required != params or tuple(fn.arg_names[:len(params)]) != params:  # extras need defaults, at the end
        raise _Failed(f"{name} must keep the signature it was given ({', '.join(params)})")


def _describe_signature(fn) -> str:
    try:
        return f"({', '.join(inspect.signature(fn).parameters)})"
    except (TypeError, ValueError):
        return "other arguments"


def solution(name: str) -> None:
    """Load the reference solution of exercise ``name`` into the cell this is called from (in
    Jupyter, as ``%load`` does: run the cell again to use it), or print it elsewhere."""
    from course import solutions

    if name not in solutions.EXERCISES:
        print(f"✗ solution({name!r}): no exercise of that name; "
              f"the exercises are {', '.join(repr(n) for n in sorted(solutions.EXERCISES))}")
        return
    source = solutions.source(name)
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is not None and hasattr(shell, "set_next_input"):
        shell.set_next_input(source, replace=True)
        print(f"The reference solution of {name} is now in this cell: run it again to use it.")
    else:
        print(source)


def yours_or_reference(name: str, fn):
    """``fn`` if the check of exercise ``name`` passed in this session, else the reference solution
    (saying so), so the cells after an exercise run either way."""
    from course import solutions

    verdict = _VERDICTS.get(name)
    if verdict is not None and verdict.passed:
        return fn
    print(f"(using the reference {name}: yours has not passed its check yet)")
    return solutions.function(name)


# --- 00: counting FLOPs and bytes ---------------------------------------------------------------

def _per_element(name: str, what: str, value, n: int):
    """Check that ``value`` (one of the numbers ``fn(n)`` returned) is a real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _Failed(f"{name}({n}) gave {what} = {value!r}: return a number")
    if not math.isfinite(value):
        raise _Failed(f"{name}({n}) gave {what} = {value}: return a finite number")
    return Fraction(value).limit_denominator(1000)


def _linear(name: str, fn, what: str, pick=lambda r: r):
    """``(slope, offset)`` of ``n -> pick(fn(n))``, sampled at several n, or a ✗ if it is not a
    straight line through the samples."""
    samples = {}
    for n in (1000, 2000, 3 * 2**20, 1):
        try:
            result = fn(n)
        except Exception as err:  # the learner's function raised
            raise _user_error(f"{name}({n})", err) from None
        samples[n] = _per_element(name, what, pick(result), n)
    if any(samples.values()) and all(abs(v) < n / 100 for n, v in samples.items() if n > 1):
        raise _Failed(f"{what} is only {float(samples[3 * 2**20]):.3g} for n={3 * 2**20}: count plain units "
                      "(bytes, FLOPs), not GB, MB or thousands")
    slope = (samples[2000] - samples[1000]) / 1000
    offset = samples[1000] - 1000 * slope
    for n, value in samples.items():
        if value != slope * n + offset:
            raise _Failed(f"{what} does not grow in proportion to n (compare {name}(1000) with {name}(2000) "
                          f"and {name}({n})): each element costs the same, so the count is a fixed amount times n")
    return slope, offset


def _pair(name: str, fn, n: int = 1000):
    try:
        result = fn(n)
    except Exception as err:
        raise _user_error(f"{name}({n})", err) from None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise _Failed(f"{name}({n}) returned {result!r}: return a pair, (flops, bytes_moved)")
    return result


def _constant_term(what: str, offset, why: str = "count only what each element costs") -> None:
    if offset:
        raise _Failed(f"{what} has a part that does not grow with n ({offset} at every size): {why}")


@_exercise("saxpy_cost", "Fill in the body of saxpy_cost above: return (flops, bytes_moved)")
def check_saxpy_cost(saxpy_cost: Callable[[int], tuple]) -> str:
    """Check ``saxpy_cost(n) -> (flops, bytes_moved)`` for ``y = a * x + y`` on ``n`` float32 values.

    FLOPs: the arithmetic per element. Bytes: the fewest a kernel must move through device
    memory, each input read once and each output written once.
    """
    _callable("saxpy_cost", saxpy_cost, ("n",))
    _pair("saxpy_cost", saxpy_cost)
    flops, flops_offset = _linear("saxpy_cost", saxpy_cost, "flops", lambda r: r[0])
    nbytes, bytes_offset = _linear("saxpy_cost", saxpy_cost, "bytes_moved", lambda r: r[1])
    if nbytes == 2 and flops > nbytes:
        raise _Failed("the first number grows faster than the second: the pair is (flops, bytes_moved), in that order")
    _constant_term("flops", flops_offset, "the scalar a is a kernel argument, loaded once; count per-element work")
    hints = {1: "you counted one operation per element: a * x + y is a multiply and an add",
             0: "flops is zero: count the arithmetic done on each element",
             3: "a * x + y has one multiply and one add per element; nothing else is computed",
             4: "that counts bytes, not operations: FLOPs are the multiplies and adds"}
    if flops != 2:
        raise _Failed(f"flops grows by {flops} per element: {hints.get(flops, hints[3])}")
    _constant_term("bytes_moved", bytes_offset, "the scalar a is a kernel argument held in a register, not an "
                                                "array in memory; count only the arrays")
    hints = {8: "you counted reading x and y, but y is also written back to memory",
             4: "count every array the kernel reads or writes, not only x",
             16: "y is read once and written once; the scalar a is not an array, and nothing else moves",
             3: "that counts elements: each float32 takes 4 bytes",
             2: "that counts elements, and misses the write of y: each float32 takes 4 bytes",
             24: "a float32 takes 4 bytes, not 8",
             6: "a float32 takes 4 bytes, not 2"}
    if nbytes != 12:
        hint = hints.get(nbytes, "which arrays does the kernel read, which does it write, and how many bytes "
                                 "is one float32?")
        raise _Failed(f"bytes_moved grows by {nbytes} per element: {hint}")
    return "right: 2n FLOPs and 12n bytes, an intensity of 1/6 FLOP per byte"


# --- 01 and 02: element-wise kernels ------------------------------------------------------------

# Odd sizes on purpose: not multiples of any power-of-two block, below one block, one element.
ELEMENTWISE_SIZES = (1000, 4099, 1025, 100, 1)


class launches(contextlib.AbstractContextManager):
    """Record the Triton kernels launched inside the ``with`` block (compiled or interpreted)::

        with exercises.launches() as seen:
            add(x, y)
        seen.programs  # programs launched in all
    """

    def __enter__(self):
        from triton.runtime.jit import JITFunction

        self.launched: list[tuple[object, int]] = []  # (kernel, programs) per launch
        self._patched = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            self._patched.append(InterpretedFunction)
        except ImportError:
            pass
        self._originals = [cls.run for cls in self._patched]
        recorder = self

        def patch(original):
            def run(kernel, *args, grid, warmup, **kwargs):
                if not warmup:
                    recorder.launched.append((kernel, _programs(grid, args, kwargs, kernel)))
                return original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            return run

        for cls, original in zip(self._patched, self._originals):
            cls.run = patch(original)
        return self

    def __exit__(self, *exc):
        for cls, original in zip(self._patched, self._originals):
            cls.run = original
        return False

    @property
    def programs(self) -> int:
        return sum(p for _, p in self.launched)

    @property
    def kernels(self) -> list[tuple[str, int]]:
        """``(name, programs)`` of each launch."""
        return [(getattr(k, "__name__", "kernel"), p) for k, p in self.launched]

    @property
    def stubs(self) -> list[str]:
        """The names of the launched kernels whose body is still a stub."""
        return [getattr(k, "__name__", "kernel") for k, _ in self.launched if _is_stub(k)]


def _constexpr_names(kernel) -> set:
    """The parameters of a ``@triton.jit`` function annotated ``tl.constexpr``."""
    fn = getattr(kernel, "fn", kernel)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if "constexpr" in str(p.annotation)}


def _source(kernel) -> str:
    """A kernel's source text, then that of the ``@triton.jit`` helpers it calls, so a check reads
    the loads and the accumulator wherever they are written ("" when Python cannot find it)."""
    texts, seen = [], set()

    def visit(fn):
        if fn in seen:
            return
        seen.add(fn)
        try:
            texts.append(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError):
            return
        for name in getattr(getattr(fn, "__code__", None), "co_names", ()):
            helper = getattr(fn, "__globals__", {}).get(name)
            if callable(getattr(helper, "fn", None)) and hasattr(helper, "arg_names"):  # a @triton.jit function
                visit(helper.fn)

    visit(getattr(kernel, "fn", kernel))
    return "\n\n".join(texts)


def _unmasked_loads(kernel) -> int:
    """How many ``tl.load`` calls in the kernel's source have no mask (lines, for the message)."""
    import ast

    try:
        tree = ast.parse(_source(kernel))
    except SyntaxError:
        return 0
    loads = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == "load"]
    return sum(1 for node in loads if len(node.args) < 2 and not any(k.arg == "mask" for k in node.keywords))


def _programs(grid, args, kwargs, kernel) -> int:
    """The number of programs a launch grid asks for (a callable grid is given the arguments)."""
    try:
        if callable(grid):
            names = getattr(kernel, "arg_names", [])
            grid = grid({**dict(zip(names, args)), **kwargs})
        if isinstance(grid, int):
            grid = (grid,)
        return math.prod(int(g) for g in grid)
    except Exception:
        return 1  # unknown: count the launch as one program


@dataclasses.dataclass
class _Run:
    """What one call of the learner's function did at one size."""

    n: int
    shape: tuple
    programs: int
    launched: list
    returned_other: bool
    missed: list
    past: list
    wrong: torch.Tensor  # bool per element: written but wrong
    inputs_changed: int | None


def _run_once(call: Callable, reference: Callable, n_inputs: int, shape, dtype) -> _Run:
    n = int(torch.Size(shape).numel())
    inputs = [guarded(n, dtype=dtype, fill=torch.randn)[0].view(shape) for _ in range(n_inputs)]
    before = [t.clone() for t in inputs]
    out_flat, buffer = guarded(n, dtype=dtype)
    out = out_flat.view(shape)
    with launches() as seen:
        result = call(*inputs, out)
        if runtime.DEVICE == "cuda":
            torch.cuda.synchronize()
    if seen.stubs:
        raise _NotAttempted
    returned_other = isinstance(result, torch.Tensor) and result.data_ptr() != out.data_ptr()
    changed = next((i for i, (t, b) in enumerate(zip(inputs, before)) if not torch.equal(t, b)), None)
    ref = reference(*[b.double() for b in before]).reshape(-1).cpu()
    got = out.reshape(-1).detach().cpu().double()
    written = ~torch.isnan(got)
    tol = 1e-5 * (1 + ref.abs())
    wrong = written & ((got - ref).abs() > tol)
    return _Run(n, tuple(shape), seen.programs, [k for k, _ in seen.launched], returned_other, unwritten(out),
                overwritten_guard(buffer, n), wrong, changed)


def _element_picture(run: _Run, title: str):
    """A strip of the output's elements: right, wrong, never written, and written past the end."""
    from course import plots

    tail = max([b for _, b in run.past] + [run.n - 1]) + 1
    tail = min(max(tail + max(8, run.n // 8), run.n + 8), run.n + 4096)
    return plots.element_map(run.n, tail, missed=run.missed, past=run.past,
                             wrong=runs(run.wrong), title=title)


def _elements(pairs) -> str:
    """``[(5, 5)]`` -> "element 5", ``[(1000, 1023)]`` -> "elements 1000..1023"."""
    single = len(pairs) == 1 and pairs[0][0] == pairs[0][1]
    return f"{'element' if single else 'elements'} {describe_runs(pairs)}"


def _check_elementwise(fn_name: str, call: Callable, reference: Callable, n_inputs: int, *,
                       kernel_hint: str, input_names: tuple, dtype=torch.float32, shapes=None, wrong_hints=(),
                       runtime_args=()) -> str:
    """Run ``call(*inputs, out)`` at every shape, then name the most telling failure.

    ``out`` is poisoned (NaN) and followed by NaN guard elements, so never-written elements,
    elements written past the end and wrong values are told apart. All sizes run before any
    verdict, so a grid that rounds down is caught at the sizes it launches nothing for.
    ``wrong_hints`` are ``(alternative_reference, hint)`` pairs: when the output matches a
    typical mistake, its hint is given. ``runtime_args`` names kernel parameters that must not be
    ``tl.constexpr``.
    """
    shapes = shapes or [(n,) for n in ELEMENTWISE_SIZES]
    runs_ = []
    for shape in shapes:
        try:
            runs_.append(_run_once(call, reference, n_inputs, shape, dtype))
        except (_Failed, _NotAttempted):
            raise
        except Exception as err:
            raise _user_error(f"{fn_name} (with an input of shape {tuple(shape)})", err) from None

    if all(r.programs == 0 for r in runs_):
        complete = all(not r.missed and not r.wrong.any() and not r.past for r in runs_)
        if complete:
            raise _Failed(f"the output is right, but no Triton kernel ran: write it as a Triton kernel "
                          f"({kernel_hint}) and launch it from {fn_name}")
        raise _Failed(f"{fn_name} launched no Triton kernel: launch it as kernel[grid](...) with a grid of "
                      "triton.cdiv(n, BLOCK_SIZE) programs")
    idle = [r for r in runs_ if r.programs == 0]
    if idle:
        busy = next(r for r in runs_ if r.programs)
        raise _Failed(f"{_with(idle[0])} {fn_name} launched no programs at all ({_with(busy)} it launched "
                      f"{busy.programs}): does the grid round up? n // BLOCK_SIZE is 0 when n < BLOCK_SIZE; "
                      "triton.cdiv(n, BLOCK_SIZE) rounds up", _element_picture(idle[0], f"n = {idle[0].n}"))
    crowded = next((r for r in runs_ if r.n >= 100 and r.programs >= r.n), None)
    if crowded:
        raise _Failed(f"{_with(crowded)} {fn_name} launched {crowded.programs} programs, one per element or more: each "
                      "program handles a whole block, so launch triton.cdiv(n, BLOCK_SIZE) of them")
    other = next((r for r in runs_ if r.returned_other), None)
    if other:
        raise _Failed(f"{fn_name} returned a new tensor: write the result into the `out` argument it is given "
                      "(and return out, or nothing)")
    changed = next((r for r in runs_ if r.inputs_changed is not None), None)
    if changed:
        which = input_names[changed.inputs_changed]
        raise _Failed(f"{which} was modified: a kernel must only write its output. Does a tl.store go to "
                      f"{which}'s pointer instead of out's?")
    past = next((r for r in runs_ if r.past), None)
    if past:
        count = sum(b - a + 1 for a, b in past.past)
        raise _Failed(f"{_with(past)}, your kernel wrote {_count(count, 'element')} past the end of out (positions "
                      f"{describe_runs(past.past)}): the last block runs past n; mask the stores (and loads) "
                      "with offsets < n", _element_picture(past, f"n = {past.n}: writes past the end"))
    # Gaps inside the tensor say more about the offsets than a missing tail does: report those first.
    holes = next((r for r in runs_ if len(r.missed) > 1 or (r.missed and r.missed[-1][1] != r.n - 1)),
                 next((r for r in runs_ if r.missed), None))
    if holes:
        raise _Failed(f"{_with(holes)}, your kernel left {_elements(holes.missed)} of out unwritten: "
                      f"{_why_missed(holes)}", _element_picture(holes, f"n = {holes.n}: elements never written"))
    bad = next((r for r in runs_ if r.wrong.any()), None)
    if bad:
        where = _elements(runs(bad.wrong))
        hint = _wrong_value_hint(call, reference, n_inputs, dtype, wrong_hints)
        raise _Failed(f"{_with(bad)}, every element was written but {where} hold wrong values: {hint}",
                      _element_picture(bad, f"n = {bad.n}: wrong values"))
    kernels = {id(k): k for r in runs_ for k in r.launched}.values()
    for kernel in kernels:
        constant = sorted(_constexpr_names(kernel) & set(runtime_args))
        if constant:
            raise _Failed(f"the output is right, but {constant[0]} is a tl.constexpr in {kernel.__name__}: Triton then "
                          f"compiles the kernel again for every value of {constant[0]}; make it a plain argument")
        if _unmasked_loads(kernel):
            raise _Failed(f"the output is right, but {kernel.__name__} has a tl.load without a mask: the last block "
                          "reads past the end of its input, which can fault on a GPU; mask the loads as the store")
    return f"right at all {len(shapes)} sizes tried, nothing written out of bounds"


def _with(run: _Run) -> str:
    """"with n=1000", or "with an input of shape (3, 333)" for more than one dimension."""
    return f"with n={run.n}" if len(run.shape) == 1 else f"with inputs of shape {run.shape} ({run.n} elements)"


def _count(k: int, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


def _why_missed(run: _Run) -> str:
    """Why elements were left unwritten, judged from what was written and how many programs ran."""
    missed = sum(b - a + 1 for a, b in run.missed)
    written = run.n - missed
    tail = len(run.missed) == 1 and run.missed[0][1] == run.n - 1
    if tail and len(run.shape) > 1 and written in run.shape:
        return (f"only {written} elements were written, one dimension of the shape: the kernel must cover all "
                "x.numel() elements, not x.shape[0] or len(x)")
    if tail and missed * run.programs < max(written, 1):  # less than one program's share is missing
        return ("the last, partial block was not written: does the grid cover it (triton.cdiv) and does the "
                "mask let its elements through (offsets < n, not offsets < n - 1)?")
    per_program = written // run.programs if written % run.programs == 0 else 0
    if tail and per_program and math.ceil(run.n / per_program) > run.programs:  # each wrote a whole block
        each = f", {per_program} each," if run.programs > 1 else ""
        return (f"{_count(run.programs, 'program')} wrote the first {written} elements{each} and then stopped: "
                "the grid has too few programs; launch triton.cdiv(n, BLOCK_SIZE) of them")
    return ("stretches of the tensor were skipped while programs overlapped: does each program start at "
            "pid * BLOCK_SIZE, with the BLOCK_SIZE the grid was computed with, and cover a whole block "
            "(tl.arange(0, BLOCK_SIZE))?")


def _wrong_value_hint(call, reference, n_inputs, dtype, wrong_hints) -> str:
    """Match the learner's output against typical mistakes, on one more fresh input."""
    shape = (777,)
    inputs = [torch.randn(shape, dtype=dtype, device=runtime.DEVICE) for _ in range(n_inputs)]
    out = torch.full(shape, float("nan"), dtype=dtype, device=runtime.DEVICE)
    try:
        call(*inputs, out)
    except Exception:  # it ran at every size before; a failure here only costs the hint
        return "the loads, the offsets of each input, or the arithmetic between load and store are off"
    got = out.double().cpu()
    args = [t.double().cpu() for t in inputs]
    for alternative, hint in wrong_hints:
        if torch.allclose(got, alternative(*args), rtol=1e-5, atol=1e-5, equal_nan=False):
            return hint
    return "the loads, the offsets of each input, or the arithmetic between load and store are off"


@_exercise("axpy", "Write axpy_kernel's body and the launch in axpy above")
def check_axpy(axpy: Callable) -> str:
    """Check ``axpy(alpha, x, y, out)``, which must write ``alpha * x + y`` into ``out`` with a
    Triton kernel. Tries several values of ``alpha`` (a run-time argument, not a constant of the
    kernel) and odd sizes."""
    _callable("axpy", axpy, ("alpha", "x", "y", "out"))
    for alpha in (2.5, -0.75):
        hints = [(lambda x, y, a=alpha: x + y, "alpha was not applied: multiply x by alpha"),
                 (lambda x, y, a=alpha: x + a * y, "alpha multiplies y here; it should multiply x"),
                 (lambda x, y, a=alpha: a * x, "y was not added"),
                 (lambda x, y, a=alpha: a * (x + y), "alpha multiplies the sum; it should multiply x alone"),
                 (lambda x, y, a=alpha: a * x + x, "x was loaded twice: load y from y_ptr")]
        _check_elementwise("axpy", lambda x, y, out, a=alpha: axpy(a, x, y, out),
                           lambda x, y, a=alpha: a * x + y, 2, kernel_hint="@triton.jit axpy_kernel",
                           input_names=("x", "y"), wrong_hints=hints, runtime_args=("alpha",))
    return "right for two values of alpha at 5 odd sizes, nothing written out of bounds"


@_exercise("residual_relu_bytes", "Fill in the bodies of unfused_bytes and fused_bytes above")
def check_residual_relu_bytes(unfused_bytes: Callable[[int], int], fused_bytes: Callable[[int], int]) -> str:
    """Check the byte counts of ``relu(x + residual)`` on ``n`` float32 values, as two PyTorch
    kernels (``unfused_bytes``) and as one fused kernel (``fused_bytes``)."""
    _callable("unfused_bytes", unfused_bytes, ("n",))
    _callable("fused_bytes", fused_bytes, ("n",))
    if _is_stub(unfused_bytes):  # fused_bytes is written: check it alone
        _check_fused_bytes(fused_bytes)
        raise _NotAttempted("fused_bytes is right; now fill in the body of unfused_bytes")
    unfused, offset = _linear("unfused_bytes", unfused_bytes, "unfused_bytes")
    _constant_term("unfused_bytes", offset, "nothing here is a scalar; each kernel's traffic grows with n")
    hints = {12: "that is one kernel's traffic: unfused, the sum x + residual is written to memory and read back",
             16: "relu writes its output too: the first kernel reads two arrays and writes one, the second "
                 "reads one and writes one",
             8: "count both kernels, each with its reads and its writes",
             5: "that counts elements: each float32 takes 4 bytes",
             24: "the first kernel reads x and residual and writes one array; the second reads that array "
                 "and writes one: no array is read twice"}
    if unfused != 20:
        raise _Failed(f"unfused_bytes grows by {unfused} per element: "
                      f"{hints.get(unfused, 'list each kernel: the arrays it reads, the array it writes')}")
    if _is_stub(fused_bytes):
        raise _NotAttempted("unfused_bytes is right; now fill in the body of fused_bytes")
    _check_fused_bytes(fused_bytes)
    return "right: unfused 20n, fused 12n, so fusion moves 40% fewer bytes"


def _check_fused_bytes(fused_bytes) -> None:
    fused, offset = _linear("fused_bytes", fused_bytes, "fused_bytes")
    _constant_term("fused_bytes", offset, "nothing here is a scalar; the kernel's traffic grows with n")
    hints = {3: "that counts elements: each float32 takes 4 bytes",
             8: "the fused kernel reads two arrays (x and residual) and writes one",
             4: "the fused kernel reads two arrays and writes one",
             20: "that is the unfused count: fused, the sum never leaves registers",
             16: "the sum stays in registers: nothing but the inputs and the result moves"}
    if fused != 12:
        raise _Failed(f"fused_bytes grows by {fused} per element: "
                      f"{hints.get(fused, 'read each input once, write the result once')}")


@_exercise("residual_relu", "Write residual_relu_kernel's body and the launch in residual_relu above")
def check_residual_relu(residual_relu: Callable) -> str:
    """Check ``residual_relu(x, residual, out)``, which must write ``relu(x + residual)`` into
    ``out`` with one Triton kernel. Tries 1-D and 2-D shapes (a kernel may treat a contiguous
    tensor as flat memory)."""
    _callable("residual_relu", residual_relu, ("x", "residual", "out"))
    shapes = [(n,) for n in ELEMENTWISE_SIZES] + [(3, 333), (64, 65)]
    hints = [(lambda x, r: x + r, "the ReLU is missing: tl.maximum(s, 0.0) keeps the positive part"),
             (lambda x, r: torch.relu(x), "residual was not added"),
             (lambda x, r: torch.relu(x) + r, "the ReLU comes after the add: relu(x + residual)"),
             (lambda x, r: torch.clamp(x + r, max=0.0), "that keeps the negative part: the ReLU is "
                                                        "maximum(s, 0), not minimum"),
             (lambda x, r: torch.relu(x + x), "x was loaded twice: load residual from its own pointer")]
    _check_elementwise("residual_relu", residual_relu, lambda x, r: torch.relu(x + r), 2,
                       kernel_hint="@triton.jit residual_relu_kernel", input_names=("x", "residual"),
                       shapes=shapes, wrong_hints=hints)
    return f"right at all {len(shapes)} shapes tried, nothing written out of bounds"


def quiet(check: Callable, *args) -> Verdict:
    """Run a check without printing anything; return its verdict (for tests)."""
    with contextlib.redirect_stdout(io.StringIO()):
        check(*args)
    return last()


# --- 03: a tiled matmul ------------------------------------------------------------------------------

# Small blocks keep the interpreter quick; 16 is tl.dot's smallest size on a GPU.
_MM_BLOCKS = dict(block_m=32, block_n=32, block_k=16)


@dataclasses.dataclass
class _Product:
    """One launch of the learner's matmul kernel: what it wrote, and what it should have."""

    what: str
    a: torch.Tensor
    b: torch.Tensor
    out: torch.Tensor  # the M x N view the kernel was given
    spill: int  # elements written outside the view (padding columns, rows past M)
    ref: torch.Tensor  # float64

    def close(self, other: torch.Tensor) -> bool:
        """Within the output dtype's tolerance of ``other`` (float32 allows for TF32 on a GPU)."""
        from course.check import tolerance

        got = self.out.double().cpu()
        return bool(torch.linalg.vector_norm(got - other) <= tolerance(self.out.dtype) * torch.linalg.vector_norm(other))

    def error(self) -> float:
        got = self.out.double().cpu()
        return (torch.linalg.vector_norm(got - self.ref) / torch.linalg.vector_norm(self.ref)).item()


def _product(kernel, what: str, M: int, N: int, K: int, *, dtype=torch.float32, transposed=False,
             padded=True) -> _Product:
    """Launch ``kernel`` on fresh inputs; C sits in a NaN buffer with 32 spare rows (and, ``padded``,
    32 spare columns: C's rows are then longer than N)."""
    from course import tiled

    if transposed:  # A stored K-major (a transposed view), B a view of every other column
        a = _guarded_matrix(K, M, dtype).T
        b = _guarded_matrix(K, 2 * N, dtype)[:, ::2]
    else:
        a = _guarded_matrix(M, K, dtype)
        b = _guarded_matrix(K, N, dtype)
    device = runtime.DEVICE
    buffer = torch.full((M + 32, N + 32 * padded), float("nan"), dtype=dtype, device=device)
    out = buffer[:M, :N]
    tiled.launch(kernel, a, b, out, **_MM_BLOCKS)
    if runtime.DEVICE == "cuda":
        torch.cuda.synchronize()
    outside = buffer.clone()
    outside[:M, :N] = float("nan")
    spill = int((~torch.isnan(outside)).sum())
    return _Product(what, a, b, out, spill, a.double().cpu() @ b.double().cpu())


def _guarded_matrix(rows: int, cols: int, dtype) -> torch.Tensor:
    """A random contiguous matrix followed in memory by NaN: a read past its end (an unmasked
    edge) turns into NaN in the result, instead of garbage that may happen to be harmless (or a crash)."""
    buffer = torch.full(((rows + 32) * (cols + 32),), float("nan"), dtype=dtype, device=runtime.DEVICE)
    matrix = buffer[:rows * cols].view(rows, cols)
    matrix.copy_(torch.randn(rows, cols, dtype=dtype, device=runtime.DEVICE))
    return matrix


@_exercise("matmul_kernel", "Write the body of matmul_kernel above: offsets, masks, the loop over K, the store")
def check_matmul_kernel(matmul_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``course.tiled.matmul_kernel``: whole
    tiles, ragged rows and columns, a ragged last step of K, transposed and sliced inputs, and a
    long float16 K (which needs a float32 accumulator). The check launches it itself."""
    _jit_function("matmul_kernel", matmul_kernel, ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak",
                                                   "stride_bk", "stride_bn", "stride_cm", "stride_cn", "BLOCK_M",
                                                   "BLOCK_N", "BLOCK_K"), kind="kernel")
    cases = [("whole tiles (64 x 64 x 64)", 64, 64, 64, {"padded": False}),
             ("ragged rows and columns (50 x 70 x 64)", 50, 70, 64, {}),
             ("a ragged last step of K (64 x 64 x 40)", 64, 64, 40, {}),
             ("transposed and sliced inputs (48 x 40 x 32)", 48, 40, 32, {"transposed": True}),
             ("float16 with a long K (32 x 32 x 4096)", 32, 32, 4096, {"dtype": torch.float16})]
    if _sixteen_bit_accumulator(matmul_kernel):
        raise _Failed("the accumulator is 16-bit: a long sum of K products loses precision in float16. "
                      "Accumulate in float32 (tl.zeros(..., dtype=tl.float32)) and convert once, at the store")
    products = []
    for what, M, N, K, options in cases:
        try:
            products.append(_product(matmul_kernel, what, M, N, K, **options))
        except Exception as err:
            raise _user_error(f"on {what}, your kernel", err) from None
    whole, ragged, k_tail, strided, long_k = products
    _diagnose_whole(whole)
    _diagnose_edges(ragged)
    if not k_tail.close(k_tail.ref):
        bk = _MM_BLOCKS["block_k"]
        full = (k_tail.a.shape[1] // bk) * bk
        truncated = k_tail.a[:, :full].double().cpu() @ k_tail.b[:full].double().cpu()
        if k_tail.close(truncated):
            raise _Failed(f"on {k_tail.what}: the last, partial step of K is missing. range(0, K, BLOCK_K) "
                          "includes it; K // BLOCK_K steps do not")
        raise _Failed(f"on {k_tail.what}: the last step of K reads past K. Mask (k + offsets along K) < K in both "
                      "loads, with other=0.0, so the extra products are zero")
    if not strided.close(strided.ref):
        raise _Failed(f"on {strided.what}: wrong values, though contiguous inputs are right. A transposed or "
                      "sliced view is not laid out row after row: compute every address from the strides "
                      "(stride_am, stride_ak, stride_bk, stride_bn), never from K or N")
    fp32_accumulator = (long_k.a.float().cpu() @ long_k.b.float().cpu()).half().double()
    floor = (torch.linalg.vector_norm(fp32_accumulator - long_k.ref) / torch.linalg.vector_norm(long_k.ref)).item()
    if long_k.error() > 3 * floor:
        raise _Failed(f"on {long_k.what}: the result is {long_k.error() / floor:.0f} times less precise than "
                      "float16 allows: accumulate in float32 (tl.zeros(..., dtype=tl.float32)) and convert "
                      "once, at the store")
    if _unmasked_loads(matmul_kernel):
        raise _Failed("the results are right, but a tl.load has no mask: at the edges it reads past the ends "
                      "of A and B, which can fault on a GPU; mask rows, columns and K, with other=0.0")
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        _compiles_for_a_gpu(matmul_kernel)
    return ("right on whole and ragged tiles, a ragged K, transposed and sliced inputs, and a long float16 K")


def _sixteen_bit_accumulator(kernel) -> bool:
    """True if the kernel starts a block of zeros in 16 bits or asks tl.dot for a 16-bit result."""
    import ast

    try:
        tree = ast.parse(_source(kernel))
    except SyntaxError:
        return False
    sixteen = lambda node: isinstance(node, ast.Attribute) and node.attr in ("float16", "bfloat16")  # noqa: E731
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("zeros", "full") and (any(sixteen(a) for a in node.args[1:]) or any(
                    k.arg == "dtype" and sixteen(k.value) for k in node.keywords)):
                return True
            if node.func.attr == "dot" and any(k.arg == "out_dtype" and sixteen(k.value) for k in node.keywords):
                return True
    return False


def _compiles_for_a_gpu(kernel, *args, **constexprs) -> None:
    """Build the kernel for an H100 (course.compile, in a separate process), by default with
    ``tiled.matmul_kernel``'s arguments; a ✗ with the compiler's words if it refuses."""
    from course.compile import build

    if not args:
        a = torch.empty(64, 64, dtype=torch.float16)
        args, constexprs = (a, a, a, 64, 64, 64, 64, 1, 64, 1, 64, 1), dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
    try:
        build(kernel, *args, **constexprs)
    except RuntimeError as err:
        lines = [line for line in str(err).splitlines()[1:] if line.strip()]
        reason = next((line.strip() for line in reversed(lines) if "Error" in line or "error" in line), lines[-1:])
        raise _Failed(f"right under the interpreter, but Triton cannot compile it for a GPU:\n    {reason}"
                      + _hint_for(str(err))) from None


def _diagnose_whole(p: _Product) -> None:
    """The basic case: every tile whole, every input contiguous."""
    unwritten = int(torch.isnan(p.out).sum())
    if unwritten == p.out.numel():
        raise _Failed(f"on {p.what}: nothing was stored into C. End the kernel with tl.store of the accumulator "
                      "(converted to C's dtype) at c_ptr + rows * stride_cm + columns * stride_cn")
    if unwritten:
        raise _Failed(f"on {p.what}: {unwritten} of {p.out.numel()} elements of C were never stored. Each program "
                      "owns one tile: rows from tl.program_id(0), columns from tl.program_id(1)")
    if p.close(p.ref):
        return
    bk = _MM_BLOCKS["block_k"]
    a, b, K = p.a.double().cpu(), p.b.double().cpu(), p.a.shape[1]
    if p.close(a[:, :bk] @ b[:bk]):
        raise _Failed(f"on {p.what}: only the first step of K counts. Loop over K and add every step into the "
                      "accumulator: acc = tl.dot(a, b, acc), or acc += tl.dot(a, b)")
    if p.close(a[:, K - bk:] @ b[K - bk:]):
        raise _Failed(f"on {p.what}: only the last step of K counts: each step replaced the accumulator. Add "
                      "into it: acc = tl.dot(a, b, acc), or acc += tl.dot(a, b)")
    overlapping = sum(a[:, s:s + bk] @ b[s:s + bk] for s in range(K // bk))
    if p.close(overlapping):
        raise _Failed(f"on {p.what}: the steps of K overlap: step k starts at k * BLOCK_K, not at k (or loop "
                      "with range(0, K, BLOCK_K) and use k itself)")
    if p.close(p.ref.T.contiguous()):
        raise _Failed(f"on {p.what}: C comes out transposed: rows go with stride_cm, columns with stride_cn")
    raise _Failed(f"on {p.what}: wrong values. A's element (i, k) is at a_ptr + i * stride_am + k * stride_ak, "
                  "B's (k, j) at b_ptr + k * stride_bk + j * stride_bn: rows of A go down [:, None], "
                  "columns of B across [None, :]")


def _which_missing(p: _Product) -> str:
    """Why some of C was not stored, judged from which elements are missing."""
    M, N = p.out.shape
    bm, bn = _MM_BLOCKS["block_m"], _MM_BLOCKS["block_n"]
    missing = torch.isnan(p.out).cpu()
    rows, cols = torch.arange(M)[:, None], torch.arange(N)[None, :]
    swapped = (rows < min(M, -(-N // bn) * bm)) & (cols < min(N, -(-M // bm) * bn))
    if torch.equal(missing, ~swapped.expand(M, N)):
        return ("The grid is (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)): rows come from tl.program_id(0), columns "
                "from tl.program_id(1); yours are swapped")
    return ("Check the store's mask, (rows < M)[:, None] & (columns < N)[None, :], and that rows come from "
            "tl.program_id(0), columns from tl.program_id(1)")


def _mask_swapped(p: _Product) -> bool:
    """Whether exactly the rows or columns past min(M, N) are missing: a store mask of rows < N and
    columns < M (which, where N > M, also writes rows past M)."""
    M, N = p.out.shape
    missing = torch.isnan(p.out).cpu()
    rows, cols = torch.arange(M)[:, None], torch.arange(N)[None, :]
    return bool(missing.any()) and (torch.equal(missing, (cols >= min(M, N)).expand(M, N))
                                    or torch.equal(missing, (rows >= min(M, N)).expand(M, N)))


def _diagnose_edges(p: _Product) -> None:
    """Rows and columns that are not multiples of the blocks."""
    unwritten = int(torch.isnan(p.out).sum())
    if unwritten and _mask_swapped(p):
        outside = f", and {_count(p.spill, 'element')} were stored outside it" if p.spill else ""
        raise _Failed(f"on {p.what}: {unwritten} elements of C were never stored{outside}. The store's mask "
                      "compares rows with N or columns with M: rows < M, columns < N")
    if p.spill and not unwritten:
        raise _Failed(f"on {p.what}: the store wrote {_count(p.spill, 'element')} outside C (past its last row or "
                      "column). Mask it with (rows < M)[:, None] & (columns < N)[None, :]")
    if unwritten and p.spill:
        raise _Failed(f"on {p.what}: the store puts values in the wrong places, some outside C: C's rows here are "
                      "longer than N, so use stride_cm and stride_cn, never N")
    if unwritten:
        raise _Failed(f"on {p.what}: {unwritten} elements of C were never stored. {_which_missing(p)}")
    if not p.close(p.ref):
        raise _Failed(f"on {p.what}: wrong values at the edges. Mask the loads too (A's rows < M, B's columns "
                      "< N) with other=0.0, and use the strides of A, B and C")


# --- 04: the grouped launch order --------------------------------------------------------------------

# (num_pid_m, num_pid_n, GROUP_M): whole groups, a short last group, a group taller than the grid,
# a single column, and a 4096^2 product in 128^2 tiles.
_ORDER_CASES = [(4, 6, 2), (5, 7, 2), (10, 3, 4), (2, 5, 4), (9, 1, 2), (32, 32, 8)]


@_exercise("grouped_tile", "Write the body of grouped_tile above: the tile (pid_m, pid_n) of program pid")
def check_grouped_tile(grouped_tile) -> str:
    """Check a ``@triton.jit`` function ``grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)`` that
    returns program ``pid``'s tile in grouped order, by running it in a kernel on several grids and
    comparing with the course's order (``course.tiled.grouped_tile``)."""
    from course import plots, tiled

    _jit_function("grouped_tile", grouped_tile, ("pid", "num_pid_m", "num_pid_n", "GROUP_M"))
    for num_pid_m, num_pid_n, group_m in _ORDER_CASES:
        grid = f"{num_pid_m} x {num_pid_n} tiles with GROUP_M = {group_m}"
        try:
            mine = tiled.launch_order(num_pid_m, num_pid_n, group_m, mapping=grouped_tile)
        except Exception as err:
            raise _user_error(f"on {grid}, your function", err) from None
        reference = tiled.launch_order(num_pid_m, num_pid_n, group_m)
        pid_m, pid_n = mine
        if torch.equal(pid_m, reference[1]) and torch.equal(pid_n, reference[0]):
            raise _Failed(f"on {grid}: pid_m and pid_n are swapped; return pid_m, pid_n in that order")
        outside = ((pid_m < 0) | (pid_m >= num_pid_m) | (pid_n < 0) | (pid_n >= num_pid_n)).nonzero().flatten()
        if len(outside):
            p = int(outside[0])
            in_last_group = p >= (num_pid_m // group_m) * group_m * num_pid_n
            short = int(pid_m[p]) >= num_pid_m and num_pid_m % group_m and in_last_group
            if short:
                hint = (": the last group has fewer rows when num_pid_m is no multiple of GROUP_M; its height "
                        "is the rows that are left (tl.minimum)")
            else:
                hint = ": pid_m must stay below num_pid_m and pid_n below num_pid_n (integer division: //)"
            raise _Failed(f"on {grid}: program {p} got tile ({int(pid_m[p])}, {int(pid_n[p])}), outside the grid{hint}")
        picture = lambda: plots.launch_orders(  # noqa: E731
            {"yours": tiled.order_map(*mine, num_pid_m, num_pid_n),
             "the grouped order": tiled.order_map(*reference, num_pid_m, num_pid_n)}, title=grid)
        tiles = pid_m.long() * num_pid_n + pid_n.long()
        counts = torch.bincount(tiles, minlength=num_pid_m * num_pid_n)
        if (counts != 1).any():
            twice, never = int((counts > 1).sum()), int((counts == 0).sum())
            if int(pid_m.max()) < group_m < num_pid_m:
                why = ("every program stays in the first GROUP_M rows: add the first row of the program's own "
                       "group to pid_m")
            else:
                why = "every program must get a tile of its own: check how pid_m and pid_n follow from the position"
            raise _Failed(f"on {grid}: {_count(twice, 'tile')} taken by several programs and {never} by none: {why}",
                          picture())
        if not (torch.equal(pid_m, reference[0]) and torch.equal(pid_n, reference[1])):
            raise _Failed(f"on {grid}: every tile is taken once, but not in the grouped order. "
                          f"{_order_hint(mine, reference, num_pid_m, num_pid_n, group_m)}", picture())
    return f"right on {len(_ORDER_CASES)} grids, short last groups included"


def _order_hint(mine, reference, num_pid_m: int, num_pid_n: int, group_m: int) -> str:
    """What a permutation that is not the grouped order most likely got wrong."""
    pids = torch.arange(num_pid_m * num_pid_n)
    if torch.equal(mine[0], pids // num_pid_n) and torch.equal(mine[1], pids % num_pid_n):
        return "This is row-major order: GROUP_M is not used"
    if torch.equal(mine[0], pids % num_pid_m) and torch.equal(mine[1], pids // num_pid_m):
        return "This is column-major order over the whole grid: only GROUP_M rows form a group"
    first = int(((mine[0] != reference[0]) | (mine[1] != reference[1])).nonzero()[0])
    group_rows = first // (group_m * num_pid_n) * group_m
    if num_pid_m - group_rows < group_m:
        return ("The last group has fewer rows (num_pid_m is no multiple of GROUP_M): its height is the rows that "
                "are left, and both the row and the column within it depend on that height")
    return (f"Program {first} takes tile ({int(mine[0][first])}, {int(mine[1][first])}); in grouped order, "
            "consecutive programs go down the GROUP_M rows of their group, then one column right")


# --- 05: waves --------------------------------------------------------------------------------------

# The last two fill their last wave exactly: 12 x 11 and 27 x 4 tiles.
_WAVE_CASES = [(4096, 4096, 128, 128, 132), (3072, 3072, 128, 128, 132), (1000, 1000, 128, 128, 132),
               (4096, 4096, 128, 256, 132), (300, 5000, 64, 128, 108), (1536, 1408, 128, 128, 132),
               (3456, 512, 128, 128, 108)]


@_exercise("wave_count", "Fill in the body of wave_count above: return (tiles, waves, idle SMs in the last wave)")
def check_wave_count(wave_count) -> str:
    """Check ``wave_count(M, N, block_m, block_n, sms) -> (tiles, waves, idle)``: the tiles of an
    ``M x N`` output, the waves they take on ``sms`` SMs (one tile per SM at a time), and the SMs
    left idle in the last wave (0 when it is full)."""
    from course import tiled

    _callable("wave_count", wave_count, ("M", "N", "block_m", "block_n", "sms"))
    for M, N, bm, bn, sms in _WAVE_CASES:
        call = f"wave_count({M}, {N}, {bm}, {bn}, {sms})"
        try:
            got = wave_count(M, N, bm, bn, sms)
        except Exception as err:
            raise _user_error(call, err) from None
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            raise _Failed(f"{call} returned {got!r}: return three numbers, (tiles, waves, idle)")
        if any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in got):
            raise _Failed(f"{call} returned {got!r}: return three numbers, (tiles, waves, idle)")
        tiles, count, idle = got
        want = tiled.waves(M, N, bm, bn, sms)
        if tiles != want["tiles"]:
            edge = M % bm or N % bn
            area = -(-(M * N) // (bm * bn))
            hint = ("rounding up the whole area is not enough: a tile is whole or not at all in each "
                    "dimension, so count the tiles along M and along N, each rounded up, then multiply"
                    if edge and tiles == area else
                    "a tile is whole or not at all: the tiles that hang over the edge count too, so round "
                    "up, per dimension" if edge and tiles < want["tiles"] else
                    "count the tiles along M and along N separately, then multiply")
            if isinstance(tiles, float) and not float(tiles).is_integer():
                hint = "tiles come in whole numbers: divide with rounding up, per dimension"
            raise _Failed(f"{call} gives {tiles} tiles: {hint}")
        if count != want["waves"]:
            if count < want["waves"]:
                hint = "the last, partial wave still takes a whole wave's time: round up"
            elif want["tiles"] % sms == 0 and count == want["waves"] + 1:
                hint = "when the tiles fill the waves exactly there is no extra wave: round up, don't add one"
            else:
                hint = "a wave is `sms` tiles at once: divide the tiles by the SMs, rounding up"
            raise _Failed(f"{call} gives {count} waves: {hint}")
        if idle != want["idle in the last wave"]:
            hint = ("when the tiles fill the last wave exactly, no SM is idle" if want["idle in the last wave"] == 0
                    else "the last wave holds the tiles left after the full waves (tiles % sms); the rest of the "
                         "SMs wait")
            raise _Failed(f"{call} gives {idle} idle SMs: {hint}")
    return f"right on {len(_WAVE_CASES)} shapes"


# --- 06: the persistent loop --------------------------------------------------------------------------

_PERSISTENT_PARAMS = ("a_ptr", "b_ptr", "c_ptr", "log_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                      "stride_bn", "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
                      "NUM_PROGRAMS", "LOG")
# (num_pid_m, num_pid_n, programs, GROUP_M): a ragged last turn, fewer tiles than programs, a short last group
_SCHEDULE_CASES = [(6, 9, 4, 3), (2, 3, 8, 2), (5, 7, 3, 2)]


@_exercise("persistent_loop", "Write the body of persistent_matmul_kernel above: the loop over program pid's tiles")
def check_persistent_loop(persistent_matmul_kernel) -> str:
    """Check a kernel with the signature of ``course.persistent.persistent_matmul_kernel``: run on a
    few programs with ``LOG=True``, every tile must be computed once, by the program the round-robin
    gives it, in grouped order, and the product must be right (also with ``LOG=False``, on ragged
    edges)."""
    from course import persistent, plots

    kernel = persistent_matmul_kernel
    _jit_function("persistent_matmul_kernel", kernel, _PERSISTENT_PARAMS, kind="kernel")
    for num_pid_m, num_pid_n, programs, group_m in _SCHEDULE_CASES:
        case = f"{num_pid_m} x {num_pid_n} tiles on {programs} programs, GROUP_M = {group_m}"
        torch.manual_seed(0)
        try:
            mine = persistent.schedule(num_pid_m, num_pid_n, num_programs=programs, group_m=group_m, kernel=kernel)
        except Exception as err:
            raise _user_error(f"on {case}, your kernel", err) from None
        torch.manual_seed(0)
        ref = persistent.schedule(num_pid_m, num_pid_n, num_programs=programs, group_m=group_m)
        picture = lambda: plots.schedules({"yours": mine, "the reference": ref}, title=case)  # noqa: E731
        _diagnose_schedule(case, mine, ref, programs, picture)
    M, N, K = 70, 90, 40  # ragged tiles of 32, a ragged last step of K, LOG=False
    a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
    b = torch.randn(K, N, device=runtime.DEVICE, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
    try:
        persistent.launch(kernel, a, b, c, num_programs=3, group_m=2, block_m=32, block_n=32, block_k=32,
                          num_warps=4, num_stages=2)
    except Exception as err:
        raise _user_error(f"on {M} x {N} x {K} with LOG=False, your kernel", err) from None
    ref = a.double().cpu() @ b.double().cpu()
    if not _close(c, ref):
        raise _Failed(f"on {M} x {N} x {K} with LOG=False the product is wrong, though it was right with LOG=True: "
                      "only the call of log_tile belongs under `if LOG:`, the tile's work runs either way")
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t = torch.empty(64, 64, dtype=torch.float16)
        _compiles_for_a_gpu(kernel, t, t, t, torch.empty(64, dtype=torch.int32), 64, 64, 64, 64, 1, 64, 1, 64, 1,
                            BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_PROGRAMS=4, LOG=True)
    return (f"right on {len(_SCHEDULE_CASES)} schedules (a ragged last turn, fewer tiles than programs, a short "
            "last group) and a ragged product")


def _close(out, ref, tol: float | None = None) -> bool:
    """``rel_error(out, ref)`` within ``tol`` (default: float16's tolerance); False where ``out`` has a NaN."""
    from course.check import rel_error, tolerance

    return rel_error(out, ref) <= (tolerance(torch.float16) if tol is None else tol)


def _diagnose_schedule(case: str, mine: dict, ref: dict, programs: int, picture) -> None:
    """What a persistent loop's log says is wrong, from the likeliest mistake to the least."""
    count, c = mine["count"], mine["c"]
    tiles = count.numel()
    written = not torch.isnan(c).all()
    product_right = _close(c, mine["ref"])
    if mine["outside"]:
        if product_right and not bool((count == 1).all()):  # computed right, logged under swapped coordinates
            raise _Failed(f"on {case}: the product is right, but {_count(mine['outside'], 'tile')} were logged outside "
                          "the grid: grouped_tile returns (pid_m, pid_n), and log_tile takes (log_ptr, tile_id, "
                          "pid_m, pid_n, num_tiles, num_pid_n) in that order")
        raise _Failed(f"on {case}: your loop went past the grid: {_count(mine['outside'], 'tile')} logged outside it. "
                      "Tile ids run from 0 to num_tiles - 1 (num_tiles = num_pid_m * num_pid_n); grouped_tile "
                      "takes (tile_id, num_pid_m, num_pid_n, GROUP_M) and returns (pid_m, pid_n), in that order")
    if int(count.sum()) == 0:
        if not written:
            raise _Failed(f"on {case}: no tile was computed. Each program loops over its own tile ids (tl.range "
                          "works like range); for each id, grouped_tile gives the tile and matmul_tile computes it")
        if product_right:
            raise _Failed(f"on {case}: the product is right, but no tile was logged: after computing a tile, "
                          "call log_tile when LOG is set")
    ids = ref["tile_id"]  # each tile's id in grouped order
    never, twice = int((count == 0).sum()), int((count > 1).sum())
    if never or twice:
        missed = sorted(ids[count == 0].tolist())
        if twice == 0 and torch.equal(count == 0, ids >= programs):
            why = ("each program computed only its first tile: a program must go on to the ids NUM_PROGRAMS "
                   "further on, and so on to the end")
        elif never == 0 and torch.equal(count, torch.clamp(ids, max=programs - 1) + 1):
            why = "program pid took every tile from pid on: step from one id to the next by the number of programs"
        elif bool((count[ids % programs == 0] == programs).all()) and torch.equal(count == 0, ids % programs != 0):
            why = "every program started at tile 0: each one starts at its own id"
        elif never == 0 and bool((count == programs).all()):
            why = ("every program computed every tile: program pid starts at tile id pid and steps by "
                   "NUM_PROGRAMS")
        elif int(count.max()) >= 2 and never:
            why = ("several programs computed the same tiles: map the loop's tile id, not the program id, to a "
                   "tile with grouped_tile")
        elif twice == 0 and missed == list(range(tiles - never, tiles)):
            why = (f"the last tile ids ({_ids(missed)}) were never taken: the loop stops early; it runs up to "
                   "num_tiles, the tiles of the whole grid")
        elif twice == 0 and missed == list(range(never)):
            why = f"the first tile ids ({_ids(missed)}) were never taken: check where each program's loop starts"
        else:
            why = f"tile ids {_ids(missed)} were never taken: each id from 0 to num_tiles - 1 needs exactly one program"
        raise _Failed(f"on {case}: {_count(twice, 'tile')} computed more than once and {never} never "
                      f"(of {tiles}): {why}", picture())
    if not written:
        raise _Failed(f"on {case}: every tile was logged once, but C was never written: compute each tile with "
                      "matmul_tile")
    if not product_right:
        raise _Failed(f"on {case}: every tile was computed once, but the product is wrong: call matmul_tile with "
                      "the tile's pid_m, pid_n from grouped_tile (in that order) and the kernel's own arguments")
    if not torch.equal(mine["program"], ref["program"]):
        row_major = torch.arange(tiles).view_as(ids)
        if torch.equal(mine["tile_id"], row_major):
            why = "the tile ids go row by row: map each id to its tile with grouped_tile, as in notebook 04"
        else:
            why = ("program pid must take every NUM_PROGRAMS-th tile id from its own id on, and map each to a "
                   "tile with grouped_tile")
        raise _Failed(f"on {case}: every tile was computed once and the product is right, but not by the "
                      f"programs of the grouped round-robin: {why}", picture())
    if not torch.equal(mine["tile_id"], ids):
        raise _Failed(f"on {case}: right, but log_tile got other tile ids than the loop's: pass the loop's tile "
                      "id, then pid_m and pid_n", picture())


def _ids(ids: list) -> str:
    return ", ".join(map(str, ids[:4])) + (f", … ({len(ids)} in all)" if len(ids) > 4 else "")


# --- 07: a kernel written with the stages -------------------------------------------------------------

_LINEAR_PARAMS = ("A", "W", "C", "M", "N", "K", "stride_am", "stride_ak", "stride_wn", "stride_wk", "stride_cm",
                  "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_SMS", "EVEN_K")


@_exercise("linear", "Write the body of linear_kernel above with the stages: C = A @ W.T for a weight W of (N, K)")
def check_linear(linear_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``solutions.linear_kernel``: ``C = A @ W.T``
    for ``W`` of shape (N, K), on whole and ragged tiles, a ragged K, a transposed A and a sliced W,
    launched on a few programs (``stages_kernels.launch_linear``)."""
    from course import stages_kernels

    _jit_function("linear_kernel", linear_kernel, _LINEAR_PARAMS, kind="kernel")
    cases = [("whole tiles (64 x 64 x 64)", 64, 64, 64, {}), ("ragged tiles (50 x 70 x 64)", 50, 70, 64, {}),
             ("a ragged K (64 x 64 x 40)", 64, 64, 40, {}),
             ("a transposed A and a sliced W (48 x 40 x 32)", 48, 40, 32, {"strided": True})]
    for what, M, N, K, options in cases:
        torch.manual_seed(0)
        a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
        w = torch.randn(N, K, device=runtime.DEVICE, dtype=torch.float16)
        if options.get("strided"):
            a = a.T.contiguous().T  # column-major
            w = torch.cat([w, w], dim=1)[:, :K]  # rows 2K apart
        buffer = torch.full((M * N + max(M, N, K) ** 2,), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
        c = buffer[:M * N].view(M, N)  # the rest catches stores past C (a wrong view would corrupt memory)
        try:
            stages_kernels.launch_linear(linear_kernel, a, w, c, num_programs=3, block_m=32, block_n=32, block_k=32,
                                         num_warps=4, num_stages=2)
        except Exception as err:
            raise _user_error(f"on {what}, your kernel", err) from None
        if not torch.isnan(buffer[M * N:]).all():
            raise _Failed(f"on {what}: the kernel stored past the end of C: C's output view is M x N (M rows, "
                          "N columns) with C's strides, stride_cm and stride_cn")
        _diagnose_linear(what, a, w, c)
    _each_program_its_own_tiles(linear_kernel)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t = torch.empty(64, 64, dtype=torch.float16)
        _compiles_for_a_gpu(linear_kernel, t, t, t, 64, 64, 64, 64, 1, 64, 1, 64, 1, BLOCK_M=32, BLOCK_N=32,
                            BLOCK_K=16, NUM_SMS=4, EVEN_K=True)
    return f"right on {len(cases)} products: whole and ragged tiles, a ragged K, a transposed A and a sliced W"


def _diagnose_linear(what: str, a, w, c) -> None:
    K, N = a.shape[1], w.shape[0]
    ref = a.double().cpu() @ w.double().cpu().T
    missing = int(torch.isnan(c).sum())
    if missing == c.numel():
        raise _Failed(f"on {what}: nothing was stored into C: for every tile of the schedule, reduce it over K and "
                      "store the accumulator through an output view of C")
    if missing:
        holes = torch.isnan(c).cpu()
        rows, cols = holes.all(dim=1), holes.all(dim=0)
        if rows.any() and torch.equal(holes, rows[:, None].expand_as(holes)) or \
                cols.any() and torch.equal(holes, cols[None, :].expand_as(holes)):
            raise _Failed(f"on {what}: whole rows or columns of C were never stored: check the sizes you give "
                          "ScheduleContext and the output view (M rows, N columns, K the shared dimension)")
        raise _Failed(f"on {what}: {missing} of {c.numel()} elements of C were never stored: take every tile "
                      "that ScheduleContext.persistent_tile_range gives this program (the kernel runs on 3 programs)")
    if _close(c, ref):
        return
    try:  # W's own memory read with its strides the wrong way round (as the kernel would)
        wrong_strides = torch.as_strided(w, (K, N), w.stride()).double().cpu()
    except RuntimeError:  # that view would reach past W's memory
        wrong_strides = None
    if K == N and _close(c, a.double().cpu() @ w.double().cpu()):
        raise _Failed(f"on {what}: you computed A @ W, not A @ W.T: B must be W's transpose, a K x N view of W's "
                      "own memory. Which of W's two strides moves you along k, and which along n?")
    if wrong_strides is not None and _close(c, a.double().cpu() @ wrong_strides):
        raise _Failed(f"on {what}: B's view walks W with the strides the wrong way round: element (k, n) of W.T is "
                      "W[n, k], so B's row stride is stride_wk and its column stride stride_wn")
    truncated = (K // 32) * 32
    if K % 32 and _close(c, a.double().cpu()[:, :truncated] @ w.double().cpu()[:, :truncated].T):
        raise _Failed(f"on {what}: the last, partial step of K is missing or zero: tell GemmContext whether K is a "
                      "multiple of BLOCK_K (even_k=EVEN_K)")
    if "transposed" in what:  # right on every contiguous case before it
        raise _Failed(f"on {what}: wrong values, where the contiguous cases were right: build each view from the "
                      "stride arguments you are given (stride_am, stride_ak, stride_wn, stride_wk), not from K and 1")
    raise _Failed(f"on {what}: wrong values. A is M x K (stride_am, stride_ak), B = W.T is K x N, C is M x N "
                  "(stride_cm, stride_cn); check each view's sizes and strides")


def _each_program_its_own_tiles(linear_kernel) -> None:
    """Launch one program of NUM_SMS = 3: only the tiles of program 0 (ids 0, 3, 6, ...) may be written;
    a kernel whose programs all compute every tile is right, and three times too slow."""
    M = N = K = 64  # 2 x 2 tiles of 32: program 0 of 3 owns tile ids 0 and 3
    a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
    w = torch.randn(N, K, device=runtime.DEVICE, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
    linear_kernel[(1,)](a, w, c, M, N, K, *a.stride(), *w.stride(), *c.stride(), BLOCK_M=32, BLOCK_N=32,
                        BLOCK_K=32, NUM_SMS=3, EVEN_K=True, num_warps=4, num_stages=2)
    written = (~torch.isnan(c)).cpu().view(2, 32, 2, 32).all(dim=3).all(dim=1).flatten().tolist()
    if sum(written) > 2:
        raise _Failed("right, but each program computes tiles that belong to other programs: with NUM_SMS "
                      "programs, program pid takes only the tile ids of persistent_tile_range (pid, pid + NUM_SMS, "
                      "...), with NUM_SMS given to GemmContext")


# --- 08: an epilogue ----------------------------------------------------------------------------------


@_exercise("gelu", "Write the body of gelu above: the tanh approximation of GELU for a float32 tile x")
def check_gelu(gelu) -> str:
    """Check a ``@triton.jit`` function ``gelu(x)``, the tanh approximation of GELU, on values from -12 to 12
    and far out to +-10^4 (each, in a kernel), then as the epilogue of ``epilogues.fused_linear_kernel``."""
    from course import epilogues

    _jit_function("gelu", gelu, ("x",))
    far = torch.tensor([50.0, 100.0, 1e3, 1e4])
    x = torch.cat([torch.linspace(-12, 12, 481), far, -far]).to(runtime.DEVICE)
    try:
        got = epilogues.apply(gelu, x).cpu().double()
    except Exception as err:
        raise _user_error("applied to a tile, your gelu", err) from None
    xs = x.cpu().double()
    want = torch.nn.functional.gelu(xs, approximate="tanh")

    bad = ~torch.isfinite(got)
    if bad.any():
        at = float(xs[bad][0])
        raise _Failed(f"gelu({at:g}) is {float(got[bad][0])}: for large |x| an exp overflowed (to inf, and inf / inf "
                      "or inf - inf is nan). Build tanh from an exp that cannot overflow, and mind the sign")
    core = slice(0, 481)  # -12 .. 12, where the forms of GELU differ; past it every GELU is x or 0
    far_wrong = ((got[481:] - want[481:]).abs() > 1e-5 * want[481:].abs() + 1e-6).any()
    if _close(got[core], want[core], 1e-5) and far_wrong:
        worst = 481 + int(torch.argmax((got[481:] - want[481:]).abs()))
        raise _Failed(f"gelu({float(xs[worst]):g}) is {float(got[worst]):.6g}, GELU gives {float(want[worst]):.6g}: "
                      "right from -12 to 12, wrong far out")
    got, want, xs = got[core], want[core], xs[core]
    if not _close(got, want, 1e-5):
        if _close(got, xs, 1e-5):
            raise _Failed("gelu returned its input unchanged: the epilogue must transform the tile")
        if _close(got, 2 * want, 1e-5):
            raise _Failed("gelu is twice too large: GELU has a factor 0.5 in front")
        if _close(got, torch.nn.functional.gelu(xs), 5e-6):
            raise _Failed("this is the exact GELU, with erf; write the tanh approximation given above")
        if _close(got, want.half().double(), 1e-5):
            raise _Failed("the values are rounded to 16 bits: keep the tile in float32 (the store converts it)")
        if _close(got, 0.5 * xs * (1 + torch.tanh(0.7978845608028654 * xs)), 1e-3):
            raise _Failed("the cubic term is missing: tanh's argument is sqrt(2 / pi) (x + 0.044715 x^3)")
        u = 0.7978845608028654 * (xs + 0.044715 * xs ** 3)
        if _close(got, 0.5 * xs * (1 + torch.tanh(u.abs())), 1e-5):
            raise _Failed("wrong for negative x: your tanh lost its sign. tanh is odd, tanh(-u) = -tanh(u): compute "
                          "it for |u| and restore the sign with tl.where")
        if _close(got, want, 1e-2):
            raise _Failed("close, but not GELU's tanh approximation: check the constants (0.5, sqrt(2 / pi) = "
                          "0.7978845608..., 0.044715)")
        worst = int(torch.argmax((got - want).abs()))
        raise _Failed(f"gelu({float(xs[worst]):g}) is {float(got[worst]):.6g}, GELU's tanh approximation gives "
                      f"{float(want[worst]):.6g}")
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
        raise _Failed("as an epilogue, gelu gave inf or nan on some accumulator values: an exp overflowed. Build "
                      "tanh from an exp that cannot overflow")
    if not _close(y, epilogues.reference(a, w, bias, "gelu"), 1e-4):
        raise _Failed("right value by value, but wrong as an epilogue: gelu must work on a whole tile at once "
                      "(tl functions, no Python math on single values)")
    return "right from -10^4 to 10^4 and as the epilogue of a fused linear layer"


# --- 09: a program's share of the Stream-K iterations -----------------------------------------------

# (num_pid_m, num_pid_n, iters per tile, programs, Stream-K tiles): an even split, a remainder, fewer
# iterations than programs
_SPAN_CASES = [(6, 5, 8, 4, 6), (2, 3, 7, 4, 6), (3, 3, 3, 8, 1)]


@_exercise("streamk_span", "Write the body of span above: program pid's (start, end) of the total iterations")
def check_streamk_span(span) -> str:
    """Check a ``@triton.jit`` function ``span(pid, total, sharers) -> (start, end)``: run in place of
    ``ScheduleContext.iter_range`` (``streamk.assignment``), the ranges must cover every shared
    iteration once, lie in program order and differ in length by at most one."""
    from course import plots, streamk

    _jit_function("span", span, ("pid", "total", "sharers"))
    try:
        floats = streamk.span_returns_floats(span)
    except Exception as err:
        raise _user_error("your span", err) from None
    if any(floats):
        raise _Failed("span returns floats: ranges of iterations are counted in whole numbers, and a GPU refuses "
                      "float loop bounds; divide with // (integer division)")
    for num_pid_m, num_pid_n, iters, programs, shared in _SPAN_CASES:
        total = shared * iters
        case = f"{total} iterations ({shared} tiles of {iters}) over {programs} programs"
        try:
            log = streamk.assignment(num_pid_m, num_pid_n, iters, num_programs=programs, streamk_tiles=shared,
                                     span=span)
        except Exception as err:
            raise _user_error(f"on {case}, your span", err) from None
        picture = lambda: plots.streamk_map(log, title=f"yours: {case}")  # noqa: E731
        owner, count = log["owner"][-shared:].flatten(), log["count"][-shared:].flatten()
        never, twice = int((count == 0).sum()), int((count > 1).sum())
        one_past = "end is one past the last iteration, as in range(start, end): the next program's start"
        if log["outside"]:
            if int(log["outside"]) == 1 and twice == programs - 1 and not never:
                raise _Failed(f"on {case}: every range is one iteration too long: {one_past}", picture())
            raise _Failed(f"on {case}: ranges run outside the iterations ({_count(log['outside'], 'iteration')} "
                          "below 0 or from total on): they must stay within 0 .. total - 1", picture())
        if never or twice:
            sizes = torch.bincount(owner[count > 0].long(), minlength=programs)
            if twice:
                why = "ranges overlap: each program's range must start where the previous one's ends"
            elif total % programs and int(sizes.sum()) == (total // programs) * programs:
                why = ("some iterations are left over: the total does not split evenly, and the remainder must go "
                       "to some of the programs")
            elif never == min(programs, total):
                why = f"every range stops one iteration short: {one_past}"
            else:
                why = ("some ranges are empty or cut short: each one starts where the previous one ends, and "
                       "together they run from 0 to total")
            raise _Failed(f"on {case}: {_count(twice, 'iteration')} computed more than once and {never} never: {why}",
                          picture())
        if (owner[1:] < owner[:-1]).any():
            raise _Failed(f"on {case}: every iteration is taken once, but not in program order: program 0's range "
                          "comes first, then program 1's, and so on", picture())
        sizes = torch.bincount(owner.long(), minlength=programs)
        if int(sizes.max() - sizes.min()) > 1:
            raise _Failed(f"on {case}: the ranges hold {sizes.tolist()} iterations: split as evenly as possible, "
                          "lengths differing by at most one (the slowest program sets the time)", picture())
    return f"right on {len(_SPAN_CASES)} splits: even, with a remainder, and fewer iterations than programs"


# --- 10: a layout whose threads load 16 bytes at a time ---------------------------------------------

@_exercise("vector_layout", "Write vector_layout above: a BlockedLayout in which every thread loads 16 bytes at once")
def check_vector_layout(vector_layout) -> str:
    """Check ``vector_layout() -> gl.BlockedLayout`` for a 64 x 64 float16 tile, row-major in memory, on
    4 warps: every element held by exactly one thread; each thread's elements in runs of 8 consecutive
    float16 of a row (16 bytes: one vectorized load each); neighbouring lanes side by side along a row,
    so that a warp's load uses whole 32-byte sectors."""
    from course import layouts

    _callable("vector_layout", vector_layout, ())
    try:
        layout = vector_layout()
    except AssertionError as err:
        if str(err):
            raise _user_error("your vector_layout", err) from None
        raise _Failed("gl.BlockedLayout refused its arguments (an assertion without a message): its four lists "
                      "must have the same length, and each has two here, one for the rows and one for the "
                      "columns") from None
    except Exception as err:
        raise _user_error("your vector_layout", err) from None
    if type(layout).__name__ != "BlockedLayout":
        raise _Failed(f"vector_layout returned {type(layout).__name__ if layout is not None else 'None'}: return "
                      "gl.BlockedLayout(size_per_thread, threads_per_warp, warps_per_cta, order)")
    names = ("size_per_thread", "threads_per_warp", "warps_per_cta", "order")
    lists = [getattr(layout, name) for name in names]
    for name, values in zip(names, lists):
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                             for v in values):
            raise _Failed(f"{name}={values!r}: pass a list of ints, one per dimension")
    size, threads, warps, order = (list(v) for v in lists)
    if len(size) != 2:
        raise _Failed(f"the layout has rank {len(size)}: the tile is 2-D, so each list has two entries (rows, "
                      "columns)")
    if not len(threads) == len(warps) == len(order) == 2:
        raise _Failed(f"the four lists have {len(size)}, {len(threads)}, {len(warps)} and {len(order)} entries: "
                      "each has two, one for the rows and one for the columns")
    for name, values in zip(names[:3], (size, threads, warps)):
        if any(v < 1 or v & (v - 1) for v in values):
            raise _Failed(f"{name}={values}: every entry must be a power of two (1, 2, 4, 8, ...)")
    if math.prod(threads) != 32:
        raise _Failed(f"threads_per_warp={threads} makes {math.prod(threads)} threads: a warp has 32")
    if math.prod(warps) != 4:
        raise _Failed(f"warps_per_cta={warps} makes {math.prod(warps)} warps: the kernel runs on 4")
    if sorted(order) != [0, 1]:
        raise _Failed(f"order={order}: order lists the dimensions, fastest first, each once")
    if order[0] != 1:
        raise _Failed(f"order={order} makes dimension 0 (down a column) the fastest: in a row-major tile, which "
                      "dimension is contiguous in memory?")
    tile = [s * t * w for s, t, w in zip(size, threads, warps)]
    if tile[0] > 64 or tile[1] > 64:
        copies = int(layouts.ownership(layout, (64, 64))["copies"].max())
        raise _Failed(f"the layout's tile is {tile[0]} x {tile[1]} (size x threads x warps per dimension), larger "
                      f"than the 64 x 64 tile: up to {copies} threads hold the same element. Keep each dimension's "
                      "product within 64")
    run = 2 * size[1]  # bytes of consecutive float16 one thread holds along a row
    if run < 16:
        raise _Failed(f"each thread holds {size[1]} consecutive float16 of a row, {run} bytes: the widest load moves "
                      "16 bytes at once. How many float16 is that?")
    if run > 16:
        raise _Failed(f"each thread holds {size[1]} consecutive float16 of a row, {run} bytes: that is {run // 16} "
                      f"16-byte loads, and in each the neighbouring lanes start {run} bytes apart, so every 32-byte "
                      "sector comes half used. Make a thread's run exactly one 16-byte load")
    if threads[1] < 2:
        raise _Failed(f"threads_per_warp={threads} puts the lanes of a warp on {threads[0]} different rows, 16 "
                      "bytes each: every 32-byte sector a load fetches comes half used. Put neighbouring lanes side "
                      "by side along a row")
    owner = layouts.ownership(layout, (64, 64))
    if (owner["copies"] != 1).any():
        raise _Failed("some elements are held by several threads: the layout's tile must divide 64 x 64")
    return (f"every element held once, each thread's in runs of 8 float16 along a row: one 16-byte load (LDG.E.128) "
            f"per run, {int(owner['register'].max()) // 8 + 1} per thread; a warp's load reads {16 * threads[1]} "
            f"contiguous bytes of each of {threads[0]} rows")


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


@_exercise("softmax_step", "Write softmax_step above: the online-softmax update of one block of keys")
def check_softmax_step(softmax_step) -> str:
    """Check a ``@triton.jit`` ``softmax_step(m_i, l_i, acc, s, v)`` as the update of
    ``attention.attention_kernel``: on ordinary scores whose row maximum grows from block to block, on
    scores in the thousands of both signs (where an exp that is not shifted by the maximum overflows
    or underflows), and under a causal mask."""
    from course import attention
    from course.check import rel_error

    _jit_function("softmax_step", softmax_step, ("m_i", "l_i", "acc", "s", "v"))
    source = inspect.getsource(softmax_step.fn)
    builtin = re.search(r"(?<![\w.])(max|min)\(", source)
    if builtin:
        raise _Failed(f"softmax_step calls Python's {builtin.group(1)}(): on tensors use tl.{builtin.group(1)}imum(a, b) "
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
            failed = _user_error("inside the attention kernel, your softmax_step", err)
            if re.search(r"rank|shape|broadcast|incompatible", str(failed)):
                failed = _Failed(f"{failed}\n  Shapes: s is [BLOCK_M, BLOCK_N], v [BLOCK_N, d]; return (m, l, acc) in that "
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
        raise _Failed("the output has inf or nan on ordinary scores: does every exp2 subtract the new running "
                      "maximum m_new (m_i is -inf before the first block; the row maximum is tl.max(s, 1)), and is "
                      "l_i a sum of exponentials?")
    if not _close(got, want):
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
            if _close(got, _online_attention(q.double(), k.double(), v.double(), 16, variant), 2e-2):
                raise _Failed(message)
        raise _Failed(f"the output differs from softmax(Q Kᵀ / √d) V by {rel_error(got, want):.2g} (relative): "
                      "return (m, l, acc) in that order, and check each of the update's rules in the notebook")
    for sign in (1, -1):  # scores of +-thousands: exp2 of an unshifted score is inf or 0
        big = run(q * 200 * sign, k, v)
        want = _online_attention((q * 200 * sign).double(), k.double(), v.double(), 16)
        if not torch.isfinite(big).all() or not _close(big, want):
            raise _Failed(f"right on ordinary scores, but with scores of {'+' if sign > 0 else '-'}thousands the "
                          "output is " + ("inf or nan" if not torch.isfinite(big).all() else "wrong") + ": an exp2 "
                          "of a score that is not shifted by its row's running maximum (tl.max(s, 1), combined "
                          "with m_i) overflows, or underflows to 0")
    causal = run(q, k, v, causal=True)
    if not _close(causal, attention.reference(q[None, None], k[None, None], v[None, None], causal=True)[0, 0]):
        raise _Failed("right without a mask, wrong with the causal mask: masked scores are -inf, so their "
                      "exponentials must come out 0 (exp2(-inf) is 0; don't replace -inf)")
    return "the online softmax matches float64 on ordinary scores, on scores of ±thousands and under a causal mask"


_MODES = ("persistent", "streamk", "tail", "gluon")


@_exercise("mode_choice", "Write choose_mode above: the course.gemm mode for an M x N x K bfloat16 product on an H100")
def check_mode_choice(choose_mode) -> str:
    """Check ``choose_mode(M, N, K, tile) -> str`` against the recorded benchmark (``gemm_h100-sxm``):
    on each of its bfloat16 rows (``tile``: the Triton kernel's ``(block_m, block_n)`` there), the mode
    chosen is scored by its recorded speed over the best recorded mode's (the persistent kernel's
    speed where the record has none for the mode: it does not apply there), within 3 % counting as a
    tie. Passes at a geometric mean of at least 0.99 and at least 0.90 on every row."""
    from course import records

    _callable("choose_mode", choose_mode, ("M", "N", "K", "tile"))
    bench = records.load("gemm_h100-sxm")
    scored = []
    for r in (r for r in bench.rows if r["dtype"] == "bf16"):
        M, N, K = r["M"], r["N"], r["K"]
        tile = tuple(int(v) for v in re.match(r"(\d+)x(\d+)", r["config"]).groups())
        try:
            mode = choose_mode(M, N, K, tile)
        except Exception as err:
            raise _user_error(f"choose_mode({M}, {N}, {K}, {tile})", err) from None
        if mode not in _MODES:
            raise _Failed(f"choose_mode({M}, {N}, {K}, {tile}) returned {mode!r}: return one of "
                          f"{', '.join(repr(m) for m in _MODES)}")
        speed = r.get(f"{mode}_ratio") or r["persistent_ratio"]
        best_mode = max(_MODES, key=lambda m: r.get(f"{m}_ratio") or 0)
        score = speed / r[f"{best_mode}_ratio"]
        scored.append((1.0 if score >= 0.97 else score, r, mode, speed, best_mode, tile))
    worst = min(scored, key=lambda s: s[0])
    score, r, mode, speed, best_mode, tile = worst
    where = f"{r['name']} ({r['M']} x {r['N']} x {r['K']}, Triton tiles {tile[0]} x {tile[1]})"
    if len({s[2] for s in scored}) == 1:
        why = {"gluon": "the Gluon kernel is slower than the Triton kernel where the waves are full",
               "persistent": "which shapes leave the last wave of the Triton kernel's tiles mostly empty?",
               "tail": "a tail split helps only shapes with several waves and a thin last one",
               "streamk": "Stream-K splits only the last wave, and gains little on an H100 (notebook 09)"}[mode]
        raise _Failed(f"choose_mode returns {mode!r} for every shape: at {where} that runs at {score:.2f} of the best "
                      f"recorded mode. {why[0].upper() + why[1:]}")
    geomean = math.exp(sum(math.log(s[0]) for s in scored) / len(scored))
    if score < 0.90:
        raise _Failed(f"at {where} your {mode!r} runs at {speed:.2f}x cuBLAS's speed, the best mode, {best_mode!r}, "
                      f"at {r[f'{best_mode}_ratio']:.2f}x (recorded): {score:.2f} of the best. Count that shape's tiles "
                      "and waves for each kernel's tiles (an idle part of the last wave costs about 1 / waves of "
                      "the run)")
    if geomean < 0.99:
        losses = ", ".join(f"{s[1]['name']} ({s[2]}: {s[0]:.2f})" for s in sorted(scored, key=lambda s: s[0])[:3])
        raise _Failed(f"your choices reach {geomean:.3f} of the best recorded mode on average (geometric mean over "
                      f"{len(scored)} shapes, within 3 % counted as a tie), under 0.99; the biggest losses: {losses}")
    hits = sum(s[0] == 1.0 for s in scored)
    outside = "; ".join(f"{s[1]['name']}: {s[2]!r} at {s[0]:.2f} of {s[4]!r}" for s in sorted(scored, key=lambda s: s[0])
                        if s[0] < 1.0)
    return (f"your choices reach {geomean:.3f} of the best recorded mode on average and at least {score:.2f} on every "
            f"shape, within 3 % of the best on {hits} of {len(scored)}" + (f" (the others: {outside})" if outside else "")
            + f". {bench.banner}")
