"""The benchmark's report: the ratio table with the course's targets (printed last), and the plots."""

import json
import math
import statistics
from pathlib import Path

from course.bench.shapes import MODES, OUT_DTYPE, WAVE_QUANTIZED, broad_group


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def triton_version() -> str:
    """Triton's major.minor version, as record names carry it (``host_h100-sxm_triton3.9``)."""
    import triton

    return ".".join(triton.__version__.split(".")[:2])


def save_plain(filename, rows, meta):
    from course.records import environment

    path = Path(__file__).resolve().parents[1] / "data" / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": {**environment(), **meta}, "rows": rows}, indent=1) + "\n")
    print(f"saved {path}")


def throughput_figure(rows, machine, dname: str, *, caption=None, record=None):
    """TFLOP/s of every mode and of the reference on the benchmark's squares of dtype ``dname``
    ("bf16", "fp16", "int8"), under that dtype's datasheet peak; None without such rows."""
    from course import plots

    sq = [r for r in rows if r["dtype"] == dname and r["name"].startswith("square")]
    if not sq:
        return None
    reference = sq[0]["reference"].split(" ")[0]
    series = {"cuBLAS (torch.matmul)" if reference == "torch.matmul" else reference:
              ([r["M"] for r in sq], [r["ref_tflops"] or 0 for r in sq])}
    for mode in MODES:
        done = [r for r in sq if r.get(f"{mode}_tflops")]  # "tail" only where a shape has a split
        if done:
            series[f"ours, {mode}"] = ([r["M"] for r in done], [r[f"{mode}_tflops"] for r in done])
    peak = machine.peak_tflops.get("int8" if dname == "int8" else dname)
    sizes = sorted({r["M"] for r in sq})
    kept = _spaced(sizes)
    fig = plots.throughput(series, xlabel="M = N = K", ylabel="TOP/s" if dname == "int8" else "TFLOP/s",
                           ceiling=peak, ceiling_label=f"{dname} datasheet peak", title=f"GEMM throughput, {dname}",
                           caption=caption, record=record, xticks=kept)
    close = [size for size in sizes if size not in kept]
    if close:  # 4224 beside 4096: its tick gets a longer mark and its label a row of its own, lower down
        ax = fig.axes[0]
        ax.set_xticks(close, [f"{x:,}" for x in close], minor=True, rotation=30, ha="right")
        ax.tick_params(axis="x", which="minor", length=22, pad=1)
    return fig


def _spaced(sizes, ratio: float = 1.1):
    """``sizes`` without those within ``ratio`` of the previous one kept (4224 after 4096): their labels
    would overlap on a log axis."""
    kept = []
    for size in sizes:
        if not kept or size >= ratio * kept[-1]:
            kept.append(size)
    return kept


def draw_plots(rows, machine, out_dir, caption):
    try:
        import matplotlib

        matplotlib.use("Agg")
        from course import plots
    except Exception as e:
        print(f"no plots: {e}")
        return
    for dname in sorted({r["dtype"] for r in rows}):
        fig = throughput_figure(rows, machine, dname, caption=caption)
        if fig is not None:
            fig.savefig(Path(out_dir) / f"gemm_throughput_{dname}.png", dpi=110)
        if dname in ("bf16", "fp16", "int8"):
            pts = [plots.Point(f"{r['name']}", 2.0 * r["M"] * r["N"] * r["K"], r["bytes"], r["auto_ms"])
                   for r in rows if r["dtype"] == dname and r["auto_ms"] and r["name"] in
                   ("square 4096", "8B qkv M=16", "8B qkv M=512", "70B gate_up M=64", "square 1536")]
            key = "int8" if dname == "int8" else dname
            if pts and key in machine.peak_tflops:
                fig = plots.roofline(machine, pts, dtype=key, title=f"Roofline, ours (auto), {dname}", caption=caption)
                fig.savefig(Path(out_dir) / f"gemm_roofline_{dname}.png", dpi=110)


def plot_recorded(out_dir):
    """Draw the GEMM plots from this GPU's recorded results (the reference GPU's without a GPU)."""
    import course  # noqa: F401
    from course import hardware, records

    machine = hardware.machine()
    record = records.load(f"gemm_{machine.slug}")
    machine = hardware.lookup(record.meta.get("gpu", "")) or machine
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    draw_plots(record.rows, machine, out_dir, record.label)
    print(f"plots of {record.label} written to {out_dir}/")


