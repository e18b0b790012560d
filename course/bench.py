"""The course's benchmark command: our GEMMs against cuBLAS in the same run, and the machine's ceilings.

    python -m course.bench gemm [--quick] [--dtypes bf16,fp16,int8] [--out DIR] [--no-save]
    python -m course.bench gemm --set broad --dtypes bf16   # shapes nothing was tuned on, auto only
    python -m course.bench copy [--out DIR] [--no-save]
    python -m course.bench host [--no-save]   # host us per call and back-to-back calls vs torch
    python -m course.bench all        # copy, then gemm
    python -m course.bench plot [--out DIR]   # redraw the plots from the recorded GEMM results (no GPU)

``gemm`` times ``course.gemm.matmul`` in each mode (persistent, streamk, tail where the shape has
a tail split, gluon on an sm_90 GPU for 16-bit shapes with M > 64, auto) against
``torch.matmul`` (and ``matmul_int8`` with scales + bias -> bf16 against ``torch._int_mm``, both
with B stored K-major) over the course's shape set: squares 1024-8192 (with the wave-quantized
1536, 3072, 4224) and the Llama-3 8B/70B projections at M in {16, 64, 512, 4096, 8192}. It prints
a ratio table last (ratio = cuBLAS time / ours: above 1 is faster than cuBLAS), geometric means
and the course's targets, saves ``course/data/gemm_<gpu>.json`` and draws throughput and
roofline plots into ``--out``. Times are GPU times from a cold L2 (``course.timing.bench``:
CUDA events, median, the host kept ahead of the GPU so that Python launch costs do not leak in).
Each ratio is the median over three rounds of the reference timed right after ours; the host
time of one call, ours and the reference's, is recorded apart for the small shapes.

``--set broad`` times ``mode="auto"`` alone on ``broad_set()``: other model families' projections
at decode batches and prefill lengths, vocabulary projections, B stored row-major, weight gradients
(A transposed) and seeded random sizes, none of which the heuristics were fitted to. It prints the
geometric mean of each group and checks its own targets (bf16: geomean >= 1.00, no shape below
0.90), and saves ``course/data/gemm_broad_<gpu>.json``.

``copy`` measures device-to-device copy bandwidth (bytes read + written) and a large bf16
matmul, and saves them as ``course/data/ceilings_<gpu>.json`` (read by ``course.hardware``).

Kernels are compiled up front by worker processes (one per CPU core, up to 8), which fill
Triton's on-disk cache, so the timed process only loads them.
"""

import argparse
import concurrent.futures
import datetime
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
from pathlib import Path

import torch

SQUARES = [1024, 1536, 2048, 3072, 4096, 4224, 8192]
# (model, projection, K, N): activations (M, K) times weights (K, N)
PROJECTIONS = [
    ("8B", "qkv", 4096, 6144), ("8B", "o", 4096, 4096), ("8B", "gate_up", 4096, 14336), ("8B", "down", 14336, 4096),
    ("70B", "qkv", 8192, 10240), ("70B", "o", 8192, 8192), ("70B", "gate_up", 8192, 28672), ("70B", "down", 28672, 8192),
]
TOKENS = [16, 64, 512, 4096, 8192]
WAVE_QUANTIZED = {"square 1536", "square 3072", "square 4224", "8B qkv M=512"}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.int8}
MODES = ("persistent", "streamk", "tail", "gluon", "auto")
_OUT_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.bfloat16}  # int8: scaled into bf16


