"""course.bench.report, on CPU: the verdict lines under the ratio table and the throughput figure."""

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import bench


def _row(name, ratio, error, dtype="bf16", M=4096):
    row = dict(dtype=dtype, name=name, M=M, N=4096, K=4096, ref_tflops=700.0, auto_mode="persistent")
    for mode in bench.MODES:
        row[f"{mode}_ratio"] = ratio
        row[f"{mode}_error"] = error
    return row


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
