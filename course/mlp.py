"""Fused MLPs (notebook 11): a transformer's feed-forward block as two GEMMs with work in their epilogues.

    y = mlp(x, w1, b1, w2, b2)                    # gelu(x @ w1.T + b1) @ w2.T + b2
    w_gate_up = pack_gate_up(w_gate, w_up)        # once, when the weights are loaded
    y = swiglu_mlp(x, w_gate_up, w_down)          # (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T

:func:`mlp` runs notebook 08's ``fused_linear_kernel`` twice: bias and GELU in the first GEMM's
epilogue. :func:`swiglu_mlp` computes the gate and up projections as **one** GEMM over a weight
whose rows alternate gate, up, gate, up (:func:`pack_gate_up`): each tile of that product holds the
gate and up values of the same hidden units side by side, so its epilogue (:func:`swiglu_kernel`)
can split them, apply ``silu(gate) * up`` and store half as many columns. The hidden activations
are written once and read once; torch's unfused chain writes and reads them three times more.
Weights are ``(out_features, in_features)``, as ``torch.nn.Linear`` keeps them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course import epilogues
from course.epilogues import silu
from course.persistent import programs
from course.stages import GemmContext, ScheduleContext, Tile, make_output_view, make_tensor_view


@triton.jit
def swiglu_kernel(X, W, Hid, M, N2, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_hm, stride_hn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr,
                  EVEN_K: tl.constexpr):
    """``Hid = silu(gate) * up`` where ``X @ W.T`` holds gate and up in alternate columns (N2 = 2 x hidden)."""
    tensorX = make_tensor_view(X, M, K, stride_xm, stride_xk)
    tensorW = make_tensor_view(W, K, N2, stride_wk, stride_wn)  # W.T, K-major
    tensorH = make_output_view(Hid, M, N2 // 2, stride_hm, stride_hn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, even_k=EVEN_K)
    sched = ScheduleContext(M, N2, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_axis(tensorX, tensorW, tile)
        # columns 2j and 2j + 1 are hidden unit j's gate and up: in the same thread's registers on a GPU
        gate, up = acc.reshape(BLOCK_M, BLOCK_N // 2, 2).split()
        tensorH.store(silu(gate) * up, Tile(tile.pid_m, tile.pid_n, BLOCK_M, BLOCK_N // 2))


def pack_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """``(2 hidden, d)``: the rows of ``w_gate`` and ``w_up`` (each ``(hidden, d)``) alternating."""
    if w_gate.shape != w_up.shape or w_gate.dim() != 2:
        raise ValueError(f"pack_gate_up: w_gate {tuple(w_gate.shape)} and w_up {tuple(w_up.shape)} must both be "
                         "(hidden, d)")
    return torch.stack([w_gate, w_up], dim=1).reshape(2 * w_gate.shape[0], w_gate.shape[1])


def swiglu(x: torch.Tensor, w_gate_up: torch.Tensor, *, num_programs: int | None = None, block_m: int = 128,
           block_n: int | None = None, block_k: int = 64, num_warps: int = 8, num_stages: int = 3) -> torch.Tensor:
    """``silu(x @ w_gate.T) * (x @ w_up.T)`` from ``w_gate_up = pack_gate_up(w_gate, w_up)``, in one GEMM."""
    if x.dim() != 2 or w_gate_up.dim() != 2 or x.shape[1] != w_gate_up.shape[1] or w_gate_up.shape[0] % 2:
        raise ValueError(f"swiglu: x {tuple(x.shape)} must be (M, d) and w_gate_up {tuple(w_gate_up.shape)} "
                         "(2 hidden, d), from pack_gate_up")
    if x.dtype != w_gate_up.dtype or x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"swiglu: x and w_gate_up must share a dtype of float16, bfloat16 or float32; got {x.dtype}, "
                        f"{w_gate_up.dtype}")
    M, K = x.shape
    N2 = w_gate_up.shape[0]
    hidden = torch.empty((M, N2 // 2), device=x.device, dtype=x.dtype)
    if not (M and N2):
        return hidden
    count = programs("swiglu", num_programs)
    block_n = block_n or _block_n(M)
    swiglu_kernel[(count,)](x, w_gate_up, hidden, M, N2, K, *x.stride(), *w_gate_up.stride(), *hidden.stride(),
                            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, NUM_SMS=count,
                            EVEN_K=K % block_k == 0, num_warps=num_warps, num_stages=num_stages)
    return hidden


def _block_n(M: int) -> int:
    # 128 x 256 tiles once there are enough rows to fill the waves (H100, M = 4096: 0.89x torch, 0.72x with 128)
    return 256 if M >= 2048 else 128


def mlp(x, w1, b1, w2, b2, *, activation=epilogues.gelu, **blocks) -> torch.Tensor:
    """``activation(x @ w1.T + b1) @ w2.T + b2``: bias and activation in the first GEMM's epilogue."""
    blocks = {"block_n": _block_n(x.shape[0]), **blocks}
    return epilogues.linear(epilogues.linear(x, w1, b1, activation=activation, **blocks), w2, b2, **blocks)


