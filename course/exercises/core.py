"""What every exercise check shares: verdicts (✓, ✗ or "not attempted", printed as one line), the
time limit, error hints, launch recording and the small helpers the notebook modules use."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import dis
import functools
import inspect
import io
import math
import re
import textwrap
import warnings
from typing import Callable

import numpy as np
import torch

from course import runtime


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


class Failed(Exception):
    """Raised inside a check to end it with a ✗ line (caught by :func:`exercise`)."""

    def __init__(self, message: str, picture=None):
        super().__init__(message)
        self.picture = picture


class TimedOut(BaseException):
    """Raised by :func:`time_limit` when a check runs too long."""


class NotAttempted(Exception):
    """Raised inside a check for a part still to write (the message says which), or with no message
    for a stub."""


_VERDICTS: dict[str, Verdict] = {}  # the latest verdict of each exercise
_CHECKING: str | None = None  # the exercise whose check is running
CHECKS: dict[str, Callable] = {}  # exercise name -> its check, in the order the notebooks' modules define them


_LAST: Verdict | None = None


def verdicts() -> dict[str, Verdict]:
    """The latest verdict of every exercise checked in this session, by exercise name."""
    return dict(_VERDICTS)


def last() -> Verdict | None:
    """The verdict of the check that ran last (None before any)."""
    return _LAST


def exercise(name: str, what_to_write: str):
    """Turn a check body into an exercise check: stubs get the "not attempted" line, a ``Failed``
    gets one ✗ line (and its picture, if any), an error raised by the learner's own code is
    reported in a few lines without the checker's frames, success gets the ✓ line."""

    def wrap(body: Callable[..., str]):
        def check(*args, **kwargs):
            global _LAST, _CHECKING
            picture = None
            try:
                if args and all(is_stub(a) for a in args):
                    raise NotAttempted
                _CHECKING = name
                UNFILLED_LOADS.clear()
                with time_limit(TIME_LIMIT_S), bounds_checked(), reference_refused(name, args), \
                        warnings.catch_warnings():
                    # numpy's overflow and divide-by-zero warnings from a wrong kernel under the
                    # interpreter say nothing the verdict does not
                    warnings.simplefilter("ignore", RuntimeWarning)
                    verdict = Verdict(name, "passed", body(*args, **kwargs))
            except NotAttempted as pending:
                what = str(pending) or what_to_write
                verdict = Verdict(name, "not attempted",
                                  f"not attempted yet.\n  {what}, then run this cell again.\n"
                                  f"  Stuck? exercises.solution({name!r}) in a new cell loads the reference solution.")
            except Failed as failure:
                message = str(failure)
                if UNFILLED_LOADS and "hint:" not in message:
                    message += f"\n  hint: {UNFILLED_HINT}"
                verdict, picture = Verdict(name, "failed", message), failure.picture
            except (OutOfBounds, UsesReference) as stray:
                verdict = Verdict(name, "failed", str(stray))
            except TimedOut as timeout:
                verdict = Verdict(name, "failed", f"the check gave up after {timeout.args[0]} s: does every loop in "
                                                  "your code end (a while loop must advance its counter)?")
            finally:
                _CHECKING = None
            _VERDICTS[name] = _LAST = verdict
            print(verdict.line)
            if picture is not None:
                show(picture)

        check.__name__ = body.__name__
        check.__doc__ = body.__doc__
        check.__wrapped__ = body
        check.__module__ = body.__module__  # the notebook's module (course.grade reads it)
        check.exercise = name
        CHECKS[name] = check
        return check

    return wrap


