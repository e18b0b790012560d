"""``python -m course.bench host``: host time per call of ``course.gemm.matmul`` against ``torch.matmul``."""

import time

import torch

from course.bench.report import geomean
from course.bench.shapes import inputs

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
        a, b, _ = inputs(dtype, M, N, K, device=device, name=name)
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
    print(f"back-to-back, geomean of torch / ours: {geomean([r['back_to_back_ratio'] for r in rows]):.3f}")


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

