"""The catalogue of notebook 02's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import numpy as np
import torch
import triton
import triton.language as tl

import course
from course import elementwise, exercises, solutions

from catalogue import assert_wrong_answers_named, quiet


# --- 02: residual + relu ---------------------------------------------------------------------------

RELU_BYTES_WRONG = {
    "the fused count": ((lambda n: 12 * n, solutions.fused_bytes), "written to memory and read back"),
    "relu's write forgotten": ((lambda n: 16 * n, solutions.fused_bytes), "relu writes its output"),
    "elements, not bytes": ((lambda n: 5 * n, solutions.fused_bytes), "counts elements"),
    "one kernel only": ((lambda n: 8 * n, solutions.fused_bytes), "count both kernels"),
    "a tensor of one count": ((lambda n: torch.tensor([20 * n]), solutions.fused_bytes), ".item() turns"),
    "fused, no write": ((solutions.unfused_bytes, lambda n: 8 * n), "writes one"),
    "fused as unfused": ((solutions.unfused_bytes, solutions.unfused_bytes), "never leaves registers"),
    "a constant term": ((lambda n: 20 * n + 8, solutions.fused_bytes), "does not grow with n"),
    # the second review: a count is an int in any integer form; a float, even a whole one, is refused
    "whole floats": ((lambda n: 20.0 * n, solutions.fused_bytes), "the count is right, but a float"),
    "whole floats, fused": ((solutions.unfused_bytes, lambda n: 12 * n / 1.0), "fused_bytes(1000) returned 12000.0"),
    "a float that is wrong": ((lambda n: 12.0 * n, solutions.fused_bytes), "written to memory and read back"),
    "nothing returned": ((lambda n: [20 * n].clear(), solutions.fused_bytes),
                         "returned None: return the number of bytes"),
    "a string": ((lambda n: f"{20 * n}", solutions.fused_bytes), "return the number of bytes, an int"),
}


def test_residual_relu_bytes_wrong_answers_get_their_own_messages():
    assert_wrong_answers_named(exercises.check_residual_relu_bytes, RELU_BYTES_WRONG,
                               same_mistake=("the fused count", "a float that is wrong"))


def test_residual_relu_bytes_accepts_whole_numbers_in_any_integer_form():
    for unfused, fused in [(solutions.unfused_bytes, solutions.fused_bytes),
                           (lambda n: torch.tensor(20) * n, lambda n: torch.tensor(12 * n)),  # 0-d tensors
                           (lambda n: np.int64(20) * n, lambda n: int(12.0 * n)),  # numpy's int; int() of a float
                           (lambda n: (n * 4 + n * 4 + n * 4) + (n * 4 + n * 4), lambda n: 3 * 4 * n)]:
        verdict = quiet(exercises.check_residual_relu_bytes, unfused, fused)
        assert verdict.passed, verdict.line


@triton.jit
def _relu_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.load(r_ptr + offs, mask=mask)
    s = tl.maximum(x + r, 0.0)
    if MODE == 1:
        s = x + r
    if MODE == 2:
        s = tl.maximum(x, 0.0) + r
    if MODE == 3:
        s = tl.minimum(x + r, 0.0)
    if MODE == 4:
        s = tl.maximum(x + x, 0.0)
    tl.store(out_ptr + offs, s, mask=mask)


@triton.jit
def _relu_unmasked_store_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask) + tl.load(r_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(s, 0.0))


@triton.jit
def _relu_bf16_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.bfloat16)
    r = tl.load(r_ptr + offs, mask=mask).to(tl.bfloat16)
    tl.store(out_ptr + offs, tl.maximum(x + r, 0.0), mask=mask)


@triton.jit
def _relu_fp16_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask) + tl.load(r_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(s, 0.0).to(tl.float16), mask=mask)


@triton.jit
def _relu_loop_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        r = tl.load(r_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.maximum(x + r, 0.0), mask=mask)


def _relu_one_program(x, r, out, block_size=1024):
    """The third review: one program loops over every block."""
    _relu_loop_kernel[(1,)](x, r, out, x.numel(), BLOCK=block_size)


def _narrow(kernel):
    def fused(x, r, out, block_size=1024):
        kernel[(triton.cdiv(x.numel(), block_size),)](x, r, out, x.numel(), BLOCK=block_size)
    return fused


def _relu(mode=0, grid_block=None, kernel_block=None):
    """A residual_relu whose kernel does ``mode`` (0: right), launched with ``grid_block`` and ``kernel_block``
    in place of block_size where given (a block size written in)."""
    def fused(x, r, out, block_size=1024):
        n = x.numel()
        grid = (triton.cdiv(n, grid_block or block_size),)
        _relu_kernel[grid](x, r, out, n, BLOCK=kernel_block or block_size, MODE=mode)
    return fused


def _no_block_size(x, r, out):
    _relu()(x, r, out)


RELU_WRONG = {
    "the add in torch, the ReLU in the kernel": (lambda x, r, out, block_size=1024: _relu(1)(x + r,
                                                                                            torch.zeros_like(r), out),
                                                 "never reached a Triton kernel"),
    "no relu": (_relu(1), "ReLU is missing"),
    "relu before the add": (_relu(2), "after the add"),
    "minimum": (_relu(3), "not minimum"),
    "x twice": (_relu(4), "load residual"),
    "no mask": (_narrow(_relu_unmasked_store_kernel), "past the end"),
    "n from the first dimension": (lambda x, r, out, block_size=1024: _relu_kernel[(triton.cdiv(x.shape[0], 512),)](
        x, r, out, x.shape[0], BLOCK=512, MODE=0), "x.numel() elements, not x.shape[0]"),
    "stores into x": (lambda x, r, out, block_size=1024: _relu_kernel[(triton.cdiv(x.numel(), 512),)](
        x, r, x, x.numel(), BLOCK=512, MODE=0), "Does a tl.store go to x's pointer"),
    "torch": (lambda x, r, out, block_size=1024: out.copy_(torch.relu(x + r)), "write it as a Triton kernel"),
    # the second review
    "the kernel's block written in (BLOCK_SIZE=1024)": (_relu(kernel_block=1024), "called with block_size=4096"),
    "the grid's block written in (cdiv(n, 1024))": (_relu(grid_block=1024), "called with block_size=4096"),
    "no block_size argument": (_no_block_size, "must keep its block_size argument"),
    "the sum in bfloat16": (_narrow(_relu_bf16_kernel), "the values pass through bfloat16"),
    "a float16 store": (_narrow(_relu_fp16_kernel), "the values pass through float16"),
    # the third review: right values from a grid that is not one program per block
    "one program loops over everything (grid (1,))": (_relu_one_program, "a single program loops over all"),
    "half the programs idle (cdiv(n, block_size // 2))": (
        lambda x, r, out, block_size=1024: _relu(grid_block=block_size // 2)(x, r, out), "more programs than blocks"),
    "both blocks written in (512), the grid matching": (_relu(grid_block=512, kernel_block=512),
                                                        "more programs than blocks"),
}


def test_residual_relu_wrong_answers_get_their_own_messages():
    # the launch counts cannot tell a grid too large from blocks too small: one message names both
    assert_wrong_answers_named(exercises.check_residual_relu, RELU_WRONG,
                               same_mistake=("both blocks written in (512), the grid matching",))


def test_residual_relu_reference_and_right_block_sizes_pass():
    verdict = quiet(exercises.check_residual_relu, solutions.residual_relu)
    assert verdict.passed and "block sizes of 4096 and 128" in verdict.message, verdict.line
    assert quiet(exercises.check_residual_relu, _relu()).passed


def test_answers_that_are_or_call_the_reference_are_refused(monkeypatch):
    """In a notebook (REFUSE_REFERENCE on, as there), the reference solution itself is no answer."""
    monkeypatch.setattr(exercises.core, "REFUSE_REFERENCE", True)
    for answer in (solutions.residual_relu, lambda x, r, out, block_size=1024: solutions.residual_relu(x, r, out)):
        verdict = quiet(exercises.check_residual_relu, answer)
        assert verdict.status == "failed" and "reference solution (course.solutions" in verdict.message, verdict.line
    verdict = quiet(exercises.check_residual_relu_bytes, solutions.unfused_bytes, lambda n: solutions.fused_bytes(n))
    assert verdict.status == "failed" and "reference solution (course.solutions" in verdict.message, verdict.line


def test_device_is_the_courses():
    out, _ = elementwise.guarded(3)
    assert out.device.type == torch.device(course.DEVICE).type