# Under the interpreter a kernel whose loop never ends would hang the cell: a check gives up after this.
TIME_LIMIT_S = 60  # the slowest check takes about 15 s on one busy core


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise a ✗ if the block runs longer than ``seconds`` (main thread, POSIX only). It stops a kernel
    under the interpreter and the learner's Python anywhere; a compiled kernel that hangs on a GPU
    cannot be stopped from Python."""
    import signal
    import threading

    usable = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    fired = []

    def give_up(signum, frame):
        fired.append(True)
        raise TimedOut(seconds)  # not an Exception: the interpreter and the checks must not catch it

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds)
    try:
        yield
    except BaseException as error:
        # raised where the interpreter happened to be, TimedOut can come out as another error (a
        # cleanup that fails half-way, a check that reports the kernel's exception): the alarm decides
        if fired and not isinstance(error, TimedOut):
            raise TimedOut(seconds) from error
        raise
    else:
        if fired:  # swallowed on the way out
            raise TimedOut(seconds)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class UsesReference(BaseException):
    """Raised when the learner's function calls the reference that :func:`yours_or_reference` handed out,
    inside that exercise's own check (not an Exception, so no check's ``except Exception`` hides it)."""


class OutOfBounds(BaseException):
    """Raised by :func:`bounds_checked` when a kernel touches memory outside its tensors (not an
    Exception, so neither the interpreter nor a check's own ``except Exception`` swallows it)."""


@contextlib.contextmanager
def bounds_checked():
    """Under the interpreter, end the check with a ✗ when a kernel launched inside the block loads or
    stores outside the memory of the tensors passed to that launch.

    The interpreter dereferences whatever address a kernel computes, so a wrong stride can read
    memory the process does not own and kill it ("Kernel died"). Every masked-in address of every
    load, store and atomic is first compared with the storages of the launch's tensor arguments
    (guard regions included). On a GPU nothing is checked: there the check's smallest case runs first.
    """
    if not runtime.INTERPRET:
        yield
        return
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if getattr(builder, "_course_bounds_checked", False):  # a check inside a check: the outer one guards
        yield
        return
    executor = interpreter.GridExecutor
    memory = []  # (first byte, end, argument name, element size) of each tensor of the current launch
    original_init = executor._init_args_hst

    def record(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        memory.clear()
        named = list(zip(self.arg_names, args_hst)) + list(kwargs_hst.items())
        for name, arg in named:
            for tensor in _tensors_in(arg):
                storage = tensor.untyped_storage()
                memory.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes(), name,
                               tensor.element_size()))
        return args_hst, kwargs_hst

    def guard(what, original, ptr_at, mask_at):
        def op(*args):
            ptrs = args[ptr_at]
            mask = args[mask_at] if mask_at is not None else None
            _check_addresses(what, ptrs, mask, memory)
            if what == "load" and args[2] is None and _masks_some(mask):
                # Triton leaves the masked-off values of a load without other= undefined (a GPU may give
                # garbage); the interpreter gives 0, which can hide the slip
                poison = _undefined_like(ptrs, interpreter)
                if poison is not None:
                    args = (*args[:2], poison, *args[3:])
                    UNFILLED_LOADS.append(what)
            return original(*args)
        return op

    patched = {"create_masked_load": ("load", 0, 1), "create_masked_store": ("store", 0, 2),
               "create_atomic_rmw": ("atomic", 1, 3), "create_atomic_cas": ("atomic", 0, None)}
    saved = {name: getattr(builder, name) for name in patched if hasattr(builder, name)}
    for name, original in saved.items():
        what, ptr_at, mask_at = patched[name]
        setattr(builder, name, guard(what, original, ptr_at, mask_at))
    executor._init_args_hst = record
    builder._course_bounds_checked = True
    try:
        yield
    finally:
        executor._init_args_hst = original_init
        for name in (*saved, "_course_bounds_checked"):
            builder.__dict__.pop(name, None)  # back to the class's methods


# What the masked-off lanes of a load without other= get under a check: inf, which spoils a sum or a maximum
# it reaches and, times the 0 of another operand's masked lane, a tl.dot (inf * 0 is NaN); an unmasked store
# of it still shows as a write (the checks mark unwritten memory with NaN)
_UNDEFINED_BITS = {"fp16": np.uint16(0x7C00), "bf16": np.uint16(0x7F80)}  # held as their 16 bits


