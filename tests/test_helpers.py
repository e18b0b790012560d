"""Unit tests of the host-side helpers in course/ (runtime, hardware, timing, check, plots, records)."""

import json
import os
import subprocess
import sys
import time

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import course  # noqa: E402
from course import check, hardware, plots, records, runtime, timing  # noqa: E402


# --- runtime -----------------------------------------------------------------------------------

def _import_course(env_overrides):
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_DEVICE", "TRITON_INTERPRET")}
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", "import course, os; print(os.environ.get('TRITON_INTERPRET'))"],
                          env=env, capture_output=True, text=True)


def test_forcing_cpu_selects_the_interpreter_and_says_so():
    proc = _import_course({"COURSE_DEVICE": "cpu"})
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.strip().splitlines()
    assert "interpreter" in first
    assert second == "1"


def test_unknown_course_device_is_a_clear_error():
    proc = _import_course({"COURSE_DEVICE": "tpu"})
    assert proc.returncode != 0
    assert "COURSE_DEVICE='tpu'" in proc.stderr and "auto, gpu, cpu" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_forcing_gpu_without_one_is_a_clear_error():
    proc = _import_course({"COURSE_DEVICE": "gpu"})
    assert proc.returncode != 0
    assert "PyTorch sees no GPU" in proc.stderr


def _run_script(tmp_path, source):
    """Run ``source`` as a script file (Triton reads a kernel's source from its file) on the CPU."""
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_DEVICE", "TRITON_INTERPRET")}
    env["COURSE_DEVICE"] = "cpu"
    script = tmp_path / "script.py"
    script.write_text(source)
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Kernels that call Triton's own jit functions (tl.sum, tl.cdiv, the x.max() method): decorated by
# `import triton`, they were in the wrong mode when triton came first (issue 23, item 6).
_KERNELS_USING_TRITON_LIBRARY = """
@triton.jit
def {name}(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.sum(x, axis=0) + x.max(axis=0) + tl.cdiv(N, 3))
"""
_LAUNCH = """
x = torch.arange(16, dtype=torch.float32)
out = torch.zeros(1)
{name}[(1,)](x, out, N=16)
print("kernel", out.item())
"""
_MATMUL = """
from course.gemm import matmul
a, b = torch.randn(32, 48, dtype=torch.float64).float(), torch.randn(48, 40).float()
print("matmul", float((matmul(a, b).double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()))
"""


@pytest.mark.skipif(bool(runtime.interpreter_numpy_problem()), reason=str(runtime.interpreter_numpy_problem()))
@pytest.mark.parametrize("first", ["import triton", "import triton.language as tl", "import triton.language"])
def test_triton_imported_before_course_still_runs_kernels(tmp_path, first):
    # `import triton` decorates triton.language.standard (tl.sum, tl.cdiv, tensor.max) while
    # TRITON_INTERPRET is unset; course.runtime re-decorates them once it has chosen the interpreter.
    source = (f"{first}\nimport course\nimport torch\nimport triton\nimport triton.language as tl\n"
              + _KERNELS_USING_TRITON_LIBRARY.format(name="late") + _LAUNCH.format(name="late") + _MATMUL)
    proc = _run_script(tmp_path, source)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("kernel", "matmul")))
    assert float(lines["kernel"]) == 120 + 15 + 6
    assert float(lines["matmul"]) < 1e-5
    assert "Warning" not in proc.stderr  # nothing of the user's needed fixing


def test_kernels_decorated_before_course_are_redecorated_with_a_warning(tmp_path):
    source = ("import torch\nimport triton\nimport triton.language as tl\n"
              + _KERNELS_USING_TRITON_LIBRARY.format(name="early")
              + "\ntuned = triton.autotune(configs=[triton.Config({})], key=[])(triton.jit(early.fn))\n"
              + "import course\n" + _LAUNCH.format(name="early") + _LAUNCH.format(name="tuned"))
    proc = _run_script(tmp_path, source)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [line for line in proc.stdout.splitlines() if line.startswith("kernel")] == ["kernel 141.0"] * 2
    assert "kernels __main__.early, __main__.tuned were decorated with @triton.jit before `import course`" \
        in proc.stderr
    assert "TRITON_INTERPRET" in proc.stderr