def swiglu_mlp(x, w_gate_up, w_down, **blocks) -> torch.Tensor:
    """``(silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T``: Llama's feed-forward block, in two GEMMs."""
    blocks = {"block_n": _block_n(x.shape[0]), **blocks}
    return epilogues.linear(swiglu(x, w_gate_up, **blocks), w_down, **blocks)


def unfused_mlp(x, w1, b1, w2, b2, **blocks) -> torch.Tensor:
    """:func:`mlp` with the same GEMM kernel but GELU as torch's separate kernel: what fusion alone buys."""
    blocks = {"block_n": _block_n(x.shape[0]), **blocks}
    h = torch.nn.functional.gelu(epilogues.linear(x, w1, b1, **blocks), approximate="tanh")
    return epilogues.linear(h, w2, b2, **blocks)


def unfused_swiglu_mlp(x, w_gate, w_up, w_down, **blocks) -> torch.Tensor:
    """:func:`swiglu_mlp` with the same GEMM kernel, gate and up as two GEMMs, silu and the product in torch."""
    blocks = {"block_n": _block_n(x.shape[0]), **blocks}
    f = torch.nn.functional
    h = f.silu(epilogues.linear(x, w_gate, **blocks)) * epilogues.linear(x, w_up, **blocks)
    return epilogues.linear(h, w_down, **blocks)


def torch_mlp(x, w1, b1, w2, b2):
    """The unfused chain, as ``nn.Linear`` and ``nn.GELU`` run it: addmm, gelu, addmm."""
    return torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(x, w1, b1),
                                                               approximate="tanh"), w2, b2)


def torch_swiglu_mlp(x, w_gate, w_up, w_down):
    """Llama's feed-forward block as its reference code runs it: three GEMMs, silu, a product."""
    f = torch.nn.functional
    return f.linear(f.silu(f.linear(x, w_gate)) * f.linear(x, w_up), w_down)


def reference(x, w1, b1, w2, b2) -> torch.Tensor:
    """:func:`mlp` (GELU's tanh form) in float64 on the CPU."""
    f = torch.nn.functional
    x, w1, b1, w2, b2 = (t.detach().double().cpu() for t in (x, w1, b1, w2, b2))
    return f.linear(f.gelu(f.linear(x, w1, b1), approximate="tanh"), w2, b2)


def swiglu_reference(x, w_gate, w_up, w_down) -> torch.Tensor:
    """:func:`swiglu_mlp` in float64 on the CPU."""
    f = torch.nn.functional
    x, w_gate, w_up, w_down = (t.detach().double().cpu() for t in (x, w_gate, w_up, w_down))
    return f.linear(f.silu(f.linear(x, w_gate)) * f.linear(x, w_up), w_down)


def benchmark(shapes=(("GELU", 512, 4096, 16384), ("GELU", 4096, 4096, 16384), ("SwiGLU", 512, 4096, 14336),
                      ("SwiGLU", 4096, 4096, 14336)), dtype=torch.float16) -> list[dict]:
    """GPU time of each MLP (``(kind, M, d, hidden)``): torch's unfused chain, the course's GEMMs with
    the elementwise work as separate torch kernels, and the course's fused version."""
    from course import runtime, timing

    rows = []
    for kind, M, d, hidden in shapes:
        dev = runtime.DEVICE
        x = torch.randn(M, d, device=dev, dtype=dtype)
        w1, w3 = (torch.randn(hidden, d, device=dev, dtype=dtype) / d ** 0.5 for _ in range(2))
        w2 = torch.randn(d, hidden, device=dev, dtype=dtype) / hidden ** 0.5
        b1, b2 = torch.randn(hidden, device=dev, dtype=dtype), torch.randn(d, device=dev, dtype=dtype)
        if kind == "GELU":
            calls = {"torch": lambda: torch_mlp(x, w1, b1, w2, b2), "unfused": lambda: unfused_mlp(x, w1, b1, w2, b2),
                     "fused": lambda: mlp(x, w1, b1, w2, b2)}
        else:
            packed = pack_gate_up(w1, w3)
            calls = {"torch": lambda: torch_swiglu_mlp(x, w1, w3, w2),
                     "unfused": lambda: unfused_swiglu_mlp(x, w1, w3, w2), "fused": lambda: swiglu_mlp(x, packed, w2)}
        row = dict(kind=kind, M=M, d=d, hidden=hidden)
        row.update({f"{name}_ms": ms for name, ms in timing.in_turns(calls).items()})
        row["hidden_mb"] = {k: v / 1e6 for k, v in hidden_traffic(M, hidden, swiglu=kind == "SwiGLU").items()}
        rows.append(row)
    return rows


def hidden_traffic(M: int, hidden: int, element_bytes: int = 2, *, swiglu: bool) -> dict:
    """Bytes of hidden activations (M x hidden) written to and read from memory between the GEMMs, unfused
    (torch's chain) and fused. GELU MLP: addmm writes, gelu reads and writes, addmm reads (4 passes)
    against write + read (2). SwiGLU: gate and up written, silu reads gate and writes, the product
    reads two and writes, the down GEMM reads (8 passes) against write + read (2)."""
    one = M * hidden * element_bytes
    return {"unfused": (8 if swiglu else 4) * one, "fused": 2 * one}
