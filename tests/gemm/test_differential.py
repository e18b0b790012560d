"""Seeded randomized differential test of ``course.gemm``: many small products, each with its own
random shape, dtype, layouts (transposed, strided, offset and lazily negated views), bias, output
(a poisoned ``out`` view or none), output dtype, mode and configuration, against a float64 (int64
for int8) reference.

Every case is a test of its own whose id says what it is; a failure names the case's seed, so
``pytest tests/gemm/test_differential.py -k case123`` repeats it. Under the interpreter (CI, CPU)
the sizes stay small and the dtypes are those it computes right (fp16, fp32, int8: bf16 is wrong
there, fp8 missing); compiled on a GPU the sizes grow and bf16 (and fp8 on sm_89+) join in.
``DIFFERENTIAL_CASES`` overrides the number of cases (default: 240 on a CPU, 400 on a GPU).
"""

import os
import random

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
import pytest
import torch

from course import gemm
from course.gemm import config as gemm_config
from course.check import check, poisoned
from course.gemm import Config, matmul, matmul_int8
from course.runtime import DEVICE, INTERPRET, pick

SEED = 23_2026
N_CASES = int(os.environ.get("DIFFERENTIAL_CASES", pick(cpu=240, gpu=400)))
MAX_DIM = pick(cpu=48, gpu=600)

FLOAT_DTYPES = ["float16", "float32"] if INTERPRET else ["float16", "float32", "bfloat16"] + (
    ["float8_e4m3fn"] if torch.float8_e4m3fn in gemm.supported_dtypes() else [])
OUT_DTYPES = ["float16", "float32"] if INTERPRET else ["float16", "float32", "bfloat16"]
MODES = ["auto", "persistent", "streamk", "tail"]
# Configurations (None: the heuristic). Compiled, every block is at least 16 and int8/fp8 need a
# K step of at least 32; a few fixed ones keep the number of compiled variants small.
CONFIGS = pick(
    cpu=[None, None, dict(block_m=16, block_n=16, block_k=16), dict(block_m=32, block_n=16, block_k=16),
         dict(block_m=16, block_n=32, block_k=32, group_size_m=1), dict(block_m=8, block_n=16, block_k=16)],
    gpu=[None, None, dict(block_m=64, block_n=64, block_k=32, num_stages=3),
         dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3, tma_store=False),
         dict(block_m=64, block_n=128, block_k=64, num_stages=4, tma=False),
         dict(block_m=16, block_n=64, block_k=128, num_stages=3, tma=False, tma_store=False),
         dict(block_m=128, block_n=64, block_k=32, num_stages=2, tma=True, tma_store=True, store_halves=2)])
LAYOUTS = ["row", "row", "col", "strided", "offset", "col_strided", "negated"]
OUT_LAYOUTS = ["none", "row", "col", "strided"]
BIASES = ["none", "none", "float32", "float16", "strided"] + ([] if INTERPRET else ["bfloat16"])


def _dim(rng):
    return rng.randint(1, 4) if rng.random() < 0.2 else rng.randint(1, MAX_DIM)


def make_spec(i: int) -> dict:
    """Case ``i``: a dict of choices, all drawn from ``random.Random(SEED + i)``."""
    rng = random.Random(SEED + i)
    int8 = rng.random() < 0.2
    dtype = "int8" if int8 else rng.choice(FLOAT_DTYPES)
    K = 0 if rng.random() < 0.02 else _dim(rng)
    spec = dict(i=i, M=_dim(rng), N=_dim(rng), K=K, dtype=dtype, a=rng.choice(LAYOUTS), b=rng.choice(LAYOUTS),
                out=rng.choice(OUT_LAYOUTS), bias=rng.choice(BIASES), mode=rng.choice(MODES),
                config=rng.choice(CONFIGS), out_dtype=rng.choice(OUT_DTYPES + [None]))
    if int8 or dtype.startswith("float8"):
        if spec["config"] is not None and spec["config"]["block_k"] < 32 and not INTERPRET:
            spec["config"] = None
        if spec["b"] == "negated":
            spec["b"] = "row"  # (a negated int8 view is tested in test_matmul.py; keep int8 inputs in range)
    if int8:
        spec["a_scale"] = rng.choice(["row", "strided", "negated"])
        spec["b_scale"] = rng.choice(["row", "strided"])
    return spec


SPECS = [make_spec(i) for i in range(N_CASES)]


def _spec_id(s):
    cfg = "heur" if s["config"] is None else "x".join(str(s["config"][k]) for k in ("block_m", "block_n", "block_k"))
    return (f"case{s['i']}-{s['M']}x{s['N']}x{s['K']}-{s['dtype']}-a_{s['a']}-b_{s['b']}-out_{s['out']}"
            f"-bias_{s['bias']}-{s['mode']}-{cfg}")


def _values(gen, rows, cols, dtype):
    if dtype == torch.int8:
        return torch.randint(-128, 128, (rows, cols), generator=gen, dtype=torch.int8)
    scale = 1.0 if dtype != torch.float8_e4m3fn else 4.0
    return (torch.randn(rows, cols, generator=gen) * scale).to(dtype)


