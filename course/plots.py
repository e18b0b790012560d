"""The course's plots: a roofline, a quantity against problem size, and a map of written elements.

Every plot is one call from a notebook and returns the matplotlib Figure (assign it, so that
Jupyter shows the picture once). Pass the :class:`course.records.Record` the numbers came from as
``record=``: the plot then says above its axes whether they were measured in this run or recorded
on another machine::

    fig = roofline(machine(), [Point("vector add", flops=n, bytes=12 * n, ms=0.05)], dtype="fp32")
    fig = throughput({"triton": (sizes, gbps), "torch": (sizes, torch_gbps)}, ylabel="GB/s",
                     ceiling=copy_gbps, ceiling_label="copy", unit="GB/s", record=record)
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import matplotlib.colors
import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np

from course.hardware import Machine

# Series differ in colour, marker and dash, and the first is drawn with wide hollow markers under the
# others, so a series lying on top of another stays visible.
_STYLES = [dict(color="tab:blue", marker="o", ls="-", lw=2.5, ms=10, mfc="none", mew=2),
           dict(color="tab:orange", marker="s", ls="--", lw=1.5, ms=4.5),
           dict(color="tab:green", marker="^", ls=":", lw=2, ms=6),
           dict(color="tab:red", marker="D", ls="-.", lw=1.5, ms=5),
           dict(color="tab:purple", marker="v", ls="-", lw=1.5, ms=6),
           dict(color="tab:brown", marker="P", ls="--", lw=1.5, ms=9, mfc="none", mew=1.5)]  # hollow: shows a point under it
_RECORDED_BOX = dict(boxstyle="round,pad=0.3", facecolor="#fff3c4", edgecolor="#c9a227")
_MEASURED_BOX = dict(boxstyle="round,pad=0.3", facecolor="#e3f4e1", edgecolor="#5a9e53")


@dataclasses.dataclass(frozen=True)
class Point:
    """One measured kernel: the work it does, the bytes it must move, and the time it took."""

    label: str
    flops: float
    bytes: float
    ms: float

    def __post_init__(self):
        for field in ("flops", "bytes", "ms"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise TypeError(f"Point({self.label!r}): {field} must be a finite number, got {value!r}")
            if value < 0 or (value == 0 and field != "flops"):
                bound = ">= 0" if field == "flops" else "> 0"
                raise ValueError(f"Point({self.label!r}): {field} must be {bound}, got {value}")

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte of device memory traffic."""
        return self.flops / self.bytes

    @property
    def tflops(self) -> float:
        return self.flops / (self.ms * 1e-3) / 1e12


def roofline(machine: Machine, points=(), *, dtype: str = "bf16", title: str | None = None,
             caption: str | None = None, record=None, ax=None):
    """Memory and compute ceilings of ``machine`` for ``dtype``, the ridge point, and ``points``.

    A point under the slanted line is held back by memory bandwidth, under the flat line by
    arithmetic; the distance to the roof is what is left to win. The roofs and the points are
    named in a legend beside the axes, so no label covers a line or a point.
    """
    if dtype not in machine.peak_tflops:
        raise ValueError(f"roofline(dtype={dtype!r}): {machine.name} has peaks for "
                         f"{', '.join(machine.peak_tflops) or 'no dtype'}; pass one of those")
    for p in points:
        if not isinstance(p, Point):
            raise TypeError(f"roofline(points=...): each point must be a course.plots.Point, got {type(p).__name__}")
    peak = machine.peak_tflops[dtype]
    bw_tbs = machine.bandwidth_gbs / 1e3
    ridge = peak / bw_tbs
    lo = min([ridge / 100] + [p.intensity / 3 for p in points if p.intensity > 0])
    hi = max([ridge * 30] + [p.intensity * 3 for p in points])
    x = np.logspace(np.log10(lo), np.log10(hi), 256)

    fig, ax = _axes(ax, (9, 4.5))
    # Where each roof comes from: course.hardware measures bandwidth (and, on a GPU it has no
    # datasheet for, the peaks too); a bandwidth other than the datasheet's was measured.
    measured_peaks = "no datasheet" in machine.source
    bandwidth_from = "measured" if machine.bandwidth_gbs != machine.datasheet_bandwidth_gbs else "datasheet"
    ax.loglog(x[x <= ridge], bw_tbs * x[x <= ridge], color="black", lw=2.5,
              label=f"memory roof: {machine.bandwidth_gbs:,.0f} GB/s ({bandwidth_from})")
    ax.loglog(x[x >= ridge], np.full((x >= ridge).sum(), peak), color="dimgray", lw=2.5,
              label=f"compute roof: {peak:,.4g} TFLOP/s ({dtype}, {'measured' if measured_peaks else 'datasheet'})")
    ax.axvline(ridge, color="gray", ls=":", lw=1, label=f"ridge point: {ridge:,.0f} FLOP/byte")
    # past the six line styles, points still differ: twenty colours (tab20's dark ones first), eleven markers
    markers = itertools.cycle("os^Dv<P>Xh*")
    colours = [plt.get_cmap("tab20")(k) for k in list(range(0, 20, 2)) + list(range(1, 20, 2))]
    for i, p in enumerate(points):
        style = _STYLES[i] if len(points) <= len(_STYLES) else dict(marker=next(markers), color=colours[i % 20])
        ax.plot(p.intensity, p.tflops, ls="none", marker=style["marker"], color=style["color"], ms=9, mew=2,
                label=f"{p.label}: {p.tflops:.3g} TFLOP/s")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(alpha=0.25, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False)
    _titles(fig, ax, title or f"Roofline: {machine.name} ({machine.source})", record)
    _caption(fig, caption)
    return fig


