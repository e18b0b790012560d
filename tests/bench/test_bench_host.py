"""course.bench.host, on CPU: the rows of host time per call (ours, torch's, a bare launch) and their table."""

import torch

import course
from course import bench


def test_host_rows_measure_ours_torch_and_a_bare_launch(capsys):
    # On the CPU the numbers are the interpreter's; the bookkeeping is what is tested here.
    rows = bench.host_rows([("tiny", 16, 16, 16)], torch.float32, calls=2, rounds=3, device=course.DEVICE)
    (row,) = rows
    for key in ("ours_host_us", "torch_host_us", "ours_alloc_host_us", "torch_alloc_host_us", "bare_triton_host_us",
                "ours_back_to_back_us", "torch_back_to_back_us"):
        assert row[key] > 0, key
    assert row["back_to_back_ratio"] == row["torch_back_to_back_us"] / row["ours_back_to_back_us"]
    bench.print_host_table(rows)
    text = capsys.readouterr().out
    assert "host time per call <= torch.matmul's (out=): worst tiny" in text and "back-to-back, geomean" in text
    assert "host time per call <= torch.matmul's (allocating): worst tiny" in text
