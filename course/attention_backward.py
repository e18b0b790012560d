"""Flash attention, backward (for training; notes/training.md): the gradients of ``O = softmax(Q Kᵀ · scale) V``
without storing the probabilities ``P``.

    out = attention(q, k, v, causal=True)     # q: (batch, heads, seq, d); k, v: (batch, kv_heads, seq_k, d)
    out.sum().backward()                      # q.grad, k.grad, v.grad

The forward (:func:`course.attention.forward`) saves, besides ``O``, one float per query row: the
log-sum-exp ``L`` of its scores (in base 2). From it the backward *recomputes* each block of
probabilities, ``P = 2^(S·scale·log₂e − L)``, instead of reading a ``seq²`` matrix back. With
``dP = dO Vᵀ`` and ``D = rowsum(dO ∘ O)`` (one float per row, :func:`delta_kernel`):

    dV = Pᵀ dO        dS = P ∘ (dP − D)        dK = dSᵀ Q · scale        dQ = dS K · scale

Two kernels share the work, each owning what it writes, so no two programs add into one element
(the gradients are the same bits on every run):

- :func:`dkdv_kernel`: one program per block of keys of one key/value head; it walks the query blocks
  of every query head that reads that key/value head (grouped-query attention) and accumulates
  ``dK`` and ``dV`` in registers.
- :func:`dq_kernel`: one program per block of queries, walking the key blocks as the forward does.

:func:`attention` is registered with ``torch.library`` (``course::flash_attention``), so
``torch.compile(fullgraph=True)`` traces it and a CUDA graph replays it. A second backward raises.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from course import runtime
from course.attention import check_inputs, empty_output, forward, key_bounds

__all__ = ["attention", "backward", "benchmark", "config_for", "dkdv_step"]


@triton.jit
def delta_kernel(O, DO, DELTA, H, S_Q, stride_ob, stride_oh, stride_os, stride_od,
                 stride_gb, stride_gh, stride_gs, stride_gd, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """``D = rowsum(dO ∘ O)`` in float32, one value per query row: (batch · heads, seq_q)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    b, h = tl.program_id(1) // H, tl.program_id(1) % H
    d = tl.arange(0, HEAD_DIM)
    inside = rows[:, None] < S_Q
    o = tl.load(O + b * stride_ob + h * stride_oh + rows[:, None] * stride_os + d[None, :] * stride_od,
                mask=inside, other=0.0)
    do = tl.load(DO + b * stride_gb + h * stride_gh + rows[:, None] * stride_gs + d[None, :] * stride_gd,
                 mask=inside, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + tl.program_id(1) * S_Q + rows, delta, mask=rows < S_Q)