def throughput(series: dict, *, xlabel: str = "elements", ylabel: str = "GB/s", ceiling: float | None = None,
               ceiling_label: str = "ceiling", unit: str = "", title: str | None = None, caption: str | None = None,
               record=None, logx: bool = True, logy: bool = False, xticks=None, ax=None):
    """One line per implementation: ``series`` maps a label to ``(sizes, values)``.

    ``ceiling`` draws a dashed horizontal line, labelled ``"<ceiling_label>: <ceiling> <unit>"``;
    ``xticks`` (sizes) are labelled with their values instead of powers of two.
    """
    if not series:
        raise ValueError("throughput(series): pass at least one {label: (sizes, values)} entry")
    fig, ax = _axes(ax, (8, 4.5))
    for (name, (xs, ys)), style in zip(series.items(), itertools.cycle(_STYLES)):
        if len(xs) != len(ys):
            raise ValueError(f"throughput: series {name!r} has {len(xs)} sizes but {len(ys)} values")
        ax.plot(xs, ys, label=name, **style)
    if ceiling:
        value = f"{ceiling:,.0f}" if ceiling >= 100 else f"{ceiling:.3g}"
        ax.axhline(ceiling, color="black", ls=(0, (6, 3)), lw=1, label=f"{ceiling_label}: {value} {unit}".rstrip())
    if logx:
        ax.set_xscale("log", base=2)
    if xticks is not None:
        ax.set_xticks(list(xticks), [f"{x:,}" for x in xticks], rotation=30, ha="right")
        ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False)
    if title or record is not None:
        _titles(fig, ax, title or "", record)
    _caption(fig, caption)
    return fig


def bars(categories, series: dict, *, ylabel: str, title: str | None = None, caption: str | None = None,
         record=None, ax=None, upright_labels: bool = False):
    """Grouped bars: one group per category (a problem shape, say), one bar per entry of ``series``
    (``{label: values}``, a value per category), each bar labelled with its value (written upwards with
    ``upright_labels``, so that the labels of narrow neighbouring bars do not run into each other)."""
    if not series:
        raise ValueError("bars(series): pass at least one {label: values} entry")
    categories = list(categories)
    for name, values in series.items():
        if len(values) != len(categories):
            raise ValueError(f"bars: series {name!r} has {len(values)} values for {len(categories)} categories")
    fig, ax = _axes(ax, (min(12, max(8, 0.6 * len(categories) * len(series))), 4.5))
    fmt = "%.0f" if max(max(v) for v in series.values()) >= 10 else "%.2f"  # ratios near 1 keep two decimals
    _grouped_bars(ax, len(categories), series, itertools.cycle(_STYLES), fmt, upright_labels)
    if upright_labels:
        ax.margins(y=0.1)  # room above the tallest bar for its upright label
    ax.set_xticks(range(len(categories)), categories, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False)
    if title or record is not None:
        _titles(fig, ax, title or "", record)
    _caption(fig, caption)
    return fig


def _grouped_bars(ax, count: int, series: dict, styles, fmt: str, upright: bool) -> None:
    """One bar per entry of ``series`` in each of ``count`` groups, side by side, each labelled with its
    value (``fmt``; written upwards with ``upright``), coloured from the ``styles`` iterator in turn."""
    width = 0.8 / max(1, len(series))
    for i, ((label, values), style) in enumerate(zip(series.items(), styles)):
        xs = np.arange(count) + (i - (len(series) - 1) / 2) * width
        drawn = ax.bar(xs, values, width, label=label, color=style["color"])
        ax.bar_label(drawn, fmt=fmt, fontsize=7, padding=1, rotation=90 if upright else 0)