# The broad set (``--set broad``): shapes nothing in course.gemm.config was tuned on. Other model
# families' projections, (family, hidden size, [(projection, K, N)]), at decode batches and prefill
# lengths; vocabulary projections; B stored row-major as well as K-major; weight gradients (A is the
# transposed activations); seeded random sizes.
BROAD_FAMILIES = [
    ("Qwen2.5-7B", [("qkv", 3584, 4608), ("o", 3584, 3584), ("gate_up", 3584, 37888), ("down", 18944, 3584)]),
    ("Gemma-2-9B", [("qkv", 3584, 8192), ("o", 4096, 3584), ("gate_up", 3584, 28672), ("down", 14336, 3584)]),
    ("Phi-3-mini", [("qkv", 3072, 9216), ("o", 3072, 3072), ("gate_up", 3072, 16384), ("down", 8192, 3072)]),
    ("Llama-2-13B", [("qkv", 5120, 15360), ("o", 5120, 5120), ("gate_up", 5120, 27648), ("down", 13824, 5120)]),
    ("Falcon-7B", [("qkv", 4544, 4672), ("o", 4544, 4544), ("up", 4544, 18176), ("down", 18176, 4544)]),
    ("GPT-2-XL", [("qkv", 1600, 4800), ("o", 1600, 1600), ("up", 1600, 6400), ("down", 6400, 1600)]),
]
BROAD_VOCAB = [("Llama-3", 4096, 128256), ("Qwen2.5-7B", 3584, 152064), ("Gemma-2-9B", 3584, 256000)]
BROAD_TOKENS = [1, 32, 1000, 4096]
ROW_MAJOR_B = " [B row-major]"  # in a case's name: b is stored (K, N) row-major, not as w.T
WEIGHT_GRAD = "dW "  # a case's name starts with it: a is stored transposed (activations^T)


def broad_set(quick: bool = False, seed: int = 0):
    """``[(name, M, N, K)]`` of the broad set; the layout of A and B is in the name (``ROW_MAJOR_B``,
    ``WEIGHT_GRAD``)."""
    families = BROAD_FAMILIES[::2] if quick else BROAD_FAMILIES
    tokens = [1, 1000] if quick else BROAD_TOKENS
    cases = [(f"{fam} {proj} M={m}", m, n, k) for fam, projs in families for m in tokens for proj, k, n in projs]
    cases += [(f"{fam} vocab M={m}", m, n, k) for fam, k, n in BROAD_VOCAB for m in tokens[:3]]
    cases += [(f"{fam} o M=1000{ROW_MAJOR_B}", 1000, n, k) for fam, projs in families for proj, k, n in projs
              if proj == "o"]
    cases += [(f"{WEIGHT_GRAD}{fam} {proj} tokens=4096", k, n, 4096) for fam, projs in families[:2]
              for proj, k, n in projs if proj in ("qkv", "down")]
    rng = random.Random(seed)
    cases += [(f"random {i}", rng.randint(1, 8192), rng.randint(1, 8192), rng.randint(1, 8192))
              for i in range(4 if quick else 10)]
    return cases


def shape_set(quick: bool):
    """``[(name, M, N, K)]``, large problems last within each group (cache-friendly: similar kernels together)."""
    cases = [(f"square {n}", n, n, n) for n in SQUARES]
    tokens = [16, 512, 4096] if quick else TOKENS
    projections = PROJECTIONS[:4] if quick else PROJECTIONS
    if quick:
        cases = [c for c in cases if c[1] in (1536, 3072, 4096, 8192)]
    for m in tokens:
        for model, proj, k, n in projections:
            cases.append((f"{model} {proj} M={m}", m, n, k))
    return cases


def _inputs(dtype, M, N, K, device="cuda", name=""):
    """Random inputs. B is stored K-major (a transposed (N, K) weight, as nn.Linear keeps it) unless
    ``name`` holds ``ROW_MAJOR_B``; A is stored transposed where ``name`` starts with ``WEIGHT_GRAD``."""
    def matrix(rows, cols, transposed):
        shape = (cols, rows) if transposed else (rows, cols)
        if dtype == torch.int8:
            t = torch.randint(-127, 128, shape, dtype=torch.int8, device=device)
        else:
            t = torch.randn(shape, device=device, dtype=dtype)
        return t.T if transposed else t

    a = matrix(M, K, transposed=name.startswith(WEIGHT_GRAD))
    b = matrix(K, N, transposed=ROW_MAJOR_B not in name)
    if dtype == torch.int8:
        extra = dict(a_scale=torch.rand(M, device=device) / 100, b_scale=torch.rand(N, device=device) / 100,
                     bias=torch.randn(N, device=device))
        return a, b, extra
    return a, b, {}


