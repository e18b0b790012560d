"""Flash attention, forward (notebook 11): ``softmax(Q Kᵀ · scale) V`` without writing the scores.

    out = attention(q, k, v, causal=True)        # q, k, v: (batch, heads, seq, head_dim)

One program computes ``BLOCK_M`` rows of one head's output. It keeps its rows of Q in registers and
walks the keys and values ``BLOCK_N`` at a time: scores ``S = Q Kᵀ`` for the block, then the **online
softmax** (:func:`softmax_step`): a running row maximum ``m``, a running sum of exponentials ``l`` and
an unnormalized output ``acc``, all rescaled whenever the maximum grows. The score matrix (``seq²``
per head) never leaves the chip; the output is divided by ``l`` once at the end.

Scores are kept in base 2 (``S · scale · log₂e``) so that the exponentials are ``exp2``, one
instruction on the GPU. With ``causal=True`` key ``j`` is visible to query ``i`` when ``j <= i``
(the top-left alignment of ``torch``'s ``is_causal``): the blocks left of a program's diagonal run
without a mask, only the diagonal blocks with one.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from course import runtime

LOG2E = 1.4426950408889634


@triton.jit
def softmax_step(m_i, l_i, acc, s, v):
    """One block of keys: ``s`` the block's scores in base 2 (``[BLOCK_M, BLOCK_N]``, -inf where
    masked), ``v`` its values. Returns the new running maximum, sum and unnormalized output."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)  # how much the old terms shrink under the new maximum
    p = tl.exp2(s - m_new[:, None])
    l_new = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_new, acc


@triton.jit
def _key_block(q, k_base, v_base, start, rows, S_K, stride_ks, stride_kd, stride_vs, stride_vd, qk_scale,
               m_i, l_i, acc, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
               CAUSAL: tl.constexpr, STEP: tl.constexpr):
    cols = start + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    k_ptrs = k_base + cols[None, :] * stride_ks + d[:, None] * stride_kd  # Kᵀ: [HEAD_DIM, BLOCK_N]
    v_ptrs = v_base + cols[:, None] * stride_vs + d[None, :] * stride_vd
    if MASKED:
        k = tl.load(k_ptrs, mask=cols[None, :] < S_K, other=0.0)
        v = tl.load(v_ptrs, mask=cols[:, None] < S_K, other=0.0)
    else:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    s = tl.dot(q, k) * qk_scale
    if MASKED:
        visible = cols[None, :] < S_K
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, s, float("-inf"))
    return STEP(m_i, l_i, acc, s, v)


@triton.jit
def key_bounds(pid_m, S_K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """The keys query block ``pid_m`` reads: ``[0, full_end)`` whole blocks without a mask, then
    ``[full_end, end)`` with one (the diagonal, or the last partial block)."""
    full_end = S_K // BLOCK_N * BLOCK_N
    end = S_K
    if CAUSAL:  # keys left of the block's first row are visible to all its rows
        full_end = tl.minimum(full_end, pid_m * BLOCK_M // BLOCK_N * BLOCK_N)
        end = tl.minimum(end, (pid_m + 1) * BLOCK_M)
    return full_end, end


@triton.jit
def attention_kernel(Q, K, V, O, LSE, sm_scale, H, GROUP, S_Q, S_K,
                     stride_qb, stride_qh, stride_qs, stride_qd, stride_kb, stride_kh, stride_ks, stride_kd,
                     stride_vb, stride_vh, stride_vs, stride_vd, stride_ob, stride_oh, stride_os, stride_od,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                     STEP: tl.constexpr = softmax_step):
    num_m = tl.cdiv(S_Q, BLOCK_M)
    pid_m = tl.program_id(0)
    if CAUSAL:  # the longest rows (most keys) first, so that the short ones fill the last wave
        pid_m = num_m - 1 - pid_m
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qs + d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=rows[:, None] < S_Q, other=0.0)
    k_base = K + b * stride_kb + h // GROUP * stride_kh  # GROUP query heads share one key/value head
    v_base = V + b * stride_vb + h // GROUP * stride_vh
    qk_scale = sm_scale * 1.4426950408889634  # scores in base 2: exp(x) = exp2(x log2 e)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full_end, end = key_bounds(pid_m, S_K, BLOCK_M, BLOCK_N, CAUSAL)
    for start in range(0, full_end, BLOCK_N):
        m_i, l_i, acc = _key_block(q, k_base, v_base, start, rows, S_K, stride_ks, stride_kd, stride_vs, stride_vd,
                                   qk_scale, m_i, l_i, acc, HEAD_DIM, BLOCK_N, False, CAUSAL, STEP)
    # the diagonal, or the last partial block: one or two steps, not worth a pipeline's shared memory
    for start in tl.range(full_end, end, BLOCK_N, num_stages=1):
        m_i, l_i, acc = _key_block(q, k_base, v_base, start, rows, S_K, stride_ks, stride_kd, stride_vs, stride_vd,
                                   qk_scale, m_i, l_i, acc, HEAD_DIM, BLOCK_N, True, CAUSAL, STEP)
    out = acc / l_i[:, None]
    o_ptrs = O + b * stride_ob + h * stride_oh + rows[:, None] * stride_os + d[None, :] * stride_od
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=rows[:, None] < S_Q)
    if LSE is not None:  # log2 of each row's softmax denominator, for the backward (course.attention_backward)
        tl.store(LSE + tl.program_id(1) * S_Q + rows, m_i + tl.log2(l_i), mask=rows < S_Q)