@triton.jit
def query_bounds(pid_n, S_Q, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """The query rows key block ``pid_n`` is seen by: ``[start, diagonal_end)`` with the causal
    mask, then ``[diagonal_end, seq_q)`` without. Without a mask the first range is empty."""
    start = 0
    diagonal_end = 0
    if CAUSAL:  # rows above the block's first key see none of it; rows past its last key see all
        last_row = tl.cdiv(S_Q, BLOCK_M) * BLOCK_M
        diagonal_end = tl.minimum(tl.cdiv((pid_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, last_row)
        start = tl.minimum(pid_n * BLOCK_N // BLOCK_M * BLOCK_M, diagonal_end)
    return start, diagonal_end


@triton.jit
def dkdv_step(k, v, dk, dv, q, do, lse, delta, cols, rows, qk_scale, MASKED: tl.constexpr):
    """``dK``, ``dV`` of a block of keys (``k``, ``v``, ``dk``, ``dv``: [BLOCK_N, d]) after one
    block of query rows (``q``, ``do``: [BLOCK_M, d]; ``lse``, ``delta``: [BLOCK_M]); ``cols``,
    ``rows``: the keys' and rows' indices; ``MASKED``: apply the causal mask (key ≤ row). ``dk``
    leaves out the factor ``scale``, applied once at the end."""
    p_t = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])  # Pᵀ for this block: [BLOCK_N, BLOCK_M]
    if MASKED:
        p_t = tl.where(cols[:, None] <= rows[None, :], p_t, 0.0)
    dv += tl.dot(p_t.to(do.dtype), do)
    dp_t = tl.dot(v, tl.trans(do))
    ds_t = p_t * (dp_t - delta[None, :])
    dk += tl.dot(ds_t.to(q.dtype), q)
    return dk, dv


@triton.jit
def _query_block(k, v, dk, dv, q_base, do_base, lse_base, delta_base, start, cols, S_Q, stride_qs, stride_qd,
                 stride_gs, stride_gd, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                 MASKED: tl.constexpr, STEP: tl.constexpr):
    rows = start + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    inside = rows < S_Q
    q = tl.load(q_base + rows[:, None] * stride_qs + d[None, :] * stride_qd, mask=inside[:, None], other=0.0)
    do = tl.load(do_base + rows[:, None] * stride_gs + d[None, :] * stride_gd, mask=inside[:, None], other=0.0)
    lse = tl.load(lse_base + rows, mask=inside, other=float("inf"))  # rows past the end: P = 0
    delta = tl.load(delta_base + rows, mask=inside, other=0.0)
    return STEP(k, v, dk, dv, q, do, lse, delta, cols, rows, qk_scale, MASKED)


@triton.jit
def dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, H, GROUP, S_Q, S_K,
                stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
                stride_vb, stride_vh, stride_vs, stride_vd, stride_gb, stride_gh, stride_gs, stride_gd,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                STEP: tl.constexpr = dkdv_step):
    """``dK`` and ``dV`` of ``BLOCK_N`` keys of one key/value head (grid: key blocks × batch ·
    kv_heads), summed over the ``GROUP`` query heads that read it. ``DK`` and ``DV`` are contiguous.
    ``STEP``: the update for one block of queries (:func:`dkdv_step`'s signature)."""
    pid_n = tl.program_id(0)
    kv_heads = H // GROUP
    b, kv_head = tl.program_id(1) // kv_heads, tl.program_id(1) % kv_heads
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    keys = cols[:, None] < S_K
    k = tl.load(K + b * stride_kb + kv_head * stride_kh + cols[:, None] * stride_ks + d[None, :] * stride_kd,
                mask=keys, other=0.0)
    v = tl.load(V + b * stride_vb + kv_head * stride_vh + cols[:, None] * stride_vs + d[None, :] * stride_vd,
                mask=keys, other=0.0)
    qk_scale = sm_scale * 1.4426950408889634
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    start, diagonal_end = query_bounds(pid_n, S_Q, BLOCK_M, BLOCK_N, CAUSAL)
    for g in range(GROUP):
        h = kv_head * GROUP + g
        q_base = Q + b * stride_qb + h * stride_qh
        do_base = DO + b * stride_gb + h * stride_gh
        row_base = (b * H + h) * S_Q  # LSE and DELTA: (batch · heads, seq_q)
        for m in tl.range(start, diagonal_end, BLOCK_M, num_stages=1):
            dk, dv = _query_block(k, v, dk, dv, q_base, do_base, LSE + row_base, DELTA + row_base, m, cols, S_Q,
                                  stride_qs, stride_qd, stride_gs, stride_gd, qk_scale, HEAD_DIM, BLOCK_M, True, STEP)
        for m in range(diagonal_end, S_Q, BLOCK_M):
            dk, dv = _query_block(k, v, dk, dv, q_base, do_base, LSE + row_base, DELTA + row_base, m, cols, S_Q,
                                  stride_qs, stride_qd, stride_gs, stride_gd, qk_scale, HEAD_DIM, BLOCK_M, False, STEP)
    out = tl.program_id(1) * S_K * HEAD_DIM + cols[:, None] * HEAD_DIM + d[None, :]
    tl.store(DK + out, (dk * sm_scale).to(DK.dtype.element_ty), mask=keys)
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=keys)


