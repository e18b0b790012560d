"""Where the course's kernels run: compiled on a GPU, or on the CPU through Triton's interpreter.

Triton reads ``TRITON_INTERPRET`` when a function is decorated with ``@triton.jit``, not when it
runs: decorated under the interpreter it becomes an ``InterpretedFunction``, otherwise a compiled
``JITFunction``, and the two do not mix. ``import triton`` itself decorates Triton's own library
functions (``tl.cdiv``, ``tl.sum``, ``tl.max``, ... in ``triton.language.standard``), so a script
that imports ``triton`` before ``course`` would hold compiled versions of them while the course's
kernels run interpreted ("Cannot call @triton.jit'd outside of the scope of a kernel"). This module
makes the choice once, at import, and then re-decorates whatever was decorated before in the other
mode: Triton's own functions silently, kernels of yours (module-level ``@triton.jit`` functions,
also under ``@triton.autotune``/``@triton.heuristics``) with a warning naming them. So
``import triton`` / ``import triton.language as tl`` may come before ``import course``; define
your own kernels after it. ``import course`` does all this for you.

Choose by hand with the environment variable ``COURSE_DEVICE``:

* ``auto`` (default): the GPU if PyTorch sees one, else the interpreter;
* ``gpu``: insist on a GPU (an error if there is none);
* ``cpu``: the interpreter, even on a GPU machine (handy for ``device_print`` debugging).

Setting ``TRITON_INTERPRET=1`` yourself also selects the interpreter.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch

_CHOICES = ("auto", "gpu", "cpu")


def _decide() -> bool:
    """Return True when kernels should run through the interpreter."""
    if os.environ.get("_COURSE_COMPILE_ONLY") == "1":  # course.compile's builder: compiles, launches nothing
        return False
    choice = os.environ.get("COURSE_DEVICE", "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ValueError(
            f"COURSE_DEVICE={choice!r} is not understood: set it to one of {', '.join(_CHOICES)}."
        )
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") and choice != "gpu":
        return True
    has_gpu = torch.cuda.is_available()
    if choice == "gpu" and not has_gpu:
        raise RuntimeError(
            "COURSE_DEVICE=gpu, but PyTorch sees no GPU: install a CUDA or ROCm build of torch, "
            "or unset COURSE_DEVICE to run on the CPU through Triton's interpreter."
        )
    return choice == "cpu" or not has_gpu


INTERPRET: bool = _decide()
# Triton imported before this decision (``import triton`` above ``import course``): what it
# decorated at its import may be in the other mode; fixed below by _redecorate_early_functions.
_TRITON_IMPORTED_EARLY: bool = "triton" in sys.modules
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"
else:
    os.environ.pop("TRITON_INTERPRET", None)
# Triton 3.9 warns at every compile unless this is set; "1" keeps the fused multiply-adds that earlier
# Tritons always made (and that the course's numbers were measured with). Older Tritons ignore it.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import triton  # noqa: E402  (after TRITON_INTERPRET is settled)
from triton.runtime.jit import KernelInterface  # noqa: E402


def _wrong_mode(obj) -> bool:
    """True for a function decorated with ``@triton.jit`` in the mode this process did not choose."""
    from triton.runtime.jit import JITFunction

    if INTERPRET:
        return type(obj) is JITFunction  # exact type: Gluon's subclass ignores TRITON_INTERPRET
    interpreter = sys.modules.get("triton.runtime.interpreter")
    return interpreter is not None and type(obj) is interpreter.InterpretedFunction


def _redecorate(obj):
    """The same function decorated again, now that ``TRITON_INTERPRET`` is settled."""
    if hasattr(obj, "kwargs"):  # an InterpretedFunction keeps its decorator's arguments
        return triton.jit(**obj.kwargs)(obj.fn)
    return triton.jit(obj.fn, version=obj.version, do_not_specialize=obj.do_not_specialize or None,
                      do_not_specialize_on_alignment=obj.do_not_specialize_on_alignment or None,
                      debug=obj.debug, noinline=obj.noinline, repr=obj._repr,
                      launch_metadata=obj.launch_metadata)


def _fix_namespace(namespace: dict, replaced: dict, setter) -> list:
    """Re-decorate wrong-mode functions held in ``namespace`` (directly, or as the ``fn`` of an
    autotuner or heuristics wrapper); return the names fixed."""
    fixed = []
    for key, value in list(namespace.items()):
        try:
            if _wrong_mode(value):
                if id(value) not in replaced:
                    replaced[id(value)] = _redecorate(value)
                setter(key, replaced[id(value)])
                fixed.append(key)
                continue
            wrapper = value  # @triton.autotune / @triton.heuristics hold the kernel as .fn
            for _ in range(8):
                if not isinstance(wrapper, KernelInterface) or not hasattr(wrapper, "fn"):
                    break
                inner = wrapper.fn
                if _wrong_mode(inner):
                    if id(inner) not in replaced:
                        replaced[id(inner)] = _redecorate(inner)
                    wrapper.fn = replaced[id(inner)]
                    fixed.append(key)
                    break
                wrapper = inner
        except Exception:  # an odd object in someone's namespace: leave it alone
            continue
    return fixed


def _fix_methods(cls: type, replaced: dict) -> None:
    """Re-decorate the jit functions Triton attaches to ``cls`` as methods (``x.max()``): compiled,
    the function itself; interpreted, a plain function calling it (as ``tl.core._tensor_member_fn``)."""
    from triton.runtime.jit import JITCallable

    for key, value in list(vars(cls).items()):
        old = value if _wrong_mode(value) else _wrapped_by(value)
        if old is None:
            continue
        if id(old) not in replaced:
            replaced[id(old)] = _redecorate(old)
        new = replaced[id(old)]
        setattr(cls, key, new if isinstance(new, JITCallable) else _method_calling(new))


def _wrapped_by(function):
    """The wrong-mode jit function a plain wrapper function closes over, or None."""
    for cell in getattr(function, "__closure__", None) or ():
        try:
            if _wrong_mode(cell.cell_contents):
                return cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return None


def _method_calling(fn):
    def method(*args, **kwargs):
        return fn(*args, **kwargs)

    method.__name__ = method.__qualname__ = fn.__name__
    return method


def _redecorate_early_functions() -> list:
    """After ``import triton`` came first: re-decorate the functions Triton (and any module of
    the user's) decorated before the mode was chosen. Returns the user's kernels fixed."""
    replaced: dict = {}
    user_fixed = []
    for name, module in list(sys.modules.items()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        if not isinstance(namespace, dict):
            continue
        if name == "triton" or name.startswith("triton."):
            _fix_namespace(namespace, replaced, namespace.__setitem__)
            for value in list(namespace.values()):  # tl.tensor's methods (x.sum(), x.max(), ...)
                if isinstance(value, type) and getattr(value, "__module__", None) == name:
                    _fix_methods(value, replaced)
        elif name.split(".")[0] not in ("course", "torch") and name != __name__:
            user_fixed += [f"{name}.{key}" for key in _fix_namespace(namespace, replaced,
                                                                        namespace.__setitem__)]
    return sorted(set(user_fixed))


# Compiled, only functions decorated under the interpreter can be wrong: none if it never loaded.
if _TRITON_IMPORTED_EARLY and (INTERPRET or "triton.runtime.interpreter" in sys.modules):
    _EARLY_KERNELS = _redecorate_early_functions()
    if _EARLY_KERNELS:
        warnings.warn(
            f"course: {'kernel' if len(_EARLY_KERNELS) == 1 else 'kernels'} {', '.join(_EARLY_KERNELS)} "
            f"{'was' if len(_EARLY_KERNELS) == 1 else 'were'} decorated with @triton.jit before "
            f"`import course` chose to run kernels {'through the interpreter' if INTERPRET else 'compiled'}"
            " (Triton reads TRITON_INTERPRET when a function is decorated); course re-decorated them. "
            "Define kernels after `import course`: one held anywhere but in a module's globals keeps "
            "the wrong mode and fails when launched.",
            stacklevel=2,
        )

def interpreter_numpy_problem() -> str | None:
    """Why Triton's interpreter will fail with this numpy, or None: Triton <= 3.6 turns a loop
    bound held in a tensor into an int in a way numpy >= 2.4 refuses ("only 0-dimensional arrays
    can be converted to Python scalars")."""
    import numpy

    def version(text: str) -> tuple:
        return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())

    if version(triton.__version__) <= (3, 6) and version(numpy.__version__) >= (2, 4):
        return (f"numpy {numpy.__version__} breaks Triton {triton.__version__}'s interpreter in loops with a "
                "run-time bound; install the course's pin: pip install 'numpy<2.4' (make venv does)")
    return None


_NUMPY_PROBLEM = interpreter_numpy_problem() if INTERPRET else None
if _NUMPY_PROBLEM:
    warnings.warn(f"course: {_NUMPY_PROBLEM}", stacklevel=2)

#: The torch device the course allocates on: ``"cuda"`` (also for ROCm) or ``"cpu"``.
DEVICE: str = "cpu" if INTERPRET else "cuda"
#: True on an AMD GPU (ROCm build of torch).
IS_HIP: bool = (not INTERPRET) and torch.version.hip is not None


def pick(*, cpu, gpu):
    """Return ``gpu`` when kernels run compiled and ``cpu`` under the interpreter.

    The interpreter runs one program at a time, about a millisecond per program and K step,
    so problem sizes shrink there::

        n = pick(cpu=2**14, gpu=2**26)
    """
    return cpu if INTERPRET else gpu


def summary() -> str:
    """One line that says how kernels run on this machine."""
    if INTERPRET:
        return (
            f"course: no GPU in use, kernels run on the CPU through Triton {triton.__version__}'s "
            "interpreter (small problem sizes, timings are not GPU speeds)"
        )
    if not torch.cuda.is_available():  # course.compile's build process: it compiles, launches nothing
        return f"course: compiling kernels only (Triton {triton.__version__}, no GPU here)"
    name = torch.cuda.get_device_name()
    return f"course: kernels run compiled on {name} (Triton {triton.__version__}, torch {torch.__version__})"
