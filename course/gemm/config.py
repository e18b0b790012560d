"""What ``course.gemm`` runs for a given product: the tile configuration and the schedule (mode).

Functions of the shape, the dtype and the GPU's SM count: ``heuristic_config`` picks tiles (the
first of ``TILE_RULES`` that applies, one line each), ``choose_mode`` the schedule (persistent,
Stream-K, a tail split, or the Gluon kernel), and the ``*_for`` functions say how each schedule
would cut the work. They launch nothing, so they can be read and tested on any machine (pass
``num_sms`` to ask about another GPU):

    >>> tail_plan_for(3072, 3072, Config(128, 256, 64), num_sms=132).cut
    2816
"""

import dataclasses
import functools
from collections.abc import Callable

import torch

from course import hardware, runtime
from course.gemm import layout as gemm_layout, gluon as gluon_gemm
from course.gemm.layout import cdiv, stored_transposed, tma_layout


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


FP8 = tuple(d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d)
OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
ELEMENT_SIZE = {torch.float16: 2, torch.bfloat16: 2, torch.float32: 4, torch.int8: 1, **{d: 1 for d in FP8}}


def sm_count() -> int:
    """Programs of a persistent launch: the SM count on a GPU, a handful under the interpreter."""
    if runtime.INTERPRET:
        return 4  # enough programs to exercise Stream-K sharing, few enough to stay fast on a CPU
    return hardware.device_sms()


def capability() -> tuple:
    """This GPU's compute capability, ``(0, 0)`` under the interpreter."""
    return (0, 0) if runtime.INTERPRET else hardware.device_capability()


def supported_dtypes() -> list:
    """Input dtypes ``matmul`` accepts here (``matmul_int8`` takes int8)."""
    if runtime.INTERPRET:
        return [torch.float16, torch.float32]
    dts = [torch.float16, torch.bfloat16, torch.float32]
    if capability() >= (8, 9):
        dts += list(FP8)
    return dts


def _wave_efficiency(M, N, block_m, block_n, sms):
    tiles = cdiv(M, block_m) * cdiv(N, block_n)
    return tiles / (cdiv(tiles, sms) * sms)


@dataclasses.dataclass(frozen=True)
class Product:
    """What the tile rules read of a product: its shape, its element size in bytes and the SM count."""

    M: int
    N: int
    K: int
    esize: int
    sms: int

    @property
    def bk(self) -> int:  # the K step that makes a 128-byte row of A or B
        return {1: 128, 2: 64, 4: 32}[self.esize]

    @property
    def wide_decode(self) -> bool:  # 128-wide tiles fill at least half of one wave
        return cdiv(self.N, 128) >= 0.5 * self.sms

    def fill(self, block_m: int, block_n: int) -> float:  # how full the tiles' waves are, on average
        return _wave_efficiency(self.M, self.N, block_m, block_n, self.sms)

    def wide(self) -> "Config":  # 128 x 256 tiles on 8 warps, stored in two halves
        return Config(128, 256, self.bk, num_warps=8, num_stages=4 if self.esize == 2 else 3, tma_store=True,
                      store_halves=2)

    def streaming(self, block_m: int, block_n: int, block_k: int, num_stages: int) -> "Config":
        # pointer loads and stores, but through TMA where K is ragged (a masked last step is slow)
        return Config(block_m, block_n, block_k, num_warps=4, num_stages=num_stages, tma=self.K % block_k != 0,
                      tma_store=False)


@dataclasses.dataclass(frozen=True)
class TileRule:
    """One row of :data:`TILE_RULES`: where it applies and the configuration it gives. ``name`` is its
    heading in ``notes/gemm-decisions.md`` (under "Tiles"), where its measurements are."""

    name: str
    applies: "Callable[[Product], bool]"
    config: "Callable[[Product], Config]"


def _narrow_fills_better(p: Product) -> bool:  # 128 x 128 fills the waves over 5 % better than 128 x 256
    return p.fill(128, 128) > p.fill(128, 256) + 0.05