def print_table(rows, broad: bool = False):
    """The ratio table, geometric means and the course's targets (printed last); for the broad set,
    its groups' geometric means and its own targets."""
    from course import check
    print()
    width = max([22] + [len(r["name"]) for r in rows])
    print(f"{'dtype':5s} {'shape':{width}s} {'M':>5s} {'N':>6s} {'K':>6s} {'ref TF':>7s} {'pers':>6s} {'streamk':>7s} "
          f"{'tail':>6s} {'gluon':>6s} {'auto':>6s} auto-mode")

    def f(x):
        return f"{x:.3f}" if x else "  -  "

    for r in rows:
        print(f"{r['dtype']:5s} {r['name']:{width}s} {r['M']:5d} {r['N']:6d} {r['K']:6d} {r['ref_tflops'] or 0:7.0f} "
              f"{f(r['persistent_ratio']):>6s} {f(r['streamk_ratio']):>7s} {f(r.get('tail_ratio')):>6s} "
              f"{f(r.get('gluon_ratio')):>6s} {f(r['auto_ratio']):>6s} {r['auto_mode']}")
    print()
    for dname in sorted({r["dtype"] for r in rows}):
        rs = [r for r in rows if r["dtype"] == dname]
        g = {m: geomean([r.get(f"{m}_ratio") for r in rs]) for m in MODES}
        best = geomean([max(filter(None, [r.get(f"{m}_ratio") for m in MODES]), default=None) for r in rs])
        tails = sum(1 for r in rs if r.get("tail_ratio"))
        wides = sum(1 for r in rs if r.get("gluon_ratio"))
        print(f"geomean {dname}: persistent {g['persistent']:.3f}  streamk {g['streamk']:.3f}  auto {g['auto']:.3f}"
              f"  best-of-modes {best:.3f}" + (f"  (tail, {tails} shapes with a split: {g['tail']:.3f})" if tails else "")
              + (f"  (gluon, {wides} shapes: {g['gluon']:.3f})" if wides else ""))
    host = [r for r in rows if r.get("auto_host_us")]
    if host:
        print(f"host time per call, median of {len(host)} small shapes: ours "
              f"{statistics.median(r['auto_host_us'] for r in host):.0f} us, reference "
              f"{statistics.median(r['ref_host_us'] for r in host):.0f} us (not in the ratios: GPU times)")
    print()
    checks = broad_checks(rows) if broad else benchmark_checks(rows)
    wrong = [f"{r['dtype']} {r['name']} {m}" for r in rows for m in MODES  # None: not run (course.bench.gemm.not_run)
             if r.get(f"{m}_error") is not None and not r[f"{m}_error"] <= check.tolerance(OUT_DTYPE[r["dtype"]])]
    checks.append(("every timed kernel matches the float64 reference", not wrong,
                   f"{len(wrong)} wrong: {', '.join(wrong[:5])}" if wrong else "all within tolerance"))
    for what, ok, detail in checks:
        print(f"{'MET ' if ok else 'MISS'}  {what}: {detail}")



def broad_checks(rows):
    """The broad set's targets: geometric mean >= 1.00 and no shape below 0.90 (bf16), with the
    geometric mean of each group printed first."""
    checks = []
    for dname in sorted({r["dtype"] for r in rows}):
        rs = [r for r in rows if r["dtype"] == dname and r.get("auto_ratio")]
        groups = {}
        for r in rs:
            groups.setdefault(broad_group(r["name"]), []).append(r["auto_ratio"])
        print(f"broad set {dname}: " + ", ".join(f"{g} {geomean(v):.3f} ({len(v)})" for g, v in groups.items()))
        if dname != "bf16" or not rs:
            continue
        g = geomean([r["auto_ratio"] for r in rs])
        worst = min(rs, key=lambda r: r["auto_ratio"])
        checks.append((f"{dname} broad set geomean (auto) >= 1.00", g >= 1.0, f"{g:.3f} over {len(rs)} shapes"))
        checks.append((f"{dname} broad set: no shape (auto) below 0.90", worst["auto_ratio"] >= 0.9,
                       f"worst {worst['auto_ratio']:.3f} ({worst['name']}, {worst['M']}x{worst['N']}x{worst['K']}), "
                       f"{sum(r['auto_ratio'] < 0.9 for r in rs)} below"))
    return checks


def benchmark_checks(rows):
    """The benchmark set's targets."""
    checks = []
    for dname in ("bf16", "fp16"):
        rs = [r for r in rows if r["dtype"] == dname]
        if not rs:
            continue
        g = geomean([r["auto_ratio"] for r in rs])
        checks.append((f"{dname} geomean (auto) >= 1.00", g >= 1.0, f"{g:.3f}"))
        nd = [r for r in rs if r["M"] > 64 and r["auto_ratio"]]
        worst = min(nd, key=lambda r: r["auto_ratio"]) if nd else None
        if worst:
            checks.append((f"{dname} every non-decode shape (auto) >= 0.90", worst["auto_ratio"] >= 0.9,
                           f"worst {worst['auto_ratio']:.3f} ({worst['name']})"))
        wq = [r for r in rs if r["name"] in WAVE_QUANTIZED]
        if wq:
            vals = [max(filter(None, [r["streamk_ratio"], r["auto_ratio"]]), default=0) for r in wq]
            checks.append((f"{dname} wave-quantized shapes (streamk or auto) >= 0.95", min(vals) >= 0.95,
                           ", ".join(f"{r['name']} {v:.3f}" for r, v in zip(wq, vals))))
        dec = [r for r in rs if r["M"] <= 64 and r["auto_ratio"]]
        if dec:
            w = min(dec, key=lambda r: r["auto_ratio"])
            checks.append((f"{dname} decode shapes M <= 64 (auto) >= 0.90", w["auto_ratio"] >= 0.9,
                           f"worst {w['auto_ratio']:.3f} ({w['name']}), geomean "
                           f"{geomean([r['auto_ratio'] for r in dec]):.3f}"))
    i8 = [r for r in rows if r["dtype"] == "int8" and r["auto_ratio"]]
    if i8:
        g = geomean([r["auto_ratio"] for r in i8])
        checks.append(("int8 + scales + bias -> bf16 vs torch._int_mm, geomean (auto) >= 1.2", g >= 1.2,
                       f"{g:.3f} over {len(i8)} shapes (M=16 has no _int_mm)"))
    return checks

