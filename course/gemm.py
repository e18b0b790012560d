"""GEMM launchers built on ``course.stages``: persistent, Stream-K, quantized.

One kernel does all of it; the host side checks the inputs, picks a configuration and a mode,
and launches it::

    c = matmul(a, b)                                # C = A @ B, any strides, fp16/bf16/fp32/fp8
    c = matmul(a, b, bias=bias, mode="streamk")     # + bias per output column, Stream-K schedule
    c = matmul_int8(a8, b8, a_scale, b_scale, bias) # int8 x int8 -> int32, scaled, bf16 out

Modes:

* ``"persistent"``: ``num_sms`` programs loop over the output tiles (``persistent_tile_range``).
* ``"streamk"``: hybrid. The full waves of tiles go to the persistent loop, the tiles of the last,
  partial wave are cut into K-iterations shared evenly by as many programs as give each one
  K-chunk of one tile (``iter_range``, ``streamk_programs_for``), and the programs that share a
  tile add their partial sums (``streamk_fixup``).
* ``"tail"``: two persistent launches. The main part of C, whole rows (or columns) of tiles that
  fill whole waves of SMs, takes the big tiles; the strip left over takes tiles a quarter the size
  (``tail_plan_for``), so the last wave is short instead of as long as a full one.
* ``"gluon"``: Hopper only: the warp-specialized Gluon kernel of ``course.gluon_gemm``, whose
  192 x 128, 128 x 144 and 128 x 320 tiles are no powers of two (warpgroups of 64 rows), for shapes
  where Triton's tiles fill the SMs' waves badly (1536^3, 3072^3, 512 x 6144 x 4096, 512 x 10240 x
  8192). Not built on stages.
* ``"auto"``: the Gluon kernel, Stream-K or the tail split when the last wave would leave many
  SMs idle (wave quantization), else persistent (``choose_mode``).

On Hopper (sm_90) tiles move through tensor descriptors (TMA, the bulk copy engine) when the
layouts allow it (a unit stride, 16-byte aligned rows). The host builds the descriptors
(``TensorDescriptor``) and passes them in place of the pointers; ``DescriptorView`` has the same
``load(tile)`` as the stages ``InputView``, so the same stages K loop (``GemmContext.reduce_tile``)
runs on either, and ``DescriptorOutputView`` has the same ``store`` (epilogue, then a TMA store).
A :class:`Config` can turn TMA off (``heuristic_config`` does for decode, where pointer loads
measured faster); other layouts, other GPUs and the interpreter use pointer loads (any strides).
Rows that TMA cannot read (a row stride that is no multiple of 16 bytes, e.g. K = 4014 in bf16)
are slow either way, and 16-bit rows that start 16 bytes into a 32-byte sector (e.g. K = 3000) slow
TMA down, so on a GPU ``matmul`` copies such operands into 128-byte aligned rows first where the
product is big enough to pay for the copy (``aligned_copies_for``).
Under the interpreter (no GPU) the same launchers run on CPU tensors with tiny blocks.

What a launch needs that depends only on shapes, strides, dtypes, alignment and the
configuration (the mode, the grid, the layouts, the kernel's constants) is worked out on the
first call and cached (``_plan_for``); later calls build the descriptors and launch.
"""


import dataclasses
import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from course import gluon_gemm, runtime
from course.stages import (
    DescriptorOutputView,
    DescriptorView,
    GemmContext,
    ScheduleContext,
    make_bias_view,
    make_output_view,
    make_scale_view,
    make_tensor_view,
)

__all__ = ["Config", "TailPlan", "matmul", "matmul_int8", "heuristic_config", "choose_mode", "streamk_tiles_for",
           "streamk_programs_for", "tail_plan_for", "gluon_tiles_for", "aligned_copies_for", "aligned_copy",
           "unaligned_decode_config", "MODES",
           "supported_dtypes"]

MODES = ("auto", "persistent", "streamk", "tail", "gluon")


# ----------------------------------------------------------------------------------------------
# Device side
# ----------------------------------------------------------------------------------------------
@triton.jit
def _reduce_k_range(ctx, A, B, out_tile, k_begin, k_end, USE_TMA: tl.constexpr):
    # Descriptor views: one stages K step per iteration (the compiler pipelines the TMA loads).
    # Pointer views: the stages loop that advances pointers and masks only a ragged last step.
    if USE_TMA:
        acc = ctx.init_accumulator()
        for k in range(k_begin, k_end):
            acc = ctx.reduce_tile(A, B, out_tile, k, acc)
    else:
        acc = ctx.reduce_k_range(A, B, out_tile, k_begin, k_end)
    return acc


