"""Tests of course.gemm.plans: cached launch plans, recorded routes replayed on fresh data (right results,
a profiler's hook, an output that overlaps an input), CUDA graph replay, autotuning, and Stream-K's
workspace on two streams at once."""

import pytest
import torch
from gemm_cases import MODES, TAIL_CASES, gpu, int8_case, randn, reference

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import gemm
from course.check import check, poisoned
from course.gemm import Config, matmul, matmul_int8
from course.gemm import config as gemm_config
from course.gemm import layout as gemm_layout
from course.runtime import DEVICE, INTERPRET, pick


def test_cached_launch_plans_follow_layout_and_alignment(monkeypatch):
    # One shape, five operand layouts in a row: each needs its own launch plan (TMA or pointer
    # loads, transposed or not), so a plan cached for one must never serve another.
    monkeypatch.setattr(gemm_layout, "MACS_PER_COPIED_ELEMENT", float("inf"))  # no aligned copies
    M, N, K = pick(cpu=(24, 40, 32), gpu=(256, 320, 192))
    base = randn(M * K + 8)
    variants = {
        "row-major": (randn(M, K), randn(K, N)),
        "B transposed": (randn(M, K), randn(N, K).T),
        "A 2 bytes off 16-byte alignment": (base[1:1 + M * K].view(M, K), randn(K, N)),
        "A transposed": (randn(K, M).T, randn(K, N)),
        "row-major again": (randn(M, K), randn(K, N)),
    }
    gemm.plans.PLANS.clear()
    for name, (a, b) in variants.items():
        out = poisoned((M, N), torch.float16, DEVICE)
        matmul(a, b, out=out, mode="persistent")
        check(f"{name} after the others", out, reference(a, b))
    assert len(gemm.plans.PLANS) == 4, "the two row-major calls share a plan, every other layout has its own"


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES + ["tail", "gluon"])
def test_matmul_replays_in_a_cuda_graph(mode):
    # The way to pay the Python launch cost once: capture, then replay on new data in place.
    if mode == "gluon" and not gemm_config.gluon_here():
        pytest.skip("the Gluon kernel needs an sm_90 GPU")
    M, N, K = TAIL_CASES["n"] if mode == "tail" else (512, 1024, 768)
    a, b = randn(M, K), randn(N, K).T
    out = poisoned((M, N), torch.float16, DEVICE)
    matmul(a, b, mode=mode, out=out)  # compile and allocate outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        matmul(a, b, mode=mode, out=out)
    for _ in range(2):
        a.copy_(randn(M, K))
        out.fill_(float("nan"))
        graph.replay()
        check(f"CUDA graph replay ({mode})", out, reference(a, b))


@pytest.mark.parametrize("mode", MODES + ["tail", "gluon", "int8"])
def test_repeated_calls_take_the_recorded_route_and_stay_right(mode):
    """The second call with the same layouts skips the checks and plans (``gemm.plans.ROUTES``) and
    launches the bound kernel; fresh values, a bias at another alignment and an aliasing ``out``
    must still come out right or be refused."""
    if mode == "gluon" and not gemm_config.gluon_here():
        pytest.skip("the Gluon kernel needs an sm_90 GPU")
    M, N, K = TAIL_CASES["n"] if mode == "tail" else pick(cpu=(33, 47, 19), gpu=(1000, 1000, 520))
    dtype = pick(cpu=torch.float16, gpu=torch.bfloat16)

    def call(bias, out):
        if mode == "int8":
            a8, b8, sa, sb, _, _ = int8_case(M, N, K)
            ref = (reference(a8, b8) * sa.double().cpu()[:, None] * sb.double().cpu()[None, :]
                   + bias.double().cpu())
            return matmul_int8(a8, b8, sa, sb, bias, out_dtype=torch.float32, out=out), ref
        a, b = randn(M, K, dtype=dtype), randn(N, K, dtype=dtype).T
        return matmul(a, b, bias=bias, mode=mode, out=out), reference(a, b, bias)

    out_dtype = torch.float32 if mode == "int8" else dtype
    for attempt in range(3):
        out = poisoned((M, N), out_dtype, DEVICE)
        got, ref = call(randn(N, dtype=torch.float32), out)
        check(f"{mode}, call {attempt + 1}", got, ref)
    if not INTERPRET:
        assert gemm.plans.ROUTES, "no route was recorded: every call went through the checks and the planning"
    shifted_bias = randn(N + 1, dtype=torch.float32)[1:]  # 4 bytes off: another alignment, another route
    check(f"{mode}, a bias 4 bytes off", *call(shifted_bias, poisoned((M, N), out_dtype, DEVICE)))
    check(f"{mode}, a float16 bias", *call(randn(N, dtype=torch.float16), poisoned((M, N), out_dtype, DEVICE)))
    if mode != "int8":  # an out that overlaps a, laid out as the outs before it
        b = randn(N, K, dtype=dtype).T
        matmul(randn(M, K, dtype=dtype), b, mode=mode, out=randn(M, N, dtype=dtype))
        buf = randn(M * K + M * N, dtype=dtype)
        a, out = buf[:M * K].view(M, K), buf[16:16 + M * N].view(M, N)  # 16 elements on: the same alignment
        with pytest.raises(ValueError, match="out and a share memory"):
            matmul(a, b, mode=mode, out=out)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("mode, M, N, K", [("auto", 1, 4096, 4096), ("auto", 512, 1024, 1000),
                                           ("gluon", 512, 1024, 1024)])  # pointers; TMA descriptors; Gluon