def _undefined_like(ptrs, interpreter):
    """A block of inf of the type ``ptrs`` point to, as the interpreter holds it; None for types other than
    float16, bfloat16, float32 and float64."""
    ty, shape = ptrs.get_element_ty(), np.shape(ptrs.data)
    if str(ty) not in ("fp16", "bf16", "fp32", "fp64"):
        return None
    dtype = interpreter._get_np_dtype(ty)
    value = np.full(shape, np.inf, dtype=dtype) if dtype.kind == "f" else np.full(shape, _UNDEFINED_BITS[str(ty)])
    return interpreter.TensorHandle(value, ty)


def _masks_some(mask) -> bool:
    return mask is not None and not np.asarray(mask.data, dtype=bool).all()


# Masked loads without other= seen in the current check (bounds_checked gives their masked-off lanes inf)
UNFILLED_LOADS: list[str] = []
UNFILLED_HINT = ("a masked tl.load without other= leaves the values it masks off undefined (a GPU may give "
                 "garbage; this check gave them inf): where they reach a sum, a maximum or a tl.dot, give "
                 "other= (0.0 for a sum, -inf for a maximum, 0.0 for a maximum of |x|)")


def masked_addresses(ptrs, mask) -> np.ndarray:
    """The byte addresses an interpreted load or store reaches: those of ``ptrs`` its ``mask`` lets through."""
    addresses = np.asarray(ptrs.data, dtype=np.uint64)
    if mask is not None:
        addresses = addresses[np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)]
    return addresses.ravel()


@contextlib.contextmanager
def watching_loads(see: Callable):
    """Under the interpreter on the CPU, call ``see(addresses)`` with the byte addresses (a flat uint64 array,
    masks applied) of every tl.load of the kernels launched inside the block, before it reads them. A check
    uses it to count reads that stay inside a tensor's memory but outside the view it means (a mask that lets
    an edge through, a wrong stride): results may still be right, but a GPU can fault there."""
    if not runtime.INTERPRET or runtime.DEVICE != "cpu":
        yield
        return
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    saved = builder.__dict__.get("create_masked_load")  # bounds_checked's guard, when inside a check
    original = builder.create_masked_load

    def load(ptrs, mask, *rest):
        see(masked_addresses(ptrs, mask))
        return original(ptrs, mask, *rest)

    builder.create_masked_load = load
    try:
        yield
    finally:
        if saved is None:
            builder.__dict__.pop("create_masked_load", None)
        else:
            builder.create_masked_load = saved


def _tensors_in(arg):
    """The torch tensors in a kernel argument (a tensor, a tuple of them, a tensor descriptor)."""
    if isinstance(arg, torch.Tensor):
        return [arg]
    if isinstance(arg, (tuple, list)):
        return [t for a in arg for t in _tensors_in(a)]
    base = getattr(arg, "base", None)
    return [base] if isinstance(base, torch.Tensor) else []


def _check_addresses(what: str, ptrs, mask, memory) -> None:
    """Raise :class:`OutOfBounds` if an address of ``ptrs`` that ``mask`` lets through lies outside
    every range of ``memory``."""
    addresses = masked_addresses(ptrs, mask)
    if addresses.size == 0 or not memory:
        return
    size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    starts = np.array([m[0] for m in memory], dtype=np.uint64)
    ends = np.array([m[1] for m in memory], dtype=np.uint64)
    inside = ((addresses[:, None] >= starts[None, :]) & (addresses[:, None] + np.uint64(size) <= ends[None, :]))
    outside = ~inside.any(axis=1)
    if not outside.any():
        return
    stray = int(addresses[outside][0])
    distance = [(stray - e) // m[3] + 1 if stray >= e else -((s - stray + m[3] - 1) // m[3])
                for s, e, m in ((int(m[0]), int(m[1]), m) for m in memory)]
    nearest = min(range(len(memory)), key=lambda i: abs(distance[i]))
    d, name = distance[nearest], memory[nearest][2]
    where = (f"{plural(d, 'element')} past the end of the nearest tensor, {name}," if d > 0
             else f"{plural(-d, 'element')} before the start of the nearest tensor, {name},")
    verb = {"load": "reads", "store": "writes", "atomic": "updates"}[what]
    count = int(outside.sum())
    raise OutOfBounds(f"your kernel {verb} outside every tensor it was given ({count} address{'es' if count > 1 else ''} "
                      f"in one tl.{what}, the first {where} in memory); the check stopped it before it touched memory "
                      f"that is not yours. Check the strides that tl.{what}'s addresses use (each from its own tensor) "
                      "and its mask")