def test_functions_decorated_for_the_interpreter_turn_compiled_when_course_picks_the_gpu(tmp_path):
    # The other direction (TRITON_INTERPRET=1 at `import triton`, COURSE_DEVICE=gpu), on a CPU: the
    # re-decoration itself, with runtime.INTERPRET flipped by hand after `import course`.
    source = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import triton, triton.language as tl
from triton.runtime.interpreter import InterpretedFunction
assert type(tl.sum) is InterpretedFunction
import course
from course import runtime
runtime.INTERPRET = False
os.environ.pop("TRITON_INTERPRET")
runtime._redecorate_early_functions()
print(type(tl.sum).__name__, type(tl.standard.cdiv).__name__, tl.sum is tl.standard.sum,
      type(tl.core.tensor.max).__name__)
"""
    proc = _run_script(tmp_path, source)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "JITFunction JITFunction True JITFunction"


def test_pick_follows_the_runtime():
    assert course.pick(cpu="small", gpu="large") == ("small" if runtime.INTERPRET else "large")
    assert runtime.DEVICE == ("cpu" if runtime.INTERPRET else "cuda")


# --- hardware ----------------------------------------------------------------------------------

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


# --- check -------------------------------------------------------------------------------------

def test_check_passes_and_prints_one_hardware_independent_line(capsys):
    x = torch.randn(64, 32)
    check.check("identity", x.clone(), x.double())
    assert capsys.readouterr().out == "✓ identity: relative error below 2e-03 (float32)\n"


def test_check_integers_are_exact(capsys):
    x = torch.randint(-100, 100, (10,), dtype=torch.int32)
    check.check("ints", x.clone(), x.long())
    assert "exact" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="exceeds the tolerance"):
        check.check("ints", x + 1, x.long())


def test_check_reports_unwritten_outputs():
    out = check.poisoned((8, 8))
    out[:4] = 1.0
    with pytest.raises(AssertionError, match=r"32 of 64 elements are NaN \(first at \(4, 0\)\)"):
        check.check("half written", out, torch.ones(8, 8, dtype=torch.float64))
    ints = check.poisoned((4,), torch.int32)
    with pytest.raises(AssertionError, match="4 of 4 elements were never written"):
        check.check("ints", ints, torch.zeros(4, dtype=torch.int64))


def test_check_names_the_worst_element():
    ref = torch.zeros(4, 4, dtype=torch.float64) + 1
    out = torch.ones(4, 4)
    out[2, 3] = 5.0
    with pytest.raises(AssertionError, match=r"worst element at \(2, 3\): got 5.0, expected 1.0"):
        check.check("one wrong", out, ref)


def test_check_rejects_shape_mismatch_and_non_tensors():
    with pytest.raises(AssertionError, match=r"output has shape \(2, 3\), expected \(3, 2\)"):
        check.check("shape", torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        check.check("list", [1, 2], torch.zeros(2))
    with pytest.raises(ValueError, match="compare tensors of the same shape"):
        check.rel_error(torch.zeros(2), torch.zeros(3))


def test_tolerances_by_dtype():
    assert check.tolerance(torch.int8) == 0.0
    assert check.tolerance(torch.float16) < check.tolerance(torch.bfloat16)
    assert check.tolerance(torch.float8_e4m3fn) == check.FP8_TOLERANCE
    with pytest.raises(TypeError, match="pass a torch.dtype"):
        check.tolerance("fp16")


def test_rel_error_is_relative():
    ref = torch.full((100,), 1000.0, dtype=torch.float64)
    assert check.rel_error(ref * (1 + 1e-3), ref) == pytest.approx(1e-3, rel=1e-6)


def test_poisoned_is_nan():
    assert torch.isnan(check.poisoned((3, 3), torch.float16)).all()


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32,
                                   torch.uint32, torch.int64, torch.uint64])
def test_poisoned_integers_are_reported_unwritten_for_every_integer_dtype(dtype):
    # Issue 23, item 8: int8 and uint8 got -1 / 255, which check() never recognised.
    out = check.poisoned((2, 3), dtype)
    out[0] = 1
    with pytest.raises(AssertionError, match=r"3 of 6 elements were never written .*first at \(1, 0\)"):
        check.check("ints", out, torch.ones(2, 3, dtype=torch.int64))
    # the marker is a right answer where the reference holds it
    same = check.poisoned((4,), dtype)
    check.check("marker value", same, same.clone())


def test_poisoned_refuses_bool_and_non_dtypes():
    with pytest.raises(ValueError, match=r"poisoned\(dtype=torch.bool\): a bool output has no value"):
        check.poisoned((2,), torch.bool)
    with pytest.raises(TypeError, match=r"poisoned\(dtype=...\): pass a torch.dtype"):
        check.poisoned((2,), "float16")
    with pytest.raises(ValueError, match=r"poisoned\(shape=\(2, -1\)\)"):
        check.poisoned((2, -1))
    assert torch.isnan(check.poisoned(3, torch.complex64)).all()


def test_check_compares_complex_outputs_in_both_parts(capsys):
    z = torch.randn(16, dtype=torch.complex64)
    check.check("complex", z.clone(), z.to(torch.complex128))
    assert capsys.readouterr().out == "✓ complex: relative error below 2e-03 (complex64)\n"
    with pytest.raises(AssertionError, match="exceeds the tolerance"):  # was accepted: imaginary part dropped
        check.check("conjugated", z.conj().resolve_conj(), z.to(torch.complex128))
    with pytest.raises(AssertionError, match="exceeds the tolerance"):
        check.check("real part only", z.real.clone(), z.to(torch.complex128))
    # |conj(z) - z| = 2 |Im z|: the relative error sees the imaginary part
    assert check.rel_error(z.conj(), z) == pytest.approx(2 * z.imag.double().norm().item() / z.abs().double().norm().item(),
                                                         rel=1e-5)


def test_check_accepts_matching_nan_and_inf_and_refuses_the_rest(capsys):
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 2.0], dtype=torch.float64)
    check.check("non-finite", ref.float(), ref)  # failed before: NaN and inf - inf
    assert capsys.readouterr().out.startswith("✓ non-finite")
    unwritten = ref.float()
    unwritten[0] = float("nan")  # a NaN where the reference is finite: still unwritten
    with pytest.raises(AssertionError, match=r"1 of 5 elements are NaN where the reference is not NaN \(first at \(0,\)\)"):
        check.check("unwritten", unwritten, ref)
    for position, value in ((1, 0.0), (2, -float("inf")), (3, 7.0), (4, float("inf"))):
        out = ref.float()
        out[position] = value
        with pytest.raises(AssertionError, match=rf"infinite or NaN in one tensor .*first at \({position},\)"):
            check.check("mismatch", out, ref)
    wrong = ref.float()
    wrong[4] = 3.0  # the finite elements are still measured
    with pytest.raises(AssertionError, match=r"worst element at \(4,\): got 3.0, expected 2.0"):
        check.check("finite part", wrong, ref)


@pytest.mark.parametrize("tol, error, message", [
    ("1e-3", TypeError, r"check\(tol='1e-3'\): pass the relative-error budget as a number"),
    (float("nan"), ValueError, r"check\(tol=nan\): pass a finite relative-error budget >= 0"),
    (-1e-3, ValueError, r"check\(tol=-0.001\)"),
    (float("inf"), ValueError, r"check\(tol=inf\)"),
    (True, TypeError, r"check\(tol=True\)"),
])
def test_check_rejects_a_bad_tolerance(tol, error, message):
    x = torch.ones(3)
    with pytest.raises(error, match=message):
        check.check("tol", x + 1, x.double(), tol=tol)  # a wrong output: a NaN tol used to pass it


# --- timing ------------------------------------------------------------------------------------

def test_bench_returns_positive_milliseconds():
    assert timing.bench(lambda: torch.ones(1000).sum()) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("host_us", [90, 300])
def test_bench_times_the_gpu_not_the_host(host_us):
    # A call whose host side outlasts do_bench's L2 flush (~85 us on an H100), and one that also
    # outlasts the least idling bench does (~50-70 us; mode="tail" takes ~140 us): the GPU part
    # alone takes a few microseconds, and that is what bench must report.
    x = torch.zeros(1 << 20, device="cuda")

    def slow_host_fast_gpu():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < host_us * 1e-6:
            pass
        x.add_(1)

    ms = timing.bench(slow_host_fast_gpu, warmup=5, rep=20)
    assert ms < 0.03, f"bench gave {ms * 1e3:.0f} us: the host's time leaked into the GPU time"


def test_host_us_measures_the_calling_side():
    assert timing.host_us(lambda: time.sleep(1e-3), calls=3) >= 900


def test_bench_rejects_a_non_callable():
    with pytest.raises(TypeError, match="wrap a call in a lambda"):
        timing.bench(torch.ones(3))


def test_units():
    assert timing.gbps(2e9, 1000.0) == pytest.approx(2.0)
    assert timing.tflops(3e12, 1000.0) == pytest.approx(3.0)


def test_rates_and_host_us_refuse_zero_with_a_clear_error():
    # Issue 23, item 8: these divided by zero.
    with pytest.raises(ValueError, match=r"gbps\(ms=0\): pass a finite number > 0"):
        timing.gbps(1e9, 0)
    with pytest.raises(ValueError, match=r"tflops\(ms=0.0\)"):
        timing.tflops(1e12, 0.0)
    with pytest.raises(ValueError, match=r"tflops\(ms=-1\)"):
        timing.tflops(1e12, -1)
    with pytest.raises(TypeError, match=r"gbps\(bytes_moved='1e9'\): pass a number"):
        timing.gbps("1e9", 1.0)
    with pytest.raises(ValueError, match=r"host_us\(calls=0\): pass the number of timed calls"):
        timing.host_us(lambda: None, calls=0)
    with pytest.raises(TypeError, match=r"host_us\(fn\): fn must be a callable"):
        timing.host_us(None)


def test_progress_yields_every_item():
    assert list(timing.progress(range(5), desc="x")) == [0, 1, 2, 3, 4]


# --- plots -------------------------------------------------------------------------------------

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


# --- records -----------------------------------------------------------------------------------

def test_records_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    path = records.save("demo", [{"n": 1, "gbps": 2.5}], meta={"note": "test"})
    data = json.loads(path.read_text())
    assert data["rows"] == [{"n": 1, "gbps": 2.5}] and data["meta"]["note"] == "test"
    rec = records.load("demo")
    assert rec.rows[0]["gbps"] == 2.5
    assert "torch" in rec.label and rec.meta["triton"] in rec.label


def test_records_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="no recorded measurements named 'nothing'"):
        records.load("nothing")
    with pytest.raises(ValueError, match="plain file stem"):
        records.save("../escape", [])
    with pytest.raises(TypeError, match="list of dicts"):
        records.save("bad", {"n": 1})


def test_measured_or_recorded_measures_on_a_gpu_and_loads_otherwise(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    records.save("sweep", [{"n": 1}], meta={"gpu": "recorded GPU"})
    rec = records.measured_or_recorded("sweep", measure=lambda: [{"n": 2}])
    assert rec.rows == ([{"n": 1}] if runtime.INTERPRET else [{"n": 2}])


def test_a_numpy_that_breaks_the_interpreter_is_named(monkeypatch):
    import numpy

    monkeypatch.setattr(numpy, "__version__", "2.5.0")
    monkeypatch.setattr(runtime.triton, "__version__", "3.6.0")
    assert "pip install 'numpy<2.4'" in runtime.interpreter_numpy_problem()
    monkeypatch.setattr(runtime.triton, "__version__", "3.7.0")
    assert runtime.interpreter_numpy_problem() is None
    monkeypatch.setattr(numpy, "__version__", "2.3.5")
    monkeypatch.setattr(runtime.triton, "__version__", "3.6.0")
    assert runtime.interpreter_numpy_problem() is None


def test_in_turns_takes_turns_and_keeps_each_median():
    order, times = [], iter([5.0, 1.0, 3.0, 2.0, 4.0, 9.0])  # a, b, a, b, a, b
    medians = timing.in_turns({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                              measure=lambda call: (call(), next(times))[1])
    assert order == ["a", "b"] * 3
    assert medians == {"a": 4.0, "b": 2.0}
    with pytest.raises(ValueError, match="rounds=0"):
        timing.in_turns({"a": lambda: None}, rounds=0)
