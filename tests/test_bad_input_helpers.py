"""Bad and unusual input to the course's helpers (issue 23): every case either gives a clear error
whose message names the argument, or the right result. Never a wrong answer, never a crash.

One table, ``CASES``, across course.check (check, poisoned, tolerance, rel_error),
course.hardware (lookup, Machine, for_device, describe), course.timing (bench, host_us, gbps,
tflops) and course.runtime (COURSE_DEVICE, TRITON_INTERPRET, pick, and the import order, the
last in subprocesses). Each case is classified as

* ``clear error``: the expected exception type, with a message naming the argument;
* ``correct``: a result equal to the expected one (for ``check``, the right verdict: ✓ for a right
  output, its ✗ AssertionError for a wrong one);
* ``wrong``: a result, or a verdict, that is not the expected one, or no error where one is due;
* ``crash``: any other exception (a wrong type, or a message that does not say what is wrong).

The counts: ``python tests/test_bad_input_helpers.py`` prints them, and so does
``test_outcome_counts`` at the end of a pytest run (``-s`` to see it).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import os
import re
import subprocess
import sys
import tempfile
from typing import Callable

import numpy as np
import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter first)
from course import check, hardware, runtime, timing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAN, INF = float("nan"), float("inf")


@dataclasses.dataclass
class Case:
    id: str
    call: Callable[[], object]
    error: tuple | None = None  # (exception type, regex the message must match): a clear error
    verdict: str | None = None  # check() must refuse with an AssertionError matching this regex
    expect: Callable[[object], bool] | None = None  # a predicate on the result: correct

    def outcome(self) -> tuple[str, str]:
        """(outcome, detail)."""
        try:
            result = self.call()
        except Exception as exc:  # noqa: BLE001  (classifying is the point)
            message = f"{type(exc).__name__}: {exc}"
            if self.error and isinstance(exc, self.error[0]) and re.search(self.error[1], str(exc)):
                return "clear error", message
            if self.verdict and isinstance(exc, AssertionError) and re.search(self.verdict, str(exc)):
                return "correct", message
            if isinstance(exc, AssertionError) and str(exc).startswith("✗"):
                what = "another reason than the expected one" if self.verdict else "a right output"
                return "wrong", f"check refused {what}: {message}"
            return "crash", message
        if self.error or self.verdict:
            return "wrong", f"no error; returned {result!r}"
        if self.expect is not None and not self.expect(result):
            return "wrong", f"returned {result!r}"
        return "correct", repr(result)[:200]


def raises(exc, pattern):
    return {"error": (exc, pattern)}


def rejects(pattern):
    return {"verdict": pattern}


def returns(predicate=None):
    return {"expect": predicate or (lambda result: True)}


# --- helpers for the cases ---------------------------------------------------------------------

def passes(out, ref, **kwargs):
    """check() of a right output: returns True (it raises if it refuses)."""
    check.check("case", out, ref, **kwargs)
    return True


def poisoned_then_half_written(dtype):
    out = check.poisoned((2, 4), dtype)
    out[0] = 1
    return out


def machine(**changes):
    fields = dict(name="Test GPU", sms=10, l2_mb=4.0, bandwidth_gbs=100.0, peak_tflops={"bf16": 50.0, "fp32": 5.0},
                  datasheet_bandwidth_gbs=100.0)
    fields.update(changes)
    return hardware.Machine(**fields)


def _set_environment(values: dict) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def environment(**values):
    saved = {k: os.environ.get(k) for k in values}
    try:
        _set_environment(values)
        yield
    finally:
        _set_environment(saved)


def decide(course_device, triton_interpret=None):
    """runtime's choice (True: the interpreter) for these environment variables, in this process."""
    with environment(COURSE_DEVICE=course_device, TRITON_INTERPRET=triton_interpret):
        return runtime._decide()


HAS_GPU = torch.cuda.is_available()

_ORDER_SCRIPT = """{first}
import course
import torch
import triton
import triton.language as tl


@triton.jit
def total(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.sum(x, axis=0) + x.max(axis=0) + tl.cdiv(N, 3))


x = torch.arange(16, dtype=torch.float32, device=course.DEVICE)
out = torch.zeros(1, device=course.DEVICE)
total[(1,)](x, out, N=16)
print("result", out.item())
"""


