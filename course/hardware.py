"""What this machine can do: SM count, peak FLOP/s per dtype, memory bandwidth.

One table of datasheet figures (dense, no sparsity) for the GPUs the course knows, merged with
the ceilings the course measured itself (``python -m course.bench copy`` writes them to
``course/data/ceilings_<gpu>.json``). Measured numbers win: a datasheet peak is a promise,
a measured copy is what a kernel can hope for.

Under the interpreter there is no GPU to describe, so :func:`machine` returns the course's
reference GPU (an H100 SXM) and says so in ``source``; plots built from it are labelled
"reference GPU, none here".

    >>> m = machine()
    >>> m.peak_tflops["bf16"] > 0 and m.bandwidth_gbs > 0
    True
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

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
    datasheet_bandwidth_gbs: float
    source: str = "datasheet"  # "datasheet", "measured", or "reference GPU, none here"
    num_xcds: int = 1  # chiplets (AMD MI300: 8); 1 on NVIDIA

    @property
    def slug(self) -> str:
        """A file-name-safe name, e.g. ``h100-sxm``."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def ridge_point(self, dtype: str = "bf16") -> float:
        """FLOP per byte above which a kernel is compute-bound rather than memory-bound."""
        return self.peak_tflops[dtype] * 1e12 / (self.bandwidth_gbs * 1e9)


def _spec(name, sms, l2_mb, bw, fp32, tf32, fp16, fp8, int8, num_xcds=1):
    peaks = {"fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": fp16, "int8": int8}
    if fp8:
        peaks["fp8"] = fp8
    return Machine(name, sms, l2_mb, bw, peaks, bw, num_xcds=num_xcds)


# Datasheet figures, dense. fp32 is the plain (non-tensor-core) rate.
KNOWN_GPUS = {
    "H100 SXM": _spec("H100 SXM", 132, 50, 3350, 67, 495, 989, 1979, 1979),
    "H100 PCIe": _spec("H100 PCIe", 114, 50, 2000, 51, 378, 756, 1513, 1513),
    "H200": _spec("H200", 132, 50, 4800, 67, 495, 989, 1979, 1979),
    "A100": _spec("A100", 108, 40, 2039, 19.5, 156, 312, None, 624),
    "MI300X": _spec("MI300X", 304, 256, 5300, 163.4, 653.7, 1307.4, 2614.9, 2614.9, num_xcds=8),
}

# How torch names them -> our table's key (first match wins).
_NAME_PATTERNS = [
    (r"H100.*PCIe", "H100 PCIe"),
    (r"H100", "H100 SXM"),
    (r"H200", "H200"),
    (r"A100", "A100"),
    (r"MI300X", "MI300X"),
]


def lookup(device_name: str) -> Machine | None:
    """The datasheet entry for a device name as torch reports it, or None if unknown."""
    for pattern, key in _NAME_PATTERNS:
        if re.search(pattern, device_name, re.IGNORECASE):
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


def current() -> Machine | None:
    """The GPU kernels run on now, or None under the interpreter."""
    if runtime.INTERPRET:
        return None
    props = torch.cuda.get_device_properties(0)
    known = lookup(props.name)
    if known is None:  # an unknown GPU: what torch can tell, no peaks
        known = Machine(props.name, props.multi_processor_count, 0.0, 0.0, {}, 0.0)
    l2 = getattr(props, "L2_cache_size", 0) / 2**20 or known.l2_mb
    known = dataclasses.replace(known, sms=props.multi_processor_count, l2_mb=l2)
    return _with_measurements(known, "datasheet")


def machine() -> Machine:
    """This GPU, or the reference GPU (labelled as such) when there is none."""
    return current() or _with_measurements(KNOWN_GPUS[REFERENCE_GPU], "reference GPU, none here")


def describe(m: Machine | None = None) -> str:
    """A few lines about ``m`` (default: :func:`machine`) for a notebook to print."""
    m = m or machine()
    peaks = ", ".join(f"{k} {v:g}" for k, v in m.peak_tflops.items())
    return (
        f"{m.name} ({m.source}): {m.sms} SMs, {m.l2_mb:g} MB L2\n"
        f"  memory bandwidth {m.bandwidth_gbs:,.0f} GB/s (datasheet {m.datasheet_bandwidth_gbs:,.0f})\n"
        f"  peak TFLOP/s: {peaks}"
    )