@triton.jit
def _matmul_kernel(A, B, C, A_scale, B_scale, bias, partials, flags,
                   M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_bias,
                   stride_sa, stride_sb,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr, STREAMK_TILES: tl.constexpr,
                   STREAMK_PROGRAMS: tl.constexpr,
                   EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, QUANTIZED: tl.constexpr,
                   ALLOW_TF32: tl.constexpr, USE_TMA: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr,
                   TMA_STORE: tl.constexpr, C_T: tl.constexpr, C_HALVES: tl.constexpr, FLATTEN: tl.constexpr,
                   WIDE: tl.constexpr):
    """C = epilogue(A @ B): persistent tiles first, then (STREAMK_TILES > 0) the Stream-K tiles.

    With USE_TMA, A and B are tensor descriptors (TMA) instead of pointers; with TMA_STORE, C is.
    WIDE: a bit per stride (``_WIDE_BITS``) that the host widened to 64 bits, because the operand's
    element offsets reach 2^31 (``_wide_strides``); 0, the usual case, leaves every offset 32-bit.
    """
    if WIDE:  # index * stride in int64 (never a unit stride: Triton passes those as the constant 1)
        if WIDE & 1:
            stride_am = stride_am.to(tl.int64)
        if WIDE & 2:
            stride_ak = stride_ak.to(tl.int64)
        if WIDE & 4:
            stride_bk = stride_bk.to(tl.int64)
        if WIDE & 8:
            stride_bn = stride_bn.to(tl.int64)
        if WIDE & 16:
            stride_cm = stride_cm.to(tl.int64)
        if WIDE & 32:
            stride_cn = stride_cn.to(tl.int64)
        if WIDE & 64:
            stride_sa = stride_sa.to(tl.int64)
        if WIDE & 128:
            stride_sb = stride_sb.to(tl.int64)
        if WIDE & 256:
            stride_bias = stride_bias.to(tl.int64)
    if USE_TMA:  # A and B arrive as tensor descriptors built on the host (see _host_descriptor)
        tensorA = DescriptorView(A, A_T)
        tensorB = DescriptorView(B, B_T)
    else:
        tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
        tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    if TMA_STORE:  # so does C
        tensorC = DescriptorOutputView(C, C_T, C_HALVES)
    else:
        tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    scale = make_scale_view(A_scale, B_scale, M, N, stride_sa, stride_sb) if QUANTIZED else None
    bias_view = make_bias_view(bias, N, stride_bias) if HAS_BIAS else None

    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, 1, GROUP_SIZE_M,
                      allow_tf32=ALLOW_TF32, even_k=EVEN_K, quantized=QUANTIZED)
    sched = ScheduleContext(M, N, K, ctx, streamk_tiles=STREAMK_TILES, streamk_programs=STREAMK_PROGRAMS)

    # Data-parallel part: whole tiles, round-robin over the programs.
    num_k = tl.cdiv(K, BLOCK_K)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in tl.range(start, total, stride, flatten=FLATTEN):
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = _reduce_k_range(ctx, tensorA, tensorB, out_tile, 0, num_k, USE_TMA)
        tensorC.store(acc, out_tile, scale=scale, bias=bias_view)

    # Stream-K part. The pieces of this program's iteration range are walked from the LAST to
    # the first: the last piece (the head of a tile that a higher program finishes) is published
    # at once, and the first piece (the tail of a tile that lower programs started) is done last,
    # when their partials are most likely ready. Walking forward chains every program to the one
    # below it (measured: 0.1-0.5x of cuBLAS instead of ~1x).
    if STREAMK_TILES > 0:
        first_iter, end_iter = sched.iter_range()
        iters = sched.iters_per_tile()
        piece_end = end_iter
        while piece_end > first_iter:
            piece_start = tl.maximum(first_iter, ((piece_end - 1) // iters) * iters)
            tile_id, k_begin, k_end = sched.streamk_span(piece_start, piece_end)
            out_tile = sched.get_tile_from_idx(tile_id)
            acc = _reduce_k_range(ctx, tensorA, tensorB, out_tile, k_begin, k_end, USE_TMA)
            acc, owner = sched.streamk_fixup(acc, tile_id, k_begin, k_end, partials, flags)
            if owner:
                tensorC.store(acc, out_tile, scale=scale, bias=bias_view)
            piece_end = piece_start


# ----------------------------------------------------------------------------------------------
# Host side: configurations
# ----------------------------------------------------------------------------------------------
_MAX_TILE_ELEMENTS = 2**20  # Triton's TRITON_MAX_TENSOR_NUMEL


@dataclasses.dataclass(frozen=True)
class Config:
    """Launch configuration: tile sizes (powers of two), warps per program, pipeline depth.

    Example: ``matmul(a, b, config=Config(128, 256, 64, num_warps=8, num_stages=3))``.
    """

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    group_size_m: int = 8
    tma: bool | None = None  # read A and B through tensor descriptors; None: wherever the layouts allow
    tma_store: bool | None = None  # write C through a tensor descriptor; None: whenever C's layout allows
    store_halves: int = 1  # TMA store in 1 or 2 pieces (2: half the staging shared memory)

    def __post_init__(self):
        # bool is an int in Python (True == 1): refused here rather than deep inside Triton
        for name in ("block_m", "block_n", "block_k"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
                raise ValueError(f"Config.{name}={v!r}: pass a power of two such as 16, 64 or 128 (an int)")
        for name in ("num_warps", "num_stages", "group_size_m"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Config.{name}={v!r}: pass a positive integer")
        if self.num_warps & (self.num_warps - 1):
            raise ValueError(f"Config.num_warps={self.num_warps}: pass a power of two (4 or 8 suit most tiles)")
        for x, y in (("block_m", "block_k"), ("block_k", "block_n"), ("block_m", "block_n")):
            if getattr(self, x) * getattr(self, y) > _MAX_TILE_ELEMENTS:
                raise ValueError(f"Config.{x} x Config.{y} = {getattr(self, x)} x {getattr(self, y)} is over "
                                 f"Triton's {_MAX_TILE_ELEMENTS} elements per tile: pass smaller blocks")
        for name in ("tma", "tma_store"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, bool):
                raise ValueError(f"Config.{name}={v!r}: pass True, False or None (None: wherever the layout allows)")
        if isinstance(self.store_halves, bool) or not isinstance(self.store_halves, int) or \
                self.store_halves not in (1, 2):
            raise ValueError(f"Config.store_halves={self.store_halves!r}: pass 1 or 2")


_DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.int8: "int8"}
_FP8 = tuple(d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d)
for _d in _FP8:
    _DTYPE_NAMES[_d] = "fp8"
_OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@functools.lru_cache(maxsize=None)
def _device_info(index: int) -> tuple:
    props = torch.cuda.get_device_properties(index)
    return props.multi_processor_count, (props.major, props.minor)


def _num_sms() -> int:
    """Programs of a persistent launch: the SM count on a GPU, a handful under the interpreter."""
    if runtime.INTERPRET:
        return 4  # enough programs to exercise Stream-K sharing, few enough to stay fast on a CPU
    return _device_info(torch.cuda.current_device())[0]


def _capability() -> tuple:
    return (0, 0) if runtime.INTERPRET else _device_info(torch.cuda.current_device())[1]


def supported_dtypes() -> list:
    """Input dtypes ``matmul`` accepts here (``matmul_int8`` takes int8)."""
    if runtime.INTERPRET:
        return [torch.float16, torch.float32]
    dts = [torch.float16, torch.bfloat16, torch.float32]
    if _capability() >= (8, 9):
        dts += list(_FP8)
    return dts


def _cdiv(a: int, b: int) -> int:
    # triton.cdiv works too, but it is a constexpr function: ~1 us a call, five calls per launch
    return -(-a // b)


_ELEMENT_SIZE = {torch.float16: 2, torch.bfloat16: 2, torch.float32: 4, torch.int8: 1,
                 **{d: 1 for d in _FP8}}


def _wave_efficiency(M, N, block_m, block_n, sms):
    tiles = _cdiv(M, block_m) * _cdiv(N, block_n)
    return tiles / (_cdiv(tiles, sms) * sms)


@functools.lru_cache(maxsize=4096)
def heuristic_config(M: int, N: int, K: int, dtype: torch.dtype) -> Config:
    """A good configuration for an ``M x N x K`` product of ``dtype`` inputs on this machine.

    Shape classes, from measurements on H100/H200 (``scratch/`` study and ``python -m course.bench
    gemm``): decode (M <= 64) streams B with short, wide-K tiles; larger problems take 128 x 256
    tiles (8 warps), which ``mode="auto"`` runs as a tail split where their waves are under 90% full
    and ``tail_plan_for`` finds a cut (2-byte types); else 128 x 128 (4 warps, 6 stages) when that
    fills the last wave of SMs clearly better (by over 5% of the SMs; a 128 x 128 tile does less
    work per SM).
    Under the interpreter every block is 16 (the smallest tile a GPU dot accepts).

    Triton tiles are powers of two; cuBLAS's are not. On the H100 (torch 2.11, profiler kernel
    names) it runs 144 x 128 tiles at 1536^3 (132 tiles: one full wave), 192 x 192 at 3072^3 and
    4224^3, 192 x 128 at 512 x 6144 x 4096 and 320 x 128 at 512 x 10240 x 8192 (128 tiles each).
    A 128 x 192 tile made of two dots (128 + 64 columns) measured 0.5-0.7 x cuBLAS (Triton 3.6):
    two narrower wgmmas read the A tile twice. What works is a tile of three warpgroups of 64
    rows, each with its own accumulator, which Triton cannot write but Gluon can:
    ``mode="gluon"`` (``course.gluon_gemm``), picked by auto where it pays (``gluon_tiles_for``).

        >>> heuristic_config(16, 4096, 4096, torch.float16).block_m  # doctest: +SKIP
        16
    """
    if runtime.INTERPRET:
        return Config(16, 16, 16, num_warps=4, num_stages=2)
    esize = _ELEMENT_SIZE[dtype]
    bk = {1: 128, 2: 64, 4: 32}[esize]
    sms = _num_sms()
    # Decode (M <= 64) streams B once. Where 128-wide tiles fill at least 60% of one wave, they beat
    # narrower ones, which leave no SM idle but read A's rows again for every 32 or 64 columns.
    wide_decode = _cdiv(N, 128) >= 0.6 * sms

    def streaming(block_m, block_n, block_k, num_stages):
        # Pointer loads suit decode only where K is a multiple of the K step: the masked last step
        # of a ragged K slowed the whole loop 6x (H100, 16 x 4096 x 4095 on 128-byte aligned rows:
        # 139 us with pointer loads, 22 us through TMA, which zero-fills the ragged step by itself)
        return Config(block_m, block_n, block_k, num_warps=4, num_stages=num_stages, tma=K % block_k != 0,
                      tma_store=False)

    if M <= 16:  # pointer loads and stores measured best for 64-wide tiles (streaming: where K allows)
        if esize == 2 and wide_decode and _cdiv(N, 128) <= sms:  # one wave of 128-wide tiles (H100, bf16:
            # 16 x 14336 x 4096 0.975 -> 0.991 x cuBLAS, 16 x 10240 x 8192 1.053 -> 1.084)
            return Config(16, 128, 4 * bk, num_warps=4, num_stages=3, tma=True, tma_store=False)
        return streaming(16, 64, 4 * bk, num_stages=4)
    if M <= 64:
        if esize <= 2 and wide_decode:  # wide weights: 64 x 128 tiles through TMA (H100: int8 0.96-1.03 x
            # _int_mm against 0.82-0.99 with 64 x 64; bf16 64 x 10240 x 8192 0.939 -> 0.990 x cuBLAS,
            # 64 x 14336 x 4096 0.976 -> 0.998, 64 x 28672 x 8192 1.024 -> 1.029)
            return Config(64, 128, 128, num_warps=4, num_stages=4, tma=True, tma_store=False)
        if esize == 2 and 2 * _cdiv(N, 64) <= sms:  # 64-wide tiles would leave half the SMs idle: 32-wide,
            # a deep pipeline (H100, 64 x 4096 x 4096: 0.94 -> 0.98 x cuBLAS, which runs 64 x 32 tiles; for
            # N >= 6144 the same tiles measured 0.89-0.96 against 0.94-1.03 with 64 x 64)
            return streaming(64, 32, 2 * bk, num_stages=8)
        return streaming(64, 64, 2 * bk, num_stages=5 if esize == 2 else 3)
    if esize == 4:
        return Config(128, 128, bk, num_warps=8, num_stages=3)
    if _cdiv(M, 128) * _cdiv(N, 128) < sms // 2:  # small: even 128 x 128 leaves SMs idle
        if esize == 1:  # int8: a longer K step (H100, 1024^3: 0.87 x _int_mm against 0.84 with 128)
            return Config(64, 128, 2 * bk, num_warps=4, num_stages=4, tma=True, tma_store=True)
        return Config(64, 128, bk, num_warps=4, num_stages=7, tma=True, tma_store=True)  # 1024^3: s5 0.90, s7 0.93
    wide = Config(128, 256, bk, num_warps=8, num_stages=4 if esize == 2 else 3, tma_store=True, store_halves=2)
    if esize == 2 and _tail_pays(M, N, wide, sms):  # 128 x 256 tiles in whole waves, a strip of small ones
        return wide
    if _wave_efficiency(M, N, 128, 128, sms) > _wave_efficiency(M, N, 128, 256, sms) + 0.05:
        # 128 x 128 fills the last wave clearly better: TMA loads and stores, a deep pipeline. A
        # 128 x 128 tile does ~8% less per SM than 128 x 256 (H100: 8192 x 10240 x 8192, wave
        # efficiencies 0.995 / 0.970: 0.89 x cuBLAS with 128 x 128, 1.02 with 128 x 256)
        if esize == 1:  # int8: K steps of 256 on 8 warps (H100: +2-6% on the five mid shapes measured)
            return Config(128, 128, 2 * bk, num_warps=8, num_stages=3, tma=True, tma_store=True)
        # 6 stages: 512 x 4096 x 4096 0.94 -> 0.99 x cuBLAS (H100), which runs 128 x 128 x 64 with 6
        return Config(128, 128, bk, num_warps=4, num_stages=6 if esize == 2 else 4, tma=True, tma_store=True)
    return wide


def _streamk_pays(M, N, K, config, sms, dtype=None):
    # Measured (H100/H200): a Stream-K piece costs a pipeline fill, and a shared tile a fix-up, about
    # as much as a few K-iterations, so Stream-K pays only where it splits the tiles of a partial last
    # wave among two or more programs each, and not for 1-byte types (int8 persistent stayed ahead).
    tiles = _cdiv(M, config.block_m) * _cdiv(N, config.block_n)
    if config.block_m <= 64:  # decode: Stream-K fills a last wave that is less than half full,
        # or shares a long K among programs when the tiles leave half the SMs idle (K >= 48 steps)
        long_k = _cdiv(K, config.block_k) >= 48
        return (tiles > sms and tiles % sms < sms // 2) or (2 * tiles <= sms and long_k)
    one_byte = dtype is not None and _ELEMENT_SIZE.get(dtype, 2) == 1
    if one_byte:
        return False
    # Compute-bound tiles: only where the partial last wave's tiles are split in two or more
    # (streamk_programs_for); unsplit, each Stream-K program would do a whole tile, a persistent
    # wave with extra steps. 128 x 128 tiles also need a long K loop (H100: 512 x 10240 x 8192
    # 0.83 -> 0.88 x cuBLAS, 4224^3 0.93 -> 0.96; at 3072^3, 48 K-steps, it was a tie); 128 x 256
    # tiles several full waves before it.
    rem = tiles % sms
    split = streamk_programs_for(M, N, K, config, sms) // rem if tiles > sms and rem else 0
    if config.block_m * config.block_n == 128 * 128:
        return split >= 2 and _cdiv(K, config.block_k) >= 64
    return config.block_m * config.block_n >= 128 * 256 and tiles >= 4 * sms and split >= 2


def streamk_tiles_for(M: int, N: int, config: Config, num_sms: int | None = None) -> int:
    """Tiles given to Stream-K in ``"streamk"`` mode: the last, partial wave (all tiles when there
    are fewer tiles than SMs, none when the tiles fill whole waves).

    Measured alternative (H100, bf16, 28 shapes, same run): sharing one full wave more than the
    remainder, so that each program gets over a tile of Stream-K work, was slower: geometric
    mean 0.84 x cuBLAS against 0.90 for the remainder alone (and 0.94 persistent). Sharing every
    tile loses most on the small shapes Stream-K is meant for (H100, 128 x 128 tiles: 1536^3 0.62
    x cuBLAS against 0.71 persistent, 512 x 6144 x 4096 0.59 against 0.79): each shared tile costs
    a second pipeline fill and a partial written and read through L2, several microseconds, where
    the whole product takes 16-41 us.
    """
    sms = num_sms or _num_sms()
    tiles = _cdiv(M, config.block_m) * _cdiv(N, config.block_n)
    return tiles if tiles < sms else tiles % sms


def streamk_programs_for(M: int, N: int, K: int, config: Config, num_sms: int | None = None) -> int:
    """Programs that share the Stream-K tiles' K-iterations in ``"streamk"`` mode: ``s`` per tile,
    so that each program gets one K-chunk of one tile (0 when no tile is Stream-K).

    ``s = num_sms // streamk_tiles``: not all ``num_sms``, because programs that hold the same
    chunk of different tiles then move through K in step and read the same A rows and B columns at
    about the same time, as the data-parallel waves do, so L2 serves them; spread over every
    program, the ranges start at different K offsets and every program streams its own slices
    from memory (measured: Stream-K launches 8-14% faster). For compute-bound tiles (128 rows) a
    chunk keeps at least 32 K-steps, since each piece pays a pipeline fill and each extra sharer a
    partial tile to add (H100, 4224^3 with 128 x 128 tiles: s = 2 gave 0.96 x cuBLAS, s = 4 0.93).
    """
    sms = num_sms or _num_sms()
    sk = streamk_tiles_for(M, N, config, sms)
    if not sk:
        return 0
    split = max(1, sms // sk)
    if config.block_m >= 128:
        split = max(1, min(split, _cdiv(K, config.block_k) // 32))
    return sk * split


@dataclasses.dataclass(frozen=True)
class TailPlan:
    """How ``mode="tail"`` cuts C: at row ``cut`` (``axis="m"``) or column ``cut`` (``axis="n"``).
    ``C[:cut]`` (or ``C[:, :cut]``) fills ``main_tiles`` tiles of the launch's config, whole waves;
    the strip past the cut takes ``tail_tiles`` tiles of ``tail_config``, at most one wave."""

    axis: str
    cut: int
    tail_config: Config
    main_tiles: int
    tail_tiles: int


def _tail_config(config: Config) -> Config:
    # Half the rows and half the columns (a quarter of the work), 4 warps, and a deep pipeline: the
    # small tiles' K loop is bound by load latency (H100, strip of 64 x 128 tiles with 7 stages
    # instead of 5: 512 x 10240 x 8192 0.90 -> 0.94 x cuBLAS, 4224^3 0.97 -> 0.99; 8 no better)
    return Config(max(16, config.block_m // 2), max(16, config.block_n // 2), config.block_k, num_warps=4,
                  num_stages=max(7, config.num_stages + 1), group_size_m=config.group_size_m, tma=config.tma,
                  tma_store=config.tma_store)


@functools.lru_cache(maxsize=4096)
def tail_plan_for(M: int, N: int, config: Config, num_sms: int | None = None) -> "TailPlan | None":
    """Where ``mode="tail"`` cuts an ``M x N`` output, or None when no cut works.

    The cut keeps the most whole rows (or columns) of ``config`` tiles whose tiles fill their
    waves of ``num_sms`` programs to at least 97%, and needs the strip past it to fit in one wave
    of tiles half as tall and half as wide. Both launches are persistent. Why it pays: a ragged
    last wave of big tiles costs as long as a full one; the small tiles of the strip, a quarter
    of the work each, finish sooner (H100, bf16, 3072^3: 0.83 x cuBLAS with 128 x 128 tiles, 0.90
    with 2816 rows of 128 x 256 tiles and a 256-row strip of 64 x 128 ones). Small tiles do not run
    4x faster: their K loop is bound by latency, not by the tensor cores (at 3072^3, 64 x 128 tiles
    took 0.6 of the time of 128 x 256 ones), so the gain is about a third of a wave. The price is
    on the host: two launches, about 140 us of Python a call instead of 60 (capture the call in a
    CUDA graph where that matters).

        >>> tail_plan_for(3072, 3072, Config(128, 256, 64), num_sms=132).cut  # doctest: +SKIP
        2816
    """
    sms = num_sms or _num_sms()
    tail = _tail_config(config)
    best = None
    for axis, block, along, other in (("m", config.block_m, _cdiv(M, config.block_m), _cdiv(N, config.block_n)),
                                      ("n", config.block_n, _cdiv(N, config.block_n), _cdiv(M, config.block_m))):
        # the most whole rows (columns) of tiles that fill whole waves
        rows = next((r for r in range(along - 1, 0, -1) if r * other / (_cdiv(r * other, sms) * sms) >= 0.97), 0)
        if not rows:
            continue
        cut = rows * block
        strip_m, strip_n = (M - cut, N) if axis == "m" else (M, N - cut)
        tail_tiles = _cdiv(strip_m, tail.block_m) * _cdiv(strip_n, tail.block_n)
        plan = TailPlan(axis, cut, tail, rows * other, tail_tiles)
        if tail_tiles <= sms and (best is None or (plan.main_tiles, -tail_tiles) > (best.main_tiles, -best.tail_tiles)):
            best = plan
    return best


def _tail_pays(M, N, config, sms):
    # Measured (H100/H200, bf16): the tail split beat every other schedule where the config's tiles
    # fill their waves to under 90% (3072^3 0.83 -> 0.90 x cuBLAS, 4224^3 0.94 -> 0.97); where the
    # waves are nearly full there is little to win and a second launch to pay.
    return config.block_m >= 128 and _wave_efficiency(M, N, config.block_m, config.block_n, sms) < 0.9 \
        and tail_plan_for(M, N, config, sms) is not None


# The Gluon kernel's tiles run at about 0.95 of the speed per SM of this file's 128 x 256 ones (H100,
# bf16: fitted to 1536^3, 3072^3 and 512 x 6144 x 4096 with 192 x 128 tiles)
_GLUON_SPEED = 0.95


def _gluon_here() -> bool:
    return not runtime.INTERPRET and gluon_gemm.gluon is not None and _capability() == (9, 0)


@functools.lru_cache(maxsize=4096)
def gluon_tiles_for(M: int, N: int, config: Config, num_sms: int | None = None) -> tuple:
    """The Gluon kernel's ``(tile, swap)`` choices (``course.gluon_gemm``) that ``mode="auto"``
    prefers to ``config``'s Triton schedule for an ``M x N`` output, fastest first; empty where
    Triton's tiles do as well. ``swap``: the tile's rows run along N (``C^T = B^T A^T``).

    A model in units of one 128 x 256 tile's time: ``config``'s schedule costs its waves (whole
    waves plus about 0.6 of one for a tail split's strip); a Gluon tile costs its waves times its
    area (a 192 x 128 tile is 0.75 of a 128 x 256 one) at about 0.95 of the speed per SM
    (``gluon_gemm.tile_choices``). It must win by 5%, and ``config`` must be the 128 x 256 class:
    elsewhere Triton's tiles already fit. In the benchmark's shape set that is 1536^3 (132 tiles of
    128 x 144 against 72 of 128 x 256), 3072^3 (three waves of 192 x 128 against a tail split),
    512 x 6144 x 4096 (192 x 128 swapped: one wave of 128) and 512 x 10240 x 8192 (one wave of
    128 x 320 against a tail split). The model ranks; its margins are rough: at 512 x 10240 x 8192
    it expects the Gluon tile 18% faster than the tail split, and it measured 3-4% faster (H100).

        >>> gluon_tiles_for(512, 6144, Config(128, 256, 64, num_warps=8, num_stages=4), num_sms=132)[0]
        ((192, 128), True)
    """
    sms = num_sms or _num_sms()
    if M <= 64 or config.block_m * config.block_n != 128 * 256:
        return ()
    if _tail_pays(M, N, config, sms):
        now = _cdiv(tail_plan_for(M, N, config, sms).main_tiles, sms) + 0.6
    else:
        now = _cdiv(_cdiv(M, config.block_m) * _cdiv(N, config.block_n), sms)

    def cost(tile, swap):
        return _cdiv(gluon_gemm.tiles(M, N, swap, tile), sms) * tile[0] * tile[1] / (128 * 256) / _GLUON_SPEED

    return tuple((tile, swap) for tile, swap in gluon_gemm.tile_choices(M, N, sms) if cost(tile, swap) < 0.95 * now)


def choose_mode(M: int, N: int, K: int, config: Config, num_sms: int | None = None, dtype=None,
                gluon: bool | None = None) -> str:
    """What ``mode="auto"`` runs: ``"gluon"`` for 2-byte inputs on an sm_90 GPU where its tiles
    fill the waves clearly better (``gluon_tiles_for``; ``gluon=False`` leaves it out, and
    at launch, operands whose layout it cannot read fall back to the rest of this list); else
    ``"tail"`` for 2-byte inputs whose tiles fill their waves to
    under 90% when a tail split exists (``tail_plan_for``); else ``"streamk"`` where the last,
    partial wave of tiles can be split
    into K-chunks shared by two or more programs each (``streamk_programs_for``) and the problem is
    big enough to pay for it, else ``"persistent"``.

    Measured: each Stream-K piece pays a pipeline fill and each shared tile a fix-up (partials
    through L2, flags), about as much as a few K-iterations, so it pays off for long K loops and
    after several full waves; small problems do better with a tile size that fills the last wave
    (``heuristic_config``). Decode shapes (M <= 64) stream B, and there splitting K pays sooner.
    """
    sms = num_sms or _num_sms()
    two_byte = dtype is None or _ELEMENT_SIZE.get(dtype) == 2
    if gluon is None:
        gluon = _gluon_here()
    if two_byte and gluon and gluon_tiles_for(M, N, config, sms):
        return "gluon"
    if runtime.INTERPRET:  # exercise both schedules on the CPU
        tiles = _cdiv(M, config.block_m) * _cdiv(N, config.block_n)
        return "streamk" if tiles % sms else "persistent"
    if two_byte and _tail_pays(M, N, config, sms):
        return "tail"
    return "streamk" if _streamk_pays(M, N, K, config, sms, dtype) else "persistent"


# ----------------------------------------------------------------------------------------------
# Host side: checks that name the argument and the fix
# ----------------------------------------------------------------------------------------------
_INT32_LIMIT = 2**31  # offsets and dimensions from here on do not fit Triton's default 32-bit indices


def _check_dense(name: str, t) -> None:
    """A plain strided tensor: not sparse, nested or MKL-DNN (whose raw memory is no matrix)."""
    if t.layout is not torch.strided or t.is_nested:
        kind = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
        raise TypeError(f"{name} is a {kind} tensor, but the kernels read plain (strided) memory: "
                        f"pass {name}.to_dense()")


def _check_matrix(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    _check_dense(name, t)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got {t.dim()}-D with shape {tuple(t.shape)}; "
                         f"for batches, loop over the batch or reshape to 2-D")
    rows, cols = t.shape
    if rows >= _INT32_LIMIT or cols >= _INT32_LIMIT:
        raise ValueError(f"{name} has shape {(rows, cols)}: each dimension must be below 2^31 (the kernels' "
                         "tile indices are 32-bit); split the product into parts")
    for dim in range(2):
        if t.shape[dim] > 1 and t.stride(dim) <= 0:
            raise ValueError(f"{name} has stride {t.stride(dim)} in dimension {dim} (a broadcast or expanded "
                             f"view): pass {name}.contiguous() instead")
    if t.device.type != runtime.DEVICE:
        raise ValueError(f"{name} is on {t.device.type} but the kernels run on {runtime.DEVICE} "
                         f"(course.DEVICE): move it with {name}.to('{runtime.DEVICE}')")


def _check_vector(name: str, t, length: int, length_name: str, dtypes, device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of length {length_name}={length}, got {type(t).__name__}")
    _check_dense(name, t)
    if t.dim() != 1 or t.shape[0] != length:
        raise ValueError(f"{name} must be 1-D of length {length_name}={length}, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} has dtype {str(t.dtype).replace('torch.', '')}: pass one of {names} "
                        f"(e.g. {name}.to(torch.{str(dtypes[0]).replace('torch.', '')}))")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but a is on {device}: put them on the same device")
    if length > 1 and t.stride(0) <= 0:
        raise ValueError(f"{name} has stride {t.stride(0)}: pass {name}.contiguous()")


def _resolved(t):
    """``t`` as the kernel may read it: a lazy negation or conjugation view (``torch._neg_view``,
    ``x.conj()``), whose raw memory holds the values before the negation, materialized first."""
    if t is not None and t.is_neg() and t.dtype in _FP8:  # CUDA has no fp8 negation: flip the sign bits
        return (torch._neg_view(t).view(torch.uint8) ^ 0x80).view(t.dtype)
    if t is not None and (t.is_neg() or t.is_conj()):
        return t.resolve_conj().resolve_neg()
    return t


def _check_pair(a, b) -> None:
    _check_matrix("a", a)
    _check_matrix("b", b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)} (K={a.shape[1]}) but b is "
                         f"{tuple(b.shape)} (K={b.shape[0]}); a must be (M, K) and b (K, N) "
                         f"(did you mean b.T?)")
    if a.dtype != b.dtype:
        raise TypeError(f"a is {str(a.dtype).replace('torch.', '')} but b is {str(b.dtype).replace('torch.', '')}: "
                        f"convert one so both match, e.g. b.to(a.dtype)")
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} but b is on {b.device}: put both on the same device")


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype is torch.float16 or dtype is torch.float32 or (dtype is torch.bfloat16 and not runtime.INTERPRET):
        return  # the common case, without asking the GPU what it supports (a host-time saving)
    name = str(dtype).replace("torch.", "")
    if dtype == torch.int8:
        raise TypeError("a and b are int8: use matmul_int8(a, b, a_scale, b_scale) (int32 accumulation "
                        "and per-row/per-column scales)")
    if runtime.INTERPRET and dtype == torch.bfloat16:
        raise TypeError("bfloat16 does not work under Triton's CPU interpreter (it computes garbage there): "
                        "use float16 or float32 on the CPU; bfloat16 runs on a GPU")
    if dtype in _FP8:
        if runtime.INTERPRET:
            raise TypeError(f"{name} (fp8) needs a GPU: Triton's interpreter has no fp8 arithmetic; use "
                            "float16 or float32 on the CPU")
        if _capability() < (8, 9):
            raise TypeError(f"{name} (fp8) needs an sm_89+ GPU (Ada, Hopper); this one is "
                            f"sm_{''.join(map(str, _capability()))}: use float16 or bfloat16")
        return
    if dtype not in supported_dtypes():
        names = ", ".join(str(d).replace("torch.", "") for d in supported_dtypes())
        raise TypeError(f"a and b have dtype {name}, which matmul does not support here: pass one of {names}")


def _check_out(out, M, N, dtype, device) -> None:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor of shape ({M}, {N}), got {type(out).__name__}")
    _check_dense("out", out)
    if tuple(out.shape) != (M, N):
        raise ValueError(f"out has shape {tuple(out.shape)} but the product is ({M}, {N})")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {str(out.dtype).replace('torch.', '')} but the result is "
                        f"{str(dtype).replace('torch.', '')}: pass out_dtype={dtype} or a matching out")
    if out.device != device:
        raise ValueError(f"out is on {out.device} but a is on {device}")
    for dim in range(2):
        if out.shape[dim] > 1 and out.stride(dim) <= 0:
            raise ValueError(f"out has stride {out.stride(dim)} in dimension {dim}: every element needs its "
                             "own place; pass a fresh tensor")
    if _overlaps_itself(out):
        raise ValueError(f"out (shape {tuple(out.shape)}, strides {out.stride()}) has elements that share one "
                         "memory location: every element needs its own place; pass a fresh tensor")


def _check_no_grad(named) -> None:
    """matmul has no backward: refuse tensors that autograd would expect it to record."""
    if not torch.is_grad_enabled():
        return
    for name, t in named:
        if t is not None and t.requires_grad:
            raise RuntimeError(f"{name} requires grad, but matmul is a forward-only kernel (no backward): call it "
                               f"under torch.no_grad() (or torch.inference_mode()), or pass {name}.detach()")


def _span(t: torch.Tensor) -> tuple:
    """``[first, last)`` byte addresses of a non-empty 1-D or 2-D tensor with non-negative strides."""
    first = t.data_ptr()
    if t.dim() == 2:
        (n0, n1), (s0, s1) = t.shape, t.stride()
        return first, first + t.element_size() * (1 + (n0 - 1) * s0 + (n1 - 1) * s1)
    return first, first + t.element_size() * (1 + (t.shape[0] - 1) * t.stride(0))


def _offsets(t: torch.Tensor) -> torch.Tensor:
    """Every element's offset from ``t.data_ptr()``, in elements (int64, on ``t``'s device)."""
    offs = torch.zeros((), dtype=torch.int64, device=t.device)
    for n, s in zip(t.shape, t.stride()):
        offs = offs[..., None] + torch.arange(n, device=t.device) * s
    return offs.reshape(-1)


def _overlaps_itself(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` (positive strides) share a memory location, e.g. an
    ``as_strided`` view whose rows overlap. Cheap for the usual layouts (one dimension's stride
    spans the other's whole extent); the rare others are checked element by element."""
    (n0, n1), (s0, s1) = t.shape, t.stride()
    if n0 <= 1 or n1 <= 1:
        return False
    s_small, n_small, s_big = (s1, n1, s0) if s0 >= s1 else (s0, n0, s1)
    if s_big > (n_small - 1) * s_small:
        return False
    if s_big == s_small:
        return True
    return _offsets(t).unique().numel() != t.numel()


def _check_no_overlap(out: torch.Tensor, inputs) -> None:
    """Refuse an ``out`` that shares memory with an input (``a``, ``b``, ``bias``, a scale).

    The kernel reads its inputs tile by tile while other programs already write C, so an input
    that overlaps ``out`` is read half overwritten. Like torch's ``out=`` (``torch.add(x, y,
    out=x[1:])``: "some elements of the input tensor and the written-to tensor refer to a single
    memory location. Please clone()"), the call is refused rather than computed into a hidden
    temporary: ``out=`` says where the result goes, and an M x N buffer plus a copy, allocated
    behind the caller's back, would change the memory and time that ``out=`` is meant to control;
    overlap is almost always a mistake (``out=a`` for a square product). Disjoint byte ranges
    (separate tensors) cost a few integer comparisons; interleaved views of one buffer
    (``x[::2]`` and ``x[1::2]``) are checked byte by byte.
    """
    o_first, o_last = _span(out)
    for name, t in inputs:
        if t is None or t.numel() == 0:
            continue
        first, last = _span(t)
        if first >= o_last or o_first >= last:
            continue  # disjoint address ranges: the usual case
        lo, hi = max(first, o_first), min(last, o_last)

        def touched(x):  # the bytes of x's elements in [lo, hi)
            es = x.element_size()
            start = x.data_ptr() + _offsets(x) * es
            byte = (start[:, None] + torch.arange(es, device=x.device)).reshape(-1)
            return byte[(byte >= lo) & (byte < hi)]

        if torch.isin(touched(t), touched(out)).any():
            raise ValueError(f"out and {name} share memory (out overlaps {name}): the kernel would read {name} "
                             f"while writing out; pass a fresh out, or {name}.clone()")


def _resolve_config(config, M, N, K, dtype) -> Config:
    if config is None:
        return heuristic_config(M, N, K, dtype)
    if isinstance(config, dict):
        fields = [f.name for f in dataclasses.fields(Config)]
        unknown = [k for k in config if k not in fields]
        if unknown:
            raise TypeError(f"config has unknown field(s) {', '.join(map(repr, unknown))}: a Config's fields are "
                            f"{', '.join(fields)}")
        return Config(**config)
    if not isinstance(config, Config):
        raise TypeError(f"config must be a course.gemm.Config (or a dict of its fields), got {type(config).__name__}")
    if not runtime.INTERPRET and min(config.block_m, config.block_n, config.block_k) < 16:
        raise ValueError(f"config {config}: compiled, every block size must be at least 16 (tl.dot's minimum)")
    return config


# ----------------------------------------------------------------------------------------------
# Host side: launching
# ----------------------------------------------------------------------------------------------
_WORKSPACES: dict = {}
_TUNED: dict = {}


def _workspace(device, num_sms, tile_elems, acc_dtype):
    """Stream-K partial tiles (one slot per program) and flags (zero between launches), one pair
    per CUDA stream: launches on different streams may run at the same time, and sharing the slots
    and flags they would add each other's partial sums or wait forever on a flag the other
    launch cleared. Each workspace is allocated while its stream is current, so the caching
    allocator never hands its memory to other work before that stream is done with it."""
    stream = None if runtime.INTERPRET else torch.cuda.current_stream(device).cuda_stream
    key = (str(device), stream, num_sms, tile_elems, acc_dtype)
    if key not in _WORKSPACES:
        if len(_WORKSPACES) >= 256:  # many short-lived streams: start over (see above: safe to free)
            _WORKSPACES.clear()
        _WORKSPACES[key] = (torch.empty(num_sms * tile_elems, device=device, dtype=acc_dtype),
                            torch.zeros(num_sms, device=device, dtype=torch.int32))
    return _WORKSPACES[key]


def _tma_layout(t: torch.Tensor):
    """``False`` (row-major), ``True`` (stored transposed) or None when TMA cannot read ``t``."""
    es = t.element_size()
    if t.data_ptr() % 16:
        return None
    (rows, cols), (s0, s1) = t.shape, t.stride()
    if s1 == 1 and (s0 * es) % 16 == 0 and cols * es >= 16:
        return False
    if s0 == 1 and (s1 * es) % 16 == 0 and rows * es >= 16:
        return True
    return None


def _host_descriptor(t, transposed, block_rows, block_cols):
    """A tensor descriptor of ``t`` as stored (of ``t.T`` when ``transposed``), moved in blocks of
    ``block_rows x block_cols`` of ``t``. Built on the host, it reaches the kernel as a parameter.
    Measured (H100, same run): against ``tl.make_tensor_descriptor`` inside the kernel, where every
    program writes and fences its own descriptors before the first load, bf16 0.92 -> 0.95 x cuBLAS
    (geometric mean of 19 shapes), int8 1.11 -> 1.18 x ``_int_mm`` (10 shapes; 1024^3 0.86 -> 1.16);
    it costs about 15 us more host time per launch."""
    if transposed:
        return TensorDescriptor(t, [t.shape[1], t.shape[0]], [t.stride(1), 1], [block_cols, block_rows])
    return TensorDescriptor(t, list(t.shape), [t.stride(0), 1], [block_rows, block_cols])


# Operands whose rows TMA cannot read (a row stride that is no multiple of 16 bytes, such as K =
# 4014 in bf16) leave the kernel with 2-byte pointer loads, and an output it cannot write with a
# pointer epilogue that takes shared memory from the pipeline: 0.1-0.5 x cuBLAS (H100, bf16,
# .gpu/pad11.py). Copied into rows that start on 128-byte boundaries they run at full speed
# (3905 x 4785 x 4014: 0.18 -> 2.9 x cuBLAS, copies included, 971 x 3858 x 2685 0.25 -> 1.9,
# 4528 x 717 x 687 0.21 -> 1.1, 237 x 5626 x 896 with only C copied 0.52 -> 1.1; cuBLAS is slow on
# such rows too). A copy pays where the product does enough work per copied element:
# MACS_PER_COPIED_ELEMENT, i.e. N for A, M for B, K for C. Even decode's weights, read once, pay
# for it (16 x 4096 x 4095: 2-byte loads took 10 x cuBLAS's time); weights used again and again
# are better padded once with aligned_copy. Below M = 16 a copy of the weights costs more than the
# product (torch copies them at about 1.5 TB/s), and unaligned_decode_config picks tiles for the
# 2-byte loads instead.
MACS_PER_COPIED_ELEMENT = 16
# Rows that TMA reads but that start 16 bytes into a 32-byte sector (a pitch that is an odd multiple
# of 16 bytes, such as 3000 bf16 elements) make every row straddle one more sector, and the same
# kernels run about 1.5x slower (H100, bf16, 3072 x 3072 x 2944 with pitches of 2944 + 8j elements:
# 0.62 x cuBLAS at 16, 48, 80, 112 bytes past a 128-byte line, 0.86-0.90 at 32, 64, 96, 0.97 on
# the line). torch copies at about 1.3 TB/s, so copying such 16-bit operands into aligned rows
# pays only in big products: they are copied together where the product does at least
# MACS_PER_REALIGNED_ELEMENT multiply-adds per element copied (H100, bf16, A and B copied, copies
# included; .gpu/copy13.py, .gpu/realign13.py): per element 5120, 10240 x 10240 x 3000: 0.76 ->
# 0.95 x cuBLAS; 4000, 8000 x 8000 x 3000: 0.95 -> 1.14; 3072, 6144 x 6144 x 3000: 0.74 -> 0.85 and
# 6144 x 6144 x 1000: 0.77 -> 0.81. Below, copies lose: 2048, 4096 x 4096 x 1000: 0.74 -> 0.70;
# 1368, 4104^3 (C too): 0.65 -> 0.59; 1000, 3000^3: 0.62 -> 0.51.
MACS_PER_REALIGNED_ELEMENT = 192 * MACS_PER_COPIED_ELEMENT  # 3072


def _rows_straddle_sectors(t: torch.Tensor) -> bool:
    """Whether TMA reads ``t`` (16-bit) but its rows (columns, where stored transposed) start 16 bytes
    into a 32-byte sector."""
    layout = _tma_layout(t)
    if layout is None or t.element_size() != 2:
        return False
    pitch = (t.stride(1) if layout else t.stride(0)) * t.element_size()
    return bool(pitch % 32 or t.data_ptr() % 32)


def aligned_copies_for(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
    """``(copy_a, copy_b, copy_c)``: which operands ``matmul`` copies into 128-byte aligned rows
    first (``c``: computed into an aligned buffer, then copied into ``c``; on a GPU only, not under
    the interpreter): the operands that TMA cannot read as they are but can once copied, where the
    product does at least ``MACS_PER_COPIED_ELEMENT`` multiply-adds per element copied; and 16-bit
    ones that it reads slowly, their rows 16 bytes off a 32-byte sector, where the product does at
    least ``MACS_PER_REALIGNED_ELEMENT`` per element of all of them.

        >>> a = torch.empty(4096, 4014, dtype=torch.bfloat16, device="meta")  # rows of 8028 bytes
        >>> aligned_copies_for(a, torch.empty(4785, 4014, dtype=torch.bfloat16, device="meta").T,
        ...                    torch.empty(4096, 4785, dtype=torch.bfloat16, device="meta"))
        (True, True, True)
    """
    M, K = a.shape
    N = b.shape[1]

    def worth(t, macs_per_element):  # TMA's narrowest row is 16 bytes, copied or not
        return (macs_per_element >= MACS_PER_COPIED_ELEMENT and _tma_layout(t) is None
                and min(t.shape) * t.element_size() >= 16)

    copies = (worth(a, N), worth(b, M), worth(c, K))
    if M * N * K < MACS_PER_REALIGNED_ELEMENT * min(M * K, N * K, M * N):  # the cheap question first
        return copies
    operands = (a, b, c)
    slow = [not copy and _rows_straddle_sectors(t) for copy, t in zip(copies, operands)]
    realigned = sum(t.numel() for t, s in zip(operands, slow) if s)
    if realigned and M * N * K >= MACS_PER_REALIGNED_ELEMENT * realigned:
        copies = tuple(copy or s for copy, s in zip(copies, slow))
    return copies


def unaligned_decode_config(a: torch.Tensor, b: torch.Tensor) -> "Config | None":
    """The configuration for a product too short to pay for copying ``b`` (M under
    ``MACS_PER_COPIED_ELEMENT``) whose 16-bit ``b`` has rows TMA cannot read, such as a K-major
    weight with K = 4095; None for every other product (``heuristic_config`` then applies).

    Such a ``b`` takes 2-byte pointer loads, and the heuristic's decode tiles, built for 16-byte
    vectors (a K step of 256, or TMA), ran at 0.04-0.13 x cuBLAS on them (H100, bf16). Measured best
    over 16 pointer configurations (``.gpu/dec12d.py``, ``.gpu/dec12e.py``): 16 x 128 x 64 tiles,
    with one stage where the rows run along K (6 shapes: 0.56-1.19 x cuBLAS, 0.79 geometric mean;
    a deeper pipeline of 2-byte asynchronous copies only adds latency) and three where they run
    along N (a row-major b with an odd N: 0.19-0.34, against 0.12-0.21).

        >>> w = torch.empty(4096, 4095, dtype=torch.bfloat16, device="meta")  # rows of 8190 bytes
        >>> unaligned_decode_config(torch.empty(1, 4095, dtype=torch.bfloat16, device="meta"), w.T).num_stages
        1
    """
    M = a.shape[0]
    if M >= MACS_PER_COPIED_ELEMENT or b.element_size() != 2 or _tma_layout(b) is not None:
        return None
    along_k = _stored_transposed(b)  # K-major: each row of the weight runs along K
    return Config(16, 128, 64, num_warps=4, num_stages=1 if along_k else 3, tma=False, tma_store=False)


def _stored_transposed(t: torch.Tensor) -> bool:
    """Whether ``t``'s columns, not its rows, are contiguous (``t`` is a transposed view), whatever
    the alignment: a K-major B, such as ``w.T``."""
    return t.stride(0) == 1 and t.stride(1) != 1


def aligned_copy(t: torch.Tensor, fill: bool = True) -> torch.Tensor:
    """A tensor equal to ``t`` (its values unless ``fill=False``) whose rows start every 128 bytes:
    the first columns of a wider buffer. A ``t`` stored transposed (unit stride down its columns)
    stays so, i.e. a K-major B stays K-major. Pad a weight with odd rows once, rather than have
    every ``matmul`` copy it:

        >>> w = torch.randn(48, 4095, dtype=torch.float16)  # rows of 8190 bytes
        >>> aligned_copy(w).stride()
        (4096, 1)
    """
    transposed = _stored_transposed(t)
    src = t.T if transposed else t
    rows, cols = src.shape
    per_line = 128 // t.element_size()
    buf = torch.empty(rows, _cdiv(cols, per_line) * per_line, device=t.device, dtype=t.dtype)[:, :cols]
    if fill:
        buf.copy_(src)
    return buf.T if transposed else buf


@dataclasses.dataclass
class _LaunchPlan:
    """Everything about a launch that depends only on shapes, strides, dtypes, alignment and the
    configuration, worked out once per such combination (``_plan_for``)."""

    config: Config  # with fewer stages where the GPU's shared memory needed it
    shrunk_key: tuple  # where a config that needs fewer stages is remembered for every shape
    tail: "TailPlan | None"  # mode "tail" with a cut: two launches, nothing else is planned
    grid: tuple = ()
    constexprs: dict = dataclasses.field(default_factory=dict)  # the kernel's, but the stage count


_PLANS: dict = {}
_GLUON_CHOICES: dict = {}  # auto's Gluon (tile, swap), or None, per operand layout: see _gluon_choice
_SHRUNK: dict = {}  # configs that needed fewer stages than asked for, whatever the shape


def _plan_for(a, b, c, config, mode, vectors, tma, flatten, sk_tiles, sk_programs) -> _LaunchPlan:
    """The cached launch plan for these operands. Recomputed on every call, it cost about 10 us of
    host time (H100: 71 -> 61 us a call with tensor descriptors, 68 -> 37 us with pointer loads,
    with the cheaper dtype check). ``vectors``: the strides of bias, a_scale and b_scale (None
    where absent)."""
    key = _operand_key(a, b, c) + (config, mode, vectors, tma, flatten, sk_tiles, sk_programs)
    return _cached(_PLANS, key, lambda: _make_plan(a, b, c, config, mode, vectors, tma, flatten, sk_tiles,
                                                   sk_programs))


def _operand_key(a, b, c) -> tuple:
    """What a launch decision may depend on in its operands: shapes, strides, dtypes, device and
    16-byte alignment (TMA's condition), not the addresses themselves."""
    return (tuple(a.shape), a.stride(), b.shape[1], b.stride(), c.stride(), a.dtype, c.dtype, a.device,
            a.data_ptr() % 16, b.data_ptr() % 16, c.data_ptr() % 16)


_MISSING = object()


def _cached(cache: dict, key, make):
    """``cache[key]``, made by ``make()`` the first time (values may be None)."""
    value = cache.get(key, _MISSING)
    if value is _MISSING:
        if len(cache) >= 4096:  # many shapes seen (e.g. a varying batch): start over rather than grow
            cache.clear()
        value = cache[key] = make()
    return value


_WIDE_BITS = ("am", "ak", "bk", "bn", "cm", "cn", "sa", "sb", "bias")  # bit i of the kernel's WIDE


def _wide_strides(M, N, K, strides: dict, block_k: int) -> int:
    """The kernel's ``WIDE``: a bit for each stride (named as in ``_WIDE_BITS``) that must be
    64-bit because its operand's element offsets, ``index * stride`` summed over both dimensions,
    can reach 2^31 (e.g. rows 2^30 elements apart): in 32 bits they would wrap around and read or
    write far outside the tensor. The K index of a ragged last step runs up to ``block_k`` past
    K - 1 (masked, but its offsets are still computed), and the scale and bias indices up to a tile
    past M or N. Unit strides stay constant 1: an index below 2^31 times 1 cannot overflow. 0 for
    every tensor smaller than 2^31 elements' worth of span: the usual, fully 32-bit kernel."""
    pad = max(block_k, 1024)
    extents = {"a": ((M - 1) * strides["am"], (K - 1 + pad) * strides["ak"]),
               "b": ((K - 1 + pad) * strides["bk"], (N - 1) * strides["bn"]),
               "c": ((M - 1) * strides["cm"], (N - 1) * strides["cn"]),
               "sa": ((M - 1 + pad) * strides["sa"],), "sb": ((N - 1 + pad) * strides["sb"],),
               "bias": ((N - 1 + pad) * strides["bias"],)}
    operands = {"am": "a", "ak": "a", "bk": "b", "bn": "b", "cm": "c", "cn": "c", "sa": "sa", "sb": "sb",
                "bias": "bias"}
    wide = 0
    for bit, name in enumerate(_WIDE_BITS):
        if sum(extents[operands[name]]) >= _INT32_LIMIT and strides[name] != 1:
            wide |= 1 << bit
    return wide


def _make_plan(a, b, c, config, mode, vectors, tma, flatten, sk_tiles, sk_programs) -> _LaunchPlan:
    has_bias = vectors[0] is not None
    M, K = a.shape
    N = b.shape[1]
    num_sms = _num_sms()
    hopper = not runtime.INTERPRET and _capability() >= (9, 0)
    if mode == "auto":  # the Gluon kernel, where auto picks it, was launched before planning
        mode = choose_mode(M, N, K, config, num_sms, a.dtype, gluon=False)
    if mode == "tail":
        tail = tail_plan_for(M, N, config, num_sms)
        if tail is not None:
            return _LaunchPlan(config, (), tail)
        mode = "persistent"  # no cut fills whole waves: one launch
    sk = 0
    if mode == "streamk":
        sk = streamk_tiles_for(M, N, config, num_sms) if sk_tiles is None else sk_tiles
    if sk_programs is None:
        sk_programs = streamk_programs_for(M, N, K, config, num_sms) if sk else 0
    tiles = _cdiv(M, config.block_m) * _cdiv(N, config.block_n)
    if tma is None:
        tma = config.tma
    if tma is None:  # measured with host-built descriptors: TMA as fast or faster (0.952 against 0.946
        tma = True      # x cuBLAS with pointer loads for 128 x 256 tiles, geometric mean of 19 shapes)
    a_t = b_t = None
    if tma and hopper:
        a_t, b_t = _tma_layout(a), _tma_layout(b)
    use_tma = a_t is not None and b_t is not None
    tma_store = config.tma_store
    if tma_store is None:
        tma_store = True
    c_t = _tma_layout(c) if tma_store and hopper else None
    tma_store = c_t is not None
    if flatten is None:
        flatten = config.block_m >= 128
    shrunk_key = (config, a.dtype, c.dtype, use_tma, tma_store, sk > 0)
    config = _SHRUNK.get(shrunk_key, config)
    (sam, sak), (sbk, sbn), (scm, scn) = a.stride(), b.stride(), c.stride()
    s_bias, s_sa, s_sb = (0 if v is None else v for v in vectors)
    wide = _wide_strides(M, N, K, dict(am=sam, ak=sak, bk=sbk, bn=sbn, cm=scm, cn=scn, sa=s_sa, sb=s_sb,
                                       bias=s_bias), config.block_k)
    constexprs = dict(
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_SIZE_M=config.group_size_m,
        NUM_SMS=num_sms, STREAMK_TILES=sk, STREAMK_PROGRAMS=sk_programs, EVEN_K=K % config.block_k == 0,
        HAS_BIAS=has_bias, QUANTIZED=a.dtype == torch.int8, ALLOW_TF32=True, USE_TMA=use_tma, A_T=bool(a_t),
        B_T=bool(b_t), TMA_STORE=tma_store, C_T=bool(c_t), C_HALVES=config.store_halves if not c_t else 1,
        FLATTEN=flatten, WIDE=wide, num_warps=config.num_warps)
    return _LaunchPlan(config, shrunk_key, None, (num_sms if sk else min(num_sms, tiles),), constexprs)


def _launch(a, b, c, config: Config, mode: str, *, a_scale=None, b_scale=None, bias=None, tma=None, flatten=None,
            sk_tiles=None, sk_programs=None):
    """Launch the kernel (inputs already checked). ``tma``/``flatten``/``sk_tiles``/``sk_programs``
    force a choice (studies)."""
    vectors = (None if bias is None else bias.stride(0), None if a_scale is None else a_scale.stride(0),
               None if b_scale is None else b_scale.stride(0))
    plan = _plan_for(a, b, c, config, mode, vectors, tma, flatten, sk_tiles, sk_programs)
    if plan.tail is not None:
        return _launch_tail(a, b, c, config, plan.tail, a_scale=a_scale, b_scale=b_scale, bias=bias, tma=tma,
                            flatten=flatten)
    config, k = plan.config, plan.constexprs
    quantized = k["QUANTIZED"]
    if k["STREAMK_TILES"]:
        acc_dtype = torch.int32 if quantized else torch.float32
        partials, flags = _workspace(a.device, k["NUM_SMS"], config.block_m * config.block_n, acc_dtype)
    else:
        partials = flags = c
    dummy = c  # unused pointer arguments (no scales / no bias)
    A, B, C = a, b, c
    if k["USE_TMA"]:
        A = _host_descriptor(a, k["A_T"], config.block_m, config.block_k)
        B = _host_descriptor(b, k["B_T"], config.block_k, config.block_n)
    if k["TMA_STORE"]:
        C = _host_descriptor(c, k["C_T"], config.block_m, config.block_n // k["C_HALVES"])
    while True:
        try:
            _matmul_kernel[plan.grid](
                A, B, C, a_scale if quantized else dummy, b_scale if quantized else dummy,
                bias if bias is not None else dummy, partials, flags,
                a.shape[0], b.shape[1], a.shape[1], *a.stride(), *b.stride(), *c.stride(),
                vectors[0] or 1, vectors[1] or 1, vectors[2] or 1,
                num_stages=config.num_stages, **k)
            return c
        except triton.runtime.errors.OutOfResources as e:
            # Too many pipeline stages for this GPU's shared memory: one fewer, remembered in the plan.
            if config.num_stages <= 1:
                raise ValueError(f"config {config} does not fit this GPU even with one stage ({e}): "
                                 "pass smaller blocks") from e
            config = plan.config = _SHRUNK[plan.shrunk_key] = dataclasses.replace(config,
                                                                                  num_stages=config.num_stages - 1)


def _launch_tail(a, b, c, config, tail: TailPlan, *, a_scale, b_scale, bias, tma, flatten):
    """``mode="tail"``: the main part and the strip of ``tail`` as two persistent launches on views
    of the same tensors (and of the scales and bias that go with those rows or columns)."""
    pick = lambda v, part: None if v is None else v[part]  # noqa: E731
    everything = slice(None)
    for part, cfg in ((slice(None, tail.cut), config), (slice(tail.cut, None), tail.tail_config)):
        rows, cols = (part, everything) if tail.axis == "m" else (everything, part)
        _launch(a[rows], b[:, cols], c[rows, cols], cfg, "persistent", a_scale=pick(a_scale, rows),
                b_scale=pick(b_scale, cols), bias=pick(bias, cols), tma=tma,
                flatten=flatten if cfg is config else None)
    return c


def _candidates(M, N, K, dtype):
    base = heuristic_config(M, N, K, dtype)
    esize = _ELEMENT_SIZE[dtype]
    bk = {1: 128, 2: 64, 4: 32}[esize]
    if M <= 64:
        bm = 16 if M <= 16 else 64
        cands = [base, Config(bm, 64, 4 * bk, 4, 4), Config(bm, 128, 2 * bk, 4, 4), Config(bm, 64, 2 * bk, 4, 5),
                 Config(bm, 64, 4 * bk, 4, 4, tma=True)]
    else:
        cands = [base, Config(128, 256, bk, 8, 4, tma=False, tma_store=True, store_halves=2),
                 Config(128, 256, bk, 8, 4, tma=True, tma_store=True, store_halves=2),
                 Config(128, 256, bk, 8, 3, tma=False, tma_store=False),
                 Config(128, 128, bk, 4, 5, tma=True, tma_store=True), Config(128, 128, bk, 4, 4)]
    return list(dict.fromkeys(cands))


def _autotuned(a, b, c, mode, **kw):
    """Time each candidate config (and, for mode="auto", both schedules); remember the best."""
    M, K = a.shape
    N = b.shape[1]
    key = (M, N, K, a.dtype, c.dtype, a.stride(), b.stride(), mode, kw.get("bias") is not None)
    if key not in _TUNED:
        from course import timing

        best = None
        for cfg in _candidates(M, N, K, a.dtype):
            modes = ("persistent", "streamk") + (("tail",) if tail_plan_for(M, N, cfg) else ())
            for m in (modes if mode == "auto" else (mode,)):
                try:
                    ms = timing.bench(lambda: _launch(a, b, c, cfg, m, **kw), warmup=5, rep=20)
                except triton.runtime.errors.OutOfResources:
                    continue
                if best is None or ms < best[0]:
                    best = (ms, cfg, m)
        _TUNED[key] = best[1:]
    return _TUNED[key]


def _gluon_choice(a, b, c, mode, config, autotune) -> "tuple | None":
    """The Gluon kernel's ``(tile, swap)`` when this call runs it (``mode="gluon"``, or ``"auto"``
    where ``choose_mode`` picks it and the operands suit it), else None. Its tile shapes are tried
    fastest first (``gluon_gemm.tile_choices``); auto takes only those that ``gluon_tiles_for``
    found faster than Triton's."""
    M, K = a.shape
    N = b.shape[1]
    if mode == "gluon":
        if config is not None:
            raise ValueError("mode='gluon' runs its own fixed tiles (gluon_gemm.TILES) and takes no config: drop "
                             "config, or pass a Triton mode ('persistent', 'streamk', 'tail', 'auto')")
        reasons = []
        for tile, swap in gluon_gemm.tile_choices(M, N, _num_sms()):
            why = gluon_gemm.unsupported(a, b, c, swap)
            if why is None:
                return tile, swap
            reasons.append(why)
        raise ValueError(f"mode='gluon' cannot run here: {'; '.join(dict.fromkeys(reasons))} "
                         "(mode='auto' runs a Triton kernel instead)")
    if mode != "auto" or config is not None or autotune or a.dtype not in (torch.float16, torch.bfloat16):
        return None

    def choose():
        if c.dtype != a.dtype or not _gluon_here():
            return None
        sms = _num_sms()
        candidates = gluon_tiles_for(M, N, heuristic_config(M, N, K, a.dtype), sms)
        return next((choice for choice in candidates if gluon_gemm.unsupported(a, b, c, choice[1]) is None), None)

    return _cached(_GLUON_CHOICES, _operand_key(a, b, c), choose)  # per operand layout, like the plans


def _run(a, b, out_dtype, mode, config, autotune, out, *, bias=None, **scales) -> torch.Tensor:
    """What matmul and matmul_int8 share once their inputs are checked: the output and bias
    checks, the output allocation, the configuration (heuristic or autotuned) and the launch."""
    M, K = a.shape
    N = b.shape[1]
    if bias is not None:
        _check_vector("bias", bias, N, "N", (torch.float32, torch.float16, torch.bfloat16), a.device)
        if runtime.INTERPRET and bias.dtype == torch.bfloat16:
            raise TypeError("bias is bfloat16, which Triton's CPU interpreter cannot add: use bias.float()")
    if out_dtype not in _OUT_DTYPES:
        if not isinstance(out_dtype, torch.dtype):
            raise TypeError(f"out_dtype={out_dtype!r} is a {type(out_dtype).__name__}, not a torch.dtype: pass "
                            "torch.float16, torch.bfloat16 or torch.float32")
        raise TypeError(f"out_dtype={out_dtype}: pass torch.float16, torch.bfloat16 or torch.float32")
    if runtime.INTERPRET and out_dtype == torch.bfloat16:
        raise TypeError("out_dtype=torch.bfloat16 does not work under Triton's CPU interpreter: "
                        "pass out_dtype=torch.float16 or torch.float32 on the CPU")
    if out is not None:
        _check_out(out, M, N, out_dtype, a.device)
    _check_no_grad((("a", a), ("b", b), ("bias", bias), ("out", out)) + tuple(scales.items()))
    a, b, bias = _resolved(a), _resolved(b), _resolved(bias)
    scales = {name: _resolved(scale) for name, scale in scales.items()}
    c = out if out is not None else torch.empty((M, N), device=a.device, dtype=out_dtype)
    if out is not None and M and N:
        _check_no_overlap(out, (("a", a), ("b", b), ("bias", bias)) + tuple(scales.items()))
    if not (M and N and K):  # an empty product: nothing to read, and for K = 0, C = 0 (+ bias), as torch.mm
        if M and N:
            if bias is None:
                c.zero_()
            else:
                c.copy_(bias.expand(M, N))
        return c
    copy_a, copy_b, copy_c = (False,) * 3 if runtime.INTERPRET else aligned_copies_for(a, b, c)
    if copy_a:
        a = aligned_copy(a)
    if copy_b:
        b = aligned_copy(b)
    work = aligned_copy(c, fill=False) if copy_c else c
    if c.is_neg():  # a lazily negated out (torch._neg_view): its raw memory holds -C; copy_ resolves it
        work = torch.empty((M, N), device=a.device, dtype=out_dtype)
    gluon_choice = _gluon_choice(a, b, work, mode, config, autotune)
    if gluon_choice is not None:
        tile, swap = gluon_choice
        if bias is not None and bias.stride(0) != 1:  # the Gluon kernel reads a contiguous bias
            bias = bias.contiguous()
        gluon_gemm.matmul_wide(a, b, work, bias, swap, _num_sms(), tile=tile)
    else:
        if autotune and config is None and not runtime.INTERPRET:
            config, mode = _autotuned(a, b, work, mode, bias=bias, **scales)
        if config is None and not runtime.INTERPRET:
            config = unaligned_decode_config(a, b)
        config = _resolve_config(config, M, N, K, a.dtype)
        _launch(a, b, work, config, mode, bias=bias, **scales)
    if work is not c:
        c.copy_(work)
    return c


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
    ``_check_no_overlap``). K = 0 gives zeros (+ bias) and M = 0 or N = 0 an empty result, as
    ``torch.mm``. Lazy negation views (``torch._neg_view``) are resolved before the raw memory is
    read. There is no backward: in grad mode, inputs that require grad are refused (call it under
    ``torch.no_grad()``). Operands whose element offsets reach 2^31 run with 64-bit offsets
    (``_wide_strides``); dimensions must stay below 2^31. Stream-K launches on different CUDA
    streams each get their own workspace (``_workspace``), so they may run at the same time.

        >>> a = torch.randn(64, 32, dtype=torch.float16, device=runtime.DEVICE)
        >>> b = torch.randn(32, 48, dtype=torch.float16, device=runtime.DEVICE)
        >>> matmul(a, b).shape
        torch.Size([64, 48])
    """
    _check_pair(a, b)
    _check_dtype(a.dtype)
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: pass one of {', '.join(map(repr, MODES))}")
    if out_dtype is None:
        out_dtype = torch.bfloat16 if a.dtype in _FP8 else a.dtype
    return _run(a, b, out_dtype, mode, config, autotune, out, bias=bias)


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
    _check_pair(a, b)
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
    _check_vector("a_scale", a_scale, M, "M", (torch.float32,), a.device)
    _check_vector("b_scale", b_scale, N, "N", (torch.float32,), a.device)
    return _run(a, b, out_dtype, mode, config, autotune, out, a_scale=a_scale, b_scale=b_scale, bias=bias)
