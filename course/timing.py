"""Timing kernels: the same call on a GPU and under the interpreter.

On a GPU, :func:`bench` times like ``triton.testing.do_bench`` (CUDA events around each call, the
L2 cache flushed before it, the median), with one change: before each timed call the GPU waits
(twice the host's time for one call, at least ~50 us), so the host has queued the call by the
time the GPU reaches it. The result is the
GPU's time for the call, whatever the Python around the launch costs (that host time matters too,
but it is another number: :func:`host_us`). Without the wait, a launcher that spends longer on the
host than the GPU spends on the flush is timed partly on the host, and a 10 us kernel can read as
20 us in one run and 10 us in the next. Under the interpreter there is no device to time, so it
takes the median of a few wall-clock runs after one warm-up: good for "which is slower",
meaningless as GPU speed.

    >>> ms = bench(lambda: sum(range(1000)))
    >>> ms > 0
    True
"""

from __future__ import annotations

import math
import numbers
import statistics
import time
from typing import Callable, Iterable

from course import runtime


def bench(fn: Callable[[], object], *, warmup: int = 25, rep: int = 100, max_cpu_runs: int = 5) -> float:
    """Median time of ``fn()`` in milliseconds.

    ``warmup`` and ``rep`` are milliseconds of warm-up and timed runs on a GPU (as in
    ``do_bench``); under the interpreter, ``max_cpu_runs`` bounds the timed runs instead.
    """
    _require_callable("bench", fn)
    _require_number("bench", "warmup", warmup, positive=False)
    _require_number("bench", "rep", rep, positive=False)
    if isinstance(max_cpu_runs, bool) or not isinstance(max_cpu_runs, int) or max_cpu_runs < 1:
        raise ValueError(f"bench(max_cpu_runs={max_cpu_runs!r}): pass an int, at least 1")
    if not runtime.INTERPRET:
        return _gpu_bench(fn, warmup, rep)
    fn()  # warm-up: the interpreter's first call also builds the kernel
    times = []
    budget_s = max(rep, 1) / 1000 * 20  # the interpreter is slow: allow more wall time than on a GPU
    start = time.perf_counter()
    while len(times) < max_cpu_runs and (not times or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


_FLUSH_BYTES = 256 * 2**20  # more than any GPU's L2 cache (as do_bench)
_HOST_LEAD_CYCLES = 100_000  # at least ~50-70 us of GPU idling before each timed call
_FASTEST_CLOCK_HZ = 3e9  # no GPU's SMs run faster: cycles counted at this rate idle at least as long


def _gpu_bench(fn, warmup: float, rep: float) -> float:
    import torch

    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    start, end = event(), event()
    start.record()
    host_start = time.perf_counter()
    for _ in range(5):
        flush.zero_()
        fn()
    host_s = (time.perf_counter() - host_start) / 5  # the host's time per call (the GPU runs behind)
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    # The GPU idles twice the host's time before each timed call, at least _HOST_LEAD_CYCLES: a
    # launcher with more host work (mode="tail" launches twice: ~140 us) is still queued in time.
    lead_cycles = max(_HOST_LEAD_CYCLES, int(2 * host_s * _FASTEST_CLOCK_HZ))
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    n = max(1, int(rep / estimate))
    starts, ends = [event() for _ in range(n)], [event() for _ in range(n)]
    idle = getattr(torch.cuda, "_sleep", lambda cycles: None)  # a private torch helper: may go away
    for i in range(n):
        flush.zero_()  # a cold L2, as a GEMM inside a model sees it
        idle(lead_cycles)  # the GPU spins, the host gets ahead: the launch is queued in time
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def in_turns(calls: dict, *, rounds: int = 3, measure: Callable[[Callable[[], object]], float] | None = None) -> dict:
    """``{label: median}`` of ``measure(calls[label])`` (default :func:`bench`, in ms), the calls
    taking turns ``rounds`` times: a GPU's clock drifts with its temperature, and turns spread the
    drift over all of them.

        >>> sorted(in_turns({"a": lambda: None, "b": lambda: None}, rounds=1))
        ['a', 'b']
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"in_turns(rounds={rounds!r}): pass an int, at least 1")
    measure = measure or bench
    times = {label: [] for label in calls}
    for _ in range(rounds):
        for label, call in calls.items():
            times[label].append(measure(call))
    return {label: statistics.median(ms) for label, ms in times.items()}


def autotune_bench(fn: Callable[[], object], quantiles=(0.5, 0.2, 0.8)) -> list[float]:
    """A timer with ``triton.testing.do_bench``'s signature, for ``triton.autotune(do_bench=...)``:
    :func:`bench` (so it also runs under the interpreter, one wall-clock run per config), the same
    time for every quantile asked."""
    ms = bench(fn, max_cpu_runs=1)
    return [ms] * len(quantiles) if quantiles else ms


def host_us(fn: Callable[[], object], calls: int = 200) -> float:
    """Host (CPU) time of one ``fn()`` call in microseconds: what the Python and the launch cost,
    with the GPU's work left queued (a GPU launch returns before the kernel runs)."""
    _require_callable("host_us", fn)
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"host_us(calls={calls!r}): pass the number of timed calls as an int, at least 1")
    fn()
    if not runtime.INTERPRET:
        import torch

        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t0) / calls * 1e6
    if not runtime.INTERPRET:
        torch.cuda.synchronize()
    return us


