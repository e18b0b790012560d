"""Tests of course.gemm.launcher: a kernel bound once launches directly and stays right on new data."""

import pytest
import torch
import triton
import triton.language as tl
from gemm_cases import gpu

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course.check import check, poisoned
from course.gemm.launcher import BoundLaunch
from course.runtime import DEVICE, INTERPRET, pick


@triton.jit
def _scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + alpha * tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _constexpr_first(BLOCK: tl.constexpr, out_ptr, n):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32), mask=offs < n)


def test_bound_launch_is_right_on_every_call():
    n, block = pick(cpu=1000, gpu=100_000), 256
    bound = BoundLaunch(_scaled_add, (triton.cdiv(n, block),), dict(BLOCK=block, num_warps=4))
    for call in range(3):
        x, y = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
        out = poisoned((n,), torch.float32, DEVICE)
        bound(x, y, out, n, 0.5)
        check(f"call {call + 1}", out, x.double().cpu() + 0.5 * y.double().cpu(), tol=1e-6)
    assert (bound.compiled is None) == INTERPRET, "compiled, the first call binds the kernel; interpreted, nothing"


@gpu
@pytest.mark.gpu
def test_a_launch_hook_sees_every_launch():
    n = 4096
    bound = BoundLaunch(_scaled_add, (n // 256,), dict(BLOCK=256, num_warps=4))
    x = torch.randn(n, device=DEVICE)
    bound(x, x, torch.empty_like(x), n, 1.0)
    seen = []
    hook = lambda metadata: seen.append(metadata)  # noqa: E731  (a profiler's hook)
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        out = poisoned((n,), torch.float32, DEVICE)
        bound(x, x, out, n, 1.0)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    assert len(seen) == 1, "with a hook installed, launches go through kernel[grid], which calls it"
    check("with a hook", out, 2 * x.double().cpu(), tol=1e-6)


@gpu
@pytest.mark.gpu
def test_direct_takes_addresses_and_declines_what_it_cannot_launch():
    n = 4096
    bound = BoundLaunch(_scaled_add, (n // 256,), dict(BLOCK=256, num_warps=4))
    x, y = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
    assert not bound.direct(x, y, torch.empty_like(x), n, 1.0), "nothing compiled yet: no direct launch"
    bound(x, y, torch.empty_like(x), n, 1.0)
    out = poisoned((n,), torch.float32, DEVICE)
    assert bound.direct(x.data_ptr(), y, out.data_ptr(), n, 0.5), "bound: pointers as addresses launch directly"
    check("addresses", out, x.double().cpu() + 0.5 * y.double().cpu(), tol=1e-6)
    hook = lambda metadata: None  # noqa: E731
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        assert not bound.direct(x.data_ptr(), y, out.data_ptr(), n, 0.5), "a hook wants kernel[grid]"
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)


def test_constexprs_given_by_position_are_not_bound():
    n = 300
    bound = BoundLaunch(_constexpr_first, (triton.cdiv(n, 128),), {})
    for _ in range(2):
        out = poisoned((n,), torch.float32, DEVICE)
        bound(128, out, n)  # BLOCK given by position
        check("constexpr first", out, torch.arange(n, dtype=torch.float64), tol=0)
    assert bound.compiled is None, "a constexpr among the arguments: every call goes through kernel[grid]"


@triton.jit
def _double_tiles(src_desc, dst_desc, BLOCK: tl.constexpr):
    row = tl.program_id(0) * BLOCK
    dst_desc.store([row, 0], src_desc.load([row, 0]) * 2)


@gpu
@pytest.mark.gpu
def test_tensor_descriptors_are_encoded_once_per_address_and_stay_right():
    from triton.tools.tensor_descriptor import TensorDescriptor

    rows, cols, block = 512, 64, 64
    bound = BoundLaunch(_double_tiles, (rows // block,), dict(BLOCK=block, num_warps=4))
    srcs = [torch.randn(rows, cols, device=DEVICE, dtype=torch.float16) for _ in range(2)]
    for call, src in enumerate(srcs + srcs + srcs[::-1]):  # each address again: from the cache
        dst = poisoned((rows, cols), torch.float16, DEVICE)
        if call >= 2 and bound.takes_tensors:  # the tensors alone: descriptors from the bound launch
            bound(src, dst)
        else:
            bound(*(TensorDescriptor(t, [rows, cols], [cols, 1], [block, cols]) for t in (src, dst)))
        check(f"call {call + 1}", dst, 2 * src.double().cpu(), tol=0)
    assert bound.compiled is not None
    if torch.cuda.get_device_capability() >= (9, 0):  # TMA: the descriptors are encoded on the host
        assert bound._raw is not None, "Triton's launcher is not as course.gemm.launcher expects: launches take the slow path"
        assert [position for position, *_ in bound._descriptors] == [0, 1]
        assert bound.takes_tensors


@gpu
@pytest.mark.gpu
def test_gemm_plans_launch_through_the_raw_launcher():
    from course import gemm

    gemm.plans.PLANS.clear()
    for shape in ((16, 4096, 4096), (512, 1024, 768)):  # pointers (decode) and tensor descriptors
        M, N, K = shape
        for _ in range(2):
            a = torch.randn(M, K, device=DEVICE, dtype=torch.float16)
            b = torch.randn(N, K, device=DEVICE, dtype=torch.float16).T
            check(f"{shape}", gemm.matmul(a, b, mode="persistent"), a.double().cpu() @ b.double().cpu())
    bound = [plan.bound for plan in gemm.plans.PLANS.values() if plan.bound is not None]
    assert bound and all(b._raw is not None for b in bound), "a plan launches through CompiledKernel.run"


def test_the_launcher_abi_is_known_for_the_triton_in_use():
    import types

    from course.gemm import launcher

    version = tuple(int(v) for v in triton.__version__.split(".")[:2])
    if launcher._cuda_driver is not None and version in ((3, 6), (3, 8), (3, 9)):
        assert launcher.LAUNCHER_ABI == ("3.8" if version >= (3, 8) else "3.6"), \
            "Triton's CUDA launcher changed: course.gemm.launcher would take the slow path on every call"
    stranger = types.SimpleNamespace(make_tensordesc_arg=None, _BASE_ARGS_FORMAT="iiiKK")
    assert launcher._launcher_abi(stranger) is None and launcher._launcher_abi(None) is None