def speedups(categories, panels: dict, *, title: str | None = None, caption: str | None = None, record=None,
             notes: dict | None = None):
    """One panel of grouped bars per baseline, side by side: ``panels`` is ``{panel title: {label: ratios}}``,
    each ratio a baseline's time over a kernel's (above the dashed line at 1: faster than the baseline).
    Panels keep their own y-axes, so that no bar is read against another panel's baseline; ``notes``
    (``{panel title: text}``) writes a line under a panel's bars (what its record lacks, say)."""
    if not panels:
        raise ValueError("speedups(panels): pass at least one {panel title: {label: ratios}} entry")
    categories = list(categories)
    widths = [max(1, len(series)) for series in panels.values()]
    fig, axes = plt.subplots(1, len(panels), figsize=(min(14, 2.2 + 1.1 * len(categories) * len(panels)
                                                          + 0.5 * sum(widths)), 4.8),
                             layout="constrained", squeeze=False, width_ratios=widths)
    styles = itertools.cycle(_STYLES)
    for ax, (name, series) in zip(axes[0], panels.items()):
        for label, values in series.items():
            if len(values) != len(categories):
                raise ValueError(f"speedups: {label!r} has {len(values)} values for {len(categories)} categories")
        _grouped_bars(ax, len(categories), series, styles, "%.2f", upright=len(series) > 1)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.margins(y=0.15)
        ax.set_ylim(bottom=0, top=None if series else 2)
        ax.set_xticks(range(len(categories)), categories, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("baseline's time / kernel's time", fontsize=9)
        ax.set_title(name, fontsize=9, loc="left")
        ax.grid(alpha=0.3, axis="y")
        if series:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.32), fontsize=8, frameon=False)
        if notes and notes.get(name):
            ax.text(0.5, 0.02 if series else 0.5, notes[name], transform=ax.transAxes, ha="center", va="bottom",
                    fontsize=8, wrap=True,
                    style="italic", bbox=dict(facecolor="white", edgecolor="none", alpha=0.8))
    _caption(fig, caption)
    if title or record is not None:  # the title, the banner under it, the panels in the rest of the figure
        fig.get_layout_engine().set(rect=(0, 0.04 if caption else 0, 1, 0.85))
        fig.text(0.5, 0.99, title or "", ha="center", va="top", fontsize=12)
    if record is not None:
        fig.text(0.5, 0.93, record.banner, ha="center", va="top", fontsize=9,
                 bbox=_MEASURED_BOX if record.measured_here else _RECORDED_BOX)
    return fig


# Colours of the element map: right, wrong value, never written, written past the end, untouched.
_ELEMENT_COLOURS = {"right": "#7cc47c", "wrong value": "#f0a030", "never written": "#3b6fb6",
                    "written past the end": "#d62728", "past the end, untouched": "#ffffff"}


