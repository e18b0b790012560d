"""The catalogue of notebook 02's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import torch
import triton
import triton.language as tl

import course
from course import elementwise, exercises, solutions

from catalogue import assert_wrong_answers_named


# --- 02: residual + relu ---------------------------------------------------------------------------

RELU_BYTES_WRONG = {
    "the fused count": ((lambda n: 12 * n, solutions.fused_bytes), "written to memory and read back"),
    "relu's write forgotten": ((lambda n: 16 * n, solutions.fused_bytes), "relu writes its output"),
    "elements, not bytes": ((lambda n: 5 * n, solutions.fused_bytes), "counts elements"),
    "one kernel only": ((lambda n: 8 * n, solutions.fused_bytes), "count both kernels"),
    "fused, no write": ((solutions.unfused_bytes, lambda n: 8 * n), "writes one"),
    "fused as unfused": ((solutions.unfused_bytes, solutions.unfused_bytes), "never leaves registers"),
    "a constant term": ((lambda n: 20 * n + 8, solutions.fused_bytes), "does not grow with n"),
}


def test_residual_relu_bytes_wrong_answers_get_their_own_messages():
    assert_wrong_answers_named(exercises.check_residual_relu_bytes, RELU_BYTES_WRONG)


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
    if MODE == 5:
        tl.store(out_ptr + offs, s)
    else:
        tl.store(out_ptr + offs, s, mask=mask)


def _relu(mode=0):
    def fused(x, r, out):
        n = x.numel()
        _relu_kernel[(triton.cdiv(n, 512),)](x, r, out, n, BLOCK=512, MODE=mode)
    return fused


RELU_WRONG = {
    "the add in torch, the ReLU in the kernel": (lambda x, r, out: _relu(1)(x + r, torch.zeros_like(r), out),
                                                 "never reached a Triton kernel"),
    "no relu": (_relu(1), "ReLU is missing"),
    "relu before the add": (_relu(2), "after the add"),
    "minimum": (_relu(3), "not minimum"),
    "x twice": (_relu(4), "load residual"),
    "no mask": (_relu(5), "past the end"),
    "n from the first dimension": (lambda x, r, out: _relu_kernel[(triton.cdiv(x.shape[0], 512),)](
        x, r, out, x.shape[0], BLOCK=512, MODE=0), "x.numel() elements, not x.shape[0]"),
    "stores into x": (lambda x, r, out: _relu_kernel[(triton.cdiv(x.numel(), 512),)](
        x, r, x, x.numel(), BLOCK=512, MODE=0), "Does a tl.store go to x's pointer"),
    "torch": (lambda x, r, out: out.copy_(torch.relu(x + r)), "write it as a Triton kernel"),
}


def test_residual_relu_wrong_answers_get_their_own_messages():
    assert_wrong_answers_named(exercises.check_residual_relu, RELU_WRONG)


def test_device_is_the_courses():
    out, _ = elementwise.guarded(3)
    assert out.device.type == torch.device(course.DEVICE).type
