"""The course's benchmark command: our GEMMs against cuBLAS in the same run, and the machine's ceilings.

    python -m course.bench gemm [--quick] [--dtypes bf16,fp16,int8] [--out DIR] [--no-save]
    python -m course.bench gemm --set broad --dtypes bf16   # shapes nothing was tuned on, auto only
    python -m course.bench gemm --per-triton   # record as gemm_<gpu>_triton3.9.json (the notebooks plot gemm_<gpu>)
    python -m course.bench copy [--out DIR] [--no-save]
    python -m course.bench host [--no-save]   # host us per call and back-to-back calls vs torch
    python -m course.bench all        # copy, then gemm, then host
    python -m course.bench plot [--out DIR]   # redraw the plots from the recorded GEMM results (no GPU)

``gemm`` times ``course.gemm.matmul`` in each mode (persistent, streamk, tail where the shape has
a tail split, gluon on an sm_90 GPU for 16-bit shapes with M > 64, auto) against
``torch.matmul`` (and ``matmul_int8`` with scales + bias -> bf16 against ``torch._int_mm``, both
with B stored K-major) over the course's shape set: squares 1024-8192 (with the wave-quantized
1536, 3072, 4224) and the Llama-3 8B/70B projections at M in {16, 64, 512, 4096, 8192}. It prints
a ratio table last (ratio = cuBLAS time / ours: above 1 is faster than cuBLAS), geometric means
and the course's targets, saves ``course/data/gemm_<gpu>.json`` and draws throughput and
roofline plots into ``--out``. Times are GPU times from a cold L2 (``course.timing.bench``:
CUDA events, median, the host kept ahead of the GPU so that Python launch costs do not leak in).
Each ratio is the median over three rounds of the reference timed right after ours; the host
time of one call, ours and the reference's, is recorded apart for the small shapes.

``--set broad`` times ``mode="auto"`` alone on ``broad_set()``: other model families' projections
at decode batches and prefill lengths, vocabulary projections, B stored row-major, weight gradients
(A transposed), square and near-square sizes no tile divides (``BROAD_SQUARES``) and seeded
random sizes, none of which the heuristics were fitted to. It prints the geometric mean of each
group and checks its own targets (bf16: geomean >= 1.00, no shape below 0.90), and saves
``course/data/gemm_broad_<gpu>.json``.

``copy`` measures device-to-device copy bandwidth (bytes read + written) and a large bf16
matmul, and saves them as ``course/data/ceilings_<gpu>.json`` (read by ``course.hardware``).

Kernels are compiled up front by worker processes (one per CPU core, up to 8), which fill
Triton's on-disk cache, so the timed process only loads them.

Where things live: ``shapes`` (the sets and their inputs), ``gemm`` (the timed comparison),
``host`` (host time per call), ``copy`` (the machine's ceilings), ``report`` (table, targets,
plots) and ``__main__`` (the command line).
"""

from course.bench.copy import run_copy
from course.bench.gemm import precompile, run_gemm
from course.bench.host import HOST_SHAPES, host_rows, print_host_table, run_host
from course.bench.report import plot_recorded, print_table, throughput_figure
from course.bench.shapes import (BROAD_FAMILIES, BROAD_SQUARES, DTYPES, MODES, NEAR_SQUARE, PROJECTIONS, ROW_MAJOR_B,
                                 SQUARES, TOKENS, WAVE_QUANTIZED, WEIGHT_GRAD, broad_group, broad_set, shape_set)

__all__ = ["run_copy", "precompile", "run_gemm", "HOST_SHAPES", "host_rows", "print_host_table", "run_host",
           "plot_recorded", "print_table", "throughput_figure", "BROAD_FAMILIES", "BROAD_SQUARES", "DTYPES", "MODES",
           "NEAR_SQUARE", "PROJECTIONS", "ROW_MAJOR_B", "SQUARES", "TOKENS", "WAVE_QUANTIZED", "WEIGHT_GRAD", "broad_group", "broad_set",
           "shape_set"]
