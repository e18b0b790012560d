"""Seeded randomized differential test of flash attention's forward and backward
(``course.attention_backward.attention``): many small problems, each with its own random batch, query and
key/value heads (grouped-query and multi-query), lengths, head dim, mask, dtype, operand layouts and
gradient layout, against float64 autograd of ``course.attention.reference``.

Every case is a test of its own whose id says what it is (``-k case7`` repeats one).
``ATTENTION_DIFFERENTIAL_CASES`` overrides the number of cases (default: 24 on a CPU, 80 on a GPU).
"""

import os
import random

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import attention, attention_backward
from course.check import tolerance
from course.runtime import DEVICE, INTERPRET, pick

SEED = 35_2026
N_CASES = int(os.environ.get("ATTENTION_DIFFERENTIAL_CASES", pick(cpu=24, gpu=80)))
MAX_LEN = pick(cpu=40, gpu=700)
HEAD_DIMS = pick(cpu=[16, 16, 32], gpu=[16, 32, 64, 64, 128, 128, 256])
DTYPES = pick(cpu=["float16", "float32"], gpu=["float16", "float32", "bfloat16", "bfloat16"])
LAYOUTS = ["contiguous", "contiguous", "seq_major", "strided_d"]  # strided_d: every other element of a wider d
GRAD_LAYOUTS = ["contiguous", "seq_major", "expanded"]


def _length(rng):
    return rng.randint(1, 3) if rng.random() < 0.2 else rng.randint(1, MAX_LEN)


def make_spec(i: int) -> dict:
    """Case ``i``: a dict of choices, all drawn from ``random.Random(SEED + i)``."""
    rng = random.Random(SEED + i)
    kv_heads = rng.choice([1, 2, 3])
    causal = rng.random() < 0.5
    # Some row sees two keys or more: where every row sees one, softmax is constant, dq is 0 and only
    # rounding is left (test_attention_backward's test_one_key_gives_a_zero_query_gradient)
    S_Q, S_K = max(_length(rng), 2 if causal else 1), max(_length(rng), 2)
    return dict(i=i, B=rng.choice([1, 2]), kv_heads=kv_heads, H=kv_heads * rng.choice([1, 1, 2, 4]),
                S_Q=S_Q, S_K=S_K, D=rng.choice(HEAD_DIMS), causal=causal,
                dtype=rng.choice(DTYPES), q=rng.choice(LAYOUTS), k=rng.choice(LAYOUTS), v=rng.choice(LAYOUTS),
                grad=rng.choice(GRAD_LAYOUTS), scale=rng.choice([None, None, 0.3]))


def _case_id(spec: dict) -> str:
    return (f"case{spec['i']}-B{spec['B']}-H{spec['H']}x{spec['kv_heads']}-{spec['S_Q']}x{spec['S_K']}-d{spec['D']}"
            f"-{'causal' if spec['causal'] else 'full'}-{spec['dtype']}-{spec['q']}-{spec['k']}-{spec['v']}"
            f"-grad_{spec['grad']}")


def _tensor(shape, layout, dtype, generator):
    """A (B, heads, seq, d) tensor with the values of a standard normal, stored as ``layout`` says."""
    values = torch.randn(shape, generator=generator).to(dtype)
    if layout == "seq_major":  # (B, seq, heads, d) memory, as a projection's output viewed per head
        return values.transpose(1, 2).contiguous().transpose(1, 2).to(DEVICE)
    if layout == "strided_d":
        wide = torch.zeros(*shape[:3], 2 * shape[3], dtype=dtype)
        wide[..., ::2] = values
        return wide.to(DEVICE)[..., ::2]
    return values.to(DEVICE)


@pytest.mark.parametrize("spec", [make_spec(i) for i in range(N_CASES)], ids=_case_id)
def test_gradients_match_float64(spec):
    generator = torch.Generator().manual_seed(SEED + spec["i"])
    dtype = getattr(torch, spec["dtype"])
    B, H, H_KV, S_Q, S_K, D = (spec[name] for name in ("B", "H", "kv_heads", "S_Q", "S_K", "D"))
    q = _tensor((B, H, S_Q, D), spec["q"], dtype, generator).requires_grad_()
    k = _tensor((B, H_KV, S_K, D), spec["k"], dtype, generator).requires_grad_()
    v = _tensor((B, H_KV, S_K, D), spec["v"], dtype, generator).requires_grad_()
    if spec["grad"] == "expanded":  # the gradient of .sum(): one value, strides 0
        grad_out = torch.ones((), dtype=dtype, device=DEVICE).expand(B, H, S_Q, D)
    else:
        grad_out = _tensor((B, H, S_Q, D), "seq_major" if spec["grad"] == "seq_major" else "contiguous", dtype,
                           generator)
    out = attention_backward.attention(q, k, v, causal=spec["causal"], scale=spec["scale"])
    out.backward(grad_out)

    exact = [t.detach().double().cpu().requires_grad_() for t in (q, k, v)]
    ref = attention.reference(*exact, causal=spec["causal"], scale=spec["scale"])
    ref.backward(grad_out.double().cpu())
    # float32 runs as TF32 on a GPU, and a gradient passes through three rounded products. bfloat16:
    # D = rowsum(dO * O) reads O rounded to 8 bits, and a row that sees one key has dq = 0 but gets
    # (dP - D) k = (rounding of D) k; with a few rows only (causal, seq_q = 3) that is up to ~7 % of
    # dq's norm in a float64 emulation of the algorithm (400 draws, median 0.3 %), as in FlashAttention-2
    tol = tolerance(dtype) * {torch.float32: 1 if INTERPRET else 2, torch.bfloat16: 4}.get(dtype, 1)
    for name, mine, theirs in (("out", out, ref), *zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad),
                                                      (t.grad for t in exact))):
        mine = mine.detach().double().cpu()
        assert not mine.isnan().any(), f"case {spec['i']}: {name} has NaN"
        size = theirs.detach().norm()
        if size == 0:  # (keys no query sees: their gradients are exactly zero)
            assert not mine.any(), f"case {spec['i']}: {name} should be all zeros"
            continue
        error = ((mine - theirs.detach()).norm() / size).item()
        assert error <= tol, f"case {spec['i']}: {name} relative error {error:.2e} > {tol:.0e}"
