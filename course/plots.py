"""The course's two plots: a roofline, and throughput against problem size.

Every plot is one call from a notebook and returns the matplotlib Figure (assign it, so that
Jupyter shows the picture once)::

    fig = roofline(machine(), [Point("vector add", flops=n, bytes=12 * n, ms=0.05)], dtype="fp32")
    fig = throughput({"triton": (sizes, gbps), "torch": (sizes, torch_gbps)}, ylabel="GB/s",
                     ceiling=machine().bandwidth_gbs, ceiling_label="copy bandwidth")
"""

from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import numpy as np

from course.hardware import Machine


@dataclasses.dataclass(frozen=True)
class Point:
    """One measured kernel: the work it does, the bytes it must move, and the time it took."""

    label: str
    flops: float
    bytes: float
    ms: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte of device memory traffic."""
        return self.flops / self.bytes

    @property
    def tflops(self) -> float:
        return self.flops / (self.ms * 1e-3) / 1e12


def roofline(machine: Machine, points=(), *, dtype: str = "bf16", title: str | None = None,
             caption: str | None = None, ax=None):
    """Memory and compute ceilings of ``machine`` for ``dtype``, the ridge point, and ``points``.

    A point under the slanted line is held back by memory bandwidth, under the flat line by
    arithmetic; the distance to the roof is what is left to win.
    """
    if dtype not in machine.peak_tflops:
        raise ValueError(f"roofline(dtype={dtype!r}): {machine.name} has peaks for "
                         f"{', '.join(machine.peak_tflops)}; pass one of those")
    for p in points:
        if not isinstance(p, Point):
            raise TypeError(f"roofline(points=...): each point must be a course.plots.Point, got {type(p).__name__}")
    peak = machine.peak_tflops[dtype]
    bw_tbs = machine.bandwidth_gbs / 1e3
    ridge = peak / bw_tbs
    lo = min([ridge / 100] + [p.intensity / 2 for p in points])
    hi = max([ridge * 100] + [p.intensity * 2 for p in points])
    x = np.logspace(np.log10(lo), np.log10(hi), 256)

    fig, ax = _axes(ax, (7, 4.5))
    ax.loglog(x, np.minimum(peak, bw_tbs * x), color="black", lw=2)
    ax.axvline(ridge, color="gray", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, peak), textcoords="offset points",
                xytext=(6, -14), color="gray")
    ax.annotate(f"{machine.bandwidth_gbs:,.0f} GB/s", (x[8], bw_tbs * x[8]), textcoords="offset points",
                xytext=(4, 6), rotation=0, color="dimgray")
    ax.annotate(f"{peak:g} TFLOP/s {dtype}", (x[-1], peak), textcoords="offset points",
                xytext=(-150, 6), color="dimgray")
    for p in points:
        ax.plot(p.intensity, p.tflops, "o", ms=8, label=f"{p.label}: {p.tflops:.3g} TFLOP/s")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title or f"Roofline: {machine.name} ({machine.source})")
    if points:
        ax.legend(loc="lower right", fontsize=9)
    _caption(fig, caption)
    return fig


def throughput(series: dict, *, xlabel: str = "elements", ylabel: str = "GB/s", ceiling: float | None = None,
               ceiling_label: str = "ceiling", title: str | None = None, caption: str | None = None,
               logx: bool = True, ax=None):
    """One line per implementation: ``series`` maps a label to ``(sizes, values)``."""
    if not series:
        raise ValueError("throughput(series): pass at least one {label: (sizes, values)} entry")
    fig, ax = _axes(ax, (7, 4.5))
    for name, (xs, ys) in series.items():
        if len(xs) != len(ys):
            raise ValueError(f"throughput: series {name!r} has {len(xs)} sizes but {len(ys)} values")
        ax.plot(xs, ys, "o-", label=name)
    if ceiling:
        ax.axhline(ceiling, color="black", ls="--", lw=1)
        ax.annotate(f"{ceiling_label}: {ceiling:,.0f}", (0.01, ceiling), xycoords=("axes fraction", "data"),
                    textcoords="offset points", xytext=(0, 4))
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    _caption(fig, caption)
    return fig


def _axes(ax, size):
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    return fig, ax


def _caption(fig, caption):
    if caption:
        engine = fig.get_layout_engine()
        if engine is not None and hasattr(engine, "set"):  # keep a strip below the axes for it
            engine.set(rect=(0, 0.04, 1, 0.96))
        fig.text(0.99, 0.005, caption, ha="right", va="bottom", fontsize=7, color="gray")