def show(fig) -> None:
    """Display a matplotlib figure once (in Jupyter) and close it."""
    import matplotlib.pyplot as plt

    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python (a script, a test run without Jupyter): nothing to display on
        plt.close(fig)
        return
    try:
        if get_ipython() is not None:
            display(fig)
    finally:
        plt.close(fig)


def is_stub(fn) -> bool:
    """True for a function (or ``@triton.jit`` kernel) whose body is only ``...``, ``pass`` or a docstring."""
    fn = getattr(fn, "fn", fn)  # a Triton kernel wraps the Python function
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP", "CACHE")]
    return ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)])


def user_error(what: str, err: BaseException) -> Failed:
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
    return Failed(f"{what} raised {name}:\n    {body}" + hint_for(text))


def _compile_refusal(what: str, err: BaseException) -> Failed | None:
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
    return Failed(f"{what} was refused: Triton cannot compile it for a GPU:\n    {reason}{where}"
                   + hint_for(reason))


_MATH_ON_A_BLOCK = ("a Python function (math.*) got a whole block of values: inside a kernel use tl functions "
                    "(tl.exp, tl.where, ...), which work element by element")


_NO_POWER = "Triton tiles have no ** operator: write x * x * x"
_RETURN_BOTH = ("a function that should return two values returned one: return both, e.g. return pid_m, pid_n "
                "(or start, end)")


# Errors whose own message does not say what to change: (text in the message, hint).
ERROR_HINTS = [
    ("only length-1 arrays can be converted", _MATH_ON_A_BLOCK),  # the interpreter's words (numpy < 2.4)
    ("only 0-dimensional arrays can be converted", _MATH_ON_A_BLOCK),  # the same, numpy >= 2.4
    ("must be real number, not tensor", _MATH_ON_A_BLOCK),  # the compiler's
    ("unsupported operand type(s) for **", _NO_POWER),  # the interpreter's words, and Triton 3.9 compiler's
    ("has no attribute '__pow__'", _NO_POWER),  # Triton 3.6 compiler's
    ("Expected dtype ['fp32', 'fp64'] but got fp16", "tl.exp and its kind take float32: keep the tile in float32 "
                                                     "(the store converts the result)"),
    ("object of type 'int' has no len()", "the launch grid is a tuple, even with one axis: kernel[(programs,)](...)"),
    ("'int' object is not subscriptable", "the launch grid is a tuple, even with one axis: kernel[(programs,)](...)"),
    ("object has no attribute 'values'", "a function that should return two values returned one: return both, "
                                         "e.g. return pid_m, pid_n"),
    ("'tensor' object has no attribute", "a block has no math methods (x.tanh(), x.exp()): the math is in tl's "
                                         "functions, tl.exp(x), tl.sigmoid(x), ..., and in libdevice"),
    ("has no attribute", "a misspelt name?" + (" (in a kernel, the interpreter cannot say on which line)"
                                              if runtime.INTERPRET else "")),
    ("arange's range must be a power of 2", "BLOCK_SIZE must be a power of two; the mask handles the rest"),
    ("AssertionError()", "Triton refused an operation without a reason: check the dtypes given to tl.dot (both "
                         "inputs alike, a float32 accumulator)"),
    ("Cannot make_shape_compatible", "two blocks of different shapes meet: a 2-D block needs 2-D offsets and a "
                                     "2-D mask, e.g. (rows[:, None] < M) & (cols[None, :] < N)"),
    ("is not iterable", _RETURN_BOTH),
    ("cannot unpack non-iterable value", _RETURN_BOTH),  # Triton 3.9 compiler's
    ("cannot unpack non-iterable NoneType", "a function returned nothing: end it with return (two values here)"),
    ("too many values to unpack", "a function returned more values than asked for: return exactly two"),
    ("unexpected type fp32", "a float where an integer is needed: tile and program indices use integer "
                             "division, //, not /"),
    ("unsupported AST node type: Break", "Triton kernels have no break (nor continue): put the condition in the "
                                         "loop, while not done: ..."),
    ("unsupported AST node type: Continue", "Triton kernels have no continue: put the rest of the body under an if"),
    ("int() argument must be", "int() cannot take a value computed in a kernel: use // for integer division"),
    ("float() argument must be", "float() cannot take a value computed in a kernel: use .to(tl.float32)"),
    ("Loop-carried variable", "a variable changed its type or shape in the loop: give it before the loop the shape "
                              "and dtype the loop gives it (an accumulator: a float32 block of its tile's shape, "
                              "tl.zeros((rows, cols), dtype=tl.float32)), and keep its updates in that dtype"),
]