def _not_run(dtype, M, N, K):
    """Modes that would only repeat another here: "tail" without a split (it runs persistent), and
    "gluon" for int8, decode shapes (M <= 64) or where the GPU cannot run it (not sm_90)."""
    from course import gemm
    from course.gemm import config as gemm_config

    skip = set() if gemm.tail_plan_for(M, N, gemm.heuristic_config(M, N, K, dtype)) else {"tail"}
    if dtype == torch.int8 or M <= 64 or not gemm_config.gluon_here():
        skip.add("gluon")
    return skip


def _ours(a, b, extra, mode, out):
    from course import gemm

    if a.dtype == torch.int8:
        return lambda: gemm.matmul_int8(a, b, extra["a_scale"], extra["b_scale"], extra["bias"], mode=mode, out=out)
    return lambda: gemm.matmul(a, b, mode=mode, out=out)


def _compile_job(job):
    """Worker: run each (dtype, M, N, K) once in every mode, so Triton compiles and caches the kernels."""
    os.environ.setdefault("COURSE_QUIET", "1")
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        import course  # noqa: F401
    failures = []
    for dtype_name, M, N, K, name, modes in job:
        dtype = DTYPES[dtype_name]
        a, b, extra = _inputs(dtype, M, N, K, name=name)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16 if dtype == torch.int8 else dtype)
        for mode in set(modes) - _not_run(dtype, M, N, K):
            try:
                _ours(a, b, extra, mode, out)()
            except Exception as e:  # reported again (and timed as missing) by the main process
                failures.append(f"{dtype_name} {M}x{N}x{K} {mode}: {type(e).__name__}: {e}")
        del a, b, extra, out
    torch.cuda.synchronize()
    return failures


def precompile(jobs, workers):
    """Compile every kernel the benchmark needs, in parallel worker processes (fills Triton's cache)."""
    buckets = [jobs[i::workers] for i in range(workers)]
    ctx = multiprocessing.get_context("spawn")
    failures = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for f in pool.map(_compile_job, [b for b in buckets if b]):
            failures += f
    return failures


