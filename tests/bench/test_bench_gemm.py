"""course.bench.gemm, on CPU: the exact reference and the error measure behind the benchmark's correctness
check, and the committed H100 record it wrote."""

import json
import math
from pathlib import Path

import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import bench, check


def test_exact_reference_applies_scales_and_bias():
    a = torch.randint(-127, 128, (5, 7), dtype=torch.int8)
    b = torch.randint(-127, 128, (7, 3), dtype=torch.int8)
    extra = dict(a_scale=torch.rand(5), b_scale=torch.rand(3), bias=torch.randn(3))
    want = ((a.long() @ b.long()).double() * extra["a_scale"].double()[:, None]
            * extra["b_scale"].double()[None, :] + extra["bias"].double())
    assert torch.equal(bench.gemm.exact(a, b, extra), want)


def test_error_sees_unwritten_outputs():
    ref = torch.ones(4, 4, dtype=torch.float64)
    out = torch.empty(4, 4)
    assert bench.gemm.error(lambda: out.fill_(1.0), out, ref) == 0.0
    assert math.isnan(bench.gemm.error(lambda: out[:2].fill_(1.0), out, ref)), "NaN poison must survive"


def test_recorded_results_carry_every_mode():
    """The committed H100 record has a ratio for every mode of every shape it timed."""
    rows = json.loads((Path(__file__).resolve().parents[2] / "course/data/gemm_h100-sxm.json").read_text())["rows"]
    names = {(r["dtype"], r["name"]) for r in rows}
    assert len(names) == len(rows) >= 3 * len(bench.shape_set(quick=False))
    for r in rows:
        # every mode was timed, except "tail" without a tail split and "gluon" where it does not run
        # (bench.gemm.not_run: error None)
        timed = [m for m in bench.MODES if not (m in ("tail", "gluon") and r.get(f"{m}_error") is None)]
        if r["ref_ms"]:
            assert all(r[f"{m}_ratio"] > 0 for m in timed), r["name"]
        for m in timed:  # runs recorded since the benchmark checks results carry their errors
            if f"{m}_error" in r:
                tol = check.tolerance(bench.shapes.OUT_DTYPE[r["dtype"]])
                assert r[f"{m}_error"] <= tol, f"{r['dtype']} {r['name']} {m}: error {r[f'{m}_error']} > {tol}"


def test_auto_mode_names_what_matmul_runs(monkeypatch):
    """The record's auto_mode: the Gluon kernel where matmul's own Gluon choice takes it, else the Triton mode."""
    from course import gemm
    from course.gemm import plans

    a, b, out = torch.randn(64, 32), torch.randn(32, 48), torch.empty(64, 48)
    cfg = gemm.heuristic_config(64, 48, 32, torch.float32)
    assert bench.gemm.auto_mode(a, b, out, cfg) == gemm.choose_mode(64, 48, 32, cfg, dtype=torch.float32, gluon=False)
    asked = []
    monkeypatch.setattr(plans, "gluon_choice", lambda a, b, c, *rest: asked.append(c) or ((128, 320), False))
    assert bench.gemm.auto_mode(a, b, out, cfg) == "gluon" and asked == [out]
