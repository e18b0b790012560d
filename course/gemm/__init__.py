"""The course's GEMM: ``matmul`` and ``matmul_int8``, launched from the host.

    c = matmul(a, b)                                # C = A @ B, any strides, fp16/bf16/fp32/fp8
    c = matmul(a, b, bias=bias, mode="streamk")     # + bias per output column, Stream-K schedule
    c = matmul_int8(a8, b8, a_scale, b_scale, bias) # int8 x int8 -> int32, scaled, bf16 out

Modes (``choose_mode`` picks one for ``"auto"``):

* ``"persistent"``: one program per SM loops over the output tiles.
* ``"streamk"``: the full waves of tiles as in persistent; the tiles of the last, partial wave
  are split along K among several programs, which add their partial sums.
* ``"tail"``: two persistent launches: whole waves of big tiles, then the strip left over in
  tiles a quarter the size, so the last wave is short.
* ``"gluon"``: Hopper only, the warp-specialized kernel of ``course.gemm.gluon``, whose tiles
  (192 x 128, 128 x 144, 128 x 320) are no powers of two, for shapes that Triton's tiles fill badly.

Where things live: this module, the public functions and the way of one call (checks, copies,
decisions, launch); then

* ``course.gemm.kernel``: the device side, one kernel built from ``course.stages``;
* ``course.gemm.config``: the choice of tiles and schedule, functions of the shape and the GPU;
* ``course.gemm.layout``: how operands are read (TMA or pointers, aligned copies, 64-bit offsets);
* ``course.gemm.inputs``: the checks that turn a bad argument into a clear error;
* ``course.gemm.launcher``: a compiled kernel launched again without Triton's per-call work;
* ``course.gemm.gluon``: the Hopper kernel in Gluon that ``mode="gluon"`` (and auto, where it pays) runs;
* ``course.gemm.plans``: the launch itself (a plan cached per operand layout, Stream-K workspaces,
  the tail split's two launches, autotuning) and the routes that replay a call whose checks and
  decisions hold: the production detail, a reader may skip it; ``course.gemm.layout_key``, the
  routes' key compiled (once, by ``python -m course.gemm``), is part of it.
"""

import torch

from course import runtime
from course.gemm import gluon as gluon_gemm, plans
from course.gemm.config import (FP8, OUT_DTYPES, Config, TailPlan, choose_mode, gluon_tiles_for, heuristic_config,
                                 sm_count, streamk_programs_for, streamk_tiles_for, supported_dtypes, tail_plan_for,
                                 unaligned_decode_config)
from course.gemm.inputs import (check_dtype, check_no_grad, check_no_overlap, check_out, check_pair, check_vector,
                                resolve_config, resolved)
from course.gemm.layout import aligned_copies_for, aligned_copy, aligned_operands

# The public API (the configuration helpers are re-exported from course.gemm.config and course.gemm.layout).
__all__ = ["Config", "TailPlan", "matmul", "matmul_int8", "heuristic_config", "choose_mode", "streamk_tiles_for",
           "streamk_programs_for", "tail_plan_for", "gluon_tiles_for", "aligned_copies_for", "aligned_copy",
           "aligned_operands", "unaligned_decode_config", "MODES", "supported_dtypes", "sm_count"]

MODES = ("auto", "persistent", "streamk", "tail", "gluon")