def _time(fn, rep):
    from course import timing

    return timing.bench(fn, warmup=max(5, rep // 4), rep=rep)


def _time_or_report(fn, rep, label):
    """``_time(fn, rep)``, or None after printing why when ``fn`` raises (the run goes on)."""
    try:
        return _time(fn, rep)
    except Exception as e:
        print(f"  {label}: {type(e).__name__}: {e}", flush=True)
        return None


def _exact(a, b, extra):
    """The float64 reference of what ``_ours`` computes (exact for int8: |sums| stay below 2^53)."""
    ref = a.double() @ b.double()
    if a.dtype == torch.int8:
        ref = ref * extra["a_scale"].double()[:, None] * extra["b_scale"].double()[None, :] + extra["bias"].double()
    return ref


def _error(fn, out, ref):
    """``||out - ref|| / ||ref||`` of one fresh run into a NaN-poisoned ``out`` (NaN if any element is unwritten)."""
    from course import check

    out.fill_(float("nan"))
    fn()
    return check.rel_error(out, ref)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def run_gemm(args):
    import course  # noqa: F401
    from course import check, gemm, hardware, records, timing

    machine = hardware.machine()
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in dtypes:
        if d not in DTYPES:
            raise SystemExit(f"--dtypes: {d!r} is not one of {', '.join(DTYPES)}")
    broad = args.set == "broad"
    cases = broad_set(args.quick) if broad else shape_set(args.quick)
    modes = ("auto",) if broad else MODES  # the broad set asks how auto does, not which mode wins
    t0 = time.time()
    if not args.no_precompile:
        jobs = [(d, M, N, K, name, modes) for d in dtypes for (name, M, N, K) in cases]
        workers = max(1, min(8, (os.cpu_count() or 2) - 1))
        fails = precompile(jobs, workers)
        print(f"compiled kernels in {time.time() - t0:.0f} s with {workers} workers"
              + (f"; {len(fails)} failures, first: {fails[0]}" if fails else ""), flush=True)
    rows = []
    rep = 25 if args.quick else 40
    for dname in dtypes:
        dtype = DTYPES[dname]
        for name, M, N, K in cases:
            a, b, extra = _inputs(dtype, M, N, K, name=name)
            out_dtype = _OUT_DTYPE[dname]
            out = torch.empty(M, N, device="cuda", dtype=out_dtype)
            flops = 2.0 * M * N * K
            row = dict(dtype=dname, name=name, M=M, N=N, K=K)
            if dtype == torch.int8:
                ref_fn = (lambda: torch._int_mm(a, b)) if M > 16 else None  # _int_mm needs M > 16
                row["reference"] = "torch._int_mm (int32 out, no epilogue)"
            else:
                ref_fn = lambda: torch.matmul(a, b)  # noqa: E731
                row["reference"] = "torch.matmul"
            cfg = gemm.heuristic_config(M, N, K, dtype)
            row["config"] = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k} w{cfg.num_warps} s{cfg.num_stages}"
            row["auto_mode"] = gemm.choose_mode(M, N, K, cfg, dtype=dtype)
            # Three rounds; in each, the reference runs right after each of our modes and the
            # ratio is taken from that adjacent pair. Clocks drift with power and heat over a run
            # (H100: cuBLAS read 680-780 TFLOP/s on one large shape in different runs), so a ratio
            # of neighbours, median over the rounds, is steadier than a ratio of separate bests.
            # Each round starts one mode later, so that no mode is always timed first or last.
            skipped = _not_run(dtype, M, N, K) | (set(MODES) - set(modes))
            fns = {"ref": ref_fn, **{mode: None if mode in skipped else _ours(a, b, extra, mode, out) for mode in MODES}}
            times = {key: [] for key in fns}
            pair_ratios = {mode: [] for mode in MODES}
            timed = [mode for mode in MODES if mode not in skipped]
            for round_ in range(3):
                for mode in timed[round_ % len(timed):] + timed[:round_ % len(timed)]:
                    if fns[mode] is None:
                        continue
                    ms = _time_or_report(fns[mode], rep, f"{dname} {name} {mode}")
                    if ms is None:
                        fns[mode] = None
                        continue
                    times[mode].append(ms)
                    if fns["ref"] is None:
                        continue
                    ref_ms = _time_or_report(fns["ref"], rep, f"{dname} {name} reference")
                    if ref_ms is None:
                        fns["ref"] = None
                        continue
                    times["ref"].append(ref_ms)
                    pair_ratios[mode].append(ref_ms / ms)
            # Every kernel that was timed is also checked: a fast wrong answer must not count.
            ref = _exact(a, b, extra)
            tol = check.tolerance(out_dtype)
            for mode in MODES:
                if mode in skipped:
                    row[f"{mode}_error"] = None
                    continue
                err = _error(fns[mode], out, ref) if fns[mode] else float("nan")  # NaN: it raised
                row[f"{mode}_error"] = err
                if not err <= tol:
                    print(f"  WRONG {dname} {name} {mode}: relative error {err:.2e} > {tol:.0e}", flush=True)
            del ref
            row["ref_ms"] = statistics.median(times["ref"]) if times["ref"] else None
            for mode in MODES:
                ms = statistics.median(times[mode]) if times[mode] else None
                row[f"{mode}_ms"] = ms
                row[f"{mode}_ratio"] = statistics.median(pair_ratios[mode]) if pair_ratios[mode] else None
                row[f"{mode}_tflops"] = flops / ms / 1e9 if ms else None
            row["ref_tflops"] = flops / row["ref_ms"] / 1e9 if row["ref_ms"] else None
            if row["ref_ms"] and row["ref_ms"] < 0.05 and fns["auto"] and fns["ref"]:  # host time: small problems only
                row["ref_host_us"] = timing.host_us(fns["ref"], 100)
                row["auto_host_us"] = timing.host_us(fns["auto"], 100)
            elem = 1 if dtype == torch.int8 else 2
            row["bytes"] = elem * (M * K + K * N) + 2 * M * N
            rows.append(row)
            r = row["auto_ratio"]
            print(f"{dname:5s} {name:22s} {M:5d}x{N:5d}x{K:5d}  ref {row['ref_tflops'] or 0:6.0f} TF  "
                  f"auto {row['auto_tflops'] or 0:6.0f} TF  ratio {r if r else float('nan'):.3f}  "
                  f"[{time.time() - t0:.0f}s]", flush=True)
            del a, b, extra, out
    meta = dict(kind="gemm", set=args.set, gpu_slug=machine.slug, quick=args.quick, sms=machine.sms,
                ratio="reference time / our time (>1: faster than the reference)")
    record = f"gemm_broad_{machine.slug}" if broad else f"gemm_{machine.slug}"
    if not args.no_save:
        try:
            path = records.save(record, rows, meta)
            print(f"saved {path}")
        except Exception as e:  # records is the lead's helper: fall back to plain JSON
            print(f"course.records.save failed ({e}); writing plain JSON")
            _save_plain(f"{record}.json", rows, meta)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"{record}.json").write_text(
            json.dumps({"meta": {**_env(), **meta}, "rows": rows}, indent=1) + "\n")
        if not broad:
            _plots(rows, machine, args.out, records.label(_env()))
    print_table(rows, broad=broad)
    return rows


