"""``python -m course.bench host``: host time per call of ``course.gemm.matmul`` against ``torch.matmul``."""

import statistics
import time

import torch

from course.bench.report import geomean
from course.bench.shapes import inputs

# Host time: small products, where Python and the launch, not the GPU, set the
# pace of a model's forward pass. (name, M, N, K), bf16, B K-major as in the benchmark.
HOST_SHAPES = [("decode 8B qkv", 1, 6144, 4096), ("decode 8B o", 16, 4096, 4096), ("decode 70B o", 64, 8192, 8192),
               ("prefill 8B o", 512, 4096, 4096), ("odd 1000x1000x1000", 1000, 1000, 1000)]


def host_rows(shapes, dtype, *, calls: int = 100, rounds: int = 21, device: str = "cuda") -> list[dict]:
    """Per shape, host microseconds per call (``course.timing.host_us``, the median of ``rounds`` turns)
    of ``course.gemm.matmul`` and ``torch.matmul``, both given ``out=`` and both allocating their
    output, and of a bare launch of a plain Triton kernel (``course.tiled``'s, one launch, no checks);
    and the back-to-back time per call of ``calls`` calls in a row with ``out=``, synchronized at the
    end (wall time: the slower of host and GPU), for ours and torch."""
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
               "ours_alloc": lambda: gemm.matmul(a, b), "torch_alloc": lambda: torch.matmul(a, b),
               "bare_triton": lambda: tiled.launch(tiled.matmul_kernel, a, b, out)}
        row = dict(name=name, M=M, N=N, K=K)
        host = _in_turns(fns, rounds, lambda fn: timing.host_us(fn, calls))
        for key, us in host.items():
            row[f"{key}_host_us"] = us
        wall = _in_turns({key: fns[key] for key in ("ours", "torch")}, (rounds + 1) // 2, back_to_back_us)
        for key, us in wall.items():
            row[f"{key}_back_to_back_us"] = us
        row["back_to_back_ratio"] = row["torch_back_to_back_us"] / row["ours_back_to_back_us"]
        rows.append(row)
    return rows


def _in_turns(fns: dict, rounds: int, measure) -> dict:
    """``{label: median}`` of ``measure(fns[label])`` over ``rounds`` turns, as ``course.timing.in_turns``,
    the order reversed every other turn: one batch of calls can catch a garbage collection or a busy
    core, the host's speed drifts over seconds (the same Python code measured 1.7x slower for a few
    seconds, on an H100 host), and no function always runs first or right after another one."""
    times = {label: [] for label in fns}
    order = list(fns)
    for _ in range(rounds):
        for label in order:
            times[label].append(measure(fns[label]))
        order.reverse()
    return {label: statistics.median(us) for label, us in times.items()}


def _compiled_key() -> str:
    """Build (once) and use the compiled layout key of ``course.gemm``'s routes; what the key is."""
    from course.gemm import layout_key

    try:
        layout_key.use_built()
        return "compiled (course.gemm.layout_key)"
    except Exception as error:  # no compiler or ninja: the routes keep their Python key
        return f"Python (the compiled one could not be built: {type(error).__name__})"


def _synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def print_host_table(rows):
    """Host us per call (ours and torch with ``out=`` and allocating, a bare Triton launch) and
    back-to-back us per call, with the target: ours no slower on the host than torch, either way."""
    print(f"\n{'':41s}{'host us, out=':>15s} {'allocating':>15s} {'bare':>7s}   {'back-to-back us':>22s}")
    print(f"{'shape':20s} {'M':>5s} {'N':>6s} {'K':>6s}  " + f"{'ours':>7s} {'torch':>7s} " * 2 + f"{'':>7s}   "
          f"{'ours':>7s} {'torch':>7s} {'ratio':>6s}")
    for r in rows:
        print(f"{r['name']:20s} {r['M']:5d} {r['N']:6d} {r['K']:6d}  {r['ours_host_us']:7.1f} "
              f"{r['torch_host_us']:7.1f} {r['ours_alloc_host_us']:7.1f} {r['torch_alloc_host_us']:7.1f} {r['bare_triton_host_us']:7.1f}   "
              f"{r['ours_back_to_back_us']:7.1f} {r['torch_back_to_back_us']:7.1f} {r['back_to_back_ratio']:6.2f}")
    for label, ours, theirs in (("out=", "ours_host_us", "torch_host_us"),
                                ("allocating", "ours_alloc_host_us", "torch_alloc_host_us")):
        worst = max(rows, key=lambda r: r[ours] / r[theirs])
        ok = worst[ours] <= worst[theirs]
        print(f"{'MET ' if ok else 'MISS'}  host time per call <= torch.matmul's ({label}): worst {worst['name']} "
              f"{worst[ours]:.1f} us against {worst[theirs]:.1f}")
    print(f"back-to-back, geomean of torch / ours: {geomean([r['back_to_back_ratio'] for r in rows]):.3f}")


def run_host(args):
    import course  # noqa: F401
    from course import hardware, records

    key = _compiled_key()
    print(f"layout key of the routes: {key}")
    rows = host_rows(HOST_SHAPES, torch.bfloat16)
    if not args.no_save:
        import triton  # host time depends on Triton's launcher: one record per minor version

        version = ".".join(triton.__version__.split(".")[:2])
        name = f"host_{hardware.machine().slug}_triton{version}"
        print(f"saved {records.save(name, rows, dict(kind='host', calls=100, rounds=21, layout_key=key))}")
    print_host_table(rows)
    return rows