# The tile rules, first match wins; each says in one line where it applies and what it runs.
TILE_RULES = (
    TileRule("decode, one row block, one wave of 128-wide tiles",
             lambda p: p.M <= 16 and p.esize == 2 and p.wide_decode and cdiv(p.N, 128) <= p.sms,
             lambda p: Config(16, 128, 4 * p.bk, num_warps=4, num_stages=3, tma=True, tma_store=False)),
    TileRule("decode, one row block",
             lambda p: p.M <= 16,
             lambda p: p.streaming(16, 64, 4 * p.bk, num_stages=4)),
    TileRule("decode, wide weights",
             lambda p: p.M <= 64 and p.esize <= 2 and p.wide_decode,
             lambda p: Config(64, 128, 128, num_warps=4, num_stages=4, tma=True, tma_store=False)),
    TileRule("decode, narrow weights",
             lambda p: p.M <= 64 and p.esize == 2 and 2 * cdiv(p.N, 64) <= p.sms,
             lambda p: p.streaming(64, 32, 2 * p.bk, num_stages=8)),
    TileRule("decode",
             lambda p: p.M <= 64,
             lambda p: p.streaming(64, 64, 2 * p.bk, num_stages=5 if p.esize == 2 else 3)),
    TileRule("float32",
             lambda p: p.esize == 4,
             lambda p: Config(128, 128, p.bk, num_warps=8, num_stages=3)),
    TileRule("small products",
             lambda p: cdiv(p.M, 128) * cdiv(p.N, 128) < p.sms // 2,
             lambda p: Config(64, 128, 2 * p.bk if p.esize == 1 else p.bk, num_warps=4,
                              num_stages=4 if p.esize == 1 else 7, tma=True, tma_store=True)),
    TileRule("tail split",
             lambda p: p.esize == 2 and _tail_pays(p.M, p.N, p.wide(), p.sms),
             Product.wide),
    TileRule("full waves of 128 x 128, Stream-K for 128 x 256",
             lambda p: p.esize == 2 and _narrow_fills_better(p) and p.fill(128, 128) >= 0.95
             and _streamk_pays(p.M, p.N, p.K, p.wide(), p.sms),
             Product.wide),
    TileRule("128 x 128 fills the waves better",
             _narrow_fills_better,
             lambda p: Config(128, 128, 2 * p.bk, num_warps=8, num_stages=3, tma=True, tma_store=True) if p.esize == 1
             else Config(128, 128, p.bk, num_warps=4, num_stages=6, tma=True, tma_store=True)),
    TileRule("large products",
             lambda p: True,
             Product.wide),
)


def tile_rule(M: int, N: int, K: int, dtype: torch.dtype, num_sms: int | None = None) -> TileRule:
    """The first of :data:`TILE_RULES` that applies to an ``M x N x K`` product of ``dtype`` inputs on
    ``num_sms`` SMs (default: this GPU's).

        >>> tile_rule(16, 4096, 4096, torch.bfloat16, num_sms=132).name
        'decode, one row block'
    """
    return _first_rule(Product(M, N, K, ELEMENT_SIZE[dtype], sm_count() if num_sms is None else num_sms))


def _first_rule(p: Product) -> TileRule:
    return next(rule for rule in TILE_RULES if rule.applies(p))


@functools.lru_cache(maxsize=4096)
def heuristic_config(M: int, N: int, K: int, dtype: torch.dtype) -> Config:
    """A good configuration for an ``M x N x K`` product of ``dtype`` inputs on this GPU: that of the
    first of :data:`TILE_RULES` that applies (:func:`tile_rule`). Under the interpreter every block is
    16 (the smallest tile a GPU dot accepts).

        >>> heuristic_config(16, 4096, 4096, torch.float16).block_m  # doctest: +SKIP
        16
    """
    if runtime.INTERPRET:
        return Config(16, 16, 16, num_warps=4, num_stages=2)
    p = Product(M, N, K, ELEMENT_SIZE[dtype], sm_count())
    return _first_rule(p).config(p)


