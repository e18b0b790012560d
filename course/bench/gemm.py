"""``python -m course.bench gemm``: ``course.gemm`` in every mode against the reference, in the same run:
kernels compiled up front by worker processes, each ratio a median of adjacent pairs, every timed
kernel checked against float64."""

import concurrent.futures
import functools
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path

import torch

from course.bench.report import draw_plots, print_table, save_plain, triton_version
from course.bench.shapes import DTYPES, MODES, OUT_DTYPE, broad_set, inputs, shape_set


def not_run(dtype, M, N, K):
    """Modes that would only repeat another here: "tail" without a split (it runs persistent), and
    "gluon" for int8, decode shapes (M <= 64) or where the GPU cannot run it (not sm_90)."""
    from course import gemm
    from course.gemm import config as gemm_config

    skip = set() if gemm.tail_plan_for(M, N, gemm.heuristic_config(M, N, K, dtype)) else {"tail"}
    if dtype == torch.int8 or M <= 64 or not gemm_config.gluon_here():
        skip.add("gluon")
    return skip


def auto_mode(a, b, out, cfg) -> str:
    """What ``mode="auto"`` runs on these operands: "gluon", or the Triton mode for ``cfg``; like
    ``matmul``, on realigned copies of operands it would copy, and with the operands' rows in view."""
    from course import gemm
    from course.gemm import plans

    a, b, work, _ = gemm.aligned_operands(a, b, out)
    if plans.gluon_choice(a, b, work, "auto", None, False) is not None:
        return "gluon"
    return gemm.choose_mode(a.shape[0], b.shape[1], a.shape[1], cfg, dtype=a.dtype, gluon=False)


def ours(a, b, extra, mode, out):
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
        a, b, extra = inputs(dtype, M, N, K, name=name)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16 if dtype == torch.int8 else dtype)
        for mode in set(modes) - not_run(dtype, M, N, K):
            try:
                ours(a, b, extra, mode, out)()
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


def timed(fn, rep):
    from course import timing

    return timing.bench(fn, warmup=max(5, rep // 4), rep=rep)


def time_or_report(fn, rep, label):
    """``timed(fn, rep)``, or None after printing why when ``fn`` raises (the run goes on)."""
    try:
        return timed(fn, rep)
    except Exception as e:
        print(f"  {label}: {type(e).__name__}: {e}", flush=True)
        return None


def exact(a, b, extra):
    """The float64 reference of what ``ours`` computes (exact for int8: |sums| stay below 2^53)."""
    ref = a.double() @ b.double()
    if a.dtype == torch.int8:
        ref = ref * extra["a_scale"].double()[:, None] * extra["b_scale"].double()[None, :] + extra["bias"].double()
    return ref


def error(fn, out, ref):
    """``||out - ref|| / ||ref||`` of one fresh run into a NaN-poisoned ``out`` (NaN if any element is unwritten)."""
    from course import check

    out.fill_(float("nan"))
    fn()
    return check.rel_error(out, ref)



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
            a, b, extra = inputs(dtype, M, N, K, name=name)
            out_dtype = OUT_DTYPE[dname]
            out = torch.empty(M, N, device="cuda", dtype=out_dtype)
            flops = 2.0 * M * N * K
            row = dict(dtype=dname, name=name, M=M, N=N, K=K)
            if dtype == torch.int8:
                ref_fn = functools.partial(torch._int_mm, a, b) if M > 16 else None  # _int_mm needs M > 16
                row["reference"] = "torch._int_mm (int32 out, no epilogue)"
            else:
                ref_fn = functools.partial(torch.matmul, a, b)
                row["reference"] = "torch.matmul"
            cfg = gemm.heuristic_config(M, N, K, dtype)
            row["config"] = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k} w{cfg.num_warps} s{cfg.num_stages}"
            row["auto_mode"] = auto_mode(a, b, out, cfg)
            # Three rounds; in each, the reference runs right after each of our modes and the
            # ratio is taken from that adjacent pair. Clocks drift with power and heat over a run
            # (H100: cuBLAS read 680-780 TFLOP/s on one large shape in different runs), so a ratio
            # of neighbours, median over the rounds, is steadier than a ratio of separate bests.
            # Each round starts one mode later, so that no mode is always timed first or last.
            skipped = not_run(dtype, M, N, K) | (set(MODES) - set(modes))
            fns = {"ref": ref_fn, **{mode: None if mode in skipped else ours(a, b, extra, mode, out) for mode in MODES}}
            times = {key: [] for key in fns}
            pair_ratios = {mode: [] for mode in MODES}
            order = [mode for mode in MODES if mode not in skipped]
            for round_ in range(3):
                for mode in order[round_ % len(order):] + order[:round_ % len(order)]:
                    if fns[mode] is None:
                        continue
                    ms = time_or_report(fns[mode], rep, f"{dname} {name} {mode}")
                    if ms is None:
                        fns[mode] = None
                        continue
                    times[mode].append(ms)
                    if fns["ref"] is None:
                        continue
                    ref_ms = time_or_report(fns["ref"], rep, f"{dname} {name} reference")
                    if ref_ms is None:
                        fns["ref"] = None
                        continue
                    times["ref"].append(ref_ms)
                    pair_ratios[mode].append(ref_ms / ms)
            # Every kernel that was timed is also checked: a fast wrong answer must not count.
            ref = exact(a, b, extra)
            tol = check.tolerance(out_dtype)
            for mode in MODES:
                if mode in skipped:
                    row[f"{mode}_error"] = None
                    continue
                err = error(fns[mode], out, ref) if fns[mode] else float("nan")  # NaN: it raised
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
    if getattr(args, "per_triton", False):
        record += f"_triton{triton_version()}"
    if not args.no_save:
        try:
            path = records.save(record, rows, meta)
            print(f"saved {path}")
        except Exception as e:  # records is the lead's helper: fall back to plain JSON
            print(f"course.records.save failed ({e}); writing plain JSON")
            save_plain(f"{record}.json", rows, meta)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"{record}.json").write_text(
            json.dumps({"meta": {**records.environment(), **meta}, "rows": rows}, indent=1) + "\n")
        if not broad:
            draw_plots(rows, machine, args.out, records.label(records.environment()))
    print_table(rows, broad=broad)
    return rows

