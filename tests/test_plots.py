"""course.plots: the roofline (its points, and where each roof's figure comes from) and throughput lines."""

import pytest

from course import hardware, plots


def test_roofline_plots_points_and_ceilings():
    m = hardware.KNOWN_GPUS["H100 SXM"]
    p = plots.Point("add", flops=1e9, bytes=12e9, ms=5.0)
    assert p.intensity == pytest.approx(1 / 12) and p.tflops == pytest.approx(0.2)
    fig = plots.roofline(m, [p], dtype="fp32", caption="recorded")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "TFLOP/s" in ax.get_ylabel()
    assert any("add" in t.get_text() for t in ax.get_legend().get_texts())


def test_roofline_says_where_each_roof_comes_from():
    import dataclasses

    sheet = hardware.KNOWN_GPUS["H100 SXM"]
    labels = lambda m: [t.get_text() for t in plots.roofline(m, dtype="bf16").axes[0].get_legend().get_texts()]  # noqa: E731
    assert labels(sheet)[:2] == ["memory roof: 3,350 GB/s (datasheet)", "compute roof: 989 TFLOP/s (bf16, datasheet)"]
    measured = dataclasses.replace(sheet, bandwidth_gbs=3000.0, source="reference GPU, none here")
    assert labels(measured)[0] == "memory roof: 3,000 GB/s (measured)"
    unknown = dataclasses.replace(sheet, bandwidth_gbs=2000.0, datasheet_bandwidth_gbs=0.0,
                                  source="measured here, no datasheet")
    assert labels(unknown)[:2] == ["memory roof: 2,000 GB/s (measured)", "compute roof: 989 TFLOP/s (bf16, measured)"]


def test_roofline_rejects_bad_input():
    m = hardware.KNOWN_GPUS["A100"]
    with pytest.raises(ValueError, match="has peaks for"):
        plots.roofline(m, dtype="fp8")
    with pytest.raises(TypeError, match="course.plots.Point"):
        plots.roofline(m, [(1, 2)])


def test_throughput_lines_and_errors():
    fig = plots.throughput({"a": ([1, 2], [3, 4]), "b": ([1, 2], [1, 1])}, ceiling=5, ceiling_label="copy")
    assert len(fig.axes[0].get_lines()) == 3  # two series and the ceiling
    with pytest.raises(ValueError, match="has 2 sizes but 1 values"):
        plots.throughput({"a": ([1, 2], [3])})
    with pytest.raises(ValueError, match="at least one"):
        plots.throughput({})