def _env():
    import triton

    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat()}


def _save_plain(filename, rows, meta):
    path = Path(__file__).resolve().parent / "data" / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": {**_env(), **meta}, "rows": rows}, indent=1) + "\n")
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


def _plots(rows, machine, out_dir, caption):
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
    _plots(record.rows, machine, out_dir, record.label)
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
        g = {m: _geomean([r.get(f"{m}_ratio") for r in rs]) for m in MODES}
        best = _geomean([max(filter(None, [r.get(f"{m}_ratio") for m in MODES]), default=None) for r in rs])
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
    checks = _broad_checks(rows) if broad else _benchmark_checks(rows)
    wrong = [f"{r['dtype']} {r['name']} {m}" for r in rows for m in MODES  # None: not run (_not_run)
             if r.get(f"{m}_error") is not None and not r[f"{m}_error"] <= check.tolerance(_OUT_DTYPE[r["dtype"]])]
    checks.append(("every timed kernel matches the float64 reference", not wrong,
                   f"{len(wrong)} wrong: {', '.join(wrong[:5])}" if wrong else "all within tolerance"))
    for what, ok, detail in checks:
        print(f"{'MET ' if ok else 'MISS'}  {what}: {detail}")


def broad_group(name: str) -> str:
    """The group of a broad-set case, by its name: decode, prefill, vocab, B row-major, weight
    gradient or random."""
    if name.startswith(WEIGHT_GRAD):
        return "weight gradient"
    if ROW_MAJOR_B in name:
        return "B row-major"
    if name.startswith("random"):
        return "random"
    if " vocab " in name:
        return "vocab"
    return "decode" if int(name.rsplit("M=", 1)[1]) <= 32 else "prefill"


def _broad_checks(rows):
    """The broad set's targets: geometric mean >= 1.00 and no shape below 0.90 (bf16), with the
    geometric mean of each group printed first."""
    checks = []
    for dname in sorted({r["dtype"] for r in rows}):
        rs = [r for r in rows if r["dtype"] == dname and r.get("auto_ratio")]
        groups = {}
        for r in rs:
            groups.setdefault(broad_group(r["name"]), []).append(r["auto_ratio"])
        print(f"broad set {dname}: " + ", ".join(f"{g} {_geomean(v):.3f} ({len(v)})" for g, v in groups.items()))
        if dname != "bf16" or not rs:
            continue
        g = _geomean([r["auto_ratio"] for r in rs])
        worst = min(rs, key=lambda r: r["auto_ratio"])
        checks.append((f"{dname} broad set geomean (auto) >= 1.00", g >= 1.0, f"{g:.3f} over {len(rs)} shapes"))
        checks.append((f"{dname} broad set: no shape (auto) below 0.90", worst["auto_ratio"] >= 0.9,
                       f"worst {worst['auto_ratio']:.3f} ({worst['name']}, {worst['M']}x{worst['N']}x{worst['K']}), "
                       f"{sum(r['auto_ratio'] < 0.9 for r in rs)} below"))
    return checks


