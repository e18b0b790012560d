"""Notebook 02: kernel fusion."""

from __future__ import annotations

from typing import Callable

import torch

from course.exercises.core import (
    Failed,
    NotAttempted,
    exercise,
    is_stub,
    require_function,
)
from course.exercises.nb00 import constant_term, linear_count
from course.exercises.nb01 import ELEMENTWISE_SIZES, run_elementwise

__all__ = ['check_residual_relu_bytes', 'check_residual_relu']


@exercise("residual_relu_bytes", "Fill in the bodies of unfused_bytes and fused_bytes above")
def check_residual_relu_bytes(unfused_bytes: Callable[[int], int], fused_bytes: Callable[[int], int]) -> str:
    """Check the byte counts of ``relu(x + residual)`` on ``n`` float32 values, as two PyTorch
    kernels (``unfused_bytes``) and as one fused kernel (``fused_bytes``)."""
    require_function("unfused_bytes", unfused_bytes, ("n",))
    require_function("fused_bytes", fused_bytes, ("n",))
    if is_stub(unfused_bytes):  # fused_bytes is written: check it alone
        _check_fused_bytes(fused_bytes)
        raise NotAttempted("fused_bytes is right; now fill in the body of unfused_bytes")
    unfused, offset = linear_count("unfused_bytes", unfused_bytes, "unfused_bytes")
    constant_term("unfused_bytes", offset, "nothing here is a scalar; each kernel's traffic grows with n")
    hints = {12: "that is one kernel's traffic: unfused, the sum x + residual is written to memory and read back",
             16: "relu writes its output too: the first kernel reads two arrays and writes one, the second "
                 "reads one and writes one",
             8: "count both kernels, each with its reads and its writes",
             5: "that counts elements: each float32 takes 4 bytes",
             24: "the first kernel reads x and residual and writes one array; the second reads that array "
                 "and writes one: no array is read twice"}
    if unfused != 20:
        raise Failed(f"unfused_bytes grows by {unfused} per element: "
                      f"{hints.get(unfused, 'list each kernel: the arrays it reads, the array it writes')}")
    if is_stub(fused_bytes):
        raise NotAttempted("unfused_bytes is right; now fill in the body of fused_bytes")
    _check_fused_bytes(fused_bytes)
    return "right: unfused 20n, fused 12n, so fusion moves 40% fewer bytes"


def _check_fused_bytes(fused_bytes) -> None:
    fused, offset = linear_count("fused_bytes", fused_bytes, "fused_bytes")
    constant_term("fused_bytes", offset, "nothing here is a scalar; the kernel's traffic grows with n")
    hints = {3: "that counts elements: each float32 takes 4 bytes",
             8: "the fused kernel reads two arrays (x and residual) and writes one",
             4: "the fused kernel reads two arrays and writes one",
             20: "that is the unfused count: fused, the sum never leaves registers",
             16: "the sum stays in registers: nothing but the inputs and the result moves"}
    if fused != 12:
        raise Failed(f"fused_bytes grows by {fused} per element: "
                      f"{hints.get(fused, 'read each input once, write the result once')}")


@exercise("residual_relu", "Write residual_relu_kernel's body and the launch in residual_relu above")
def check_residual_relu(residual_relu: Callable) -> str:
    """Check ``residual_relu(x, residual, out)``, which must write ``relu(x + residual)`` into
    ``out`` with one Triton kernel. Tries 1-D and 2-D shapes (a kernel may treat a contiguous
    tensor as flat memory)."""
    require_function("residual_relu", residual_relu, ("x", "residual", "out"))
    shapes = [(n,) for n in ELEMENTWISE_SIZES] + [(3, 333), (64, 65)]
    hints = [(lambda x, r: x + r, "the ReLU is missing: tl.maximum(s, 0.0) keeps the positive part"),
             (lambda x, r: torch.relu(x), "residual was not added"),
             (lambda x, r: torch.relu(x) + r, "the ReLU comes after the add: relu(x + residual)"),
             (lambda x, r: torch.clamp(x + r, max=0.0), "that keeps the negative part: the ReLU is "
                                                        "maximum(s, 0), not minimum"),
             (lambda x, r: torch.relu(x + x), "x was loaded twice: load residual from its own pointer")]
    run_elementwise("residual_relu", residual_relu, lambda x, r: torch.relu(x + r), 2,
                       kernel_hint="@triton.jit residual_relu_kernel", input_names=("x", "residual"),
                       shapes=shapes, wrong_hints=hints)
    return f"right at all {len(shapes)} shapes tried, nothing written out of bounds"
