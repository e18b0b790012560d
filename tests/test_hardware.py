"""course.hardware: GPUs recognised by their whole name, datasheet figures for known ones, measured ceilings
(or none made up) for the rest."""

import time

import pytest
import torch

from course import hardware, plots, runtime


@pytest.mark.parametrize("torch_name, key", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100"), ("AMD Instinct MI300X", "MI300X"),
    ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA GH200 144G HBM3e", "GH200 HBM3e"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"), ("NVIDIA A10", "A10"), ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
])
def test_known_gpus_are_recognised(torch_name, key):
    assert hardware.lookup(torch_name) is hardware.KNOWN_GPUS[key]


@pytest.mark.parametrize("torch_name", [
    "Some Future GPU", "NVIDIA RTX A1000", "NVIDIA RTX A1000 6GB Laptop GPU", "NVIDIA A10G", "NVIDIA L40",
    "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA GH200", "NVIDIA H800",
    "NVIDIA H20", "AMD Instinct MI300A", "",
])
def test_names_are_matched_whole_and_unknown_gpus_are_none(torch_name):
    # Issue 23, item 7: "RTX A1000" got the A100's figures, "H100 NVL" the SXM's, "GH200" the H200's.
    assert hardware.lookup(torch_name) is None


def test_lookup_of_a_non_string_names_the_argument():
    for bad in (None, 100, b"H100"):
        with pytest.raises(TypeError, match=r"lookup\(device_name\): pass the GPU's name as a str"):
            hardware.lookup(bad)


def test_a_known_gpu_is_its_datasheet_entry_and_is_not_measured():
    def measure():
        raise AssertionError("a GPU in the table must not be measured")

    m = hardware.for_device("NVIDIA H100 80GB HBM3", 132, 50 * 2**20, measure)
    sheet = hardware.KNOWN_GPUS["H100 SXM"]
    assert (m.name, m.peak_tflops, m.datasheet_bandwidth_gbs, m.sms, m.l2_mb) == \
        (sheet.name, sheet.peak_tflops, 3350, 132, 50)
    assert m.source == "measured" and m.bandwidth_gbs == hardware.measured_ceilings(sheet)["copy_gbs"]


def test_an_unknown_gpu_is_measured_and_labelled_so():
    calls = []

    def measure():
        calls.append(1)
        return {"copy_gbs": 250.0, "fp32": 9.5, "tf32": 30.0, "fp16": 60.0, "bf16": 58.0, "junk": 1.0}

    m = hardware.for_device("NVIDIA RTX A1000 6GB Laptop GPU", 20, 2 * 2**20, measure)
    assert calls == [1]
    assert m.source == "measured here, no datasheet" and m.name == "NVIDIA RTX A1000 6GB Laptop GPU"
    assert m.bandwidth_gbs == 250.0 and m.datasheet_bandwidth_gbs == 0 and (m.sms, m.l2_mb) == (20, 2)
    assert m.peak_tflops == {"fp32": 9.5, "tf32": 30.0, "fp16": 60.0, "bf16": 58.0}
    # what notebook 00 and the roofline need
    assert m.peak_tflops["bf16"] > m.peak_tflops["fp32"] > 0 and m.ridge_point("bf16") == pytest.approx(232)
    assert plots.roofline(m, dtype="bf16") is not None
    text = hardware.describe(m)
    assert "measured here, no datasheet" in text and "no datasheet)" in text


def test_an_unknown_gpu_whose_measurement_fails_has_no_made_up_figures():
    def measure():
        raise RuntimeError("CUDA error: out of memory")

    m = hardware.for_device("Some Future GPU", 10, 0, measure)
    assert m.peak_tflops == {} and m.bandwidth_gbs == 0 and m.source == "measured here, no datasheet"
    assert "peak TFLOP/s: unknown" in hardware.describe(m)
    with pytest.raises(ValueError, match=r"ridge_point\(dtype='bf16'\): Some Future GPU has peaks for no dtype"):
        m.ridge_point("bf16")
    partial = hardware.for_device("Some Future GPU", 10, 0, lambda: {"copy_gbs": float("nan"), "fp16": -1, "bf16": 5})
    assert partial.peak_tflops == {"bf16": 5.0} and partial.bandwidth_gbs == 0


@pytest.mark.gpu
def test_measuring_this_gpu_is_quick_and_plausible():
    props = torch.cuda.get_device_properties(0)
    t0 = time.perf_counter()
    found = hardware._measure_here()
    seconds = time.perf_counter() - t0
    m = hardware.for_device("Some Future GPU", props.multi_processor_count, 0, lambda: found)
    assert seconds < 1.5, f"measuring took {seconds:.2f} s"
    assert m.peak_tflops["bf16"] > m.peak_tflops["fp32"] > 0 and m.bandwidth_gbs > 0
    sheet = hardware.lookup(props.name)
    if sheet is not None:  # on a GPU in the table: the measurement is a fraction of the datasheet
        assert 0.5 * sheet.bandwidth_gbs < m.bandwidth_gbs < 1.05 * sheet.datasheet_bandwidth_gbs
        for dtype in ("fp16", "bf16", "tf32"):
            assert 0.4 * sheet.peak_tflops[dtype] < m.peak_tflops[dtype] < 1.05 * sheet.peak_tflops[dtype], dtype


def test_every_known_gpu_has_sane_ceilings():
    for m in hardware.KNOWN_GPUS.values():
        assert m.sms > 0 and m.bandwidth_gbs > 0
        assert m.peak_tflops["bf16"] > m.peak_tflops["fp32"] > 0
        assert 50 < m.ridge_point("bf16") < 1000


def test_machine_always_describes_a_gpu():
    m = hardware.machine()
    assert m.peak_tflops and m.bandwidth_gbs > 0
    if runtime.INTERPRET:
        assert hardware.current() is None and "none here" in m.source
    assert m.name in hardware.describe(m)
