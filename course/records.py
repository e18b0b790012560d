"""GPU measurements kept in the repository, so that learners without a GPU still see real numbers.

A record is a JSON file in ``course/data/``: ``{"meta": {...}, "rows": [{...}, ...]}``. ``meta``
says where the numbers came from (GPU, torch and Triton versions, date); :func:`label` turns it
into the caption every plot of recorded data carries, and :attr:`Record.banner` into the line
that says, where a learner looks, whether the numbers were measured in this run or recorded.

    >>> rows = measured_or_recorded("vector_add", measure=lambda: [{"n": 1, "gbps": 2.0}])  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from pathlib import Path
from typing import Callable

import torch
import triton

from course import runtime

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclasses.dataclass
class Record:
    """Rows of measurements and where they came from: measured in this run (``measured_here``),
    or loaded from a GPU run recorded earlier."""

    rows: list
    meta: dict
    measured_here: bool = False

    @property
    def label(self) -> str:
        return label(self.meta)

    @property
    def banner(self) -> str:
        """"measured in this run on <GPU>, <date>" or "recorded on <GPU>, <date>: not measured
        in this run"."""
        where = f"{self.meta.get('gpu', 'an unknown GPU')}, {self.meta.get('date', 'undated')}"
        return f"measured in this run on {where}" if self.measured_here else \
            f"recorded on {where}: not measured in this run"


def environment() -> dict:
    """Where measurements taken now come from."""
    meta = {"torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat()}
    meta["gpu"] = "CPU (Triton interpreter)" if runtime.INTERPRET else torch.cuda.get_device_name()
    return meta


def label(meta: dict) -> str:
    """A caption such as ``NVIDIA H100 80GB HBM3 · torch 2.11.0 · Triton 3.6.0 · 2026-11-21``."""
    parts = [meta.get("gpu", "unknown GPU")]
    parts += [f"{k} {meta[k]}" for k in ("torch", "triton") if k in meta]
    parts += [meta["date"]] if "date" in meta else []
    return " · ".join(parts)


def _path(name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"record name {name!r} must be a plain file stem such as 'vector_add'")
    return DATA_DIR / f"{name}.json"


def save(name: str, rows: list, meta: dict | None = None) -> Path:
    """Write ``rows`` (a list of dicts) to ``course/data/<name>.json`` with this machine's meta."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError("save(name, rows): rows must be a list of dicts, one per measurement")
    path = _path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": {**environment(), **(meta or {})}, "rows": rows}, indent=1) + "\n")
    return path


def load(name: str) -> Record:
    """The record ``course/data/<name>.json``."""
    path = _path(name)
    if not path.exists():
        known = sorted(p.stem for p in DATA_DIR.glob("*.json"))
        raise FileNotFoundError(f"no recorded measurements named {name!r} in {DATA_DIR.name}/; "
                                f"known: {', '.join(known) or 'none'}. Run the measurement on a GPU first.")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a valid record ({err}); restore it with git checkout, or re-measure it "
                         "on a GPU with COURSE_RECORD=1") from None
    if not (isinstance(data, dict) and isinstance(data.get("rows"), list) and isinstance(data.get("meta"), dict)):
        raise ValueError(f"{path}: a record needs a 'meta' object and a 'rows' list; restore it with git checkout, "
                         "or re-measure it on a GPU with COURSE_RECORD=1")
    return Record(rows=data["rows"], meta=data["meta"])


def measured_or_recorded(name: str, measure: Callable[[], list]) -> Record:
    """Measure now on a GPU, or load the recorded GPU run under the interpreter.

    With ``COURSE_RECORD=1`` in the environment, a GPU measurement also replaces the record
    (that is how the course's own records were made).
    """
    if runtime.INTERPRET:
        return load(name)
    rows = measure()
    if os.environ.get("COURSE_RECORD") == "1":
        save(name, rows)
    return Record(rows=rows, meta=environment(), measured_here=True)