def matmul(a: torch.Tensor, b: torch.Tensor, *, bias: torch.Tensor | None = None, out_dtype=None,
           mode: str = "auto", config: Config | dict | None = None, autotune: bool = False,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b (+ bias)`` with a persistent or Stream-K GEMM built on ``course.stages``.

    ``a``: (M, K), ``b``: (K, N), same dtype: float16, bfloat16 (GPU), float32 (TF32 on a GPU's
    tensor cores) or fp8 e4m3/e5m2 (sm_89+ GPUs). Any strides (transposed or sliced views) work
    without copies; only rows TMA cannot read (no multiple of 16 bytes long) or reads slowly (16
    bytes off a 32-byte sector) are copied into aligned ones, on a GPU and where that pays
    (:func:`aligned_copies_for`). ``bias``: length N, added to every row. ``out_dtype``: float16,
    bfloat16 or float32 (default: the input dtype; bfloat16 for fp8). ``mode``: "auto", "persistent",
    "streamk", "tail" or "gluon" (see the module docstring; "gluon" needs an sm_90 GPU, 16-bit
    inputs and output and a row-major ``a``). ``config``: a :class:`Config` (default:
    :func:`heuristic_config`).
    ``autotune=True`` times a few configs on the GPU once per shape and keeps the fastest.
    ``out``: write into this (M, N) tensor instead of a new one.

    Edges (the same for :func:`matmul_int8`): an ``out`` that shares memory with ``a``, ``b``,
    ``bias`` or a scale, or whose own elements share a location, is refused with a ValueError, as
    torch refuses such ``out=`` arguments, rather than computed through a hidden temporary (see
    ``check_no_overlap``). K = 0 gives zeros (+ bias) and M = 0 or N = 0 an empty result, as
    ``torch.mm``. Lazy negation views (``torch._neg_view``) are resolved before the raw memory is
    read. There is no backward: in grad mode, inputs that require grad are refused (call it under
    ``torch.no_grad()``). Operands whose element offsets reach 2^31 run with 64-bit offsets
    (``layout.wide_strides``); dimensions must stay below 2^31. Stream-K launches on different CUDA
    streams each get their own workspace (``plans.workspace``), so they may run at the same time.

        >>> a = torch.randn(64, 32, dtype=torch.float16, device=runtime.DEVICE)
        >>> b = torch.randn(32, 48, dtype=torch.float16, device=runtime.DEVICE)
        >>> matmul(a, b).shape
        torch.Size([64, 48])
    """
    key = plans.call_key((a, b, bias, out), ("matmul", out_dtype, mode, config, autotune))
    route = plans.ROUTES.get(key) if key is not None else None
    if route is not None:  # a call like an earlier one: its checks and decisions hold (about 10 us)
        return route(a, b, bias, out)
    check_pair(a, b)
    check_dtype(a.dtype)
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: pass one of {', '.join(map(repr, MODES))}")
    if out_dtype is None:
        out_dtype = torch.bfloat16 if a.dtype in FP8 else a.dtype
    return _run(a, b, out_dtype, mode, config, autotune, out, key, bias=bias)


def matmul_int8(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
                bias: torch.Tensor | None = None, out_dtype=torch.bfloat16, *, mode: str = "auto",
                config: Config | dict | None = None, autotune: bool = False,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """Quantized GEMM: ``(a @ b) * a_scale[:, None] * b_scale[None, :] (+ bias)`` in ``out_dtype``.

    ``a``: (M, K) int8, ``b``: (K, N) int8 (fastest stored K-major, i.e. ``b = w.T`` for a
    row-major ``w`` of shape (N, K)); products accumulate exactly in int32. ``a_scale``: float32,
    length M (one per row of a); ``b_scale``: float32, length N (one per column of b);
    ``bias``: length N. ``out_dtype``: bfloat16 (default), float16 or float32.

        >>> a = torch.randint(-8, 8, (32, 64), dtype=torch.int8, device=runtime.DEVICE)
        >>> b = torch.randint(-8, 8, (64, 16), dtype=torch.int8, device=runtime.DEVICE)
        >>> ones = lambda n: torch.ones(n, device=runtime.DEVICE)
        >>> matmul_int8(a, b, ones(32), ones(16), out_dtype=torch.float32).shape
        torch.Size([32, 16])
    """
    key = plans.call_key((a, b, bias, out, a_scale, b_scale), ("int8", out_dtype, mode, config, autotune))
    route = plans.ROUTES.get(key) if key is not None else None
    if route is not None:
        return route(a, b, bias, out, a_scale, b_scale)
    check_pair(a, b)
    if a.dtype != torch.int8:
        raise TypeError(f"matmul_int8 takes int8 a and b, got {str(a.dtype).replace('torch.', '')}: "
                        "quantize first, or call matmul for floating-point inputs")
    if mode == "gluon":
        raise ValueError("mode='gluon' takes float16 or bfloat16 inputs, not int8: pass mode='auto' "
                         "(or 'persistent', 'streamk', 'tail')")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: pass one of {', '.join(map(repr, MODES))}")
    M, K = a.shape
    N = b.shape[1]
    if a_scale is None or b_scale is None:
        raise TypeError("matmul_int8 needs a_scale (float32, length M) and b_scale (float32, length N); "
                        "for unscaled int8 products pass torch.ones(M) and torch.ones(N)")
    check_vector("a_scale", a_scale, M, "M", (torch.float32,), a.device)
    check_vector("b_scale", b_scale, N, "N", (torch.float32,), a.device)
    return _run(a, b, out_dtype, mode, config, autotune, out, key, a_scale=a_scale, b_scale=b_scale, bias=bias)


def _run(a, b, out_dtype, mode, config, autotune, out, key, *, bias=None, **scales) -> torch.Tensor:
    """What matmul and matmul_int8 share once their inputs are checked: the output and bias
    checks, the output allocation, the configuration (heuristic or autotuned) and the launch.
    ``key``: the call's ``plans.call_key``, under which the launches are kept for the next such call
    (None: nothing is kept)."""
    M, K = a.shape
    N = b.shape[1]
    if bias is not None:
        check_vector("bias", bias, N, "N", (torch.float32, torch.float16, torch.bfloat16), a.device)
        if runtime.INTERPRET and bias.dtype == torch.bfloat16:
            raise TypeError("bias is bfloat16, which Triton's CPU interpreter cannot add: use bias.float()")
    if out_dtype not in OUT_DTYPES:
        if not isinstance(out_dtype, torch.dtype):
            raise TypeError(f"out_dtype={out_dtype!r} is a {type(out_dtype).__name__}, not a torch.dtype: pass "
                            "torch.float16, torch.bfloat16 or torch.float32")
        raise TypeError(f"out_dtype={out_dtype}: pass torch.float16, torch.bfloat16 or torch.float32")
    if runtime.INTERPRET and out_dtype == torch.bfloat16:
        raise TypeError("out_dtype=torch.bfloat16 does not work under Triton's CPU interpreter: "
                        "pass out_dtype=torch.float16 or torch.float32 on the CPU")
    if out is not None:
        check_out(out, M, N, out_dtype, a.device)
    check_no_grad((("a", a), ("b", b), ("bias", bias), ("out", out)) + tuple(scales.items()))
    given = (a, b, bias, *scales.values())
    a, b, bias = resolved(a), resolved(b), resolved(bias)
    scales = {name: resolved(scale) for name, scale in scales.items()}
    as_given = all(t is u for t, u in zip(given, (a, b, bias, *scales.values())))
    c = out if out is not None else torch.empty((M, N), device=a.device, dtype=out_dtype)
    if out is not None and M and N:
        check_no_overlap(out, (("a", a), ("b", b), ("bias", bias)) + tuple(scales.items()))
    if not (M and N and K):  # an empty product: nothing to read, and for K = 0, C = 0 (+ bias), as torch.mm
        if M and N:
            if bias is None:
                c.zero_()
            else:
                c.copy_(bias.expand(M, N))
        return c
    a, b, work, copied = aligned_operands(a, b, c, runtime.INTERPRET)
    if c.is_neg():  # a lazily negated out (torch._neg_view): its raw memory holds -C; copy_ resolves it
        work = torch.empty((M, N), device=a.device, dtype=out_dtype)
    gluon_choice = plans.gluon_choice(a, b, work, mode, config, autotune)
    if gluon_choice is not None:
        tile, swap = gluon_choice
        if bias is not None and bias.stride(0) != 1:  # the Gluon kernel reads a contiguous bias
            bias = bias.contiguous()
            as_given = False
        wide = gluon_gemm.wide_launch(a, b, work, bias, swap, sm_count(), tile=tile)
        wide(a, b, work, bias)
        route = lambda a, b, c, bias, a_scale, b_scale: wide(a, b, c, bias)  # noqa: E731
        route.addressed = wide.addressed
    else:
        if autotune and config is None and not runtime.INTERPRET:
            config, mode = plans.autotuned(a, b, work, mode, bias=bias, **scales)
        if config is None and not runtime.INTERPRET:
            config = unaligned_decode_config(a, b)
        config = resolve_config(config, M, N, K, a.dtype)
        route = plans.launch(a, b, work, config, mode, bias=bias, **scales)
    if work is not c:
        c.copy_(work)
    elif key is not None and as_given and not runtime.INTERPRET and not copied:
        operands = (out, a, b, bias, scales.get("a_scale"), scales.get("b_scale"))
        plans.cached(plans.ROUTES, key, lambda: plans.again(route, M, N, out_dtype, operands))
    return c