# The same kernel with the lengths left as run-time values, for a length of 1: Triton compiles an int
# argument equal to 1 as a constant, and ptxas (Triton 3.6, sm_90) crashed on that kernel. Every other
# length keeps the specialization, 1-4 % faster (H100, d = 128).
_attention_kernel_any_length = triton.jit(do_not_specialize=["S_Q", "S_K"])(attention_kernel.fn)


def config_for(head_dim: int, causal: bool, element_size: int = 2) -> dict:
    """Blocks, warps and pipeline stages for :func:`attention` (a GPU's; the interpreter takes 16 x 16)
    with inputs of ``element_size`` bytes."""
    if runtime.INTERPRET:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    return gpu_config(head_dim, element_size)


def gpu_config(head_dim: int, element_size: int = 2) -> dict:
    """:func:`config_for`'s choice on a GPU (what :func:`build` compiles with on any machine)."""
    if head_dim <= 128:  # best of 8 configs on an H100 at seq 8192, bf16: 1.38-1.53x of SDPA (notes/fusion.md)
        return dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3)
    if element_size > 2:  # float32 at 256: K and V blocks of 64 KB each would not fit twice
        return dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=1)
    return dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)  # 256: K and V blocks of 32 KB each


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              scale: float | None = None, step=None, config: dict | None = None, kernel: str = "auto") -> torch.Tensor:
    """``softmax(q kᵀ · scale (+ causal mask)) v`` per batch and head, by :func:`attention_kernel` or,
    on an H100 where it is faster, by the warp-specialized Gluon kernel of :mod:`course.attention_gluon`.

    ``q``: (batch, heads, seq_q, head_dim); ``k``, ``v``: (batch, kv_heads, seq_k, head_dim) where
    ``kv_heads`` divides ``heads`` (grouped-query attention: query head ``h`` reads key/value head
    ``h // (heads // kv_heads)``; ``kv_heads = 1`` is multi-query attention). One dtype, float16 or
    bfloat16 (float32 also runs: TF32 on a GPU's tensor cores); ``head_dim`` a power of two from 16
    to 256; any strides. ``scale``: default ``1 / sqrt(head_dim)``, as torch's
    ``scaled_dot_product_attention`` (whose ``enable_gqa=True`` this matches). ``step``: the
    ``@triton.jit`` online-softmax update (default :func:`softmax_step`). ``config``: override
    :func:`config_for`. ``kernel``: "auto" (the Gluon kernel where ``attention_gluon.plan`` takes
    it: an sm_90 GPU, 16-bit inputs, head dim 128 or 64 from 2k keys, 128 query rows or more, no
    ``step`` or ``config``), "triton" or "gluon" (which raises where it cannot run, saying why). Forward only: for gradients,
    :func:`course.attention_backward.attention`.

        >>> q = torch.randn(1, 2, 40, 16, dtype=torch.float16, device=runtime.DEVICE)
        >>> attention(q, q, q, causal=True).shape
        torch.Size([1, 2, 40, 16])
    """
    check_inputs(q, k, v)
    if step is not None and not hasattr(step, "fn"):
        raise TypeError("attention: step must be a @triton.jit function (m_i, l_i, acc, s, v) -> (m, l, acc)")
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        raise RuntimeError("attention: q, k or v requires a gradient, and this forward kernel computes none; for "
                           "gradients call course.attention_backward.attention (the same arguments, without step= "
                           "and config=), or run this one under torch.no_grad()")
    return _launch(q, k, v, causal, scale, step, config, with_lse=False, kernel=kernel)[0]


