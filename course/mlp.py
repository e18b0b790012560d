"""Fused MLPs (notebook 11): a transformer's feed-forward block as two GEMMs with work in their epilogues.

    y = mlp(x, w1, b1, w2, b2)                    # gelu(x @ w1.T + b1) @ w2.T + b2
    w_gate_up = pack_gate_up(w_gate, w_up)        # once, when the weights are loaded
    y = swiglu_mlp(x, w_gate_up, w_down)          # (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T
    y = gelu_mlp(x, w1, b1, w2, b2)               # mlp() with gradients, for training

:func:`mlp` runs notebook 08's ``fused_linear_kernel`` twice: bias and GELU in the first GEMM's
epilogue. :func:`swiglu_mlp` computes the gate and up projections as **one** GEMM over a weight
whose rows alternate gate, up, gate, up (:func:`pack_gate_up`): each tile of that product holds the
gate and up values of the same hidden units side by side, so its epilogue (:func:`swiglu_kernel`)
can split them, apply ``silu(gate) * up`` and store half as many columns. The hidden activations
are written once and read once; torch's unfused chain writes and reads them three times more.
Weights are ``(out_features, in_features)``, as ``torch.nn.Linear`` keeps them.

For training (notebook 13), :func:`gelu_mlp` is :func:`mlp` with gradients: ``gelu_gemm_kernel`` runs
the forward's first GEMM (storing the pre-activation beside its GELU) and the backward's first,
``dY @ w2`` times GELU's derivative, with the bias gradient's column sums in the same epilogue.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import triton
import triton.language as tl

from course import epilogues, runtime
from course.epilogues import gelu, gelu_grad, silu
from course.gemm import autograd
from course.gemm.config import Config, heuristic_config
from course.gemm.layout import host_descriptor, tma_layout
from course.persistent import programs
from course.stages import (DescriptorOutputView, DescriptorView, GemmContext, ScheduleContext, Tile, make_bias_view,
                           make_output_view, make_tensor_view)


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


# --- Training (notebook 13): the GELU MLP with its backward fused ---------------------------------------


@triton.jit
def gelu_gemm_kernel(A, B, Pre, Out, bias, col_sums, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_om, stride_on, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr, EVEN_K: tl.constexpr, USE_TMA: tl.constexpr,
                     A_T: tl.constexpr, B_T: tl.constexpr, TMA_OUT: tl.constexpr, HALVES: tl.constexpr,
                     FLATTEN: tl.constexpr, BACKWARD: tl.constexpr):
    """The two GEMMs of a GELU MLP's training that carry the GELU in their epilogue.

    Forward (``BACKWARD=False``): ``Pre = A @ B + bias`` and ``Out = gelu(Pre)``, both stored (the
    backward needs ``Pre``). Backward: ``Out = (A @ B) * gelu'(Pre)`` with ``Pre`` read: the gradient
    before the GELU straight from ``dY @ W_down``, whose product is never stored; and each tile's
    column sums of ``Out`` in ``col_sums[pid_m, :]`` (float32; None: none), which summed over ``pid_m``
    give the bias gradient. With ``USE_TMA``, ``A`` and ``B`` are host tensor descriptors (``A_T``, ``B_T``:
    stored transposed); with ``TMA_OUT``, ``Pre`` and ``Out`` are too (row-major, stored in ``HALVES``
    pieces; ``Pre`` read whole in the backward). ``Pre`` and ``Out`` share strides."""
    if USE_TMA:
        tensorA = DescriptorView(A, A_T)
        tensorB = DescriptorView(B, B_T)
    else:
        tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
        tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    if TMA_OUT:
        tensorOut = DescriptorOutputView(Out, False, HALVES)
        if BACKWARD:
            tensorPre = DescriptorView(Pre, False)
        else:
            tensorPre = DescriptorOutputView(Pre, False, HALVES)
    else:
        tensorPre = make_output_view(Pre, M, N, stride_om, stride_on)
        tensorOut = make_output_view(Out, M, N, stride_om, stride_on)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, 1, GROUP_SIZE_M, even_k=EVEN_K)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in tl.range(start, total, stride, flatten=FLATTEN):
        tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_k_range(tensorA, tensorB, tile, 0, tl.cdiv(K, BLOCK_K))
        if BACKWARD:
            acc = acc * gelu_grad(tensorPre.load(tile, boundary=True).to(tl.float32))
            tensorOut.store(acc, tile)
            if col_sums is not None:
                rows, cols = tile.indices()
                acc = tl.where(rows[:, None] < M, acc, 0.0)  # pointer views read rows past M wrapped, not zeros
                tl.store(col_sums + tile.pid_m * N + cols, tl.sum(acc, axis=0), mask=cols < N)
        else:
            acc = make_bias_view(bias, N, 1).apply(acc, tile)
            tensorPre.store(acc, tile)
            tensorOut.store(gelu(acc), tile)


# The fastest of four on an H100: forward + backward of two MLP shapes in 2.45 ms, against 2.48-2.89 ms
# (notes/training.md, "The fused MLP")
_TRAINING_TILES = Config(128, 256, 64, num_warps=8, num_stages=3)
_FLATTEN = False  # tl.range(..., flatten=) of the persistent loop
_STAGES_THAT_FIT = {}  # (config, dtype, device, variant) -> the most pipeline stages that compiled


def _training_tiles(element_size):
    """``(config, halves)``: :data:`_TRAINING_TILES` with K blocks of 32 for 4-byte inputs, and the
    outputs stored in two halves where a tile's row is 512 bytes or more (half the staging shared memory)."""
    config = _TRAINING_TILES if element_size != 4 else dataclasses.replace(_TRAINING_TILES, block_k=32)
    return config, 2 if config.block_n * element_size >= 512 else 1