def hint_for(error_text: str) -> str:
    """The ``hint:`` line for an error message that matches one of :data:`ERROR_HINTS`, or ""."""
    hint = next((h for pattern, h in ERROR_HINTS if pattern in error_text), "")
    return f"\n  hint: {hint}" if hint else ""


def require_function(name: str, fn, params: tuple[str, ...]) -> None:
    """Fail clearly when ``fn`` is not a function taking ``params``."""
    if fn is None:
        raise Failed(f"got None instead of your function: pass {name} itself (no parentheses)")
    if not callable(fn):
        kind = type(fn).__name__
        raise Failed(f"got {'an' if kind[0] in 'aeiou' else 'a'} {kind} instead of a function: "
                      f"pass {name} itself (no parentheses)")
    if hasattr(fn, "run") and hasattr(fn, "fn"):  # a @triton.jit kernel
        raise Failed(f"got a Triton kernel: pass the Python function {name}({', '.join(params)}) that launches it")
    try:
        inspect.signature(fn).bind(*params)
    except TypeError:
        raise Failed(f"{name} must take {len(params)} argument{'s' if len(params) > 1 else ''} "
                      f"({', '.join(params)}); "
                      f"yours takes {_describe_signature(fn)}") from None
    except ValueError:  # builtins without a signature: let the call decide
        pass


def require_jit(name: str, fn, params: tuple[str, ...], kind: str = "function") -> None:
    """Fail clearly when ``fn`` is not a ``@triton.jit`` function (a ``kind``) with exactly ``params``."""
    if inspect.isfunction(fn):
        raise Failed(f"{name} is a plain Python function: did you forget @triton.jit above its def?")
    if not (hasattr(fn, "fn") and hasattr(fn, "arg_names")):
        raise Failed(f"got {type(fn).__name__}: pass the @triton.jit {kind} {name} itself (the check launches it)")
    given = inspect.signature(fn.fn).parameters.values()
    required = tuple(p.name for p in given if p.default is inspect.Parameter.empty)
    if required != params or tuple(fn.arg_names[:len(params)]) != params:  # extras need defaults, at the end
        raise Failed(f"{name} must keep the signature it was given ({', '.join(params)})")


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
    reference = solutions.function(name)
    if not inspect.isfunction(reference):  # a @triton.jit function: later cells launch it as it is
        return reference

    @functools.wraps(reference)
    def borrowed(*args, **kwargs):
        if _CHECKING == name:
            raise UsesReference(f"{name} calls the reference solution (through exercises.yours_or_reference): "
                                "that is the answer, not yours; write it yourself")
        return reference(*args, **kwargs)
    return borrowed