def test_a_replayed_call_goes_through_triton_while_a_profiler_hook_is_installed(mode, M, N, K):
    import triton

    if mode == "gluon" and not gemm_config.gluon_here():
        pytest.skip("the Gluon kernel needs an sm_90 GPU")
    b = randn(N, K).T
    for _ in range(2):  # the second call replays the first's route
        a = randn(M, K)
        check("replayed", matmul(a, b, mode=mode, out=poisoned((M, N), torch.float16, DEVICE)), reference(a, b))
    seen = []
    hook = lambda metadata: seen.append(metadata)  # noqa: E731  (a profiler's hook)
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        a = randn(M, K)
        got = matmul(a, b, mode=mode, out=poisoned((M, N), torch.float16, DEVICE))
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    check("with a hook", got, reference(a, b))
    assert seen, "the hook saw no launch: the route launched around Triton"


def test_a_replayed_call_still_refuses_an_out_that_overlaps_an_input():
    # gemm.plans.again replays a recorded route (compiled only); its overlap check runs here without a GPU
    launched = []
    M, N, K = 8, 6, 16
    a, b, out = randn(M, K), randn(K, N), randn(M, N)
    call = gemm.plans.again(lambda *args: launched.append(args), M, N, torch.float16, (out, a, b, None, None, None))
    fresh = randn(M, N)
    assert call(a, b, None, fresh) is fresh and len(launched) == 1
    buf = randn(M * K + M * N)
    with pytest.raises(ValueError, match="out and a share memory"):
        call(buf[:M * K].view(M, K), b, None, buf[16:16 + M * N].view(M, N))
    assert len(launched) == 1, "refused before launching"
    bias = randn(N)
    with_bias = gemm.plans.again(lambda *args: launched.append(args), M, N, torch.float16, (out, a, b, bias, None, None))
    buf = randn(M * N + N)
    with pytest.raises(ValueError, match="out and bias share memory"):
        with_bias(a, b, buf[M * N - 2:M * N - 2 + N], buf[:M * N].view(M, N))
    buf = randn(K * N + M * N)
    with pytest.raises(ValueError, match="out and b share memory"):
        with_bias(a, buf[:K * N].view(K, N), bias, buf[K * N - 8:K * N - 8 + M * N].view(M, N))
    assert len(launched) == 1, "refused before launching"
    # a call without out has a key of its own, and its route makes a new output each time
    new_out = gemm.plans.again(lambda *args: launched.append(args), M, N, torch.float16, (None, a, b, None, None, None))
    assert new_out(a, b, None, None).shape == (M, N) and len(launched) == 2


@gpu
@pytest.mark.gpu
def test_autotune_picks_a_config_that_is_right():
    M, N, K = 512, 768, 1024
    a, b = randn(M, K), randn(K, N)
    check("autotuned", matmul(a, b, autotune=True), reference(a, b))
    check("autotuned (cached)", matmul(a, b, autotune=True), reference(a, b))


@gpu
@pytest.mark.gpu
def test_streamk_launches_on_two_streams_at_once():
    # Stream-K's partial tiles and flags were one workspace per device: two streams' launches wrote
    # each other's partials, or waited forever on a flag the other launch had cleared
    M, N, K = 512, 512, 4096
    cfg = Config(64, 64, 64, num_warps=4, num_stages=3)
    assert gemm.streamk_tiles_for(M, N, cfg) == 64, "every tile shared: the fix-up is exercised"
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    inputs = [(randn(M, K), randn(K, N)) for _ in streams]
    outs = [[poisoned((M, N), torch.float16, DEVICE) for _ in range(12)] for _ in streams]
    torch.cuda.synchronize()
    for r in range(12):
        for s, (a, b), o in zip(streams, inputs, outs):
            with torch.cuda.stream(s):
                matmul(a, b, mode="streamk", config=cfg, out=o[r])
    torch.cuda.synchronize()
    for (a, b), o in zip(inputs, outs):
        ref = reference(a, b)
        for r, out in enumerate(o):
            check(f"stream-K launch {r} on its own stream", out, ref)


def test_call_keys_tell_grad_mode_apart():
    # a route recorded under no_grad (as course.gemm.autograd's op runs) must not let the same tensors
    # through in grad mode, where the checks refuse a tensor that requires grad
    a, b = randn(4, 5, dtype=torch.float32).requires_grad_(), randn(5, 3, dtype=torch.float32)
    options = ("matmul", None, "auto", None, False)
    with torch.no_grad():
        quiet = gemm.plans.call_key((a, b, None, None), options)
    assert quiet is not None and gemm.plans.call_key((a, b, None, None), options) != quiet
