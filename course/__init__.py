"""Host-side helpers of the Triton GEMM course.

``import course`` first decides where kernels run (see ``course.runtime``) and says so in one line.
Everything else lives in a module of its own:

* ``course.runtime``  -- GPU or interpreter, ``DEVICE``, ``pick(cpu=..., gpu=...)``
* ``course.hardware`` -- this machine's name, SM count, peak FLOP/s and bandwidth
* ``course.timing``   -- ``bench(fn)`` and ``progress(items)``
* ``course.check``    -- relative error against a float64 reference, poisoned outputs, pass/fail
* ``course.plots``    -- roofline and throughput plots
* ``course.records``  -- GPU measurements saved in the repository, for learners without a GPU
* ``course.stages``   -- the device-side GEMM building blocks (a standalone, copyable file)
* ``course.gemm``     -- ``matmul`` / ``matmul_int8`` built on stages (persistent, Stream-K, Gluon): a package,
  its kernel, tile rules, operand layout, input checks, launcher and Gluon kernel one module each;
  ``course.Linear`` (``course.gemm.autograd.Linear``) is a drop-in for ``nn.Linear`` on its kernels
* ``course.attention``, ``course.attention_backward`` -- flash attention forward, and its backward for training
* ``course.gpt``      -- a small GPT on the course's kernels beside its torch twin
* ``course.bench``    -- ``python -m course.bench gemm|copy|host|plot``: the benchmark against cuBLAS (a package: shapes, gemm, host, copy, report)
* ``course.elementwise`` -- guarded buffers and size sweeps of notebooks 01-02
* ``course.tiled``    -- the first tiled matmul, its launch orders and costs (notebooks 03-05)
* ``course.compile``  -- ``build(kernel, *args, **constexprs)``: a kernel's stages for an H100, on any machine
* ``course.exercises``, ``course.solutions`` -- the exercise checks, and the reference solutions
* ``course.lab``      -- ``python -m course.lab``: what ``make lab`` runs
* ``course.execute``  -- ``python -m course.execute notebooks/*.ipynb``: refresh committed outputs
"""

from course import runtime
from course.runtime import DEVICE, INTERPRET, pick

print(runtime.summary())

__all__ = ["DEVICE", "INTERPRET", "Linear", "pick", "runtime"]


def __getattr__(name):
    # course.Linear, the drop-in for nn.Linear, without importing the GEMM library at `import course`
    if name == "Linear":
        from course.gemm.autograd import Linear

        return Linear
    raise AttributeError(f"module 'course' has no attribute {name!r}")
