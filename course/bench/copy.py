"""``python -m course.bench copy``: the machine's ceilings (copy bandwidth, a large bf16 matmul), read by
``course.hardware``."""

import datetime
import json
from pathlib import Path

import torch

from course.bench.gemm import timed


def run_copy(args):
    import triton

    import course  # noqa: F401
    from course import hardware

    machine = hardware.machine()
    n = 1 << 30  # 1 GiB each way
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), 200)
    copy_gbs = 2 * n / (ms * 1e-3) / 1e9
    size = 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    mm_ms = timed(lambda: torch.matmul(a, b), 300)
    tflops = 2 * size**3 / (mm_ms * 1e-3) / 1e12
    data = {"gpu": torch.cuda.get_device_name(), "copy_gbs": round(copy_gbs, 1),
            "matmul_tflops": {"bf16": round(tflops, 1)}, "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(),
            "how": "copy: 1 GiB device-to-device, bytes read + written; matmul: torch.matmul 8192^3 bf16, "
                   "random inputs; medians of course.timing.bench"}
    text = json.dumps(data, indent=1) + "\n"
    if not args.no_save:
        path = Path(__file__).resolve().parents[1] / "data" / f"ceilings_{machine.slug}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"saved {path}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"ceilings_{machine.slug}.json").write_text(text)
    print(f"copy {copy_gbs:,.0f} GB/s (read + write), bf16 matmul {tflops:,.0f} TFLOP/s on {data['gpu']}")
    return data

