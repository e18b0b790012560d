"""Timing kernels: the same call on a GPU and under the interpreter.

On a GPU, :func:`bench` is ``triton.testing.do_bench`` (CUDA events, cache flushed between runs,
median). Under the interpreter there is no device to time, so it takes the median of a few
wall-clock runs after one warm-up: good for "which is slower", meaningless as GPU speed.

    >>> ms = bench(lambda: sum(range(1000)))
    >>> ms > 0
    True
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Iterable

from course import runtime


def bench(fn: Callable[[], object], *, warmup: int = 25, rep: int = 100, max_cpu_runs: int = 5) -> float:
    """Median time of ``fn()`` in milliseconds.

    ``warmup`` and ``rep`` are milliseconds of warm-up and timed runs on a GPU (as in
    ``do_bench``); under the interpreter, ``max_cpu_runs`` bounds the timed runs instead.
    """
    if not callable(fn):
        raise TypeError(f"bench(fn): fn must be a callable taking no arguments, got {type(fn).__name__}; "
                        "wrap a call in a lambda: bench(lambda: add(x, y))")
    if not runtime.INTERPRET:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    if max_cpu_runs < 1:
        raise ValueError(f"bench(max_cpu_runs={max_cpu_runs}): pass at least 1")
    fn()  # warm-up: the interpreter's first call also builds the kernel
    times = []
    budget_s = max(rep, 1) / 1000 * 20  # the interpreter is slow: allow more wall time than on a GPU
    start = time.perf_counter()
    while len(times) < max_cpu_runs and (not times or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def progress(items: Iterable, desc: str | None = None, **kwargs):
    """``items`` wrapped in a progress bar (a widget in Jupyter, text elsewhere)."""
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False, **kwargs)


def gbps(bytes_moved: float, ms: float) -> float:
    """Bandwidth in GB/s of moving ``bytes_moved`` bytes in ``ms`` milliseconds."""
    return bytes_moved / (ms * 1e-3) / 1e9


def tflops(flops: float, ms: float) -> float:
    """Throughput in TFLOP/s of ``flops`` operations in ``ms`` milliseconds."""
    return flops / (ms * 1e-3) / 1e12
