"""course.runtime: choosing the GPU or Triton's interpreter at `import course` (COURSE_DEVICE), kernels
decorated before that choice, ``pick``, and naming a numpy that breaks the interpreter."""

import os
import subprocess
import sys

import pytest
import torch

import course
from course import runtime


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