def _gelu_gemm(a, b, pre=None, bias=None, column_sums=True):
    """Forward (``pre`` None): ``(pre, gelu(pre))`` of ``a @ b + bias``. Backward: ``(a @ b) *
    gelu'(pre)`` and its column sums (float32; None with ``column_sums=False``)."""
    M, K = a.shape
    N = b.shape[1]
    backward = pre is not None
    config, halves = (heuristic_config(M, N, K, a.dtype), 1) if runtime.INTERPRET else \
        _training_tiles(a.element_size())
    out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if not backward:
        pre = torch.empty_like(out)
    elif pre.stride() != out.stride():  # the kernel reads pre with out's strides
        pre = pre.contiguous()
    bias = bias.contiguous() if bias is not None else None  # the kernel reads it with unit stride
    rows_of_tiles = triton.cdiv(M, config.block_m)
    column_sums = backward and column_sums
    col_sums = torch.empty((rows_of_tiles, N), device=a.device, dtype=torch.float32) if column_sums else None
    if not (M and N):
        return (out, col_sums.sum(0) if column_sums else None) if backward else (pre, out)
    layouts = (tma_layout(a), tma_layout(b))
    use_tma = not runtime.INTERPRET and torch.cuda.get_device_capability(a.device)[0] >= 9 and None not in layouts
    a_t, b_t = layouts[0] == "columns", layouts[1] == "columns"
    tma_out = use_tma and tma_layout(out) == "rows" and tma_layout(pre) == "rows"
    a_arg, b_arg, pre_arg, out_arg = a, b, pre, out
    if use_tma:
        a_arg = host_descriptor(a, a_t, config.block_m, config.block_k)
        b_arg = host_descriptor(b, b_t, config.block_k, config.block_n)
    if tma_out:
        out_arg = host_descriptor(out, False, config.block_m, config.block_n // halves)
        pre_arg = host_descriptor(pre, False, config.block_m, config.block_n // (1 if backward else halves))
    count = min(programs("gelu_mlp", None), rows_of_tiles * triton.cdiv(N, config.block_n))
    key = (config, a.dtype, a.device, backward, column_sums, use_tma, a_t, b_t, tma_out)
    launch = functools.partial(
        gelu_gemm_kernel[(count,)], a_arg, b_arg, pre_arg, out_arg, bias if bias is not None else out,
        col_sums, M, N, K, *a.stride(), *b.stride(), *out.stride(), BLOCK_M=config.block_m,
        BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_SIZE_M=config.group_size_m, NUM_SMS=count,
        EVEN_K=K % config.block_k == 0, USE_TMA=use_tma, A_T=a_t, B_T=b_t, TMA_OUT=tma_out, HALVES=halves,
        FLATTEN=_FLATTEN and not runtime.INTERPRET, BACKWARD=backward, num_warps=config.num_warps)
    stages = _STAGES_THAT_FIT.get(key, config.num_stages)
    while True:  # the epilogue's shared memory is the compiler's to lay out: one stage fewer until it fits
        try:
            launch(num_stages=stages)
            break
        except triton.runtime.errors.OutOfResources:
            if stages <= 1:
                raise
            stages -= 1
    _STAGES_THAT_FIT[key] = stages
    if not backward:
        return pre, out
    return out, col_sums.sum(0) if column_sums else None


@torch.library.custom_op("course::gelu_linear", mutates_args=())
def _gelu_linear_op(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _gelu_gemm(x, w.T, bias=bias)


@_gelu_linear_op.register_fake
def _(x, w, bias):
    return x.new_empty((x.shape[0], w.shape[0])), x.new_empty((x.shape[0], w.shape[0]))


@torch.library.custom_op("course::gelu_linear_backward", mutates_args=())
def _gelu_backward_op(grad_y: torch.Tensor, w_down: torch.Tensor,
                      pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _gelu_gemm(grad_y, w_down, pre=pre)


@_gelu_backward_op.register_fake
def _(grad_y, w_down, pre):
    return torch.empty_like(pre), pre.new_empty(pre.shape[1], dtype=torch.float32)


def _no_second_backward(ctx, *grads):
    raise RuntimeError("gelu_mlp: a second backward (through the gradients, create_graph=True) is not implemented; "
                       "for higher derivatives use mlp.torch_mlp")


_gelu_backward_op.register_autograd(_no_second_backward, setup_context=lambda ctx, inputs, output: None)


class _GeluMLP(torch.autograd.Function):
    @staticmethod
    def forward(x, w1, b1, w2, b2):
        pre, hidden = _gelu_linear_op(x, w1, b1)
        return autograd.matmul(hidden, w2.T, b2), pre, hidden

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w1, _, w2, _ = inputs
        _, pre, hidden = output
        ctx.save_for_backward(x, w1, w2, pre, hidden)
        ctx.mark_non_differentiable(pre, hidden)

    @staticmethod
    def backward(ctx, grad_y, _grad_pre, _grad_hidden):
        x, w1, w2, pre, hidden = ctx.saved_tensors
        if 0 in grad_y.stride():  # an expanded gradient (from .sum(), say): no rows to read in place
            grad_y = grad_y.contiguous()
        need_x, need_w1, need_b1, need_w2, need_b2 = ctx.needs_input_grad
        if need_x or need_w1 or need_b1:
            grad_pre, grad_b1 = _gelu_backward_op(grad_y, w2, pre)  # dY @ W2, times gelu'(pre): one kernel
        return (autograd.matmul(grad_pre, w1) if need_x else None,  # dX
                autograd.matmul(grad_pre.T, x) if need_w1 else None,  # dW1 = dPreᵀ X
                grad_b1.to(w1.dtype) if need_b1 else None,
                autograd.matmul(grad_y.T, hidden) if need_w2 else None,  # dW2 = dYᵀ H
                grad_y.sum(0, dtype=torch.float32).to(w2.dtype) if need_b2 else None)


_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def gelu_mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """:func:`mlp` with gradients: ``gelu(x @ w1.T + b1) @ w2.T + b2`` over the last dimension of ``x``,
    weights ``(out, in)`` as ``nn.Linear`` keeps them. The forward's first GEMM stores the
    pre-activation and the GELU of it; the backward's first GEMM, ``dY @ w2``, multiplies by GELU's
    derivative in its epilogue and sums the bias gradient's columns there: the gradient after the
    GELU never reaches memory. The other products run :mod:`course.gemm.autograd`'s kernels.
    Traceable by ``torch.compile(fullgraph=True)``; a second backward is refused.

        >>> x = torch.randn(4, 16, device=runtime.DEVICE, requires_grad=True)
        >>> w1, w2 = torch.randn(64, 16, device=runtime.DEVICE), torch.randn(16, 64, device=runtime.DEVICE)
        >>> gelu_mlp(x, w1, torch.zeros(64, device=runtime.DEVICE), w2, torch.zeros(16, device=runtime.DEVICE)).shape
        torch.Size([4, 16])
    """
    d, hidden = x.shape[-1] if x.dim() else None, w1.shape[0] if w1.dim() == 2 else None
    if (x.dim() == 0 or w1.shape != (hidden, d) or tuple(b1.shape) != (hidden,) or tuple(w2.shape) != (d, hidden)
            or tuple(b2.shape) != (d,)):
        raise ValueError(f"gelu_mlp: x {tuple(x.shape)}, w1 {tuple(w1.shape)}, b1 {tuple(b1.shape)}, w2 "
                         f"{tuple(w2.shape)}, b2 {tuple(b2.shape)}: pass x (..., d), w1 (hidden, d), b1 (hidden,), "
                         "w2 (d, hidden), b2 (d,)")
    if len({t.dtype for t in (x, w1, b1, w2, b2)}) != 1 or x.dtype not in _DTYPES:
        raise TypeError("gelu_mlp: x, w1, b1, w2 and b2 must share one dtype of float16, bfloat16 or float32; got "
                        f"{', '.join(str(t.dtype).replace('torch.', '') for t in (x, w1, b1, w2, b2))}")
    rows = x.reshape(-1, d)
    if 0 in rows.stride() and rows.numel():
        rows = rows.contiguous()
    return _GeluMLP.apply(rows, w1, b1, w2, b2)[0].reshape(*x.shape[:-1], d)


def training_benchmark(shapes=((8192, 768, 3072), (4096, 1024, 4096), (16384, 2048, 8192)),
                       dtype=torch.bfloat16) -> list[dict]:
    """GPU time of one forward and backward of a GELU MLP (``(M, d, hidden)``): torch's chain
    (``torch_ms``), the course's Linear layers with torch's GELU between them (``unfused_ms``) and
    :func:`gelu_mlp` (``fused_ms``); and the bias gradient of the backward's fused GEMM, summed in its
    epilogue (``sums_in_epilogue_ms``: the kernel and the sum of its partials) or by a separate
    reduction after it (``separate_sum_ms``: the kernel without them, then ``sum(0)``)."""
    from course import timing

    rows = []
    for M, d, hidden in shapes:
        x = torch.randn(M, d, device=runtime.DEVICE, dtype=dtype, requires_grad=True)
        up = autograd.Linear(d, hidden, device=runtime.DEVICE, dtype=dtype)
        down = autograd.Linear(hidden, d, device=runtime.DEVICE, dtype=dtype)
        params = (up.weight, up.bias, down.weight, down.bias)
        grad_y = torch.randn(M, d, device=runtime.DEVICE, dtype=dtype)

        def step(forward):
            return lambda: torch.autograd.grad(forward(), (x, *params), grad_y)

        f = torch.nn.functional
        calls = {"torch": step(lambda: torch_mlp(x, *params)),
                 "unfused": step(lambda: down(f.gelu(up(x), approximate="tanh"))),
                 "fused": step(lambda: gelu_mlp(x, *params))}
        with torch.no_grad():
            pre, _ = _gelu_gemm(x, up.weight.T, bias=up.bias)
        calls["sums_in_epilogue"] = lambda: _gelu_gemm(grad_y, down.weight, pre=pre)
        calls["separate_sum"] = lambda: _gelu_gemm(grad_y, down.weight, pre=pre, column_sums=False)[0].sum(0)
        medians = timing.in_turns(calls)
        rows.append(dict(M=M, d=d, hidden=hidden, **{f"{name}_ms": ms for name, ms in medians.items()}))
    return rows