def _benchmark_checks(rows):
    """The benchmark set's targets."""
    checks = []
    for dname in ("bf16", "fp16"):
        rs = [r for r in rows if r["dtype"] == dname]
        if not rs:
            continue
        g = _geomean([r["auto_ratio"] for r in rs])
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
                           f"{_geomean([r['auto_ratio'] for r in dec]):.3f}"))
    i8 = [r for r in rows if r["dtype"] == "int8" and r["auto_ratio"]]
    if i8:
        g = _geomean([r["auto_ratio"] for r in i8])
        checks.append(("int8 + scales + bias -> bf16 vs torch._int_mm, geomean (auto) >= 1.2", g >= 1.2,
                       f"{g:.3f} over {len(i8)} shapes (M=16 has no _int_mm)"))
    return checks


# Host time: small products, where Python and the launch, not the GPU, set the
# pace of a model's forward pass. (name, M, N, K), bf16, B K-major as in the benchmark.
HOST_SHAPES = [("decode 8B qkv", 1, 6144, 4096), ("decode 8B o", 16, 4096, 4096), ("decode 70B o", 64, 8192, 8192),
               ("prefill 8B o", 512, 4096, 4096), ("odd 1000x1000x1000", 1000, 1000, 1000)]


def host_rows(shapes, dtype, *, calls: int = 100, device: str = "cuda") -> list[dict]:
    """Per shape, host microseconds per call (``course.timing.host_us``, median of 15 turns) of
    ``course.gemm.matmul``, ``torch.matmul`` and a bare launch of a plain Triton kernel
    (``course.tiled``'s, one launch, no checks), and the back-to-back time per call of ``calls``
    calls in a row, synchronized at the end (wall time: the slower of host and GPU), for ours and
    torch."""
    from course import gemm, tiled, timing

    def back_to_back_us(fn):  # wall time per call of ``calls`` calls in a row
        fn()
        _synchronize(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        _synchronize(device)
        return (time.perf_counter() - start) / calls * 1e6

    rows = []
    for name, M, N, K in shapes:
        a, b, _ = _inputs(dtype, M, N, K, device=device, name=name)
        out = torch.empty(M, N, device=device, dtype=dtype)
        fns = {"ours": lambda: gemm.matmul(a, b, out=out), "torch": lambda: torch.matmul(a, b, out=out),
               "bare_triton": lambda: tiled.launch(tiled.matmul_kernel, a, b, out)}
        row = dict(name=name, M=M, N=N, K=K)
        # in turns, median of 15: one batch of calls can catch a garbage collection or a busy core
        host = timing.in_turns(fns, rounds=15, measure=lambda fn: timing.host_us(fn, calls))
        for key, us in host.items():
            row[f"{key}_host_us"] = us
        wall = timing.in_turns({key: fns[key] for key in ("ours", "torch")}, rounds=7, measure=back_to_back_us)
        for key, us in wall.items():
            row[f"{key}_back_to_back_us"] = us
        row["back_to_back_ratio"] = row["torch_back_to_back_us"] / row["ours_back_to_back_us"]
        rows.append(row)
    return rows


def _synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def print_host_table(rows):
    """Host us per call (ours, torch, a bare Triton launch) and back-to-back us per call, with the
    target: ours no slower on the host than torch."""
    print(f"\n{'shape':20s} {'M':>5s} {'N':>6s} {'K':>6s}  host us: {'ours':>6s} {'torch':>6s} {'bare':>6s}"
          f"   back-to-back us: {'ours':>7s} {'torch':>7s} {'ratio':>6s}")
    for r in rows:
        print(f"{r['name']:20s} {r['M']:5d} {r['N']:6d} {r['K']:6d}           {r['ours_host_us']:6.1f} "
              f"{r['torch_host_us']:6.1f} {r['bare_triton_host_us']:6.1f}                    "
              f"{r['ours_back_to_back_us']:7.1f} {r['torch_back_to_back_us']:7.1f} {r['back_to_back_ratio']:6.2f}")
    worst = max(rows, key=lambda r: r["ours_host_us"] / r["torch_host_us"])
    ok = worst["ours_host_us"] <= worst["torch_host_us"]
    print(f"{'MET ' if ok else 'MISS'}  host time per call <= torch.matmul's: worst {worst['name']} "
          f"{worst['ours_host_us']:.1f} us against {worst['torch_host_us']:.1f}")
    print(f"back-to-back, geomean of torch / ours: {_geomean([r['back_to_back_ratio'] for r in rows]):.3f}")


def run_host(args):
    import course  # noqa: F401
    from course import hardware, records

    rows = host_rows(HOST_SHAPES, torch.bfloat16)
    if not args.no_save:
        import triton  # host time depends on Triton's launcher: one record per minor version

        version = ".".join(triton.__version__.split(".")[:2])
        name = f"host_{hardware.machine().slug}_triton{version}"
        print(f"saved {records.save(name, rows, dict(kind='host', calls=100))}")
    print_host_table(rows)
    return rows


def run_copy(args):
    import triton

    import course  # noqa: F401
    from course import hardware

    machine = hardware.machine()
    n = 1 << 30  # 1 GiB each way
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = _time(lambda: dst.copy_(src), 200)
    copy_gbs = 2 * n / (ms * 1e-3) / 1e9
    size = 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    mm_ms = _time(lambda: torch.matmul(a, b), 300)
    tflops = 2 * size**3 / (mm_ms * 1e-3) / 1e12
    data = {"gpu": torch.cuda.get_device_name(), "copy_gbs": round(copy_gbs, 1),
            "matmul_tflops": {"bf16": round(tflops, 1)}, "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(),
            "how": "copy: 1 GiB device-to-device, bytes read + written; matmul: torch.matmul 8192^3 bf16, "
                   "random inputs; medians of course.timing.bench"}
    text = json.dumps(data, indent=1) + "\n"
    if not args.no_save:
        path = Path(__file__).resolve().parent / "data" / f"ceilings_{machine.slug}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"saved {path}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"ceilings_{machine.slug}.json").write_text(text)
    print(f"copy {copy_gbs:,.0f} GB/s (read + write), bf16 matmul {tflops:,.0f} TFLOP/s on {data['gpu']}")
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m course.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["gemm", "copy", "host", "all", "plot"])
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    ap.add_argument("--set", choices=["benchmark", "broad"], default="benchmark",
                    help="benchmark: the course's shape set, every mode; broad: shapes nothing was tuned on, auto only")
    ap.add_argument("--dtypes", default="bf16,fp16,int8", help="comma-separated: bf16, fp16, int8")
    ap.add_argument("--out", default=None, help="folder for a JSON copy and the PNG plots")
    ap.add_argument("--no-save", action="store_true", help="do not write course/data/")
    ap.add_argument("--no-precompile", action="store_true", help="compile in the timed process instead")
    args = ap.parse_args(argv)
    if args.what == "plot":
        return plot_recorded(args.out or "vis")
    if not torch.cuda.is_available():
        raise SystemExit("course.bench measures GPU speed: it needs a GPU (none is visible to PyTorch). "
                         "Recorded results are in course/data/.")
    if args.what in ("copy", "all"):
        run_copy(args)
    if args.what in ("gemm", "all"):
        run_gemm(args)
    if args.what in ("host", "all"):
        run_host(args)


if __name__ == "__main__":
    sys.exit(main())