@contextlib.contextmanager
def reference_refused(name: str, answers=()):
    """Inside exercise ``name``'s check, its reference solution refuses to run: an answer that is the
    reference (``matmul_kernel = solutions.matmul_kernel``), calls it or launches its kernel gets a ✗."""
    from course import solutions

    if not REFUSE_REFERENCE:
        yield
        return
    pieces = [(piece, getattr(solutions, piece)) for piece in solutions.EXERCISES.get(name, ((),))[0]]
    for answer in answers:
        for piece, reference in pieces:
            if answer is reference or getattr(answer, "__wrapped__", None) is reference:
                raise UsesReference(_refusal(piece))
    swapped, launched = [], []
    for piece, reference in pieces:
        if inspect.isfunction(reference) and not reference.__code__.co_freevars:
            swapped.append((reference, reference.__code__))
            reference.__code__ = _refusing.__code__.replace(co_name=piece)  # the name the refusal gives
        elif hasattr(reference, "fn"):  # a kernel: its launch (kernel[grid](...)) goes through .run
            launched.append(reference)
            reference.run = functools.partial(_refuse_launch, piece)
    try:
        yield
    finally:
        for reference, code in swapped:
            reference.__code__ = code
        for reference in launched:
            reference.__dict__.pop("run", None)


REFUSE_REFERENCE = True  # the course's own tests turn it off to hand the references to the checks


def _refusal(piece: str) -> str:
    return (f"your answer uses the reference solution (course.solutions.{piece}): that is the answer, not yours; "
            "write it yourself")


def _refuse_launch(piece, *args, **kwargs):
    raise UsesReference(_refusal(piece))


def _refusing(*args, **kwargs):
    """Stands in for a reference solution's body during its check, its code renamed after that piece. Its
    globals are the solutions module's, so it finds this module (and sys) through ``__import__``."""
    core = __import__("course.exercises.core", fromlist=["core"])
    raise core.UsesReference(core._refusal(__import__("sys")._getframe().f_code.co_name))


def _no_hook(*args, **kwargs):
    """A launch hook that does nothing (see :class:`launches`)."""


class launches(contextlib.AbstractContextManager):
    """Record the Triton kernels launched inside the ``with`` block (compiled or interpreted)::

        with exercises.launches() as seen:
            add(x, y)
        seen.programs  # programs launched in all
    """

    def __enter__(self):
        from triton.runtime.jit import JITFunction

        self.launched: list[tuple[object, int]] = []  # (kernel, programs) per launch
        self.storages: set[int] = set()  # where the tensors given to the launches live
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
                    recorder.launched.append((kernel, programs_of(grid, args, kwargs, kernel)))
                    recorder.storages.update(a.untyped_storage().data_ptr() for a in (*args, *kwargs.values())
                                             if isinstance(a, torch.Tensor))
                return original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            return run

        for cls, original in zip(self._patched, self._originals):
            cls.run = patch(original)
        # course.gemm relaunches a compiled kernel through its own launcher (course.gemm.launcher), past
        # JITFunction.run, unless a launch hook is installed (as a profiler's would be): install one
        import triton

        self._hooks = getattr(getattr(getattr(triton, "knobs", None), "runtime", None), "launch_enter_hook", None)
        if not hasattr(self._hooks, "add"):
            self._hooks = None
        if self._hooks is not None:
            self._hooks.add(_no_hook)
        return self

    def __exit__(self, *exc):
        for cls, original in zip(self._patched, self._originals):
            cls.run = original
        if self._hooks is not None:
            self._hooks.remove(_no_hook)
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
        return [getattr(k, "__name__", "kernel") for k, _ in self.launched if is_stub(k)]


def constexpr_names(kernel) -> set:
    """The parameters of a ``@triton.jit`` function annotated ``tl.constexpr``."""
    fn = getattr(kernel, "fn", kernel)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if "constexpr" in str(p.annotation)}


def source_of(kernel) -> str:
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


def _loads(kernel) -> list:
    """The ``tl.load`` calls in the kernel's source (read with ``ast``)."""
    try:
        tree = ast.parse(source_of(kernel))
    except SyntaxError:
        return []
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "load"]


def unmasked_loads(kernel) -> int:
    """How many ``tl.load`` calls in the kernel's source have no mask (lines, for the message)."""
    return sum(1 for node in _loads(kernel) if len(node.args) < 2 and not any(k.arg == "mask" for k in node.keywords))


