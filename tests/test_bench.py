"""The benchmark's own bookkeeping, on CPU: its correctness check, its verdict lines, its plots."""
import json
import math
from pathlib import Path

import torch

from course import bench, check


def _row(name, ratio, error, dtype="bf16", M=4096):
    row = dict(dtype=dtype, name=name, M=M, N=4096, K=4096, ref_tflops=700.0, auto_mode="persistent")
    for mode in bench.MODES:
        row[f"{mode}_ratio"] = ratio
        row[f"{mode}_error"] = error
    return row


def test_exact_reference_applies_scales_and_bias():
    a = torch.randint(-127, 128, (5, 7), dtype=torch.int8)
    b = torch.randint(-127, 128, (7, 3), dtype=torch.int8)
    extra = dict(a_scale=torch.rand(5), b_scale=torch.rand(3), bias=torch.randn(3))
    want = ((a.long() @ b.long()).double() * extra["a_scale"].double()[:, None]
            * extra["b_scale"].double()[None, :] + extra["bias"].double())
    assert torch.equal(bench._exact(a, b, extra), want)


def test_error_sees_unwritten_outputs():
    ref = torch.ones(4, 4, dtype=torch.float64)
    out = torch.empty(4, 4)
    assert bench._error(lambda: out.fill_(1.0), out, ref) == 0.0
    assert math.isnan(bench._error(lambda: out[:2].fill_(1.0), out, ref)), "NaN poison must survive"


def test_verdict_flags_a_wrong_kernel(capsys):
    bench.print_table([_row("square 4096", 1.1, 1e-3), _row("square 8192", 1.2, float("nan"))])
    text = capsys.readouterr().out
    wrong = f"MISS  every timed kernel matches the float64 reference: {len(bench.MODES)} wrong: bf16 square 8192 persistent"
    assert wrong in text
    bench.print_table([_row("square 4096", 1.1, 1e-3)])
    assert "MET   every timed kernel matches the float64 reference" in capsys.readouterr().out


def test_verdict_skips_modes_that_did_not_run(capsys):
    row = _row("square 4096", 1.1, 1e-3)
    row.update(tail_ratio=None, tail_error=None)  # no tail split for this shape: not run, not wrong
    bench.print_table([row])
    assert "MET   every timed kernel matches the float64 reference" in capsys.readouterr().out


def test_recorded_results_carry_every_mode():
    """The committed H100 record has a ratio for every mode of every shape it timed."""
    rows = json.loads((Path(__file__).parents[1] / "course/data/gemm_h100-sxm.json").read_text())["rows"]
    names = {(r["dtype"], r["name"]) for r in rows}
    assert len(names) == len(rows) >= 3 * len(bench.shape_set(quick=False))
    for r in rows:
        # every mode was timed, except "tail" without a tail split and "gluon" where it does not run
        # (bench._not_run: error None)
        timed = [m for m in bench.MODES if not (m in ("tail", "gluon") and r.get(f"{m}_error") is None)]
        if r["ref_ms"]:
            assert all(r[f"{m}_ratio"] > 0 for m in timed), r["name"]
        for m in timed:  # runs recorded since the benchmark checks results carry their errors
            if f"{m}_error" in r:
                tol = check.tolerance(bench._OUT_DTYPE[r["dtype"]])
                assert r[f"{m}_error"] <= tol, f"{r['dtype']} {r['name']} {m}: error {r[f'{m}_error']} > {tol}"
