"""What this machine can do: SM count, peak FLOP/s per dtype, memory bandwidth.

One table of datasheet figures (dense, no sparsity) for the GPUs the course knows, merged with
the ceilings the course measured itself (``python -m course.bench copy`` writes them to
``course/data/ceilings_<gpu>.json``). Measured numbers win: a datasheet peak is a promise,
a measured copy is what a kernel can hope for.

Under the interpreter there is no GPU to describe, so :func:`machine` returns the course's
reference GPU (an H100 SXM) and says so in ``source``; plots built from it are labelled
"reference GPU, none here".

A GPU the table does not know (names are matched whole: an "RTX A1000" is not an A100, an
"H100 NVL" not an H100 SXM) is measured once per process, in well under a second: a
device-to-device copy for the bandwidth and large cuBLAS matmuls (fp32, tf32, fp16, bf16) for
the peaks. Its ``source`` says "measured here, no datasheet": those are what PyTorch reaches on
it, below a datasheet's promise. It has no fp8 or int8 peak.

    >>> m = machine()
    >>> m.peak_tflops["bf16"] > 0 and m.bandwidth_gbs > 0
    True
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import re
import statistics
from pathlib import Path
from typing import Callable

import torch

from course import runtime

DATA_DIR = Path(__file__).resolve().parent / "data"
REFERENCE_GPU = "H100 SXM"


@dataclasses.dataclass(frozen=True)
class Machine:
    """A GPU's ceilings. ``peak_tflops`` maps a dtype name ("fp32", "tf32", "fp16", "bf16",
    "fp8", "int8") to dense TFLOP/s (TOP/s for int8); ``bandwidth_gbs`` is the memory
    bandwidth in GB/s (measured when the course has measured it, else the datasheet's)."""

    name: str
    sms: int
    l2_mb: float
    bandwidth_gbs: float
    peak_tflops: dict
    datasheet_bandwidth_gbs: float  # 0 where there is no datasheet
    # "datasheet", "measured", "measured here, no datasheet" or "reference GPU, none here"
    source: str = "datasheet"
    num_xcds: int = 1  # chiplets (AMD MI300: 8); 1 on NVIDIA

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Machine(name=...): pass the GPU's name as a non-empty str, got {self.name!r}")
        if isinstance(self.sms, bool) or not isinstance(self.sms, numbers.Integral) or self.sms < 0:
            raise ValueError(f"Machine(sms={self.sms!r}): the SM count must be an int >= 0")
        for field in ("l2_mb", "bandwidth_gbs", "datasheet_bandwidth_gbs"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"Machine({field}={value!r}): pass a finite number >= 0")
        if not isinstance(self.peak_tflops, dict):
            raise TypeError(f"Machine(peak_tflops=...): pass a dict such as {{'bf16': 989.0}}, "
                            f"got {type(self.peak_tflops).__name__}")
        for key, value in self.peak_tflops.items():
            if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or not math.isfinite(value) or value <= 0:
                raise ValueError(f"Machine(peak_tflops={{{key!r}: {value!r}}}): peaks map a dtype name "
                                 "such as 'bf16' to TFLOP/s > 0")

    @property
    def slug(self) -> str:
        """A file-name-safe name, e.g. ``h100-sxm``."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def ridge_point(self, dtype: str = "bf16") -> float:
        """FLOP per byte above which a kernel is compute-bound rather than memory-bound."""
        if dtype not in self.peak_tflops:
            raise ValueError(f"ridge_point(dtype={dtype!r}): {self.name} has peaks for "
                             f"{', '.join(self.peak_tflops) or 'no dtype'}; pass one of those")
        if not self.bandwidth_gbs > 0:
            raise ValueError(f"ridge_point: the memory bandwidth of {self.name} is unknown (0 GB/s)")
        return self.peak_tflops[dtype] * 1e12 / (self.bandwidth_gbs * 1e9)


def _spec(name, sms, l2_mb, bw, fp32, tf32, fp16, fp8, int8, num_xcds=1):
    peaks = {"fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": fp16, "int8": int8}
    if fp8:
        peaks["fp8"] = fp8
    return Machine(name, sms, l2_mb, bw, peaks, bw, num_xcds=num_xcds)


# Datasheet figures, dense (half the "with sparsity" figures). fp32 is the plain (non-tensor-core)
# rate; 16-bit, fp8 and int8 peaks are those with fp32 (int32) accumulation, as the course's
# kernels accumulate (GeForce cards run fp16/bf16/fp8 with fp32 accumulation at half the rate of
# fp16 accumulation).
KNOWN_GPUS = {
    "H100 SXM": _spec("H100 SXM", 132, 50, 3350, 67, 495, 989, 1979, 1979),
    "H100 PCIe": _spec("H100 PCIe", 114, 50, 2000, 51, 378, 756, 1513, 1513),
    "H100 NVL": _spec("H100 NVL", 132, 50, 3900, 60, 417.5, 835.5, 1670.5, 1670.5),
    "H200": _spec("H200", 132, 50, 4800, 67, 495, 989, 1979, 1979),
    "H200 NVL": _spec("H200 NVL", 132, 50, 4800, 60, 417.5, 835.5, 1670.5, 1670.5),
    # Grace Hopper: an H100 SXM's compute with 96 GB of HBM3 (4 TB/s) or 144 GB of HBM3e (4.9 TB/s).
    "GH200": _spec("GH200", 132, 50, 4000, 67, 495, 989, 1979, 1979),
    "GH200 HBM3e": _spec("GH200 HBM3e", 132, 50, 4900, 67, 495, 989, 1979, 1979),
    "A100": _spec("A100", 108, 40, 2039, 19.5, 156, 312, None, 624),  # SXM4 80 GB
    "A100 80GB PCIe": _spec("A100 80GB PCIe", 108, 40, 1935, 19.5, 156, 312, None, 624),
    "A100 40GB": _spec("A100 40GB", 108, 40, 1555, 19.5, 156, 312, None, 624),  # SXM4 and PCIe
    "A10": _spec("A10", 72, 6, 600, 31.2, 62.5, 125, None, 250),
    "L4": _spec("L4", 58, 48, 300, 30.3, 60, 121, 242.5, 242.5),
    "L40S": _spec("L40S", 142, 96, 864, 91.6, 183, 366, 733, 733),
    "RTX 4090": _spec("RTX 4090", 128, 72, 1008, 82.6, 82.6, 165.2, 330.3, 660.6),
    "MI300X": _spec("MI300X", 304, 256, 5300, 163.4, 653.7, 1307.4, 2614.9, 2614.9, num_xcds=8),
}

# How torch names them -> our table's key. A pattern must match the whole name once the vendor's
# prefixes are dropped (see _short_name), so "RTX A1000" is not an A100, "A10G" not an A10,
# "GH200" not an H200, "H100 NVL" not an H100 SXM and "RTX 4090 D" (fewer SMs) not an RTX 4090.
_NAME_PATTERNS = [
    (r"H100( SXM5?)?( 80GB)?( HBM3)?", "H100 SXM"),  # torch: "NVIDIA H100 80GB HBM3"
    (r"H100( 80GB)? PCIe( 80GB)?", "H100 PCIe"),
    (r"H100 NVL( 94GB)?", "H100 NVL"),
    (r"H200( SXM)?( 141GB)?( HBM3e)?", "H200"),
    (r"H200 NVL( 141GB)?", "H200 NVL"),
    (r"GH200( 96GB)?( HBM3)? 480GB", "GH200"),  # torch: "NVIDIA GH200 480GB"
    (r"GH200 (144GB?|624GB)( HBM3e)?", "GH200 HBM3e"),  # torch: "NVIDIA GH200 144G HBM3e"
    (r"A100( SXM4?)?( 80GB)?", "A100"),  # torch: "NVIDIA A100-SXM4-80GB"
    (r"A100( 80GB PCIe| PCIe 80GB)", "A100 80GB PCIe"),
    (r"A100( SXM4?| PCIe)? 40GB", "A100 40GB"),  # torch: "NVIDIA A100-PCIE-40GB"
    (r"A10", "A10"),
    (r"L4", "L4"),
    (r"L40S", "L40S"),
    (r"RTX 4090", "RTX 4090"),
    (r"MI300X( OAM)?", "MI300X"),  # torch: "AMD Instinct MI300X"
]

_VENDOR_WORDS = {"nvidia", "geforce", "amd", "instinct", "tesla", "radeon"}


def _short_name(device_name: str) -> str:
    """``"NVIDIA A100-SXM4-80GB"`` -> ``"A100 SXM4 80GB"``: vendor words dropped, dashes and
    underscores read as spaces."""
    words = re.sub(r"[-_\s]+", " ", device_name).split()
    return " ".join(w for w in words if w.lower() not in _VENDOR_WORDS)


def lookup(device_name: str) -> Machine | None:
    """The datasheet entry for a device name as torch reports it, or None if unknown."""
    if not isinstance(device_name, str):
        raise TypeError(f"lookup(device_name): pass the GPU's name as a str, such as "
                        f"torch.cuda.get_device_name(), got {type(device_name).__name__}")
    short = _short_name(device_name)
    for pattern, key in _NAME_PATTERNS:
        if re.fullmatch(pattern, short, re.IGNORECASE):
            return KNOWN_GPUS[key]
    return None


def measured_ceilings(m: Machine) -> dict | None:
    """The ceilings the course measured on this kind of GPU, if a file records them."""
    path = DATA_DIR / f"ceilings_{m.slug}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _with_measurements(m: Machine, source: str) -> Machine:
    measured = measured_ceilings(m)
    if not measured:
        return dataclasses.replace(m, source=source)
    return dataclasses.replace(
        m, bandwidth_gbs=measured.get("copy_gbs", m.bandwidth_gbs),
        source="measured" if source == "datasheet" else source,
    )


UNKNOWN_SOURCE = "measured here, no datasheet"
_MEASURED_HERE: dict = {}  # device name -> what _measure_here found (once per process)


def for_device(name: str, sms: int, l2_bytes: int, measure: Callable[[], dict]) -> Machine:
    """The Machine for a GPU torch describes by ``name``, SM count and L2 size: the datasheet's
    figures if the table knows the name, else what ``measure()`` finds (a dict with ``copy_gbs``
    and TFLOP/s per dtype name, as :func:`_measure_here` returns), labelled as measured here."""
    known = lookup(name)
    if known is None:
        known = _unknown_gpu(name, sms, measure)
    l2 = l2_bytes / 2**20 or known.l2_mb
    known = dataclasses.replace(known, sms=sms, l2_mb=l2)
    return _with_measurements(known, known.source)


def _unknown_gpu(name: str, sms: int, measure: Callable[[], dict]) -> Machine:
    try:
        found = measure()
    except Exception as exc:  # noqa: BLE001  (a figure we cannot measure is left out, not fatal)
        found = {"error": f"{type(exc).__name__}: {exc}"}
    peaks = {k: float(v) for k, v in found.items()
             if k in ("fp32", "tf32", "fp16", "bf16") and isinstance(v, (int, float)) and math.isfinite(v) and v > 0}
    copy = found.get("copy_gbs", 0.0)
    copy = float(copy) if isinstance(copy, (int, float)) and math.isfinite(copy) and copy > 0 else 0.0
    return Machine(name, sms, 0.0, copy, peaks, 0.0, source=UNKNOWN_SOURCE)


def _measure_here(copy_bytes: int = 256 * 2**20, n16: int = 8192, n32: int = 4096,
                  budget_ms: float = 100.0) -> dict:
    """Ceilings of the current GPU in well under a second: GB/s of a device-to-device copy
    (bytes read + written) and TFLOP/s of torch.matmul per dtype (fp32 without TF32, tf32,
    fp16, bf16). A dtype that fails is left out."""
    found: dict = {}
    free, _ = torch.cuda.mem_get_info()
    copy_bytes = max(2**20, min(copy_bytes, free // 8))
    src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    found["copy_gbs"] = 2 * copy_bytes / (_median_ms(lambda: dst.copy_(src), budget_ms) * 1e-3) / 1e9
    del src, dst
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for key, dtype, n, allow_tf32 in (("fp16", torch.float16, n16, tf32), ("bf16", torch.bfloat16, n16, tf32),
                                          ("fp32", torch.float32, n32, False), ("tf32", torch.float32, n32, True)):
            n = n if free > 6 * n * n * 4 else n // 2  # randn makes fp32 first
            torch.backends.cuda.matmul.allow_tf32 = allow_tf32
            try:
                a = torch.randn(n, n, device="cuda").to(dtype)
                b = torch.randn(n, n, device="cuda").to(dtype)
                c = torch.empty(n, n, device="cuda", dtype=dtype)
                found[key] = 2 * n**3 / (_median_ms(lambda: torch.matmul(a, b, out=c), budget_ms) * 1e-3) / 1e12
            except RuntimeError:  # e.g. bf16 on a GPU without it
                pass
            finally:
                a = b = c = None
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.cuda.empty_cache()
    return found


def _median_ms(fn, budget_ms: float) -> float:
    """Median of a few CUDA-event timings of ``fn`` after one warm-up, within about ``budget_ms``."""
    fn()
    torch.cuda.synchronize()
    times = []
    while len(times) < 3 or (len(times) < 10 and sum(times) < budget_ms):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


@functools.lru_cache(maxsize=None)
def _properties(index: int) -> tuple:
    props = torch.cuda.get_device_properties(index)
    return props.multi_processor_count, (props.major, props.minor)


def device_sms(index: int | None = None) -> int:
    """The SM count of GPU ``index`` (default: the current one)."""
    return _properties(torch.cuda.current_device() if index is None else index)[0]


def device_capability(index: int | None = None) -> tuple:
    """The compute capability ``(major, minor)`` of GPU ``index`` (default: the current one)."""
    return _properties(torch.cuda.current_device() if index is None else index)[1]


def current() -> Machine | None:
    """The GPU kernels run on now, or None under the interpreter."""
    if runtime.INTERPRET:
        return None
    props = torch.cuda.get_device_properties(0)

    def measure():
        if props.name not in _MEASURED_HERE:
            _MEASURED_HERE[props.name] = _measure_here()
        return _MEASURED_HERE[props.name]

    return for_device(props.name, props.multi_processor_count, getattr(props, "L2_cache_size", 0), measure)


def machine() -> Machine:
    """This GPU, or the reference GPU (labelled as such) when there is none."""
    return current() or _with_measurements(KNOWN_GPUS[REFERENCE_GPU], "reference GPU, none here")


def describe(m: Machine | None = None) -> str:
    """A few lines about ``m`` (default: :func:`machine`) for a notebook to print."""
    m = m or machine()
    if not isinstance(m, Machine):
        raise TypeError(f"describe(m): pass a course.hardware.Machine, got {type(m).__name__}")
    peaks = ", ".join(f"{k} {v:g}" for k, v in m.peak_tflops.items()) or "unknown"
    sheet = f"datasheet {m.datasheet_bandwidth_gbs:,.0f}" if m.datasheet_bandwidth_gbs else "no datasheet"
    return (
        f"{m.name} ({m.source}): {m.sms} SMs, {m.l2_mb:g} MB L2\n"
        f"  memory bandwidth {m.bandwidth_gbs:,.0f} GB/s ({sheet})\n"
        f"  peak TFLOP/s: {peaks}"
    )
