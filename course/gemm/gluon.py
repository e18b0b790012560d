"""A Hopper GEMM in Gluon with tiles of 192 x 128, 128 x 144 or 128 x 320: shapes Triton cannot express.

Triton's tiles are powers of two, and on some shapes that leaves SMs idle however the tiles are
scheduled: 1536^3 makes 72 tiles of 128 x 256 for 132 SMs; 3072^3 makes 288 (2.2 waves).
cuBLAS runs 144 x 128, 192 x 128 or 320 x 128 tiles there. Gluon, Triton's lower-level dialect,
lets a kernel give each *warpgroup* its own accumulator, so a 192-row tile is three warpgroups of
64 rows:

* three consumer partitions (4 warps each) each keep a 64 x 128 fp32 accumulator and issue
  ``wgmma`` m64 n128 on their own 64 rows of the A tile and the shared B tile;
* one producer warp only issues TMA loads into a ring of shared-memory slots (``TILES``: 3 to 6
  stages, by tile shape); ``ready``/``empty`` mbarriers hand the slots back and forth (the consumers free a slot
  once the wgmma that read it has finished), so the loads of the next tile run during an epilogue;
* the kernel is persistent (one program per SM, tiles in grouped order).

On Triton 3.9 it also runs on pairs of CTAs (``ctas=2``): a program is a cluster of two SMs with a tile
each, one above the other, and each K-step's tile of B is loaded once and multicast into both.
``mode="auto"`` does not use it: it is no faster (notes, "Pairs of CTAs").

Columns that are no power of two are two accumulators side by side (a tensor's sides must be
powers of two; wgmma takes any multiple of 8), each fed by its own B descriptor: the 128 x 144
tile is two warpgroups of 64 x 128 + 64 x 16 (6 stages), the 128 x 320 tile two of 64 x 256 +
64 x 64 (3 stages, 160 accumulator registers per thread). ``swap=True`` computes ``C^T = B^T A^T``
instead: the tile's rows run along N. That suits a short, wide product such as 512 x 6144 x 4096
(32 x 4 = 128 tiles of 192 x 128 for 132 SMs); the epilogue transposes each piece on its way to
shared memory, so C stays row-major.

It needs an sm_90 GPU (wgmma), 16-bit inputs and output, ``a`` row-major and, with ``swap``,
``b`` stored K-major (``b = w.T`` for a row-major ``w``); :func:`unsupported` says what is missing.
Gluon has no interpreter: on a CPU the Triton kernels of ``course.gemm`` run instead.

How it was measured, how the tile is chosen and what is left against cuBLAS:
``notes/gemm-decisions.md``, "The Gluon kernel".
"""

from __future__ import annotations

import functools

import torch

from course import hardware, runtime
from course.gemm.layout import tma_layout
from course.gemm.launcher import BoundLaunch, rebased

try:  # Gluon is experimental: absent from older Triton, and its API may move in newer ones
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                                  warpgroup_mma, warpgroup_mma_wait)
    try:  # clusters of CTAs (Triton 3.9; 3.6 has no multicast copy)
        from triton.experimental.gluon.language.nvidia.hopper import cluster
    except ImportError:  # pragma: no cover - depends on the installed Triton
        cluster = None
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    # The TMA copies are async_copy_global_to_shared / async_copy_shared_to_global in Triton 3.6;
    # later releases rename them async_load / async_store and make the old names raise.
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    _tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None

BLOCK_K = 64  # K step
EPI = 64  # the epilogue stores 64 x 64 pieces (and 64 x 16 ones for the 144-column tile)
# Tile shapes (rows x columns), each with its pipeline depth: as many stages of operands as fit
# Hopper's 227 KB next to the epilogue's staging buffers. 192 x 128 is three warpgroups of 64 rows
# (5 x 40 KB + 3 x 8 KB); 128 x 144 is two, whose 144 columns are a 128- and a 16-wide wgmma
# (Triton's tensors are powers of two): 6 x 34 KB + 2 x 10 KB; 128 x 320 is two of 256 + 64
# columns: 3 x 56 KB + 2 x 16 KB.
TILES = {(192, 128): 5, (128, 144): 6, (128, 320): 3}
WIDE = (192, 128)