def cuda_graph(fn: Callable[[], object]):
    """``fn`` captured in a CUDA graph (GPU only). Returns ``(replay, outputs)``: ``replay()`` runs all of
    ``fn``'s kernels again from one launch, no Python in between, into ``outputs``, the tensors ``fn``
    returned while it was captured.

        >>> replay, doubled = cuda_graph(lambda: x * 2)  # doctest: +SKIP
        >>> x.add_(1); replay()  # doubled now holds the new x * 2  # doctest: +SKIP
    """
    import torch

    if runtime.INTERPRET:
        raise RuntimeError("cuda_graph: CUDA graphs need a GPU; under the interpreter call fn itself")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (compiles, allocations) off the capture, as torch's docs ask
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = fn()
    return graph.replay, outputs


def progress(items: Iterable, desc: str | None = None, **kwargs):
    """``items`` wrapped in a progress bar (a widget in Jupyter, text elsewhere)."""
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False, **kwargs)


def gbps(bytes_moved: float, ms: float) -> float:
    """Bandwidth in GB/s of moving ``bytes_moved`` bytes in ``ms`` milliseconds."""
    _require_number("gbps", "bytes_moved", bytes_moved, positive=False)
    _require_number("gbps", "ms", ms, positive=True)
    return bytes_moved / (ms * 1e-3) / 1e9


def tflops(flops: float, ms: float) -> float:
    """Throughput in TFLOP/s of ``flops`` operations in ``ms`` milliseconds."""
    _require_number("tflops", "flops", flops, positive=False)
    _require_number("tflops", "ms", ms, positive=True)
    return flops / (ms * 1e-3) / 1e12


def _require_callable(where: str, fn) -> None:
    if not callable(fn):
        raise TypeError(f"{where}(fn): fn must be a callable taking no arguments, got {type(fn).__name__}; "
                        f"wrap a call in a lambda: {where}(lambda: add(x, y))")


def _require_number(where: str, name: str, value, *, positive: bool) -> None:
    """A finite real number, > 0 if ``positive`` else >= 0; a clear error naming ``name`` if not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}({name}={value!r}): pass a number, not a {type(value).__name__}")
    if not math.isfinite(value) or (value <= 0 if positive else value < 0):
        raise ValueError(f"{where}({name}={value!r}): pass a finite number {'> 0' if positive else '>= 0'}"
                         + (" (a time of 0 ms has no rate)" if positive else ""))
