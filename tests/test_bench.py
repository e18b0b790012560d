"""The benchmark's own bookkeeping, on CPU: its correctness check, its verdict lines, its plots."""
import json
import math
from pathlib import Path

import torch

import course
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
    assert torch.equal(bench.gemm.exact(a, b, extra), want)


def test_error_sees_unwritten_outputs():
    ref = torch.ones(4, 4, dtype=torch.float64)
    out = torch.empty(4, 4)
    assert bench.gemm.error(lambda: out.fill_(1.0), out, ref) == 0.0
    assert math.isnan(bench.gemm.error(lambda: out[:2].fill_(1.0), out, ref)), "NaN poison must survive"


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
        # (bench.gemm.not_run: error None)
        timed = [m for m in bench.MODES if not (m in ("tail", "gluon") and r.get(f"{m}_error") is None)]
        if r["ref_ms"]:
            assert all(r[f"{m}_ratio"] > 0 for m in timed), r["name"]
        for m in timed:  # runs recorded since the benchmark checks results carry their errors
            if f"{m}_error" in r:
                tol = check.tolerance(bench.shapes.OUT_DTYPE[r["dtype"]])
                assert r[f"{m}_error"] <= tol, f"{r['dtype']} {r['name']} {m}: error {r[f'{m}_error']} > {tol}"


def test_broad_set_spans_what_nobody_tuned_for():
    cases = bench.broad_set()
    names = [name for name, *_ in cases]
    assert len(cases) >= 40 and len(set(names)) == len(names)
    groups = {bench.broad_group(name) for name in names}
    assert groups == {"decode", "prefill", "vocab", "B row-major", "weight gradient", "random"}
    tuned = {(M, N, K) for _, M, N, K in bench.shape_set(quick=False)}
    assert not tuned & {(M, N, K) for _, M, N, K in cases}, "the broad set must hold no benchmark shape"
    assert bench.broad_set() == cases, "seeded: the same shapes every run"
    assert len(bench.broad_set(quick=True)) < len(cases)


def test_broad_inputs_take_the_layout_in_the_name():
    a, b, _ = bench.shapes.inputs(torch.float32, 5, 6, 7, device="cpu", name="Qwen2.5-7B qkv M=5")
    assert a.stride() == (7, 1) and b.stride() == (1, 7)  # B K-major, as nn.Linear keeps its weight
    a, b, _ = bench.shapes.inputs(torch.float32, 5, 6, 7, device="cpu", name=f"x o M=5{bench.ROW_MAJOR_B}")
    assert b.stride() == (6, 1)
    a, b, extra = bench.shapes.inputs(torch.int8, 5, 6, 7, device="cpu", name=f"{bench.WEIGHT_GRAD}x qkv tokens=7")
    assert a.shape == (5, 7) and a.stride() == (1, 5) and set(extra) == {"a_scale", "b_scale", "bias"}


def test_broad_verdict_names_the_worst_shape(capsys):
    rows = [_row("Phi-3-mini o M=1", 1.1, 1e-3, M=1), _row("random 3", 0.8, 1e-3)]
    for row in rows:
        row.update({f"{m}_ratio": None for m in bench.MODES if m != "auto"})
        row.update({f"{m}_error": None for m in bench.MODES if m != "auto"})
    bench.print_table(rows, broad=True)
    text = capsys.readouterr().out
    assert "broad set bf16: decode 1.100 (1), random 0.800 (1)" in text
    assert "MISS  bf16 broad set: no shape (auto) below 0.90: worst 0.800 (random 3" in text
    assert "MET   every timed kernel matches the float64 reference" in text


def test_host_rows_measure_ours_torch_and_a_bare_launch(capsys):
    # On the CPU the numbers are the interpreter's; the bookkeeping is what is tested here.
    rows = bench.host_rows([("tiny", 16, 16, 16)], torch.float32, calls=2, device=course.DEVICE)
    (row,) = rows
    for key in ("ours_host_us", "torch_host_us", "bare_triton_host_us", "ours_back_to_back_us",
                "torch_back_to_back_us"):
        assert row[key] > 0, key
    assert row["back_to_back_ratio"] == row["torch_back_to_back_us"] / row["ours_back_to_back_us"]
    bench.print_host_table(rows)
    text = capsys.readouterr().out
    assert "host time per call <= torch.matmul's: worst tiny" in text and "back-to-back, geomean" in text


def test_throughput_figure_ticks_every_square_and_the_roofline_dates_its_records():
    from course import capstone, hardware, records

    h100 = hardware.lookup("NVIDIA H100 80GB HBM3")
    record = records.load("gemm_h100-sxm")
    fig = bench.throughput_figure(record.rows, h100, "bf16", record=record)
    ax = fig.axes[0]
    ticked = set(ax.get_xticks()) | set(ax.get_xticks(minor=True))
    assert {r["M"] for r in record.rows if r["dtype"] == "bf16" and r["name"].startswith("square")} <= ticked
    banner = capstone.points_record().banner
    dates = sorted({records.load(name).meta["date"] for name in capstone.POINT_RECORDS})
    assert dates[0] in banner and dates[-1] in banner
    fig = capstone.course_roofline(h100)
    assert len(fig.axes) == 2 and fig.axes[1].lines  # the zoomed panel has the compute-bound points
