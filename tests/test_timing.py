"""course.timing: GPU times that leave the host out, host time per call, rates, progress and timing in turns."""

import time

import pytest
import torch

from course import runtime, timing


def test_bench_returns_positive_milliseconds():
    assert timing.bench(lambda: torch.ones(1000).sum()) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("host_us", [90, 300])
def test_bench_times_the_gpu_not_the_host(host_us):
    # A call whose host side outlasts do_bench's L2 flush (~85 us on an H100), and one that also
    # outlasts the least idling bench does (~50-70 us; mode="tail" takes ~140 us): the GPU part
    # alone takes a few microseconds, and that is what bench must report.
    x = torch.zeros(1 << 20, device="cuda")

    def slow_host_fast_gpu():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < host_us * 1e-6:
            pass
        x.add_(1)

    ms = timing.bench(slow_host_fast_gpu, warmup=5, rep=20)
    assert ms < 0.03, f"bench gave {ms * 1e3:.0f} us: the host's time leaked into the GPU time"


def test_host_us_measures_the_calling_side():
    assert timing.host_us(lambda: time.sleep(1e-3), calls=3) >= 900


def test_bench_rejects_a_non_callable():
    with pytest.raises(TypeError, match="wrap a call in a lambda"):
        timing.bench(torch.ones(3))


def test_units():
    assert timing.gbps(2e9, 1000.0) == pytest.approx(2.0)
    assert timing.tflops(3e12, 1000.0) == pytest.approx(3.0)


def test_rates_and_host_us_refuse_zero_with_a_clear_error():
    # Issue 23, item 8: these divided by zero.
    with pytest.raises(ValueError, match=r"gbps\(ms=0\): pass a finite number > 0"):
        timing.gbps(1e9, 0)
    with pytest.raises(ValueError, match=r"tflops\(ms=0.0\)"):
        timing.tflops(1e12, 0.0)
    with pytest.raises(ValueError, match=r"tflops\(ms=-1\)"):
        timing.tflops(1e12, -1)
    with pytest.raises(TypeError, match=r"gbps\(bytes_moved='1e9'\): pass a number"):
        timing.gbps("1e9", 1.0)
    with pytest.raises(ValueError, match=r"host_us\(calls=0\): pass the number of timed calls"):
        timing.host_us(lambda: None, calls=0)
    with pytest.raises(TypeError, match=r"host_us\(fn\): fn must be a callable"):
        timing.host_us(None)


def test_progress_yields_every_item():
    assert list(timing.progress(range(5), desc="x")) == [0, 1, 2, 3, 4]


def test_in_turns_takes_turns_and_keeps_each_median():
    order, times = [], iter([5.0, 1.0, 3.0, 2.0, 4.0, 9.0])  # a, b, a, b, a, b
    medians = timing.in_turns({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                              measure=lambda call: (call(), next(times))[1])
    assert order == ["a", "b"] * 3
    assert medians == {"a": 4.0, "b": 2.0}
    with pytest.raises(ValueError, match="rounds=0"):
        timing.in_turns({"a": lambda: None}, rounds=0)


@pytest.mark.gpu
def test_cuda_graph_replays_into_the_captured_outputs():
    x = torch.arange(4.0, device="cuda")
    replay, doubled = timing.cuda_graph(lambda: x * 2)
    x.add_(1)
    doubled.fill_(float("nan"))
    replay()
    assert torch.equal(doubled, torch.arange(1.0, 5.0, device="cuda") * 2)


@pytest.mark.skipif(not runtime.INTERPRET, reason="the interpreter's refusal")
def test_cuda_graph_refuses_under_the_interpreter():
    with pytest.raises(RuntimeError, match="CUDA graphs need a GPU"):
        timing.cuda_graph(lambda: None)