@triton.jit
def _key_block(q, do, lse, delta, dq, k_base, v_base, start, rows, S_K, stride_ks, stride_kd, stride_vs, stride_vd,
               qk_scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    cols = start + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    k_t = tl.load(k_base + cols[None, :] * stride_ks + d[:, None] * stride_kd, mask=cols[None, :] < S_K, other=0.0)
    v_t = tl.load(v_base + cols[None, :] * stride_vs + d[:, None] * stride_vd, mask=cols[None, :] < S_K, other=0.0)
    p = tl.exp2(tl.dot(q, k_t) * qk_scale - lse[:, None])
    if MASKED:
        visible = cols[None, :] < S_K
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        p = tl.where(visible, p, 0.0)
    ds = p * (tl.dot(do, v_t) - delta[:, None])
    return dq + tl.dot(ds.to(k_t.dtype), tl.trans(k_t))


@triton.jit
def dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, sm_scale, H, GROUP, S_Q, S_K,
              stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
              stride_vb, stride_vh, stride_vs, stride_vd, stride_gb, stride_gh, stride_gs, stride_gd,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """``dQ`` of ``BLOCK_M`` query rows of one head (grid: query blocks × batch · heads), over the
    key blocks the forward read (:func:`course.attention.key_bounds`). ``DQ`` is contiguous."""
    pid_m = tl.program_id(0)
    b, h = tl.program_id(1) // H, tl.program_id(1) % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    inside = rows < S_Q
    q = tl.load(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qs + d[None, :] * stride_qd,
                mask=inside[:, None], other=0.0)
    do = tl.load(DO + b * stride_gb + h * stride_gh + rows[:, None] * stride_gs + d[None, :] * stride_gd,
                 mask=inside[:, None], other=0.0)
    lse = tl.load(LSE + tl.program_id(1) * S_Q + rows, mask=inside, other=float("inf"))
    delta = tl.load(DELTA + tl.program_id(1) * S_Q + rows, mask=inside, other=0.0)
    k_base = K + b * stride_kb + h // GROUP * stride_kh
    v_base = V + b * stride_vb + h // GROUP * stride_vh
    qk_scale = sm_scale * 1.4426950408889634
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full_end, end = key_bounds(pid_m, S_K, BLOCK_M, BLOCK_N, CAUSAL)
    for start in range(0, full_end, BLOCK_N):
        dq = _key_block(q, do, lse, delta, dq, k_base, v_base, start, rows, S_K, stride_ks, stride_kd, stride_vs,
                        stride_vd, qk_scale, HEAD_DIM, BLOCK_N, False, CAUSAL)
    for start in tl.range(full_end, end, BLOCK_N, num_stages=1):
        dq = _key_block(q, do, lse, delta, dq, k_base, v_base, start, rows, S_K, stride_ks, stride_kd, stride_vs,
                        stride_vd, qk_scale, HEAD_DIM, BLOCK_N, True, CAUSAL)
    out = tl.program_id(1) * S_Q * HEAD_DIM + rows[:, None] * HEAD_DIM + d[None, :]
    tl.store(DQ + out, (dq * sm_scale).to(DQ.dtype.element_ty), mask=inside[:, None])


def config_for(head_dim: int, element_size: int = 2) -> dict:
    """Blocks, warps and stages of the two backward kernels, ``{"dkdv": {...}, "dq": {...}}``, for
    inputs of ``element_size`` bytes."""
    if runtime.INTERPRET:
        small = dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
        return {"dkdv": small, "dq": small}
    if element_size > 2:  # float32: its blocks take twice the shared memory
        if head_dim > 128:
            return {"dkdv": dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1),
                    "dq": dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1)}
        return {"dkdv": dict(BLOCK_M=32, BLOCK_N=64, num_warps=4, num_stages=2),
                "dq": dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2)}
    # best of 7 x 5 configs per kernel on an H100 (bf16, seq 4096, 16 heads; notes/fusion.md)
    if head_dim <= 64:
        return {"dkdv": dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3),
                "dq": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)}
    if head_dim <= 128:
        return {"dkdv": dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3),
                "dq": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)}
    return {"dkdv": dict(BLOCK_M=32, BLOCK_N=64, num_warps=8, num_stages=2),
            "dq": dict(BLOCK_M=64, BLOCK_N=32, num_warps=8, num_stages=2)}