def element_map(n: int, shown: int, *, missed=(), past=(), wrong=(), title: str = ""):
    """A strip of output positions ``0 .. shown-1``: which of the ``n`` elements are right, wrong
    or never written, and which positions after the end were written. Runs are inclusive
    ``(first, last)`` pairs, as :func:`course.elementwise.runs` gives them."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    if n < 0 or shown < n:
        raise ValueError(f"element_map(n={n}, shown={shown}): need 0 <= n <= shown")
    codes = np.zeros(max(shown, 1), dtype=int)
    codes[n:] = 4
    for runs, code in ((missed, 2), (wrong, 1), (past, 3)):
        for a, b in runs:
            codes[max(a, 0):min(b, shown - 1) + 1] = code
    names = list(_ELEMENT_COLOURS)
    fig, ax = plt.subplots(figsize=(9, 1.6), layout="constrained")
    ax.imshow(codes[None, :], aspect="auto", interpolation="nearest", vmin=0, vmax=4,
              cmap=ListedColormap(list(_ELEMENT_COLOURS.values())), extent=(-0.5, shown - 0.5, 0, 1))
    ax.axvline(n - 0.5, color="black", lw=0.8, ls="--")
    ax.text(n - 0.5, 1.05, "end of out ", transform=ax.get_xaxis_transform(), fontsize=8, va="bottom", ha="right")
    # A run of a few elements is thinner than a pixel: mark every run with a triangle above the strip.
    for runs, code in ((missed, 2), (wrong, 1), (past, 3)):
        for a, b in runs:
            ax.plot((a + b) / 2, 1.0, marker="v", ms=9, color=list(_ELEMENT_COLOURS.values())[code],
                    markeredgecolor="black", markeredgewidth=0.5, transform=ax.get_xaxis_transform(), clip_on=False)
    ax.set_yticks([])
    ax.set_xlabel("position in out")
    used = sorted(set(codes.tolist()))
    ax.legend(handles=[Patch(facecolor=list(_ELEMENT_COLOURS.values())[c], edgecolor="gray", label=names[c])
                       for c in used], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return fig


def _axes(ax, size):
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    return fig, ax


def _titles(fig, ax, title: str, record) -> None:
    """The title, and under it a banner saying where the numbers come from (for a record)."""
    if record is None:
        ax.set_title(title)
        return
    if title:
        fig.suptitle(title)
    box = _MEASURED_BOX if record.measured_here else _RECORDED_BOX
    ax.set_title(record.banner, fontsize=9, bbox=box, pad=10)


def _caption(fig, caption):
    if caption:
        engine = fig.get_layout_engine()
        if engine is not None and hasattr(engine, "set"):  # keep a strip below the axes for it
            engine.set(rect=(0, 0.04, 1, 0.96))
        fig.text(0.99, 0.005, caption, ha="right", va="bottom", fontsize=7, color="gray")


def tile_map(owner, *, title: str = "", label: str = "program"):
    """A matrix whose elements hold the number of the program that wrote them, drawn as coloured
    tiles with the number in each (``owner`` is a 2-D integer tensor, e.g. written by a kernel)."""
    import torch

    owner = torch.as_tensor(owner).detach().cpu()
    if owner.dim() != 2:
        raise ValueError(f"tile_map(owner): pass a 2-D tensor of program numbers, got shape {tuple(owner.shape)}")
    rows, cols = owner.shape
    fig, ax = plt.subplots(figsize=(min(1 + 0.45 * cols, 10), min(0.8 + 0.45 * rows, 8)), layout="constrained")
    ax.imshow(owner.numpy() % 20, cmap="tab20", vmin=0, vmax=19, interpolation="nearest")
    for value in torch.unique(owner).tolist():
        where = torch.nonzero(owner == value).float()
        (r, c) = where.mean(0).tolist()
        ax.text(c, r, f"{value}", ha="center", va="center", fontsize=11, fontweight="bold")
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=7)
    ax.set_xlabel("column of C")
    ax.set_ylabel("row of C")
    ax.set_title(title or f"which {label} wrote each element", fontsize=10)
    return fig


def launch_orders(orders: dict, *, wave: int | None = None, path: int | None = None, title: str = ""):
    """Side by side, the launch index of every tile for each order in ``orders`` ({label: 2-D tensor
    from course.tiled.order_map}; "none" where no program took the tile, the last program where
    several did); with ``wave``, the tiles of the first wave (the first ``wave`` programs, one per
    SM) tinted red; with ``path``, a line from tile to tile through the first ``path`` programs in
    launch order (a dot at program 0), which shows the order where the colours are too close to
    tell apart. Small grids get the index written in each tile."""
    import torch

    if not orders:
        raise ValueError("launch_orders(orders): pass at least one {label: order map} entry")
    fig, axes = plt.subplots(1, len(orders), figsize=(4.6 * len(orders), 4.4), layout="constrained", squeeze=False)
    for ax, (label, order) in zip(axes[0], orders.items()):
        order = torch.as_tensor(order).cpu()
        rows, cols = order.shape
        cmap = plt.get_cmap("viridis").with_extremes(bad="white")  # tiles no program took (-1)
        image = ax.imshow(np.ma.masked_less(order.numpy(), 0), cmap=cmap, interpolation="nearest",
                          vmin=0, vmax=max(int(order.max()), 1))
        if rows * cols <= 256:
            for (r, c), value in zip(itertools.product(range(rows), range(cols)), order.flatten().tolist()):
                ax.text(c, r, str(value) if value >= 0 else "none", ha="center", va="center", fontsize=7,
                        color="white" if 0 <= value < order.max() / 2 else "black")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if wave:  # tint the first wave's tiles red
            from matplotlib.colors import ListedColormap

            first = ((order >= 0) & (order < wave)).numpy()
            ax.imshow(np.ma.masked_where(~first, first), cmap=ListedColormap(["red"]), alpha=0.5,
                      interpolation="nearest")
        if path:  # the first programs' tiles, joined in launch order
            where = {value: (r, c) for (r, c), value in np.ndenumerate(order.numpy()) if 0 <= value < path}
            rows_, cols_ = zip(*(where[p] for p in sorted(where))) if where else ((), ())
            ax.plot(cols_, rows_, color="white", lw=4.0)
            ax.plot(cols_, rows_, color="black", lw=1.8)
            ax.plot(cols_[:1], rows_[:1], "o", color="black", mfc="white", ms=7)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("tile column (pid_n)")
        ax.set_ylabel("tile row (pid_m)")
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="launch order (program id)")
    if title:
        fig.suptitle(title + (f"; red: the first {wave} programs, running at once" if wave else "")
                     + (f"\nline: programs 0 to {path - 1}, tile to tile in launch order (dot: program 0)"
                        if path else ""))
    return fig


def wave_fill(shapes: dict, *, sms: int, title: str = ""):
    """One bar per problem (``shapes`` maps a label to :func:`course.tiled.waves` output): the waves
    of tiles over ``sms`` SMs, full waves solid, the last wave's busy part lighter and its idle part
    hatched; beside it, the last wave alone, SM by SM. The hatched area is GPU time spent waiting
    for the slowest wave."""
    from matplotlib.patches import Patch

    if not shapes:
        raise ValueError("wave_fill(shapes): pass at least one {label: waves(...)} entry")
    fig, (ax, last) = plt.subplots(1, 2, figsize=(10, 0.9 + 0.55 * len(shapes)), layout="constrained", sharey=True,
                                   width_ratios=[3, 1])
    for row, (label, w) in enumerate(shapes.items()):
        full = w["waves"] - (w["idle in the last wave"] > 0)
        ax.barh(row, full, color="tab:blue", edgecolor="white")
        busy = w["busy in the last wave"] if w["idle in the last wave"] else sms
        if w["idle in the last wave"]:
            ax.barh(row, busy / sms, left=full, color="tab:orange", edgecolor="white")
            ax.barh(row, 1 - busy / sms, left=full + busy / sms, color="white", edgecolor="gray", hatch="///")
        ax.text(w["waves"] + 0.1, row, f"{w['tiles']} tiles, {w['efficiency']:.0%} of the SM time busy",
                va="center", fontsize=8)
        last.barh(row, busy, color="tab:orange" if busy < sms else "tab:blue", edgecolor="white")
        last.barh(row, sms - busy, left=busy, color="white", edgecolor="gray", hatch="///")
        last.text(sms * 1.02, row, f"{busy}", va="center", fontsize=8)
    ax.set_yticks(range(len(shapes)), list(shapes))
    ax.invert_yaxis()
    ax.set_xlabel(f"waves of {sms} programs")
    ax.set_xlim(0, max(w["waves"] for w in shapes.values()) * 1.45 + 0.5)
    last.set_xlim(0, sms * 1.15)
    last.set_xlabel(f"the last wave: busy SMs of {sms}")
    last.legend(handles=[Patch(color="tab:blue", label="full waves"), Patch(color="tab:orange", label="last wave, busy"),
                         Patch(facecolor="white", edgecolor="gray", hatch="///", label="last wave, idle")],
                loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def schedules(logs: dict, *, title: str = ""):
    """Side by side, for each ``{label: log}`` (``course.persistent.schedule`` output), the tiles of
    C coloured by the program that computed them, with the turn of that program's loop written in
    each tile ("none": never computed, "2x": computed twice)."""
    import torch

    if not logs:
        raise ValueError("schedules(logs): pass at least one {label: schedule(...)} entry")
    fig, axes = plt.subplots(1, len(logs), figsize=(max(6.0, 4.8 * len(logs)), 3.9), layout="constrained",
                             squeeze=False)
    programs = sorted({int(p) for log in logs.values() for p in torch.as_tensor(log["program"]).flatten() if p >= 0})
    cmap = plt.get_cmap("tab10" if len(programs) <= 10 else "tab20")
    for ax, (label, log) in zip(axes[0], logs.items()):
        program, count, step = (torch.as_tensor(log[key]).cpu() for key in ("program", "count", "step"))
        rows, cols = program.shape
        colours = np.ones((rows, cols, 4))
        done = (count > 0).numpy()
        colours[done] = cmap(program.numpy()[done] % cmap.N)
        ax.imshow(colours, interpolation="nearest")
        if rows * cols <= 400:
            for r, c in itertools.product(range(rows), range(cols)):
                n = int(count[r, c])
                text = "none" if n == 0 else f"{n}x" if n > 1 else str(int(step[r, c]))
                box = None if n == 1 else dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none")
                ax.text(c, r, text, ha="center", va="center", fontsize=7, fontweight="normal" if n == 1 else "bold",
                        bbox=box)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("tile column (pid_n)")
        ax.set_ylabel("tile row (pid_m)")
    if len(programs) <= 20:
        from matplotlib.patches import Patch

        fig.legend(handles=[Patch(color=cmap(p % cmap.N), label=f"program {p}") for p in programs],
                   loc="outside right", fontsize=8, frameon=False)
    fig.suptitle((title + "\n" if title else "") + "colour: the program; number: the turn of its loop", fontsize=10)
    return fig


def _category_panel(ax, values, cmap, title: str, xlabel: str, ylabel: str, numbers=None, fontsize: int = 7) -> None:
    """One map of category ids (numpy; -1: none, drawn white) on ``ax``, one colour of ``cmap`` per id,
    with ``numbers`` (numpy, the same shape) written into the cells when given."""
    colours = np.ones(values.shape + (4,))
    colours[values >= 0] = cmap(values[values >= 0] % cmap.N)
    ax.imshow(colours, interpolation="nearest")
    if numbers is not None:
        for (i, j), n in np.ndenumerate(numbers):
            ax.text(j, i, str(n), ha="center", va="center", fontsize=fontsize)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if values.shape[0] == 1:
        ax.set_yticks([])


def _category_legend(fig, cmap, labels: list, fontsize: int) -> None:
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=cmap(i % cmap.N), label=text) for i, text in enumerate(labels)],
               loc="outside right", fontsize=fontsize, frameon=False)


def category_maps(maps: dict, *, categories: int, label: str, title: str = "", numbers: dict | None = None,
                  xlabel: str = "tile column (pid_n)", ylabel: str = "tile row (pid_m)", names=None):
    """Side by side, each ``{title: 2-D tensor of category ids}`` (e.g. ``persistent.xcd_map``: the
    chiplet of every tile) in one colour per category, ``categories`` of them, with a legend
    (``"<label> <id>"``, or ``names[id]``); ``numbers`` (``{title: tensor of the same shape}``) are
    written into the cells."""
    import torch

    if not maps:
        raise ValueError("category_maps(maps): pass at least one {title: 2-D tensor} entry")
    rows, cols = max(torch.as_tensor(m).shape[0] for m in maps.values()), max(torch.as_tensor(m).shape[-1]
                                                                             for m in maps.values())
    written = numbers is not None and cols <= 32 and rows <= 32  # numbers stay legible up to 32 x 32 cells
    side = max(4.8, 0.3 * cols) if written else 4.8
    widths = [torch.as_tensor(m).shape[-1] for m in maps.values()]  # panels as wide as their columns
    height = max(4.2 if rows > 2 else 1.9, side * rows / cols)  # a single row (a 1-D tensor) stays a strip
    fig, axes = plt.subplots(1, len(maps), figsize=(side * sum(widths) / cols + 1.5, height),
                             layout="constrained", squeeze=False, width_ratios=widths)
    cmap = plt.get_cmap("tab10" if categories <= 10 else "tab20")
    for ax, (name, values) in zip(axes[0], maps.items()):
        written_here = torch.as_tensor(numbers[name]).cpu().numpy() if written and name in numbers else None
        _category_panel(ax, torch.as_tensor(values).cpu().numpy(), cmap, name, xlabel, ylabel, written_here, 7)
    _category_legend(fig, cmap, [names[i] if names else f"{label} {i}" for i in range(categories)], 8)
    if title:
        fig.suptitle(title)
    return fig


def ownership(owners: dict, *, number: str = "thread", colour: str = "warp", title: str = ""):
    """Each ``{title: layouts.ownership(...)}``: every element of the tensor coloured by its ``colour``
    ("warp" or "register"), with its ``number`` ("thread", "lane" or "register") written in where the
    tensors are at most 32 x 32. Side by side where that fits a notebook's width (about 960 pixels),
    else one above the other, so the numbers stay legible (8 points)."""
    import torch

    if colour not in ("warp", "register"):
        raise ValueError(f"ownership(colour={colour!r}): pass 'warp' or 'register'")
    if not owners:
        raise ValueError("ownership(owners): pass at least one {title: layouts.ownership(...)} entry")
    maps, numbers = {}, {}
    for name, owner in owners.items():
        key, value = owner[colour], owner[number]
        if key.dim() == 1:  # a 1-D tensor (a SliceLayout's) as one row
            key, value = key[None, :], value[None, :]
        maps[name], numbers[name] = torch.as_tensor(key).cpu().numpy(), torch.as_tensor(value).cpu().numpy()
    count = max(int(m.max()) for m in maps.values()) + 1
    flat = all(owner[colour].dim() == 1 for owner in owners.values())
    cols = [m.shape[1] for m in maps.values()]
    rows = [m.shape[0] for m in maps.values()]
    written = max(cols) <= 32 and max(rows) <= 32  # numbers stay legible up to 32 x 32 cells
    width, legend = 9.3, 1.3  # inches at 100 dpi: within JupyterLab's width (960 px), and the legend's strip
    side_by_side = sum(cols) * 0.25 + legend <= width
    cell = min(0.3, (width - legend - 0.6 * (len(maps) if side_by_side else 1))
               / (sum(cols) if side_by_side else max(cols)))
    pad = 0.9  # a panel's title, tick labels and axis labels
    if side_by_side:
        size, grid = (cell * sum(cols) + legend + 0.6 * len(maps), cell * max(rows) + pad), (1, len(maps))
        ratios = dict(width_ratios=cols)
    else:
        size, grid = (cell * max(cols) + legend + 0.6, sum(cell * r + pad for r in rows)), (len(maps), 1)
        ratios = dict(height_ratios=rows)
    fig, axes = plt.subplots(*grid, figsize=(size[0], max(size[1], 1.5)), layout="constrained", squeeze=False,
                             **ratios)
    cmap = plt.get_cmap("tab10" if count <= 10 else "tab20")
    for ax, (name, values) in zip(axes.flat, maps.items()):
        _category_panel(ax, values, cmap, name, "index i" if flat else "column j", "" if flat else "row i",
                        numbers[name] if written else None, 8)
    _category_legend(fig, cmap, [f"{colour} {i}" for i in range(count)], 9)
    fig.suptitle(title or f"who holds each element (number: the {number}; colour: the {colour})", fontsize=11)
    return fig


def streamk_map(log: dict, *, title: str = ""):
    """Every (tile, K-iteration) of a Stream-K schedule (``course.streamk.assignment``), coloured by the
    program that computed it: whole tiles above the dashed line, the shared ones below; white where no
    program did, a cross where several did."""
    import torch

    owner, count = torch.as_tensor(log["owner"]).cpu(), torch.as_tensor(log["count"]).cpu()
    tiles, iters = owner.shape
    cmap = plt.get_cmap("tab10" if log["num_programs"] <= 10 else "tab20")
    colours = np.ones((tiles, iters, 4))
    done = (count > 0).numpy()
    colours[done] = cmap(owner.numpy()[done] % cmap.N)
    fig, ax = plt.subplots(figsize=(min(max(6.0, 2 + 0.35 * iters), 9), min(1 + 0.22 * tiles, 9)), layout="constrained")
    ax.imshow(colours, interpolation="nearest", aspect="auto")
    for t, k in torch.nonzero(count > 1).tolist():
        ax.text(k, t, "x", ha="center", va="center", fontsize=8, fontweight="bold")
    shared_from = tiles - log["streamk_tiles"]
    if 0 < shared_from < tiles:
        ax.axhline(shared_from - 0.5, color="black", ls="--", lw=1)
    ax.set_xlabel("K-iteration of the tile")
    ax.set_ylabel("tile id (grouped order)")
    if tiles <= 40:  # every tile id, so that the prose can point at one
        ax.set_yticks(range(tiles), [str(t) for t in range(tiles)], fontsize=7)
    else:
        ax.yaxis.get_major_locator().set_params(integer=True)
    ax.xaxis.get_major_locator().set_params(integer=True)
    from matplotlib.patches import Patch

    handles = [Patch(color=cmap(p % cmap.N), label=f"program {p}") for p in range(log["num_programs"])][:20]
    if (count == 0).any():
        handles.append(Patch(facecolor="white", edgecolor="gray", label="never computed"))
    if (count > 1).any():
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], linestyle="none", marker="$x$", color="black",
                              label="computed by several programs"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(title or "which program computes each K-iteration", fontsize=10)
    return fig


def timeline(spans: dict, *, title: str = ""):
    """One row per program (``course.streamk.program_spans``): its pieces in the order it runs them,
    each as long as its K-iterations (a model: every iteration takes the same time), labelled with
    the tile id and coloured by tile."""
    fig, ax = plt.subplots(figsize=(9, 0.8 + 0.45 * len(spans)), layout="constrained")
    # One colour per tile: tab20, tab20b and tab20c give 60 distinct ones before any repeats.
    palette = [c for name in ("tab20", "tab20b", "tab20c") for c in plt.get_cmap(name).colors]
    rank = {tile: i for i, tile in enumerate(sorted({p[0] for pieces in spans.values() for p in pieces}))}
    for row, (program, pieces) in enumerate(spans.items()):
        t = 0
        for tile, k_begin, k_end in pieces:
            width = k_end - k_begin
            colour = palette[rank[tile] % len(palette)]
            ax.barh(row, width, left=t, color=colour, edgecolor="white")
            ax.text(t + width / 2, row, str(tile), ha="center", va="center", fontsize=7, color=_ink_on(colour))
            t += width
    ax.set_yticks(range(len(spans)), [f"program {p}" for p in spans])
    ax.invert_yaxis()
    ax.set_xlabel("time, in K-iterations (each labelled with its tile id)")
    ax.set_title(title or "what each program runs, in order", fontsize=10)
    return fig


def lanes(panels: dict, *, unit: str = "time", title: str = "", group_label: str = "warpgroup {}"):
    """One panel per schedule (``{name: {lane: [(start, end, label, group)]}}``, as
    ``course.attention_gluon.schedule`` gives them), one row per lane, each span a bar labelled and
    coloured by its group (a warpgroup; the legend names each ``group_label.format(group)``); the panels
    share the time axis."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 0.6 + sum(0.5 * len(p) + 0.4 for p in panels.values())),
                             sharex=True, layout="constrained", squeeze=False,
                             height_ratios=[len(p) for p in panels.values()])
    colours = plt.get_cmap("tab10").colors
    for ax, (name, rows) in zip(axes[:, 0], panels.items()):
        for row, spans in enumerate(rows.values()):
            for start, end, label, group in spans:
                colour = colours[group % len(colours)]
                ax.barh(row, end - start, left=start, color=colour, edgecolor="white")
                ax.text((start + end) / 2, row, label, ha="center", va="center", fontsize=9, color=_ink_on(colour))
        ax.set_yticks(range(len(rows)), list(rows))
        ax.invert_yaxis()
        end = max(span[1] for spans in rows.values() for span in spans)
        ax.set_title(f"{name}: the loop ends at {end:g}", fontsize=10, loc="left")
    axes[-1, 0].set_xlabel(unit)
    groups = sorted({span[3] for rows in panels.values() for spans in rows.values() for span in spans})
    fig.legend(handles=[matplotlib.patches.Patch(color=colours[g % len(colours)], label=group_label.format(g))
                        for g in groups], loc="outside lower center", ncols=len(groups), fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _ink_on(colour) -> str:
    """Black or white, whichever reads better on ``colour`` (by its relative luminance)."""
    r, g, b = matplotlib.colors.to_rgb(colour)
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def banks(tiles: dict, *, element_bytes: int, column: int, title: str = ""):
    """Two to a row, each ``{title: offsets}`` (``layouts.shared_offsets``: a tile's place in shared
    memory): every element coloured by its shared-memory bank (one hue per bank, 32 banks), and the
    ``column`` that one warp reads (a lane per row) outlined, with how many passes that read takes.
    About 960 pixels wide (a notebook's width), labels of 10 points or more."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    from course import layouts

    if not tiles:
        raise ValueError("banks(tiles): pass at least one {title: 2-D tensor of offsets} entry")
    cmap = ListedColormap(plt.get_cmap("turbo")(np.linspace(0.05, 0.95, layouts.BANKS)))  # not cyclic: 0 != 31
    across = min(2, len(tiles))
    down = -(-len(tiles) // across)
    fig, axes = plt.subplots(down, across, figsize=(4.2 * across + 1.0, 2.9 * down + 0.3), layout="constrained",
                             squeeze=False)
    for ax in axes.flat[len(tiles):]:
        ax.remove()
    for ax, (name, offsets) in zip(axes.flat, tiles.items()):
        bank = layouts.banks(offsets, element_bytes)
        image = ax.imshow(bank.numpy(), cmap=cmap, vmin=-0.5, vmax=layouts.BANKS - 0.5, interpolation="nearest")
        rows = offsets.shape[0]
        ax.add_patch(Rectangle((column - 0.5, -0.5), 1, min(rows, 32), fill=False, edgecolor="black", lw=2))
        passes = layouts.wavefronts(offsets[:32, column], element_bytes)
        ax.set_title(f"{name}\ncolumn {column} by one warp: {passes} pass{'es' if passes > 1 else ''}", fontsize=10)
        ax.set_xlabel("column j", fontsize=10)
        ax.set_ylabel("row i", fontsize=10)
        ax.tick_params(labelsize=10)
    bar = fig.colorbar(image, ax=axes[:, -1].tolist(), ticks=[0, 8, 16, 24, 31], shrink=0.8)
    bar.set_label("bank", fontsize=10)
    bar.ax.tick_params(labelsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