def _matrix(gen, rows, cols, dtype, layout):
    """A (rows, cols) matrix stored as ``layout``, and its values as a plain tensor (for the reference)."""
    vals = _values(gen, rows, cols, dtype)
    if layout in ("row", "negated"):
        t = vals.to(DEVICE)
        if layout == "negated":  # a lazy negation view whose raw memory holds -vals
            t = torch._neg_view((-vals.float()).to(dtype).to(DEVICE)) if dtype != torch.int8 else t
    elif layout == "col":
        t = vals.T.contiguous().to(DEVICE).T
    elif layout == "strided":  # every other row, every third column of a bigger buffer
        big = torch.zeros(2 * rows + 1, 3 * cols + 2, dtype=dtype, device=DEVICE)
        t = big[1::2, 2::3][:rows, :cols]
        t.copy_(vals.to(DEVICE))
    elif layout == "offset":  # a window of a bigger buffer: a storage offset and a wider row
        big = torch.zeros(rows + 3, cols + 5, dtype=dtype, device=DEVICE)
        t = big[3:, 5:]
        t.copy_(vals.to(DEVICE))
    elif layout == "col_strided":  # transposed, with a gap between columns
        big = torch.zeros(2 * cols + 1, rows + 4, dtype=dtype, device=DEVICE)
        t = big[::2, 4:][:cols].T
        t.copy_(vals.to(DEVICE))
    else:
        raise ValueError(layout)
    return t, vals


def _vector(gen, n, dtype, kind):
    vals = (torch.rand(n, generator=gen) / 32 + 1e-3) if dtype == "scale" else torch.randn(n, generator=gen)
    dt = torch.float32 if dtype == "scale" else dtype
    vals = vals.to(dt)
    if kind == "strided":
        t = torch.zeros(3 * n, dtype=dt, device=DEVICE)[1::3]
        t.copy_(vals.to(DEVICE))
    elif kind == "negated":
        t = torch._neg_view((-vals).to(DEVICE))
    else:
        t = vals.to(DEVICE)
    return t, vals


def _out(M, N, dtype, layout):
    if layout == "row":
        whole = poisoned((M, N), dtype, DEVICE)
        return whole, whole
    if layout == "col":
        whole = poisoned((N, M), dtype, DEVICE)
        return whole.T, whole
    whole = poisoned((2 * M + 1, N + 3), dtype, DEVICE)  # every other row, a column offset
    return whole[1::2, 3:][:M], whole


def run_spec(s: dict) -> None:
    gen = torch.Generator().manual_seed(SEED * 7919 + s["i"])
    M, N, K = s["M"], s["N"], s["K"]
    dtype = getattr(torch, s["dtype"])
    int8 = dtype == torch.int8
    a, a_vals = _matrix(gen, M, K, dtype, s["a"])
    b, b_vals = _matrix(gen, K, N, dtype, s["b"])
    ref = a_vals.double() @ b_vals.double() if not int8 else (a_vals.long() @ b_vals.long()).double()
    kw = dict(mode=s["mode"], config=None if s["config"] is None else Config(**s["config"]))
    if int8:
        a_scale, sa = _vector(gen, M, "scale", s["a_scale"])
        b_scale, sb = _vector(gen, N, "scale", s["b_scale"])
        ref = ref * sa.double()[:, None] * sb.double()[None, :]
    bias = None
    if s["bias"] != "none":
        bias_dtype = torch.float32 if s["bias"] == "strided" else getattr(torch, s["bias"])
        bias, bias_vals = _vector(gen, N, bias_dtype, "strided" if s["bias"] == "strided" else "row")
        ref = ref + bias_vals.double()
    out_dtype = getattr(torch, s["out_dtype"]) if s["out_dtype"] else (
        torch.bfloat16 if int8 or dtype in gemm_config.FP8 else dtype)
    if INTERPRET and out_dtype == torch.bfloat16:
        out_dtype = torch.float32  # (int8's default output, bf16, is wrong under the interpreter)
    out = whole = None
    if s["out"] != "none":
        out, whole = _out(M, N, out_dtype, s["out"])
    if int8:
        result = matmul_int8(a, b, a_scale, b_scale, bias, out_dtype=out_dtype, out=out, **kw)
    else:
        result = matmul(a, b, bias=bias, out_dtype=out_dtype, out=out, **kw)
    assert result.shape == (M, N) and result.dtype == out_dtype
    if out is not None:
        assert result.data_ptr() == out.data_ptr() or M * N == 0, "matmul must write into out"
    check(_spec_id(s), result, ref)
    if whole is not None and out is not whole:
        written = M * N - int(torch.isnan(out).sum())
        assert int((~torch.isnan(whole)).sum()) == written, "elements outside the out view were written"


@pytest.mark.parametrize("spec", SPECS, ids=[_spec_id(s) for s in SPECS])
def test_matches_float64(spec):
    run_spec(spec)


def test_the_cases_cover_every_choice():
    for key, choices in (("dtype", FLOAT_DTYPES + ["int8"]), ("a", LAYOUTS), ("b", LAYOUTS), ("out", OUT_LAYOUTS),
                         ("bias", BIASES), ("mode", MODES)):
        seen = {s[key] for s in SPECS}
        assert set(choices) <= seen, f"{key}: {set(choices) - seen} never drawn in {N_CASES} cases"
    assert {None} | {tuple(sorted(c.items())) for c in CONFIGS if c} == \
        {None if s["config"] is None else tuple(sorted(s["config"].items())) for s in SPECS}
