"""The catalogue of notebook 01's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import pytest
import torch
import triton
import triton.language as tl

import course
from course import exercises, solutions

from catalogue import assert_survives, assert_wrong_answers_named, quiet, stub, stub_kernel


# --- 01: axpy (kernels written as a learner might) ----------------------------------------------------

@triton.jit
def _axpy_kernel(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if MODE == 6:  # forgot to multiply the program id by the block size
        offs = pid + tl.arange(0, BLOCK)
    mask = offs < n
    if MODE == 7:  # an off-by-one mask
        mask = offs < n - 1
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    result = alpha * x + y
    if MODE == 1:
        result = x + y
    if MODE == 2:
        result = x + alpha * y
    if MODE == 3:
        result = alpha * x + x
    if MODE == 4:
        result = alpha * (x + y)
    if MODE == 5:  # no mask on the store
        tl.store(out_ptr + offs, result)
    elif MODE == 8:  # stores into an input
        tl.store(y_ptr + offs, result, mask=mask)
    else:
        tl.store(out_ptr + offs, result, mask=mask)


@triton.jit
def _axpy_unmasked_loads(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs) + tl.load(y_ptr + offs), mask=offs < n)


@triton.jit
def _axpy_constexpr_alpha(alpha: tl.constexpr, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _axpy_fixed_stride(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * 1024 + tl.arange(0, BLOCK)  # the stride written as a number
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def _launch(kernel, block=256, programs=None):
    def axpy(alpha, x, y, out):
        n = x.numel()
        kernel[(programs or triton.cdiv(n, block),)](alpha, x, y, out, n, BLOCK=block)
    return axpy


def _axpy(mode=0, floor_grid=False, block=256):
    def axpy(alpha, x, y, out):
        n = x.numel()
        programs = n // block if floor_grid else triton.cdiv(n, block)
        _axpy_kernel[(programs,)](alpha, x, y, out, n, BLOCK=block, MODE=mode)
        return out
    return axpy


AXPY_WRONG = {
    "no mask": (_axpy(5), "past the end of out"),
    "grid rounds down": (_axpy(floor_grid=True), "round up"),
    "offsets without the block": (_axpy(6), "programs overlapped"),
    "mask off by one": (_axpy(7), "last, partial block"),
    "alpha forgotten": (_axpy(1), "alpha was not applied"),
    "alpha on y": (_axpy(2), "should multiply x"),
    "x loaded twice": (_axpy(3), "load y from y_ptr"),
    "alpha on the sum": (_axpy(4), "multiply x alone"),
    "pure torch": (lambda a, x, y, out: out.copy_(a * x + y), "write it as a Triton kernel"),
    "torch multiplies, the kernel adds": (lambda a, x, y, out: _axpy()(1.0, a * x, y, out),
                                          "x never reached a Triton kernel"),
    "1-D inputs only": (lambda a, x, y, out: _axpy_kernel[(triton.cdiv(x.shape[0], 256),)](
        a, x, y, out, x.shape[0], BLOCK=256, MODE=0), "unwritten"),
    "a new tensor": (lambda a, x, y, out: _axpy()(a, x, y, out.clone()), "returned a new tensor"),
    "changes an input": (lambda a, x, y, out: (_axpy()(a, x, y, out), x.zero_()), "x was modified"),
    "a compile error": (lambda a, x, y, out: _axpy(block=100)(a, x, y, out), "power of 2"),
    "stores into y": (_axpy(8), "Does a tl.store go to y's pointer"),
    "one program only": (lambda a, x, y, out: _axpy_kernel[(1,)](a, x, y, out, x.numel(), BLOCK=1024, MODE=0),
                         "too few programs"),
    "a fixed stride": (_launch(_axpy_fixed_stride, 512), "with the BLOCK_SIZE the grid was computed with"),
    "unmasked loads": (_launch(_axpy_unmasked_loads), "tl.load without a mask"),
    "alpha as a constexpr": (_launch(_axpy_constexpr_alpha), "alpha is a tl.constexpr"),
    "one program per element": (lambda a, x, y, out: solutions.axpy_kernel[(x.numel(),)](
        a, x, y, out, x.numel(), BLOCK_SIZE=64), "one per element or more"),
    "grid as an int": (lambda a, x, y, out: _axpy_kernel[triton.cdiv(x.numel(), 256)](a, x, y, out, x.numel(),
                                                                                      BLOCK=256, MODE=0),
                       "the launch grid is a tuple"),
}


def test_axpy_passes_the_reference_and_says_so(capsys):
    exercises.check_axpy(solutions.axpy)
    assert capsys.readouterr().out.startswith("✓ axpy: right")


def test_axpy_wrong_answers_get_their_own_messages():
    assert_wrong_answers_named(exercises.check_axpy, AXPY_WRONG)


def test_a_stub_kernel_behind_a_written_wrapper_is_not_attempted():
    def axpy(alpha, x, y, out):
        stub_kernel[(1,)](x, x.numel(), BLOCK_SIZE=64)
    assert quiet(exercises.check_axpy, axpy).status == "not attempted"


def test_half_written_byte_counts_check_the_written_one():
    verdict = quiet(exercises.check_residual_relu_bytes, solutions.unfused_bytes, stub)
    assert verdict.status == "not attempted" and "unfused_bytes is right" in verdict.message
    verdict = quiet(exercises.check_residual_relu_bytes, stub, lambda n: 8 * n)
    assert verdict.status == "failed" and "fused_bytes grows by 8" in verdict.message


def test_failures_draw_the_output():
    import matplotlib.pyplot as plt

    run = exercises.nb01.run_once(lambda x, y, out: _axpy(5)(2.0, x, y, out), lambda x, y: 2.0 * x + y, 2, (1000,),
                              torch.float32)
    fig = exercises.nb01.element_picture(run, "no mask")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "written past the end" in labels and "right" in labels
    plt.close(fig)


# --- a check survives what would kill the kernel --------------------------------------------------

_AXPY_CELL = '''
@triton.jit
def axpy_kernel(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + LOAD_X, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    STORE


def axpy(alpha, x, y, out, block_size=1024):
    n = x.numel()
    axpy_kernel[(triton.cdiv(n, block_size),)](alpha, x, y, out, n, BLOCK_SIZE=block_size)
    return out
'''

AXPY_CRASHES = {  # label: (x's offsets, the store, words of the ✗ line)
    "x read 4096 apart": ("offsets * 4096", "tl.store(out_ptr + offsets, alpha * x + y, mask=mask)",
                          "reads outside every tensor it was given"),
    "a store before the start": ("offsets", "tl.store(out_ptr - offsets * 64 - 1, alpha * x + y, mask=mask)",
                                 "writes outside every tensor"),
    "a store far past the end": ("offsets", "tl.store(out_ptr + offsets + 10**9, alpha * x + y, mask=mask)",
                                 "past the end of the nearest tensor, out_ptr"),
    "a loop that never ends": ("offsets", "while n > 0:\n        n = n * 1\n    tl.store(out_ptr + offsets, x, mask=mask)",
                               "gave up after"),
}


@pytest.mark.parametrize("label", AXPY_CRASHES)
def test_axpy_check_survives_kernels_that_would_crash_or_hang(label):
    if not course.INTERPRET:
        pytest.skip("a compiled kernel's stray address faults the GPU; the interpreter's is caught")
    load_x, store, words = AXPY_CRASHES[label]
    cell = _AXPY_CELL.replace("LOAD_X", load_x).replace("STORE", store)
    assert_survives("check_axpy", cell, "axpy", words, time_limit_s=3)


def test_the_reference_handed_out_by_yours_or_reference_is_refused_inside_its_check(capsys):
    exercises.core._VERDICTS.pop("axpy", None)
    reference = exercises.yours_or_reference("axpy", None)
    verdict = quiet(exercises.check_axpy, lambda alpha, x, y, out: reference(alpha, x, y, out))
    assert verdict.status == "failed" and "calls the reference solution" in verdict.message
    out = torch.empty(8, device=course.DEVICE)
    ones = torch.ones(8, device=course.DEVICE)
    reference(2.0, ones, ones, out)  # outside the check it works, for the cells after
    assert torch.equal(out.cpu(), torch.full((8,), 3.0))