def check_inputs(q, k, v) -> None:
    """Raise a ``ValueError`` or ``TypeError`` naming the argument where ``q``, ``k``, ``v`` are not
    what :func:`attention` takes."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"attention: {name} must be a 4-D tensor (batch, heads, seq, head_dim)")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"attention: q, k and v must share a dtype of float16, bfloat16 or float32; got {q.dtype}, "
                        f"{k.dtype}, {v.dtype}")
    B, H, _, D = q.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"attention: q is {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: k and v must be "
                         "(batch, kv_heads, seq_k, head_dim) with q's batch and head_dim")
    if k.shape[1] == 0:
        raise ValueError(f"attention: k and v have no heads (k is {tuple(k.shape)}): pass at least one key/value head")
    if H % k.shape[1]:
        raise ValueError(f"attention: q has heads={H} and k, v have heads={k.shape[1]}: the key/value heads must divide "
                         "the query heads (grouped-query attention), or equal them")
    if D < 16 or D > 256 or D & (D - 1):
        raise ValueError(f"attention: head_dim={D}; pass a power of two from 16 to 256 (pad the heads otherwise)")
    if not (q.device == k.device == v.device):
        raise ValueError("attention: q, k and v must be on one device")
    if max(q.numel(), k.numel()) >= 2**31:
        raise ValueError(f"attention: q has {q.numel():,} elements and k {k.numel():,}; the kernels index in 32 bits, "
                         "so each must stay under 2^31: split the batch into several calls")


def packs_heads(heads: int, kv_heads: int, causal: bool) -> bool:
    """Whether :func:`forward` gives one program rows of several query heads: without a mask the
    rows of a group's query heads are independent, and sharing a program reads each key/value block
    once per group instead of once per head (decoding has one row per head)."""
    return kv_heads < heads and not causal


def empty_output(q: torch.Tensor, kv_heads: int, causal: bool) -> torch.Tensor:
    """The output :func:`forward` writes, (batch, heads, seq_q, head_dim), stored as (batch, seq_q,
    heads, head_dim), so that a model's next ``transpose(1, 2).reshape(batch, seq_q, -1)`` is a view,
    not a copy (contiguous where :func:`packs_heads`, which needs each head's rows together)."""
    B, H, S_Q, D = q.shape
    if packs_heads(H, kv_heads, causal):
        return q.new_empty(B, H, S_Q, D)
    return q.new_empty(B, S_Q, H, D).transpose(1, 2)


def forward(q, k, v, *, causal: bool = False, scale: float | None = None, step=None, config: dict | None = None,
            with_lse: bool = False, kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`attention`'s output and, with ``with_lse=True``, each row's log-sum-exp in base 2
    (``log2 Σ_j 2^(s_j · log₂e)``, float32, (batch, heads, seq_q)): what the backward needs to
    recompute the probabilities. Without the gradient path; inputs as :func:`attention` takes them."""
    check_inputs(q, k, v)
    return _launch(q, k, v, causal, scale, step, config, with_lse, kernel)


def _gluon_options(q, k, v, causal, scale, step, config, kernel) -> dict | None:
    """``attention_gluon.forward``'s options where ``kernel`` picks the Gluon kernel, else None."""
    from course import attention_gluon

    if kernel not in ("auto", "triton", "gluon"):
        raise ValueError(f"attention: kernel={kernel!r}; pass 'auto', 'triton' or 'gluon'")
    if kernel == "triton" or (kernel == "auto" and (step is not None or config is not None)):
        return None
    why = attention_gluon.unsupported(q, k, v)
    if why is None and scale is not None and not scale > 0:  # its running maximum is taken before scaling
        why = f"it takes a scale above 0, not {scale}"
    if kernel == "gluon":
        if step is not None or config is not None:
            raise ValueError("attention: step= and config= are the Triton kernel's; drop them, or pass kernel='triton'")
        if why is not None:
            raise ValueError(f"attention: kernel='gluon' cannot run here: {why}; pass kernel='auto' or 'triton'")
        return {}
    if why is not None:
        return None
    return attention_gluon.plan(q.shape[-1], causal, q.shape[2], k.shape[2], grouped=k.shape[1] < q.shape[1])


def _launch(q, k, v, causal, scale, step, config, with_lse, kernel="auto"):
    """:func:`forward` on inputs :func:`check_inputs` has passed."""
    B, H, S_Q, D = q.shape
    H_KV, S_K = k.shape[1], k.shape[2]
    gluon_options = _gluon_options(q, k, v, causal, scale, step, config, kernel)
    out = empty_output(q, H_KV, causal)
    lse = torch.empty(B, H, S_Q, device=q.device, dtype=torch.float32) if with_lse else None
    if S_Q == 0 or B * H == 0:
        return out, lse
    if S_K == 0:
        raise ValueError("attention: k and v have no keys (seq_k = 0): softmax over nothing is undefined")
    scale = scale if scale is not None else 1 / math.sqrt(D)
    if gluon_options is not None:
        from course import attention_gluon

        attention_gluon.forward(q, k, v, out, lse, causal, scale, **gluon_options)
        return out, lse
    group = H // H_KV
    rows_q, heads = S_Q, H
    out_rows = out
    if packs_heads(H, H_KV, causal):
        rows_q, heads, group = group * S_Q, H_KV, 1
        q, out_rows = q.reshape(B, H_KV, rows_q, D), out.view(B, H_KV, rows_q, D)
    config = dict(config or config_for(D, causal, q.element_size()))
    block_m = config.pop("BLOCK_M")
    grid = (triton.cdiv(rows_q, block_m), B * heads)
    extra = {} if step is None else {"STEP": step}
    kernel = _attention_kernel_any_length if 1 in (rows_q, S_K) else attention_kernel
    kernel[grid](q, k, v, out_rows, lse, scale, heads, group, rows_q, S_K, *q.stride(), *k.stride(), *v.stride(),
                 *out_rows.stride(), HEAD_DIM=D, BLOCK_M=block_m, CAUSAL=bool(causal), **extra, **config)
    return out, lse


@triton.jit
def _bounds_kernel(full_ptr, end_ptr, S_K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    full_end, end = key_bounds(tl.program_id(0), S_K, BLOCK_M, BLOCK_N, CAUSAL)
    tl.store(full_ptr + tl.program_id(0), full_end)
    tl.store(end_ptr + tl.program_id(0), end)


def key_blocks(S_Q: int, S_K: int, block_m: int, block_n: int, causal: bool) -> torch.Tensor:
    """Per (query block, key block): 0 not read, 1 read whole, 2 read with a mask, as
    :func:`attention_kernel` reads them (from :func:`key_bounds`, run in a kernel)."""
    num_m, num_n = triton.cdiv(S_Q, block_m), triton.cdiv(S_K, block_n)
    full_end, end = (torch.zeros(num_m, dtype=torch.int32, device=runtime.DEVICE) for _ in range(2))
    _bounds_kernel[(num_m,)](full_end, end, S_K, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal)
    start = torch.arange(num_n) * block_n
    full_end, end = full_end.cpu()[:, None], end.cpu()[:, None]
    return torch.where(start < full_end, 1, torch.where(start < end, 2, 0))


def benchmark(seqs=(1024, 2048, 4096, 8192, 16384), head_dims=(64, 128), tokens: int = 16384, heads: int = 16,
              dtype=torch.bfloat16) -> list[dict]:
    """GPU time of :func:`attention` and of torch's ``scaled_dot_product_attention`` on its flash backend
    (FlashAttention-2) and on its cuDNN backend, causal and not, batch ``tokens // seq``: one row per
    (head_dim, causal, seq). Where the cuDNN backend raises (not built in, or the shape unsupported), a
    note is printed and the row has no ``cudnn_ms``."""
    from course import timing

    rows = []
    for head_dim in head_dims:
        for causal in (False, True):
            for seq in seqs:
                batch, q, k, v = _benchmark_inputs(tokens, heads, seq, head_dim, dtype)
                calls = _sdpa_calls(q, k, v, causal, {"sdpa": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION"})
                calls["ours"] = lambda: attention(q, k, v, causal=causal, kernel="triton")
                medians = timing.in_turns(calls)
                torch_ms, ms = medians["sdpa"], medians["ours"]
                work = flops(batch, heads, seq, head_dim, causal)
                row = dict(head_dim=head_dim, causal=causal, seq=seq, batch=batch, heads=heads, ms=ms,
                           sdpa_ms=torch_ms, ratio=torch_ms / ms, tflops=work / ms / 1e9,
                           sdpa_tflops=work / torch_ms / 1e9)
                if "cudnn" in medians:
                    row.update(cudnn_ms=medians["cudnn"], cudnn_tflops=work / medians["cudnn"] / 1e9)
                rows.append(row)
    return rows


def _benchmark_inputs(tokens, heads, seq, head_dim, dtype):
    """(batch, q, k, v) of a benchmark row: ``tokens // seq`` sequences of random bf16/fp16 values."""
    batch = max(1, tokens // seq)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device=runtime.DEVICE, dtype=dtype) for _ in range(3))
    return batch, q, k, v


def _sdpa_calls(q, k, v, causal, backends: dict) -> dict:
    """``{label: call}``: torch's ``scaled_dot_product_attention`` restricted to each backend of ``backends``
    ({label: SDPBackend member name}) that runs these inputs; one that raises (not built in, or the shape
    refused) is noted and left out."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    calls = {}
    for label, name in backends.items():
        backend = getattr(SDPBackend, name, None)

        def call(backend=backend):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        try:
            if backend is None:
                raise RuntimeError(f"this torch has no SDPBackend.{name}")
            call()
            torch.cuda.synchronize()
            calls[label] = call
        except RuntimeError as error:
            reason = (str(error).strip().splitlines() or ["no reason given"])[0][:120]
            print(f"note: torch's {label} attention skipped (d={q.shape[-1]}, causal={causal}, seq={q.shape[2]}):",
                  reason)
    return calls


def benchmark_hopper(seqs=(1024, 4096, 8192, 16384), head_dims=(64, 128), tokens: int = 16384, heads: int = 16,
                     dtype=torch.bfloat16) -> list[dict]:
    """GPU time of every SDPA backend torch has here (flash, efficient, cuDNN), of :func:`attention_kernel`
    ("Triton"), of the Gluon kernel with each of ``attention_gluon.TECHNIQUES`` and of :func:`attention`
    as it runs ("course": the kernel ``attention_gluon.plan`` picks), causal and not, batch
    ``tokens // seq``: one row per (head_dim, causal, seq) with each one's TFLOP/s. A backend that
    raises is noted and left out."""
    from course import attention_gluon, timing

    rows = []
    for head_dim in head_dims:
        for causal in (False, True):
            for seq in seqs:
                batch, q, k, v = _benchmark_inputs(tokens, heads, seq, head_dim, dtype)
                out = empty_output(q, heads, causal)
                scale = 1 / math.sqrt(head_dim)
                calls = _sdpa_calls(q, k, v, causal, {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                                                      "cuDNN": "CUDNN_ATTENTION"})
                calls["Triton"] = lambda: attention(q, k, v, causal=causal, kernel="triton")
                for name, options in attention_gluon.TECHNIQUES.items():
                    calls[name] = (lambda o: lambda: attention_gluon.forward(q, k, v, out, None, causal, scale,
                                                                             **o))(options)
                calls["course"] = lambda: attention(q, k, v, causal=causal)
                medians = timing.in_turns(calls)
                work = flops(batch, heads, seq, head_dim, causal)
                rows.append(dict(head_dim=head_dim, causal=causal, seq=seq, batch=batch, heads=heads,
                                 tflops={name: work / ms / 1e9 for name, ms in medians.items()}))
    return rows


def hopper_table(rows: list[dict]) -> str:
    """:func:`benchmark_hopper`'s rows as a text table: TFLOP/s per kernel (torch's backends, then the
    course's), and the last column "course" over the fastest of torch's backends on that row."""
    names = list(rows[0]["tflops"])
    widths = [max(9, len(n)) for n in names]
    torch_names = [n for n in ("flash", "efficient", "cuDNN") if n in names]

    def span(title, group):  # a dashed title over the columns of ``group`` (blank where it has none)
        width = sum(w + 1 for n, w in zip(names, widths) if n in group) - 1
        return f"{title:-^{width}s}" if width >= len(title) else " " * max(width, 0)

    gluon_names = [n for n in names if n not in torch_names and n not in ("Triton", "course")]
    triton_gap = " " * (widths[names.index("Triton")] if "Triton" in names else 0)
    head = f"{'':18s} {span(' torch ', torch_names)} {triton_gap} {span(' Gluon ', gluon_names)}"
    lines = [head, f"{'d':>4s} {'causal':>6s} {'seq':>6s} " + " ".join(f"{n:>{w}s}" for n, w in zip(names, widths))
             + "   course / best torch"]
    for r in rows:
        t = r["tflops"]
        best = max(torch_names, key=lambda n: t.get(n, 0))
        lines.append(f"{r['head_dim']:4d} {r['causal']!s:>6s} {r['seq']:6d} "
                     + " ".join(f"{t.get(n, 0):{w}.0f}" for n, w in zip(names, widths))
                     + f"   {t['course'] / t[best]:5.2f} ({best})")
    return "\n".join(lines)


def build(head_dim: int = 128, causal: bool = False, seq: int = 8192):
    """:func:`attention_kernel` compiled for an H100 (a ``course.compile.Build``, on any machine), bf16,
    with its GPU configuration (:func:`gpu_config`), for 16 heads of ``seq`` tokens."""
    from course import compile

    x = torch.empty(1, 16, seq, head_dim, dtype=torch.bfloat16)
    return compile.build(attention_kernel, x, x, x, x, None, 0.1, 16, 1, seq, seq, *x.stride(), *x.stride(),
                         *x.stride(), *x.stride(), HEAD_DIM=head_dim, CAUSAL=causal, **gpu_config(head_dim))


# FlashAttention-3's forward pass as its paper publishes it (Shah et al., 2024, arXiv:2407.08608, the
# figure of forward speed on an H100 80GB SXM5): FP16, head dim 128, no causal mask, 16k tokens, with
# batch x seq = 16k and 16 heads of 128, the shapes of :func:`benchmark`. The abstract's "up to 740
# TFLOP/s" is head dim 256.
FA3_PUBLISHED_TFLOPS = {"head_dim": 128, "causal": False, "seq": 16384, "tflops": 648.0}


def fastest_torch(row: dict) -> tuple[str, float]:
    """The fastest of torch's backends measured in ``row`` (a :func:`benchmark` row): its name and
    TFLOP/s. A row without ``cudnn_tflops`` (an older record) has only the flash backend."""
    best = ("flash", row["sdpa_tflops"])
    if row.get("cudnn_tflops") is not None and row["cudnn_tflops"] > best[1]:
        best = ("cuDNN", row["cudnn_tflops"])
    return best


def reference(q, k, v, *, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """:func:`attention` in float64 on the CPU, writing the whole score matrix (differentiable: the
    backward's reference too). Fewer key/value heads than query heads are repeated to match."""
    q, k, v = (t.double().cpu() for t in (q, k, v))
    k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> float:
    """Multiply-adds of the two products, times two (half of them under a causal mask)."""
    return 4 * batch * heads * seq * seq * head_dim / (2 if causal else 1)


def score_bytes(batch: int, heads: int, seq: int, element_bytes: int = 2) -> int:
    """Bytes of the score matrix an unfused attention writes and reads back (once each, per pass)."""
    return batch * heads * seq * seq * element_bytes