if gluon is not None:

    @gluon.jit
    def _tile_coords(t, row_tiles, col_tiles, GROUP: gl.constexpr):
        # grouped order: GROUP row-tiles share their column tiles in L2 (as course.stages does)
        per_group = GROUP * col_tiles
        first = (t // per_group) * GROUP
        rows = gl.minimum(row_tiles - first, GROUP)
        return first + (t % per_group) % rows, (t % per_group) // rows

    @gluon.jit
    def _schedule(R, Q, K, BR: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr, NUM_SMS: gl.constexpr):
        """Tiles along R and Q, K-steps per tile, and how many tiles this program computes (every
        NUM_SMS-th): the consumers and the producer walk the same schedule."""
        row_tiles = gl.cdiv(R, BR)
        col_tiles = gl.cdiv(Q, BQ)
        my_tiles = (row_tiles * col_tiles - gl.program_id(0) + NUM_SMS - 1) // NUM_SMS
        return row_tiles, col_tiles, gl.cdiv(K, BK), my_tiles

    @gluon.jit
    def _add_bias(out, off_r, off_q, bias_ptr, R, Q, SWAP: gl.constexpr):
        """``out`` (rows from off_r, columns from off_q) plus bias, which is per column of C: the
        tile's columns, or its rows when swapped."""
        layout: gl.constexpr = out.type.layout
        if SWAP:
            idx = off_r + gl.arange(0, out.shape[0], layout=gl.SliceLayout(1, layout))
            return out + gl.load(bias_ptr + idx, mask=idx < R, other=0.0).to(gl.float32)[:, None]
        else:
            idx = off_q + gl.arange(0, out.shape[1], layout=gl.SliceLayout(0, layout))
            return out + gl.load(bias_ptr + idx, mask=idx < Q, other=0.0).to(gl.float32)[None, :]

    @gluon.jit
    def _store_piece(piece, c_desc, c_s, off_r, off_q, SWAP: gl.constexpr):
        """One piece of a tile through its staging buffer; TMA clips it at C's edge."""
        tma.store_wait(pendings=0)  # the buffer's previous piece has left it
        if SWAP:  # the tile is a piece of C^T: transpose it on the way to shared memory
            c_s.store(piece.permute((1, 0)))
            fence_async_shared()
            _tma_store(c_desc, [off_q, off_r], c_s)
        else:
            c_s.store(piece)
            fence_async_shared()
            _tma_store(c_desc, [off_r, off_q], c_s)

    @gluon.jit
    def _store_columns(out, c_desc, c_s, off_r, off_q, SWAP: gl.constexpr):
        """A warpgroup's 64 x 128 or 64 x 256 result (per CTA) as 64 x 64 pieces (halves, then quarters)."""
        ROWS: gl.constexpr = out.shape[0]  # 64, or 128 for a pair of CTAs (64 each)
        EPI: gl.constexpr = c_s.type.shape[0] if SWAP else c_s.type.shape[1]
        HALF: gl.constexpr = out.shape[1] // 2
        halves = out.reshape(ROWS, 2, HALF).permute(0, 2, 1).split()
        for h in gl.static_range(2):
            if HALF > EPI:
                quarters = halves[h].reshape(ROWS, 2, EPI).permute(0, 2, 1).split()
                for q in gl.static_range(2):
                    _store_piece(quarters[q], c_desc, c_s, off_r, off_q + h * HALF + q * EPI, SWAP)
            else:
                _store_piece(halves[h], c_desc, c_s, off_r, off_q + h * HALF, SWAP)

    @gluon.jit
    def _free_slot(empty, y_free, slot, pred, CTAS: gl.constexpr):
        """This warpgroup is done with ring slot ``slot``: tell the producer, and with a pair of CTAS
        also the CTA that multicasts B (this CTA's copy of B may be overwritten)."""
        mbarrier.arrive(empty.index(slot), count=1, pred=pred)
        if CTAS > 1:
            mbarrier.arrive(y_free.index(slot), count=1, pred=pred)

    @gluon.jit
    def consumer(x_s, y_s, y2_s, ready, empty, y_free, c_desc, c2_desc, c_s, c2_s, bias_ptr, R, Q, K,
                  WG: gl.constexpr, WGS: gl.constexpr, EXTRA: gl.constexpr, NUM_SMS: gl.constexpr, GROUP: gl.constexpr,
                  STAGES: gl.constexpr, Y_KMAJOR: gl.constexpr, SWAP: gl.constexpr, HAS_BIAS: gl.constexpr,
                  CTAS: gl.constexpr):
        """Warpgroup WG: rows 64*WG .. 64*WG+63 of every tile of this program, start to store.
        With EXTRA columns, a second, EXTRA-wide accumulator takes the tile's last columns. With a pair
        of CTAS, the program's tile is two CTAs' tiles stacked: warpgroup WG of CTA r takes rows
        128*WG + 64*r .. + 63 (its shared memory and accumulator hold only those)."""
        BK: gl.constexpr = x_s.type.shape[2]
        BQ: gl.constexpr = y_s.type.shape[1] if Y_KMAJOR else y_s.type.shape[2]
        ROWS: gl.constexpr = x_s.type.shape[1]  # a warpgroup's rows, over the CTAs of the program
        pid = gl.program_id(0)
        row_tiles, col_tiles, num_k, my_tiles = _schedule(R, Q, K, ROWS * WGS, BQ + EXTRA, BK, NUM_SMS)
        BQ2: gl.constexpr = EXTRA if EXTRA > 0 else 16  # (a placeholder without EXTRA columns)
        # a pair: the rows split between the CTAs, as A's are (Triton 3.6 takes the bases as a list, not a constexpr)
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, BQ, 16],
                                                             cga_layout=[] if CTAS == 1 else [[1, 0]])
        acc2_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                              instr_shape=[16, BQ2, 16],
                                                              cga_layout=[] if CTAS == 1 else [[1, 0]])
        acc = gl.zeros([ROWS, BQ], gl.float32, acc_layout)
        acc2 = gl.zeros([ROWS, BQ2], gl.float32, acc2_layout)  # unused (and compiled away) without EXTRA
        MMAS: gl.constexpr = 2 if EXTRA > 0 else 1  # wgmma groups per K-step
        my_c_s = c_s.index(WG)
        step = 0  # K-steps done by this program so far: the ring slot and its phase
        for t in range(my_tiles):
            for kk in range(num_k):
                s = step % STAGES
                mbarrier.wait(ready.index(s), (step // STAGES) & 1)
                x = x_s.index(s * WGS + WG)
                y = y_s.index(s).permute((1, 0)) if Y_KMAJOR else y_s.index(s)
                acc = warpgroup_mma(x, y, acc, use_acc=kk > 0, is_async=True)
                if EXTRA > 0:
                    y2 = y2_s.index(s).permute((1, 0)) if Y_KMAJOR else y2_s.index(s)
                    acc2 = warpgroup_mma(x, y2, acc2, use_acc=kk > 0, is_async=True)
                # one K-step in flight: the previous one is done, so its slot can be refilled
                acc, acc2 = warpgroup_mma_wait(num_outstanding=MMAS, deps=(acc, acc2))
                _free_slot(empty, y_free, (step + STAGES - 1) % STAGES, kk > 0, CTAS)
                step += 1
            acc, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=(acc, acc2))
            _free_slot(empty, y_free, (step + STAGES - 1) % STAGES, True, CTAS)

            pid_r, pid_q = _tile_coords(pid + t * NUM_SMS, row_tiles, col_tiles, GROUP)
            off_r = pid_r * (ROWS * WGS) + ROWS * WG
            off_q = pid_q * (BQ + EXTRA)
            out = acc
            if HAS_BIAS:
                out = _add_bias(out, off_r, off_q, bias_ptr, R, Q, SWAP)
            _store_columns(out.to(c_desc.dtype), c_desc, my_c_s, off_r, off_q, SWAP)
            if EXTRA > 0:
                out2 = acc2
                if HAS_BIAS:
                    out2 = _add_bias(out2, off_r, off_q + BQ, bias_ptr, R, Q, SWAP)
                _store_piece(out2.to(c_desc.dtype), c2_desc, c2_s.index(WG), off_r, off_q + BQ, SWAP)
        tma.store_wait(pendings=0)

    if cluster is not None:  # Triton 3.9: the calls of a pair of CTAs (kept out of the kernels' text for 3.6)

        @gluon.jit
        def _pair_barriers(STAGES: gl.constexpr):
            """``ready`` and ``empty``, one of each per CTA and stage, and ``y_free``, one per pair of CTAs
            and stage (it lives in the first CTA, which alone waits on it)."""
            return (mbarrier.allocate_mbarrier(batch=STAGES), mbarrier.allocate_mbarrier(batch=STAGES),
                    mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True))

        @gluon.jit
        def _multicast_load(desc, coord, bar, dest):
            tma.async_load(desc, coord, bar, dest, multicast=True)

        @gluon.jit
        def _pair_sync():
            cluster.barrier()

    else:  # pragma: no cover - depends on the installed Triton

        @gluon.jit
        def _pair_barriers(STAGES: gl.constexpr):
            gl.static_assert(False, "pairs of CTAs need Triton 3.9's Gluon")

        @gluon.jit
        def _multicast_load(desc, coord, bar, dest):
            gl.static_assert(False, "pairs of CTAs need Triton 3.9's Gluon")

        @gluon.jit
        def _pair_sync():
            gl.static_assert(False, "pairs of CTAs need Triton 3.9's Gluon")

    @gluon.jit
    def _load_y(desc, coord, bar, dest, CTAS: gl.constexpr):
        """B's tile of a K-step into ``dest``; with a pair of CTAS, one copy multicast into both."""
        if CTAS > 1:
            _multicast_load(desc, coord, bar, dest)
        else:
            _tma_load(desc, coord, bar, dest)

    @gluon.jit
    def producer(x_desc, y_desc, y2_desc, x_s, y_s, y2_s, ready, empty, y_free, R, Q, K,
                  WGS: gl.constexpr, EXTRA: gl.constexpr, NUM_SMS: gl.constexpr, GROUP: gl.constexpr,
                  STAGES: gl.constexpr, Y_KMAJOR: gl.constexpr, CTAS: gl.constexpr):
        """One warp: TMA loads of every K-step of every tile of this program, as slots free up. With a
        pair of CTAS, each loads its own A rows and the first multicasts B into both, once both
        have freed the slot (``y_free``: a barrier of the pair, waited on by the first CTA only)."""
        BK: gl.constexpr = x_desc.block_type.shape[1]
        BQ: gl.constexpr = y_desc.block_type.shape[0] if Y_KMAJOR else y_desc.block_type.shape[1]
        ROWS: gl.constexpr = x_desc.block_type.shape[0]  # a warpgroup's rows, over the CTAs
        nbytes: gl.constexpr = (WGS * x_desc.block_type.nbytes // CTAS + y_desc.block_type.nbytes
                                + (y2_desc.block_type.nbytes if EXTRA > 0 else 0))  # arriving in each CTA
        pid = gl.program_id(0)
        row_tiles, col_tiles, num_k, my_tiles = _schedule(R, Q, K, ROWS * WGS, BQ + EXTRA, BK, NUM_SMS)
        step = 0
        for t in range(my_tiles):
            pid_r, pid_q = _tile_coords(pid + t * NUM_SMS, row_tiles, col_tiles, GROUP)
            off_r = pid_r * (ROWS * WGS)
            off_q = pid_q * (BQ + EXTRA)
            for kk in range(num_k):
                s = step % STAGES
                mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)  # first pass: free
                if CTAS > 1:
                    mbarrier.wait(y_free.index(s), ((step // STAGES) & 1) ^ 1)
                bar = ready.index(s)
                mbarrier.expect(bar, nbytes)
                k = kk * BK
                for w in gl.static_range(WGS):  # the A rows of each warpgroup
                    _tma_load(x_desc, [off_r + ROWS * w, k], bar, x_s.index(s * WGS + w))
                if Y_KMAJOR:
                    _load_y(y_desc, [off_q, k], bar, y_s.index(s), CTAS)
                    if EXTRA > 0:
                        _load_y(y2_desc, [off_q + BQ, k], bar, y2_s.index(s), CTAS)
                else:
                    _load_y(y_desc, [k, off_q], bar, y_s.index(s), CTAS)
                    if EXTRA > 0:
                        _load_y(y2_desc, [k, off_q + BQ], bar, y2_s.index(s), CTAS)
                step += 1

    @gluon.jit
    def wide_kernel(x_desc, y_desc, y2_desc, c_desc, c2_desc, bias_ptr, R, Q, K, NUM_SMS: gl.constexpr,
                     GROUP: gl.constexpr, STAGES: gl.constexpr, WGS: gl.constexpr, EXTRA: gl.constexpr,
                     Y_KMAJOR: gl.constexpr, SWAP: gl.constexpr, HAS_BIAS: gl.constexpr,
                     CONSUMER_REGS: gl.constexpr, CTAS: gl.constexpr):
        """out[R x Q] = X[R x K] @ Y (Y: [Q x K] when Y_KMAJOR, else [K x Q]); C is out, or out^T (SWAP).
        Tiles of 64*WGS rows and the columns of y_desc's block (128 or 256), plus EXTRA (16 or 64) columns
        through y2_desc and c2_desc (placeholders without them). CTAS = 2: a program is a cluster of two
        CTAs with a tile each, one above the other, that share B's tiles (one TMA copy multicast into
        both); the descriptors' blocks are then the pair's (x: 128 rows, 64 in each CTA)."""
        BK: gl.constexpr = x_desc.block_type.shape[1]
        ROWS: gl.constexpr = x_desc.block_type.shape[0]  # 64 per CTA
        # the A rows of a stage: WGS blocks of 64 (shapes are powers of two, so no 192 x 64 block)
        x_s = gl.allocate_shared_memory(x_desc.dtype, [STAGES * WGS, ROWS, BK], x_desc.layout)
        y_s = gl.allocate_shared_memory(y_desc.dtype, [STAGES] + y_desc.block_type.shape, y_desc.layout)
        y2_s = y_s  # a placeholder without EXTRA columns
        if EXTRA > 0:
            y2_s = gl.allocate_shared_memory(y2_desc.dtype, [STAGES] + y2_desc.block_type.shape, y2_desc.layout)
        if CTAS == 1:
            ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
            empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
            y_free = empty  # a placeholder: B is this CTA's alone
        else:  # y_free: WGS arrivals from each CTA
            ready, empty, y_free = _pair_barriers(STAGES)
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)  # the producer's expect + the TMA bytes
            mbarrier.init(empty.index(i), count=WGS)  # one arrival per consumer warpgroup
            if CTAS > 1:
                mbarrier.init(y_free.index(i), count=WGS)
        # a staging buffer per warpgroup for its output pieces (and one for the EXTRA columns)
        c_s = gl.allocate_shared_memory(c_desc.dtype, [WGS] + c_desc.block_type.shape, c_desc.layout)
        c2_s = c_s
        if EXTRA > 0:
            c2_s = gl.allocate_shared_memory(c2_desc.dtype, [WGS] + c2_desc.block_type.shape, c2_desc.layout)
        # partitions: a consumer per warpgroup (the first is the default partition), then the producer.
        # One comprehension: joining tuples with + would turn the constexprs in them into plain ints
        gl.warp_specialize(
            [(producer, (x_desc, y_desc, y2_desc, x_s, y_s, y2_s, ready, empty, y_free, R, Q, K, WGS, EXTRA, NUM_SMS,
                          GROUP, STAGES, Y_KMAJOR, CTAS)) if p == WGS else
             (consumer, (x_s, y_s, y2_s, ready, empty, y_free, c_desc, c2_desc, c_s, c2_s, bias_ptr, R, Q, K, p, WGS,
                          EXTRA, NUM_SMS, GROUP, STAGES, Y_KMAJOR, SWAP, HAS_BIAS, CTAS))
             for p in (0, 1, 2, 3)[:WGS + 1]],
            [4] * (WGS - 1) + [1], [CONSUMER_REGS] * (WGS - 1) + [40])  # warps, registers per thread
        if CTAS > 1:  # neither CTA leaves while the other may still arrive on its barriers or copy into it
            _pair_sync()


def _columns(tile: tuple) -> tuple:
    """(columns of the main accumulator, extra columns): 128 x 144 is 128 + 16, 128 x 320 is 256 + 64."""
    main = 256 if tile[1] >= 256 else 128
    return main, tile[1] - main


def _consumer_registers(tile: tuple) -> int:
    """Registers per thread of a consumer warpgroup: 152 where its accumulators hold 64 or 72 (64 rows
    x 128 or 144 columns over 128 threads), 232 where they hold the 160 of 320 columns."""
    return 152 if tile[1] <= 144 else 232


def launch_shapes(tile: tuple, swap: bool, y_kmajor: bool, ctas: int = 1) -> tuple:
    """``(blocks, constexprs)`` of a ``wide_kernel`` launch with ``tile`` tiles on programs of ``ctas``
    CTAs: the block of each tensor descriptor (x, y, y2, c, c2; without extra columns y2 and c2 repeat y
    and c), each with how it is spread over the CTAs (``cga``: None for one CTA) and the kernel's tile
    constants. :func:`matmul_wide` launches with them, and the compile check in ``tests/`` builds the
    same kernel from them."""
    block_q, extra = _columns(tile)
    rows = 64 * ctas  # a warpgroup's rows over the program: split by rows between the CTAs
    split, shared = ([[0, 1]] if swap else [[1, 0]], [[0, 0]]) if ctas > 1 else (None, None)
    y_block = [block_q, BLOCK_K] if y_kmajor else [BLOCK_K, block_q]
    piece = [EPI, rows] if swap else [rows, EPI]
    blocks = {"x": ([rows, BLOCK_K], None if ctas == 1 else [[1, 0]]), "y": (y_block, shared),
              "y2": (y_block, shared), "c": (piece, split), "c2": (piece, split)}
    if extra:
        blocks["y2"] = ([extra, BLOCK_K] if y_kmajor else [BLOCK_K, extra], shared)
        blocks["c2"] = ([extra, rows] if swap else [rows, extra], split)
    constexprs = dict(STAGES=TILES[tile], WGS=tile[0] // 64, EXTRA=extra, Y_KMAJOR=y_kmajor, SWAP=swap,
                      CONSUMER_REGS=_consumer_registers(tile), CTAS=ctas)
    return blocks, constexprs


def tiles(M: int, N: int, swap: bool, tile: tuple = WIDE) -> int:
    """Number of ``tile`` (rows x columns) tiles of an M x N output (the rows along N when ``swap``)."""
    rows, cols = (N, M) if swap else (M, N)
    return -(-rows // tile[0]) * -(-cols // tile[1])


def tile_choices(M: int, N: int, num_sms: int) -> list:
    """``[(tile, swap)]`` for an M x N output, the fastest first by a model fitted to this kernel's
    timings: each K-step of a tile takes a time in proportion to its area (H100, bf16:
    about 42,000 outputs per us per SM for each tile shape: 0.57 us for 192 x 128 at 3072^3, 1.0 us
    for 128 x 320 at 512 x 10240 x 8192), so a program's time is its waves of tiles times their area;
    ties go to the tile that reads fewer bytes per step (rows + columns). At 1536^3 that picks 132
    tiles of 128 x 144 (one wave) over 96 of 192 x 128; at 3072^3, 3 waves of 192 x 128 over 2 of
    128 x 320 (measured: 82 against 97 us).

        >>> tile_choices(1536, 1536, 132)[0]
        ((128, 144), False)
    """
    def cost(choice):
        tile, swap = choice
        waves = -(-tiles(M, N, swap, tile) // num_sms)
        return waves * tile[0] * tile[1], waves * (tile[0] + tile[1]), swap

    return sorted(((tile, swap) for tile in TILES for swap in (False, True)), key=cost)


@functools.lru_cache(maxsize=1024)
def group_for(rows: int, cols: int, tile: tuple, num_programs: int) -> int:
    """The ``GROUP`` of the grouped tile order for an output of ``rows`` x ``cols`` (rows along the
    tile's rows) on ``num_programs`` persistent programs: the one whose waves of tiles touch the
    fewest operand rows. Per wave, the distinct row blocks of A and column blocks of B it reads (as
    notebook 04's ``tiled.wave_footprint`` counts them) are weighted by the tile's height and width
    and summed over the waves: what L2 must hold or fetch again while a wave runs. Ties go to 8.

        >>> group_for(4096, 1600, (128, 144), 132), group_for(1000, 4544, (128, 144), 132)
        (1, 8)
    """
    row_tiles, col_tiles = -(-rows // tile[0]), -(-cols // tile[1])
    t = torch.arange(row_tiles * col_tiles)

    def touched(group):  # every tile's place in _tile_coords's order, then the waves' footprints
        per_group = group * col_tiles
        first = t // per_group * group
        height = (row_tiles - first).clamp(max=group)
        pid_m, pid_n = first + t % per_group % height, t % per_group // height
        waves = (slice(start, start + num_programs) for start in range(0, len(t), num_programs))
        return sum(len(pid_m[w].unique()) * tile[0] + len(pid_n[w].unique()) * tile[1] for w in waves)

    return min((1, 2, 4, 8, 16, 32), key=lambda g: (touched(g), abs(g - 8)))


def unsupported(a, b, c, swap: bool) -> str | None:
    """Why this kernel cannot compute ``c = a @ b`` here (None when it can)."""
    if gluon is None:
        return "this Triton has no Gluon (triton.experimental.gluon); install Triton 3.6 or later"
    if runtime.INTERPRET or not torch.cuda.is_available():
        return "Gluon kernels need a GPU (Triton's interpreter cannot run them)"
    cap = hardware.device_capability(a.device.index)
    if cap != (9, 0):
        return f"it needs an sm_90 GPU (Hopper: wgmma); this one is sm_{cap[0]}{cap[1]}"
    if a.dtype not in (torch.float16, torch.bfloat16) or c.dtype != a.dtype:
        return "it takes float16 or bfloat16 inputs with an output of the same dtype"
    if tma_layout(a) != "rows" or tma_layout(c) != "rows":
        return "a and the output must be row-major (contiguous rows, 16-byte aligned): pass a.contiguous()"
    b_layout = tma_layout(b)
    if swap and b_layout != "columns":
        return "with the tile rows along N, b must be stored K-major: pass b = w.T for a row-major w (N, K)"
    if b_layout is None:
        return "b must be row-major or K-major with 16-byte aligned rows: pass b.contiguous()"
    return None


def shared_layout(block: list, cga, bf16: bool):
    """The shared-memory layout of a descriptor's ``block`` spread over CTAs as ``cga`` says (None: one CTA)."""
    return _shared_layout(tuple(block), None if cga is None else tuple(map(tuple, cga)), bf16)


@functools.lru_cache(maxsize=None)
def _shared_layout(block: tuple, cga, bf16: bool):
    return gl.NVMMASharedLayout.get_default_for(list(block), gl.bfloat16 if bf16 else gl.float16,
                                                cga_layout=None if cga is None else [list(v) for v in cga])


def _descriptor(t: torch.Tensor, block: list, layout) -> "TensorDescriptor":
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


def matmul_wide(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bias: torch.Tensor | None, swap: bool,
                num_sms: int, group: int | None = None, tile: tuple = WIDE, ctas: int = 1) -> torch.Tensor:
    """``c = a @ b (+ bias)`` with ``tile`` (a key of ``TILES``) tiles, their rows along N when
    ``swap``, in grouped order of ``group`` row tiles (default: :func:`group_for`'s); inputs already
    checked (see :func:`unsupported`). ``ctas=2``: in clusters of two SMs whose tiles, one above the
    other, share each K-step's tile of B, loaded once and multicast into both (Triton 3.9 and later:
    :func:`clusters_here`)."""
    return wide_launch(a, b, c, bias, swap, num_sms, group, tile, ctas)(a, b, c, bias)


def clusters_here() -> bool:
    """Whether this Triton's Gluon can run ``wide_kernel`` on pairs of CTAs (TMA multicast, CTA clusters)."""
    return gluon is not None and cluster is not None and hasattr(tma, "async_load") and hasattr(
        mbarrier, "allocate_mbarrier")


def wide_launch(a, b, c, bias, swap: bool, num_sms: int, group: int | None = None, tile: tuple = WIDE,
                ctas: int = 1):
    """``launch(a, b, c, bias)``, which runs :func:`matmul_wide` for operands laid out as these (the
    same shapes, strides, dtypes and 16-byte alignment), the kernel bound at its first launch
    (``course.gemm.launcher``); after that launch, ``launch.addressed(pa, pb, pc, a, b, c, bias)`` is
    the same for a caller that has the addresses of a, b and c (a route of ``course.gemm.plans``)."""
    if ctas not in (1, 2) or (ctas == 2 and not clusters_here()):
        raise ValueError(f"ctas={ctas!r}: pass 1, or 2 for pairs of CTAs (Triton 3.9's Gluon)")
    M, K = a.shape
    N = b.shape[1]
    y_kmajor = swap or tma_layout(b) == "columns"  # swap: Y = A (M x K), a K-major operand
    R, Q = (N, M) if swap else (M, N)
    programs = max(num_sms // ctas, 1)  # one program per SM, or per pair of SMs
    program_tile = (tile[0] * ctas, tile[1])
    if group is None:
        group = group_for(R, Q, program_tile, programs)
    blocks, constexprs = launch_shapes(tile, swap, y_kmajor, ctas)
    blocks = {name: (block, shared_layout(block, cga, a.dtype == torch.bfloat16))
              for name, (block, cga) in blocks.items()}
    extra = constexprs["EXTRA"]
    options = dict(NUM_SMS=programs, GROUP=group, HAS_BIAS=bias is not None, num_warps=4, **constexprs)
    if ctas > 1:
        options["num_ctas"] = ctas
    bound = BoundLaunch(wide_kernel, (min(programs, tiles(M, N, swap, program_tile)),), options)

    def operands(a, b):
        if swap:  # X = B^T (N x K, row-major), Y = A
            return b.T, a
        return a, (b.T if y_kmajor else b)

    x, y = operands(a, b)
    names = ("x", "y", "c") + (("y2", "c2") if extra else ())
    tensors = {"x": x, "y": y, "y2": y, "c": c, "c2": c}
    templates = {name: rebased(_descriptor(tensors[name], *blocks[name]), None)
                 for name in names}  # built once, rebased on each call

    def launch(a, b, c, bias):
        x, y = (b, a) if swap else (a, b)  # a direct launch encodes their descriptors (b.T starts where b does)
        if bound.direct(x, y, y, c, c, bias if bias is not None else c, R, Q, K):
            return c
        x, y = operands(a, b)  # the first launch, or a profiler's hook installed: through Triton
        x_desc, y_desc, c_desc = rebased(templates["x"], x), rebased(templates["y"], y), rebased(templates["c"], c)
        y2_desc, c2_desc = y_desc, c_desc  # placeholders where the tile has no extra columns
        if extra:
            y2_desc, c2_desc = rebased(templates["y2"], y), rebased(templates["c2"], c)
        bound(x_desc, y_desc, y2_desc, c_desc, c2_desc, bias if bias is not None else c, R, Q, K)
        return c

    def addressed(pa, pb, pc, a, b, c, bias, a_scale=None, b_scale=None):
        px, py = (pb, pa) if swap else (pa, pb)
        if not bound.direct(px, py, py, pc, pc, pc if bias is None else bias.data_ptr(), R, Q, K):
            launch(a, b, c, bias)

    launch.addressed = addressed
    return launch