def import_order(first):
    """Run a kernel that uses Triton's library functions in a fresh process, ``first`` imported
    before course; return its result (120 + 15 + 6 = 141 when right)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "order.py")
        with open(script, "w") as f:
            f.write(_ORDER_SCRIPT.format(first=first))
        env = {k: v for k, v in os.environ.items() if k not in ("COURSE_DEVICE", "TRITON_INTERPRET")}
        proc = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return float(proc.stdout.split("result")[-1])


z = torch.tensor([1 + 1j, 2 - 3j, -0.5 + 0.25j], dtype=torch.complex64)
x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
non_finite = torch.tensor([1.0, NAN, INF, -INF, 2.0], dtype=torch.float64)


def changed(t, index, value):
    t = t.clone()
    t[index] = value
    return t


# --- the table ---------------------------------------------------------------------------------

CASES = [
    # check(): tol
    Case("check tol str", lambda: passes(x, x.double(), tol="1e-3"), **raises(TypeError, r"check\(tol='1e-3'\)")),
    Case("check tol nan", lambda: passes(x + 1, x.double(), tol=NAN), **raises(ValueError, r"check\(tol=nan\)")),
    Case("check tol negative", lambda: passes(x, x.double(), tol=-1e-3), **raises(ValueError, r"check\(tol=-0.001\)")),
    Case("check tol inf", lambda: passes(x + 1, x.double(), tol=INF), **raises(ValueError, r"check\(tol=inf\)")),
    Case("check tol bool", lambda: passes(x, x.double(), tol=True), **raises(TypeError, r"check\(tol=True\)")),
    Case("check tol list", lambda: passes(x, x.double(), tol=[1e-3]), **raises(TypeError, r"check\(tol=\[0.001\]\)")),
    Case("check tol 0 exact", lambda: passes(x, x.double(), tol=0), **returns()),
    Case("check tol numpy float", lambda: passes(x, x.double(), tol=np.float32(1e-3)), **returns()),
    # check(): arguments that are not tensors, shapes
    Case("check out list", lambda: passes([1.0, 2.0], torch.ones(2)), **raises(TypeError, r"out must be a torch.Tensor")),
    Case("check ref None", lambda: passes(torch.ones(2), None), **raises(TypeError, r"ref must be a torch.Tensor")),
    Case("check shape mismatch", lambda: passes(torch.zeros(2, 3), torch.zeros(3, 2)),
         **rejects(r"output has shape \(2, 3\), expected \(3, 2\)")),
    Case("check empty", lambda: passes(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.float64)), **returns()),
    Case("check 0-d wrong", lambda: passes(torch.tensor(2.0), torch.tensor(1.0, dtype=torch.float64)),
         **rejects(r"worst element at \(\): got 2.0, expected 1.0")),
    Case("check transposed view", lambda: passes(x.T, x.double().T.contiguous()), **returns()),
    Case("check requires_grad", lambda: passes(x.clone().requires_grad_(), x.double()), **returns()),
    Case("check fp16 out fp32 ref", lambda: passes(x.half(), x), **returns()),
    Case("check int out, fractional ref", lambda: passes(torch.ones(3, dtype=torch.int32), torch.full((3,), 1.25)),
         **rejects(r"exceeds the tolerance 0e\+00")),
    # check(): complex
    Case("check complex right", lambda: passes(z.clone(), z.to(torch.complex128)), **returns()),
    Case("check complex wrong imaginary", lambda: passes(z.conj().resolve_conj(), z.to(torch.complex128)),
         **rejects(r"exceeds the tolerance 2e-03 for torch.complex64")),
    Case("check real out, complex ref", lambda: passes(z.real.clone(), z.to(torch.complex128)),
         **rejects(r"exceeds the tolerance")),
    Case("check complex unwritten", lambda: passes(check.poisoned((3,), torch.complex64), z.to(torch.complex128)),
         **rejects(r"3 of 3 elements are NaN")),
    # check(): NaN and infinities
    Case("check same NaN and inf", lambda: passes(non_finite.float(), non_finite), **returns()),
    Case("check NaN where ref finite", lambda: passes(changed(non_finite.float(), 0, NAN), non_finite),
         **rejects(r"1 of 5 elements are NaN where the reference is not NaN \(first at \(0,\)\)")),
    Case("check finite where ref NaN", lambda: passes(changed(non_finite.float(), 1, 0.0), non_finite),
         **rejects(r"infinite or NaN in one tensor .*first at \(1,\): got 0.0, expected nan")),
    Case("check inf of the wrong sign", lambda: passes(changed(non_finite.float(), 2, -INF), non_finite),
         **rejects(r"first at \(2,\): got -inf, expected inf")),
    Case("check inf where ref finite", lambda: passes(changed(non_finite.float(), 4, INF), non_finite),
         **rejects(r"first at \(4,\): got inf, expected 2.0")),
    Case("check finite part still measured", lambda: passes(changed(non_finite.float(), 4, 3.0), non_finite),
         **rejects(r"worst element at \(4,\): got 3.0, expected 2.0")),
    Case("check unwritten float", lambda: passes(poisoned_then_half_written(torch.float16), torch.ones(2, 4)),
         **rejects(r"4 of 8 elements are NaN \(first at \(1, 0\)\)")),
    # check(): integers, bool
    *[Case(f"check unwritten {str(dt)[6:]}", lambda dt=dt: passes(poisoned_then_half_written(dt), torch.ones(2, 4, dtype=torch.int64)),
           **rejects(r"4 of 8 elements were never written")) for dt in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)],
    Case("check int marker equal to ref", lambda: passes(check.poisoned((3,), torch.int8), check.poisoned((3,), torch.int8).long()),
         **returns()),
    Case("check bool right", lambda: passes(torch.tensor([True, False]), torch.tensor([True, False])), **returns()),
    Case("check bool wrong", lambda: passes(torch.tensor([True, True]), torch.tensor([True, False])),
         **rejects(r"worst element at \(1,\): got True, expected False")),
    # poisoned()
    Case("poisoned bool", lambda: check.poisoned((2,), torch.bool), **raises(ValueError, r"poisoned\(dtype=torch.bool\)")),
    Case("poisoned dtype str", lambda: check.poisoned((2,), "float16"), **raises(TypeError, r"poisoned\(dtype=...\): pass a torch.dtype")),
    Case("poisoned dtype numpy", lambda: check.poisoned((2,), np.float32), **raises(TypeError, r"poisoned\(dtype=...\)")),
    Case("poisoned negative shape", lambda: check.poisoned((2, -1)), **raises(ValueError, r"poisoned\(shape=\(2, -1\)\)")),
    Case("poisoned shape str", lambda: check.poisoned("3"), **raises(ValueError, r"poisoned\(shape='3'\)")),
    Case("poisoned shape float", lambda: check.poisoned((2.5,)), **raises(ValueError, r"poisoned\(shape=\(2.5,\)\)")),
    Case("poisoned device", lambda: check.poisoned((2,), torch.float32, "tpu"), **raises(ValueError, r"poisoned\(device='tpu'\)")),
    Case("poisoned int shape", lambda: check.poisoned(5), **returns(lambda t: t.shape == (5,) and torch.isnan(t).all())),
    Case("poisoned torch.Size", lambda: check.poisoned(torch.Size([2, 3]), torch.float16),
         **returns(lambda t: t.shape == (2, 3) and t.dtype == torch.float16 and torch.isnan(t).all())),
    Case("poisoned complex", lambda: check.poisoned((2,), torch.complex64), **returns(lambda t: torch.isnan(t).all())),
    Case("poisoned fp8", lambda: check.poisoned((2,), torch.float8_e4m3fn), **returns(lambda t: torch.isnan(t.float()).all())),
    Case("poisoned uint64", lambda: check.poisoned((2,), torch.uint64), **returns(lambda t: t.dtype == torch.uint64)),
    # tolerance(), rel_error()
    Case("tolerance str", lambda: check.tolerance("fp16"), **raises(TypeError, r"tolerance\(dtype\)")),
    Case("tolerance None", lambda: check.tolerance(None), **raises(TypeError, r"tolerance\(dtype\)")),
    Case("tolerance complex64", lambda: check.tolerance(torch.complex64), **returns(lambda t: t == check.TOLERANCES[torch.float32])),
    Case("tolerance int8", lambda: check.tolerance(torch.int8), **returns(lambda t: t == 0.0)),
    Case("rel_error shapes", lambda: check.rel_error(torch.zeros(2), torch.zeros(3)), **raises(ValueError, r"out has shape \(2,\) but ref has \(3,\)")),
    Case("rel_error non-tensor", lambda: check.rel_error(1.0, torch.zeros(1)), **raises(TypeError, r"out must be a torch.Tensor")),
    Case("rel_error complex", lambda: check.rel_error(torch.tensor([1 - 1j]), torch.tensor([1 + 1j])),
         **returns(lambda e: math.isclose(e, math.sqrt(2)))),
    Case("rel_error zero ref", lambda: check.rel_error(torch.tensor([3.0, 4.0]), torch.zeros(2)), **returns(lambda e: e == 5.0)),
    # hardware
    Case("lookup None", lambda: hardware.lookup(None), **raises(TypeError, r"lookup\(device_name\)")),
    Case("lookup int", lambda: hardware.lookup(100), **raises(TypeError, r"lookup\(device_name\).*got int")),
    Case("lookup empty", lambda: hardware.lookup(""), **returns(lambda m: m is None)),
    Case("lookup RTX A1000", lambda: hardware.lookup("NVIDIA RTX A1000"), **returns(lambda m: m is None)),
    Case("lookup H100 NVL", lambda: hardware.lookup("NVIDIA H100 NVL"), **returns(lambda m: m.name == "H100 NVL")),
    Case("lookup GH200", lambda: hardware.lookup("NVIDIA GH200 480GB"), **returns(lambda m: m.name == "GH200")),
    Case("lookup A10G", lambda: hardware.lookup("NVIDIA A10G"), **returns(lambda m: m is None)),
    Case("Machine name None", lambda: machine(name=None), **raises(TypeError, r"Machine\(name=...\)")),
    Case("Machine sms negative", lambda: machine(sms=-1), **raises(ValueError, r"Machine\(sms=-1\)")),
    Case("Machine bandwidth nan", lambda: machine(bandwidth_gbs=NAN), **raises(ValueError, r"Machine\(bandwidth_gbs=nan\)")),
    Case("Machine peaks list", lambda: machine(peak_tflops=[1.0]), **raises(TypeError, r"Machine\(peak_tflops=...\)")),
    Case("Machine peak zero", lambda: machine(peak_tflops={"bf16": 0}), **raises(ValueError, r"Machine\(peak_tflops=\{'bf16': 0\}\)")),
    Case("Machine numpy bandwidth", lambda: machine(bandwidth_gbs=np.float32(2.5)), **returns(lambda m: m.bandwidth_gbs == 2.5)),
    Case("ridge_point unknown dtype", lambda: machine().ridge_point("fp64"), **raises(ValueError, r"ridge_point\(dtype='fp64'\): Test GPU has peaks for bf16, fp32")),
    Case("ridge_point 0 GB/s", lambda: machine(bandwidth_gbs=0.0).ridge_point("bf16"), **raises(ValueError, r"memory bandwidth of Test GPU is unknown")),
    Case("describe non-Machine", lambda: hardware.describe("H100"), **raises(TypeError, r"describe\(m\)")),
    Case("unknown GPU measured", lambda: hardware.for_device("NVIDIA RTX A1000", 20, 0, lambda: {"copy_gbs": 180.0, "fp32": 6.0, "bf16": 40.0}),
         **returns(lambda m: m.source == "measured here, no datasheet" and m.peak_tflops == {"fp32": 6.0, "bf16": 40.0} and m.bandwidth_gbs == 180.0)),
    Case("unknown GPU, measurement fails", lambda: hardware.for_device("X", 1, 0, lambda: 1 / 0),
         **returns(lambda m: m.peak_tflops == {} and m.bandwidth_gbs == 0.0)),
    # timing
    Case("bench non-callable", lambda: timing.bench(torch.ones(3)), **raises(TypeError, r"bench\(fn\)")),
    Case("bench max_cpu_runs 0", lambda: timing.bench(lambda: None, max_cpu_runs=0), **raises(ValueError, r"bench\(max_cpu_runs=0\)")),
    Case("bench rep negative", lambda: timing.bench(lambda: None, rep=-1), **raises(ValueError, r"bench\(rep=-1\)")),
    Case("bench warmup str", lambda: timing.bench(lambda: None, warmup="5"), **raises(TypeError, r"bench\(warmup='5'\)")),
    Case("host_us calls 0", lambda: timing.host_us(lambda: None, calls=0), **raises(ValueError, r"host_us\(calls=0\)")),
    Case("host_us calls float", lambda: timing.host_us(lambda: None, calls=2.5), **raises(ValueError, r"host_us\(calls=2.5\)")),
    Case("host_us fn None", lambda: timing.host_us(None), **raises(TypeError, r"host_us\(fn\)")),
    Case("host_us 1 call", lambda: timing.host_us(lambda: None, calls=1), **returns(lambda us: us >= 0)),
    Case("gbps ms 0", lambda: timing.gbps(1e9, 0), **raises(ValueError, r"gbps\(ms=0\)")),
    Case("tflops ms 0", lambda: timing.tflops(1e12, 0.0), **raises(ValueError, r"tflops\(ms=0.0\)")),
    Case("gbps ms nan", lambda: timing.gbps(1e9, NAN), **raises(ValueError, r"gbps\(ms=nan\)")),
    Case("gbps bytes negative", lambda: timing.gbps(-1, 1.0), **raises(ValueError, r"gbps\(bytes_moved=-1\)")),
    Case("tflops flops str", lambda: timing.tflops("1e12", 1.0), **raises(TypeError, r"tflops\(flops='1e12'\)")),
    Case("gbps numpy", lambda: timing.gbps(np.int64(2_000_000_000), np.float64(1000.0)), **returns(lambda r: math.isclose(r, 2.0))),
    # runtime: COURSE_DEVICE and TRITON_INTERPRET (runtime._decide, in this process)
    Case("COURSE_DEVICE tpu", lambda: decide("tpu"), **raises(ValueError, r"COURSE_DEVICE='tpu' is not understood.*auto, gpu, cpu")),
    Case("COURSE_DEVICE ' CPU '", lambda: decide(" CPU "), **returns(lambda interpret: interpret is True)),
    Case("COURSE_DEVICE empty", lambda: decide(""), **returns(lambda interpret: interpret is (not HAS_GPU))),
    Case("COURSE_DEVICE gpu", lambda: decide("gpu"),
         **(returns(lambda interpret: interpret is False) if HAS_GPU else raises(RuntimeError, r"COURSE_DEVICE=gpu, but PyTorch sees no GPU"))),
    Case("TRITON_INTERPRET=1", lambda: decide("auto", "1"), **returns(lambda interpret: interpret is True)),
    Case("TRITON_INTERPRET=0", lambda: decide("auto", "0"), **returns(lambda interpret: interpret is (not HAS_GPU))),
    Case("pick keyword-only", lambda: runtime.pick(1, 2), **raises(TypeError, r"pick\(\) takes 0 positional arguments")),
    # runtime: import order (subprocesses: slow, so few)
    Case("import triton first", lambda: import_order("import triton"), **returns(lambda r: r == 141.0)),
    Case("import triton.language as tl first", lambda: import_order("import triton.language as tl"),
         **returns(lambda r: r == 141.0)),
]

_OUTCOMES: dict = {}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, capsys):
    outcome, detail = case.outcome()
    capsys.readouterr()  # check()'s ✓ lines
    _OUTCOMES[case.id] = outcome
    assert outcome in ("clear error", "correct"), f"{case.id}: {outcome}: {detail}"


def test_case_ids_are_unique():
    assert len({c.id for c in CASES}) == len(CASES) >= 40


def test_outcome_counts():
    if len(_OUTCOMES) < len(CASES):
        pytest.skip("only part of the table ran (counts need all of it)")
    counts = collections.Counter(_OUTCOMES.values())
    print("\n" + summary(counts))  # shown with -s
    assert counts["wrong"] == counts["crash"] == 0


def summary(counts) -> str:
    return (f"bad-input table (helpers): {len(CASES)} cases: clear error {counts['clear error']}, "
            f"correct {counts['correct']}, wrong {counts['wrong']}, crash {counts['crash']}")


if __name__ == "__main__":
    counts = collections.Counter()
    for case in CASES:
        outcome, detail = case.outcome()
        counts[outcome] += 1
        if outcome not in ("clear error", "correct"):
            print(f"{outcome:12} {case.id}: {detail}", file=sys.stderr)
    print(summary(counts))
    sys.exit(1 if counts["wrong"] or counts["crash"] else 0)