def loads_without_other(kernel) -> int:
    """How many ``tl.load`` calls in the kernel's source have a mask but no ``other=`` (what they mask off is
    undefined on a GPU)."""
    def keywords(node):
        return {k.arg for k in node.keywords}

    return sum(1 for node in _loads(kernel) if (len(node.args) >= 2 or "mask" in keywords(node))
               and len(node.args) < 3 and "other" not in keywords(node))


def programs_of(grid, args, kwargs, kernel) -> int:
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


def plural(k: int, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


def quiet(check: Callable, *args) -> Verdict:
    """Run a check without printing anything; return its verdict (for tests)."""
    with contextlib.redirect_stdout(io.StringIO()):
        check(*args)
    return last()


def compiles_for_a_gpu(kernel, *args, **constexprs) -> None:
    """Build the kernel for an H100 (course.compile, in a separate process), by default with
    ``tiled.matmul_kernel``'s arguments; a ✗ with the compiler's innermost reason and the line it points at
    if it refuses. Skipped where the build cannot reach the kernel's source or module."""
    from course.compile import build

    fn = getattr(kernel, "fn", kernel)
    try:
        inspect.getsource(fn)
    except (OSError, TypeError):  # defined by exec or python -c: the build (another process) needs the source
        return
    if not args:
        a = torch.empty(64, 64, dtype=torch.float16)
        args, constexprs = (a, a, a, 64, 64, 64, 64, 1, 64, 1, 64, 1), dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
    try:
        build(kernel, *args, **constexprs)
    except RuntimeError as err:
        reason = _compiler_reason(str(err))
        if f"No module named '{getattr(fn, '__module__', '')}'" in str(err):
            return  # the kernel's own module cannot be imported by the build (a file outside sys.path)
        raise Failed("right under the interpreter, but Triton cannot compile it for a GPU:\n    "
                     + reason + hint_for(reason)) from None
    except TypeError:
        return  # the build cannot carry it (a notebook object): nothing to blame the learner for


def _compiler_reason(text: str) -> str:
    """The innermost reason in a failed build's output and the source line it points at ("reason\n    at: line");
    failing that, the last line that names an error."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\S*(CompilationError|UnsupportedLanguageConstruct)\S*: at \d+:\d+:", line):
            caret = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "^"), None)
            if caret is None:
                continue
            reason = []
            for follow in lines[caret + 1:]:
                if not follow.strip():
                    break
                reason.append(follow.strip())
            if not reason:  # a call site: its callee's error, with the reason, comes first or later
                continue
            reason = " ".join(reason)
            inner = re.fullmatch(r"(\w+Error)\((['\"].*['\"])\)", reason)
            if inner:  # TypeError("...") -> TypeError: ...
                try:
                    reason = f"{inner.group(1)}: {ast.literal_eval(inner.group(2))}"
                except (ValueError, SyntaxError):
                    pass
            return f"{reason}\n    at: {lines[caret - 1].strip()}"
    shown = [line.strip() for line in lines[1:] if line.strip()]
    return next((line for line in reversed(shown) if "Error" in line or "error" in line),
                shown[-1] if shown else "(no reason given)")


def resolve(node, scope: dict):
    """The object an ``ast`` name or dotted attribute (``tl.swizzle2d``, ``tiled.waves``) stands for in
    ``scope`` (a function's globals), builtins included; None where it cannot be found."""
    import builtins

    if isinstance(node, ast.Name):
        return scope.get(node.id, getattr(builtins, node.id, None))
    if isinstance(node, ast.Attribute):
        base = resolve(node.value, scope)
        return None if base is None else getattr(base, node.attr, None)
    return None


def module_of(obj) -> str:
    """The module an object (a function, a @triton.jit function, a class or a module) comes from."""
    import types

    if isinstance(obj, types.ModuleType):
        return obj.__name__
    return getattr(getattr(obj, "fn", obj), "__module__", None) or ""


def close(out, ref, tol: float | None = None) -> bool:
    """``rel_error(out, ref)`` within ``tol`` (default: float16's tolerance); False where ``out`` has a NaN."""
    from course.check import rel_error, tolerance

    return rel_error(out, ref) <= (tolerance(torch.float16) if tol is None else tol)
