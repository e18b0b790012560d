"""Where the course's kernels run: compiled on a GPU, or on the CPU through Triton's interpreter.

This module must be imported before any ``@triton.jit`` function is defined: Triton reads
``TRITON_INTERPRET`` when a kernel is decorated, so the choice is made here, once, at import.
``import course`` does it for you.

Choose by hand with the environment variable ``COURSE_DEVICE``:

* ``auto`` (default): the GPU if PyTorch sees one, else the interpreter;
* ``gpu``: insist on a GPU (an error if there is none);
* ``cpu``: the interpreter, even on a GPU machine (handy for ``device_print`` debugging).

Setting ``TRITON_INTERPRET=1`` yourself also selects the interpreter.
"""

from __future__ import annotations

import os

import torch

_CHOICES = ("auto", "gpu", "cpu")


def _decide() -> bool:
    """Return True when kernels should run through the interpreter."""
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
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"
else:
    os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402  (after TRITON_INTERPRET is settled)

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
    name = torch.cuda.get_device_name()
    return f"course: kernels run compiled on {name} (Triton {triton.__version__}, torch {torch.__version__})"