def _streamk_pays(M, N, K, config, sms, dtype=None):
    # A Stream-K piece costs a pipeline fill and a shared tile a fix-up (notes/gemm-decisions.md).
    tiles = cdiv(M, config.block_m) * cdiv(N, config.block_n)
    if config.block_m <= 64:  # decode: Stream-K fills a last wave that is less than half full, or
        # shares K when the tiles leave half the SMs idle (24+ K-steps); either way only where each
        # share is 512+ of K: else its fix-up (a partial through L2, a flag) costs what it spreads
        shared = streamk_tiles_for(M, N, config, sms)
        if not shared or K < 512 * max(1, sms // shared):
            return False
        return (tiles > sms and tiles % sms < sms // 2) or (2 * tiles <= sms and cdiv(K, config.block_k) >= 24)
    one_byte = dtype is not None and ELEMENT_SIZE.get(dtype, 2) == 1
    if one_byte:
        return False
    # Compute-bound tiles: only where the last wave's tiles are split in two or more; 128 x 128 tiles
    # also need a long K loop, 128 x 256 tiles four full waves before it.
    rem = tiles % sms
    split = streamk_programs_for(M, N, K, config, sms) // rem if tiles > sms and rem else 0
    if config.block_m * config.block_n == 128 * 128:
        return split >= 2 and cdiv(K, config.block_k) >= 64
    return config.block_m * config.block_n >= 128 * 256 and tiles >= 4 * sms and split >= 2


def streamk_tiles_for(M: int, N: int, config: Config, num_sms: int | None = None) -> int:
    """Tiles given to Stream-K in ``"streamk"`` mode: the last, partial wave (all tiles when there
    are fewer tiles than SMs, none when the tiles fill whole waves); sharing more measured slower
    (``notes/gemm-decisions.md``, "Stream-K")."""
    sms = num_sms or sm_count()
    tiles = cdiv(M, config.block_m) * cdiv(N, config.block_n)
    return tiles if tiles < sms else tiles % sms


def streamk_programs_for(M: int, N: int, K: int, config: Config, num_sms: int | None = None) -> int:
    """Programs that share the Stream-K tiles' K-iterations in ``"streamk"`` mode: ``num_sms //
    streamk_tiles`` per tile, so that programs holding the same chunk of different tiles move through
    K in step and L2 serves them, and for 128-row tiles no fewer than 32 K-steps per chunk (0 when no
    tile is Stream-K; ``notes/gemm-decisions.md``, "Stream-K")."""
    sms = num_sms or sm_count()
    sk = streamk_tiles_for(M, N, config, sms)
    if not sk:
        return 0
    split = max(1, sms // sk)
    if config.block_m >= 128:
        split = max(1, min(split, cdiv(K, config.block_k) // 32))
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
    # small tiles' K loop is bound by load latency (7 stages: 512 x 10240 x 8192 0.90 -> 0.94 x cuBLAS)
    return Config(max(16, config.block_m // 2), max(16, config.block_n // 2), config.block_k, num_warps=4,
                  num_stages=max(7, config.num_stages + 1), group_size_m=config.group_size_m, tma=config.tma,
                  tma_store=config.tma_store)


@functools.lru_cache(maxsize=4096)
def tail_plan_for(M: int, N: int, config: Config, num_sms: int | None = None) -> "TailPlan | None":
    """Where ``mode="tail"`` cuts an ``M x N`` output, or None when no cut works.

    The cut keeps the most whole rows (or columns) of ``config`` tiles whose tiles fill their waves of
    ``num_sms`` programs to at least 97 %, and needs the strip past it to fit in one wave of tiles half
    as tall and half as wide. Both launches are persistent; a ragged last wave of big tiles costs as
    long as a full one, the small tiles of the strip finish sooner (``notes/gemm-decisions.md``,
    "The tail split").

        >>> tail_plan_for(3072, 3072, Config(128, 256, 64), num_sms=132).cut
        2816
    """
    sms = num_sms or sm_count()
    tail = _tail_config(config)
    best = None
    for axis, block, along, other in (("m", config.block_m, cdiv(M, config.block_m), cdiv(N, config.block_n)),
                                      ("n", config.block_n, cdiv(N, config.block_n), cdiv(M, config.block_m))):
        # the most whole rows (columns) of tiles that fill whole waves
        rows = next((r for r in range(along - 1, 0, -1) if r * other / (cdiv(r * other, sms) * sms) >= 0.97), 0)
        if not rows:
            continue
        cut = rows * block
        strip_m, strip_n = (M - cut, N) if axis == "m" else (M, N - cut)
        tail_tiles = cdiv(strip_m, tail.block_m) * cdiv(strip_n, tail.block_n)
        plan = TailPlan(axis, cut, tail, rows * other, tail_tiles)
        if tail_tiles <= sms and (best is None or (plan.main_tiles, -tail_tiles) > (best.main_tiles, -best.tail_tiles)):
            best = plan
    return best


def _tail_pays(M, N, config, sms):
    # Where the waves are nearly full there is little to win and a second launch to pay.
    return config.block_m >= 128 and _wave_efficiency(M, N, config.block_m, config.block_n, sms) < 0.9 \
        and tail_plan_for(M, N, config, sms) is not None


# Speed per SM of a tile shape, relative to Triton's 128 x 256 (H100, bf16): 128 x 128 does ~8% less
# (8192 x 10240 x 8192, waves 0.995 / 0.970 full: 0.89 x cuBLAS against 1.02); the Gluon kernel's ~5% less
_NARROW_SPEED = 0.92
_GLUON_SPEED = 0.95


def gluon_here() -> bool:
    """Whether the Gluon kernel can run here: compiled, Triton with Gluon, an sm_90 GPU."""
    return not runtime.INTERPRET and gluon_gemm.gluon is not None and capability() == (9, 0)


def _waves(M, N, K, config, sms, slow_rows=False) -> float:
    """The time of ``config``'s schedule for an M x N output, in waves of 128 x 256 tiles: whole waves,
    the tail split's main waves and its strip (0.6 of a wave), or Stream-K's full waves and its last
    wave's share, each scaled by the tile's cost per wave (:func:`_tile_cost`)."""
    tiles = cdiv(M, config.block_m) * cdiv(N, config.block_n)
    per_tile = _tile_cost(config.block_m, config.block_n, slow_rows)
    if _tail_pays(M, N, config, sms):
        return (cdiv(tail_plan_for(M, N, config, sms).main_tiles, sms) + 0.6) * per_tile
    if tiles >= 4 * sms and _streamk_pays(M, N, K, config, sms):  # shares amortized over 4+ full waves
        return tiles / sms * per_tile
    return cdiv(tiles, sms) * per_tile


def _tile_cost(rows, cols, slow_rows=False, speed=None) -> float:
    """One wave of ``rows x cols`` tiles, relative to one of Triton's 128 x 256: in proportion to the
    tile's area over its speed per SM where the tensor cores decide (``speed``, default Triton's:
    1, or ``_NARROW_SPEED`` below 128 x 256); to the operand bytes each K-step loads (``rows + cols``)
    where the loads decide, as they do for operands whose rows straddle 32-byte sectors (``slow_rows``;
    ``notes/gemm-decisions.md``, "Rows off the sector")."""
    if slow_rows:
        return (rows + cols) / (128 + 256)
    area = rows * cols / (128 * 256)
    return area / (speed or (1.0 if area >= 1 else _NARROW_SPEED))


@functools.lru_cache(maxsize=4096)
def gluon_tiles_for(M: int, N: int, K: int, config: Config, num_sms: int | None = None,
                    slow_rows: bool = False) -> tuple:
    """The Gluon kernel's ``(tile, swap)`` choices (``course.gemm.gluon``) that ``mode="auto"``
    prefers to ``config``'s Triton schedule for an ``M x N x K`` product, fastest first; empty where
    Triton's tiles do as well. ``swap``: the tile's rows run along N (``C^T = B^T A^T``).
    ``slow_rows``: an operand's rows straddle 32-byte sectors (``layout.rows_straddle_sectors``).

    Both sides are costed by one model (``_waves``): waves of tiles times each tile's cost per wave
    (``_tile_cost``); a Gluon tile must win by 5 % (``notes/gemm-decisions.md``, "The Gluon kernel").

        >>> gluon_tiles_for(512, 6144, 4096, Config(128, 256, 64, num_warps=8, num_stages=4), num_sms=132)[0]
        ((192, 128), True)
    """
    sms = num_sms or sm_count()
    if M <= 64 or config.block_m != 128 or config.block_n not in (128, 256):
        return ()
    now = _waves(M, N, K, config, sms, slow_rows)

    def cost(choice):
        tile, swap = choice
        return cdiv(gluon_gemm.tiles(M, N, swap, tile), sms) * _tile_cost(*tile, slow_rows, speed=_GLUON_SPEED)

    faster = [choice for choice in gluon_gemm.tile_choices(M, N, sms) if cost(choice) < 0.95 * now]
    return tuple(sorted(faster, key=cost))  # a stable sort: tile_choices breaks ties


def choose_mode(M: int, N: int, K: int, config: Config, num_sms: int | None = None, dtype=None,
                gluon: bool | None = None) -> str:
    """What ``mode="auto"`` runs: ``"gluon"`` for 2-byte inputs on an sm_90 GPU where its tiles
    fill the waves clearly better (``gluon_tiles_for``; ``gluon=False`` leaves it out, and at launch,
    operands whose layout it cannot read fall back to the rest of this list); else ``"tail"`` for
    2-byte inputs whose tiles fill their waves to under 90 % when a tail split exists
    (``tail_plan_for``); else ``"streamk"`` where the last, partial wave can be split into K-chunks
    shared by two or more programs each and the problem is big enough to pay for the fix-ups; else
    ``"persistent"`` (``notes/gemm-decisions.md``, "Stream-K").

        >>> choose_mode(4096, 4096, 4096, Config(128, 256, 64), num_sms=132, gluon=False)  # doctest: +SKIP
        'persistent'
    """
    sms = num_sms or sm_count()
    two_byte = dtype is None or ELEMENT_SIZE.get(dtype) == 2
    if gluon is None:
        gluon = gluon_here()
    if two_byte and gluon and gluon_tiles_for(M, N, K, config, sms):
        return "gluon"
    if runtime.INTERPRET:  # exercise both schedules on the CPU
        tiles = cdiv(M, config.block_m) * cdiv(N, config.block_n)
        return "streamk" if tiles % sms else "persistent"
    if two_byte and _tail_pays(M, N, config, sms):
        return "tail"
    return "streamk" if _streamk_pays(M, N, K, config, sms, dtype) else "persistent"


def unaligned_decode_config(a: torch.Tensor, b: torch.Tensor) -> "Config | None":
    """The configuration for a product too short to pay for copying ``b`` (M under
    ``course.gemm.layout.MACS_PER_COPIED_ELEMENT``) whose 16-bit ``b`` has rows TMA cannot read, such as a
    K-major weight with K = 4095; None for every other product (``heuristic_config`` then applies).
    Such a ``b`` takes 2-byte pointer loads: 16 x 128 x 64 tiles, one stage where its rows run along
    K, three where they run along N (``notes/gemm-decisions.md``, "Operand layout").

        >>> w = torch.empty(4096, 4095, dtype=torch.bfloat16, device="meta")  # rows of 8190 bytes
        >>> unaligned_decode_config(torch.empty(1, 4095, dtype=torch.bfloat16, device="meta"), w.T).num_stages
        1
    """
    M = a.shape[0]
    if M >= gemm_layout.MACS_PER_COPIED_ELEMENT or b.element_size() != 2 or tma_layout(b) is not None:
        return None
    along_k = stored_transposed(b)  # K-major: each row of the weight runs along K
    return Config(16, 128, 64, num_warps=4, num_stages=1 if along_k else 3, tma=False, tma_store=False)


def autotune_candidates(M, N, K, dtype):
    """The configurations ``matmul(..., autotune=True)`` times: the heuristic's and a few around it."""
    base = heuristic_config(M, N, K, dtype)
    esize = ELEMENT_SIZE[dtype]
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