# As the forward's: lengths of 1 take twins that leave the lengths unspecialized (ptxas crashed on the
# forward compiled with a constant length of 1 on sm_90, Triton 3.6)
_KERNELS = {False: (dkdv_kernel, dq_kernel),
            True: tuple(triton.jit(do_not_specialize=["S_Q", "S_K"])(kernel.fn) for kernel in (dkdv_kernel, dq_kernel))}


def _check_saved(q, k, v, out, lse, grad_out) -> None:
    check_inputs(q, k, v)
    for name, t in (("out", out), ("grad_out", grad_out)):
        if not isinstance(t, torch.Tensor) or t.shape != q.shape or t.dtype != q.dtype or t.device != q.device:
            got = f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"attention backward: {name} must have q's shape {tuple(q.shape)}, dtype {q.dtype} and "
                             f"device; got {got}")
    if not isinstance(lse, torch.Tensor) or lse.shape != q.shape[:3] or lse.dtype != torch.float32 \
            or not lse.is_contiguous() or lse.device != q.device:
        raise ValueError(f"attention backward: lse must be the contiguous float32 (batch, heads, seq_q) = "
                         f"{tuple(q.shape[:3])} tensor that course.attention.forward(..., with_lse=True) returns")


def backward(q, k, v, out, lse, grad_out, *, causal: bool = False, scale: float | None = None,
             step=None, config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``dq, dk, dv`` of :func:`course.attention.attention` from its inputs, its output ``out``, the
    base-2 log-sum-exp ``lse`` (:func:`course.attention.forward` with ``with_lse=True``) and the
    output's gradient ``grad_out`` (any strides). ``step``: the ``@triton.jit`` dK/dV update for one
    block of queries (default :func:`dkdv_step`). ``config``: override :func:`config_for`."""
    _check_saved(q, k, v, out, lse, grad_out)
    if step is not None and not hasattr(step, "fn"):
        raise TypeError("attention backward: step must be a @triton.jit function with dkdv_step's arguments")
    B, H, S_Q, D = q.shape
    H_KV, S_K = k.shape[1], k.shape[2]
    dq = torch.empty_like(q, memory_format=torch.contiguous_format)
    dk = torch.empty_like(k, memory_format=torch.contiguous_format)
    dv = torch.empty_like(v, memory_format=torch.contiguous_format)
    if S_Q == 0 or B * H == 0:  # no queries: nothing reads the keys
        return dq, dk.zero_(), dv.zero_()
    scale = scale if scale is not None else 1 / math.sqrt(D)
    config = config or config_for(D, q.element_size())
    delta = torch.empty(B, H, S_Q, device=q.device, dtype=torch.float32)
    delta_kernel[(triton.cdiv(S_Q, 64), B * H)](out, grad_out, delta, H, S_Q, *out.stride(), *grad_out.stride(),
                                                HEAD_DIM=D, BLOCK_M=64)
    common = (scale, H, H // H_KV, S_Q, S_K, *q.stride(), *k.stride(), *v.stride(), *grad_out.stride())
    dkdv, dq_config = config["dkdv"], config["dq"]
    dkdv_launch, dq_launch = _KERNELS[1 in (S_Q, S_K)]
    extra = {} if step is None else {"STEP": step}
    dkdv_launch[(triton.cdiv(S_K, dkdv["BLOCK_N"]), B * H_KV)](q, k, v, grad_out, lse, delta, dk, dv, *common,
                                                               HEAD_DIM=D, CAUSAL=bool(causal), **dkdv, **extra)
    dq_launch[(triton.cdiv(S_Q, dq_config["BLOCK_M"]), B * H)](q, k, v, grad_out, lse, delta, dq, *common,
                                                               HEAD_DIM=D, CAUSAL=bool(causal), **dq_config)
    return dq, dk, dv


@torch.library.custom_op("course::flash_attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    return forward(q, k, v, causal=causal, scale=scale, with_lse=True)


@_attention_op.register_fake
def _(q, k, v, causal, scale):
    return empty_output(q, k.shape[1], causal), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.custom_op("course::flash_attention_backward", mutates_args=())
def _backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                 grad_out: torch.Tensor, causal: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return backward(q, k, v, out, lse, grad_out, causal=causal, scale=scale)


@_backward_op.register_fake
def _(q, k, v, out, lse, grad_out, causal, scale):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal, ctx.scale = causal, scale
    ctx.mark_non_differentiable(lse)


def _attention_grads(ctx, grad_out, _grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = _backward_op(q, k, v, out, lse, grad_out, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


def _no_second_backward(ctx, *grads):
    raise RuntimeError("course attention: a second backward (through the gradients, create_graph=True) is not "
                       "implemented; for higher derivatives use torch.nn.functional.scaled_dot_product_attention")


_attention_op.register_autograd(_attention_grads, setup_context=_setup_context)
_backward_op.register_autograd(_no_second_backward, setup_context=lambda ctx, inputs, output: None)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              scale: float | None = None) -> torch.Tensor:
    """:func:`course.attention.attention` with gradients for ``q``, ``k`` and ``v`` (inputs as it
    takes them, grouped-query heads included, its default kernel configs); traceable by
    ``torch.compile(fullgraph=True)``.

        >>> q = torch.randn(1, 4, 40, 16, device=runtime.DEVICE, requires_grad=True)
        >>> kv = torch.randn(1, 2, 40, 16, device=runtime.DEVICE, requires_grad=True)
        >>> attention(q, kv, kv, causal=True).sum().backward()
        >>> q.grad.shape, kv.grad.shape
        (torch.Size([1, 4, 40, 16]), torch.Size([1, 2, 40, 16]))
    """
    check_inputs(q, k, v)
    return _attention_op(q, k, v, bool(causal), float(scale) if scale is not None else 1 / math.sqrt(q.shape[-1]))[0]


def benchmark(seqs=(1024, 4096, 8192, 16384), head_dims=(64, 128), tokens: int = 16384, heads: int = 16,
              dtype=torch.bfloat16) -> list[dict]:
    """GPU time of the backward pass (``torch.autograd.grad`` of each forward's output) of
    :func:`attention` and of torch's ``scaled_dot_product_attention`` on its flash (FlashAttention-2)
    and cuDNN backends, causal and not, batch ``tokens // seq``: one row per (head_dim, causal, seq)
    with ``ms``, ``flash_ms``, ``cudnn_ms`` (absent where torch's backend raised; a note says why)
    and ``tflops`` (2.5 times the forward's FLOPs: five products to its two)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from course import attention as forward_module
    from course import timing

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None)}
    rows = []
    for head_dim in head_dims:
        for causal in (False, True):
            for seq in seqs:
                batch = max(1, tokens // seq)
                q, k, v = (torch.randn(batch, heads, seq, head_dim, device=runtime.DEVICE, dtype=dtype,
                                       requires_grad=True) for _ in range(3))
                grad_out = torch.randn_like(q)
                outputs = {"ours": attention(q, k, v, causal=causal)}
                for name, backend in backends.items():
                    try:
                        with sdpa_kernel(backend):
                            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        torch.autograd.grad(out, (q, k, v), grad_out, retain_graph=True)
                        outputs[name] = out
                    except (RuntimeError, TypeError) as error:  # TypeError: a torch without the cuDNN backend
                        reason = (str(error).strip().splitlines() or ["no reason given"])[0][:120]
                        print(f"note: torch's {name} backward skipped (d={head_dim}, causal={causal}, seq={seq}):",
                              reason)
                medians = timing.in_turns({name: lambda out=out: torch.autograd.grad(out, (q, k, v), grad_out,
                                                                                   retain_graph=True)
                                           for name, out in outputs.items()})
                work = 2.5 * forward_module.flops(batch, heads, seq, head_dim, causal)
                rows.append(dict(head_dim=head_dim, causal=causal, seq=seq, batch=batch, heads=heads,
                                 ms=medians["ours"], tflops=work / medians["ours"] / 1e9,
                                 **{f"{name}_ms": medians[name] for name in backends if name in medians}))
    return rows
