"""The benchmark's shapes: the course's set (squares and Llama-3 projections), the broad set nothing was
tuned on, and random inputs laid out as each case's name says."""

import random

import torch

SQUARES = [1024, 1536, 2048, 3072, 4096, 4224, 8192]
# (model, projection, K, N): activations (M, K) times weights (K, N)
PROJECTIONS = [
    ("8B", "qkv", 4096, 6144), ("8B", "o", 4096, 4096), ("8B", "gate_up", 4096, 14336), ("8B", "down", 14336, 4096),
    ("70B", "qkv", 8192, 10240), ("70B", "o", 8192, 8192), ("70B", "gate_up", 8192, 28672), ("70B", "down", 28672, 8192),
]
TOKENS = [16, 64, 512, 4096, 8192]
WAVE_QUANTIZED = {"square 1536", "square 3072", "square 4224", "8B qkv M=512"}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.int8}
MODES = ("persistent", "streamk", "tail", "gluon", "auto")
OUT_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.bfloat16}  # int8: scaled into bf16


# The broad set (``--set broad``): shapes nothing in course.gemm.config was tuned on. Other model
# families' projections, (family, hidden size, [(projection, K, N)]), at decode batches and prefill
# lengths; vocabulary projections; B stored row-major as well as K-major; weight gradients (A is the
# transposed activations); near-square sizes; seeded random sizes.
BROAD_FAMILIES = [
    ("Qwen2.5-7B", [("qkv", 3584, 4608), ("o", 3584, 3584), ("gate_up", 3584, 37888), ("down", 18944, 3584)]),
    ("Gemma-2-9B", [("qkv", 3584, 8192), ("o", 4096, 3584), ("gate_up", 3584, 28672), ("down", 14336, 3584)]),
    ("Phi-3-mini", [("qkv", 3072, 9216), ("o", 3072, 3072), ("gate_up", 3072, 16384), ("down", 8192, 3072)]),
    ("Llama-2-13B", [("qkv", 5120, 15360), ("o", 5120, 5120), ("gate_up", 5120, 27648), ("down", 13824, 5120)]),
    ("Falcon-7B", [("qkv", 4544, 4672), ("o", 4544, 4544), ("up", 4544, 18176), ("down", 18176, 4544)]),
    ("GPT-2-XL", [("qkv", 1600, 4800), ("o", 1600, 1600), ("up", 1600, 6400), ("down", 6400, 1600)]),
]
BROAD_VOCAB = [("Llama-3", 4096, 128256), ("Qwen2.5-7B", 3584, 152064), ("Gemma-2-9B", 3584, 256000)]
BROAD_TOKENS = [1, 32, 1000, 4096]
# Square and near-square sizes from 1,000 to 5,000 that no tile divides: a few elements past a multiple
# of 128 (the last row and column of tiles nearly empty), odd (rows no multiple of 16 bytes) or neither.
BROAD_SQUARES = [(n, n, n) for n in (1000, 1032, 1153, 2056, 2500, 3080, 3333, 4104, 4999)] + [
    (1500, 1700, 1600), (2056, 2048, 2176), (3000, 3200, 2904), (4104, 3976, 4096), (4800, 5000, 4616)]
ROW_MAJOR_B = " [B row-major]"  # in a case's name: b is stored (K, N) row-major, not as w.T
WEIGHT_GRAD = "dW "  # a case's name starts with it: a is stored transposed (activations^T)
NEAR_SQUARE = "near-square "  # a case's name starts with it: one of BROAD_SQUARES


def broad_set(quick: bool = False, seed: int = 0):
    """``[(name, M, N, K)]`` of the broad set; the layout of A and B is in the name (``ROW_MAJOR_B``,
    ``WEIGHT_GRAD``)."""
    families = BROAD_FAMILIES[::2] if quick else BROAD_FAMILIES
    tokens = [1, 1000] if quick else BROAD_TOKENS
    cases = [(f"{fam} {proj} M={m}", m, n, k) for fam, projs in families for m in tokens for proj, k, n in projs]
    cases += [(f"{fam} vocab M={m}", m, n, k) for fam, k, n in BROAD_VOCAB for m in tokens[:3]]
    cases += [(f"{fam} o M=1000{ROW_MAJOR_B}", 1000, n, k) for fam, projs in families for proj, k, n in projs
              if proj == "o"]
    cases += [(f"{WEIGHT_GRAD}{fam} {proj} tokens=4096", k, n, 4096) for fam, projs in families[:2]
              for proj, k, n in projs if proj in ("qkv", "down")]
    squares = BROAD_SQUARES[::3] if quick else BROAD_SQUARES
    cases += [(f"{NEAR_SQUARE}{M}x{N}x{K}", M, N, K) for M, N, K in squares]
    rng = random.Random(seed)
    cases += [(f"random {i}", rng.randint(1, 8192), rng.randint(1, 8192), rng.randint(1, 8192))
              for i in range(4 if quick else 10)]
    return cases


def shape_set(quick: bool):
    """``[(name, M, N, K)]``, large problems last within each group (cache-friendly: similar kernels together)."""
    cases = [(f"square {n}", n, n, n) for n in SQUARES]
    tokens = [16, 512, 4096] if quick else TOKENS
    projections = PROJECTIONS[:4] if quick else PROJECTIONS
    if quick:
        cases = [c for c in cases if c[1] in (1536, 3072, 4096, 8192)]
    for m in tokens:
        for model, proj, k, n in projections:
            cases.append((f"{model} {proj} M={m}", m, n, k))
    return cases


def broad_group(name: str) -> str:
    """The group of a broad-set case, by its name: decode, prefill, vocab, B row-major, weight
    gradient, near-square or random."""
    if name.startswith(WEIGHT_GRAD):
        return "weight gradient"
    if name.startswith(NEAR_SQUARE):
        return "near-square"
    if ROW_MAJOR_B in name:
        return "B row-major"
    if name.startswith("random"):
        return "random"
    if " vocab " in name:
        return "vocab"
    return "decode" if int(name.rsplit("M=", 1)[1]) <= 32 else "prefill"


def inputs(dtype, M, N, K, device="cuda", name=""):
    """Random inputs. B is stored K-major (a transposed (N, K) weight, as nn.Linear keeps it) unless
    ``name`` holds ``ROW_MAJOR_B``; A is stored transposed where ``name`` starts with ``WEIGHT_GRAD``."""
    def matrix(rows, cols, transposed):
        shape = (cols, rows) if transposed else (rows, cols)
        if dtype == torch.int8:
            t = torch.randint(-127, 128, shape, dtype=torch.int8, device=device)
        else:
            t = torch.randn(shape, device=device, dtype=dtype)
        return t.T if transposed else t

    a = matrix(M, K, transposed=name.startswith(WEIGHT_GRAD))
    b = matrix(K, N, transposed=ROW_MAJOR_B not in name)
    if dtype == torch.int8:
        extra = dict(a_scale=torch.rand(M, device=device) / 100, b_scale=torch.rand(N, device=device) / 100,
                     bias=torch.randn(N, device=device))
        return a, b, extra
    return a, b, {}
