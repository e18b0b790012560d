"""Flash attention's forward for Hopper in Gluon: warp specialization and wgmma kept busy.

    out, lse = attention.forward(q, k, v, causal=True, with_lse=True, kernel="gluon")   # course.attention
    # q, k, v: (batch, heads, seq, head_dim), float16 or bfloat16, on an sm_90 GPU

The same online softmax as :mod:`course.attention` (notebook 11), arranged the way FlashAttention-3
arranges it on an H100:

* **Warp specialization.** One producer warp only issues TMA loads: the program's rows of Q once,
  then every block of K and V into rings of shared-memory slots (``ready`` / ``empty`` mbarriers
  per slot, as in :mod:`course.gemm.gluon`). The consumers never wait on a global load they issued.
* **One warpgroup per 64 rows.** A program's ``64 * WGS`` query rows are ``WGS`` consumer
  warpgroups (4 warps each), each with its own 64 x head_dim fp32 accumulator; they read the same
  K and V slots, so a block is loaded once for all of them.
* **Softmax under the matmuls.** In step ``j`` a warpgroup issues ``S_j = Q K_jᵀ`` and then
  ``O += P_{j-1} V_{j-1}`` as asynchronous wgmma, waits for ``S_j`` only, and computes the softmax
  of ``S_j`` while the tensor cores still work on ``P_{j-1} V_{j-1}``; then it waits for that and
  rescales ``O``. ``P`` goes into the second wgmma from registers (the scores' accumulator layout
  is the operand layout wgmma wants), so it never touches shared memory.

The tensors are read through 4-D TMA descriptors (batch, heads, seq, head_dim), so any strides
with 16-byte aligned rows work and the hardware clips a block at a head's last row: a partial last
block of keys reads zeros, not the next head. It needs an sm_90 GPU, float16 or bfloat16 and a
head dim of 64 or 128 (:func:`unsupported` says what is missing); :func:`course.attention.attention`
runs it where it applies. Gluon has no interpreter: on a CPU, ``course.compile`` shows what it
compiles to.
"""

from __future__ import annotations

import functools
import math

import torch

from course import hardware, runtime

try:  # Gluon is experimental: absent from older Triton, and its API may move in newer ones
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                                  warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # 3.6's names
    _tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None

BLOCK_N = 128  # keys per step
# head dim -> (consumer warpgroups, i.e. query rows / 64; stages of K and V): what fits 227 KB of
# shared memory with room for the register budget of 2-3 warpgroups
SHAPES = {64: (2, 3), 128: (2, 2)}


if gluon is not None:

    @gluon.jit
    def _tile(t, num_m, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
        """(first query row, batch x heads + head) of tile ``t``: the tiles go head by head (a head's
        tiles share its keys in L2), and under a causal mask a head's last query blocks first (they
        read the most keys)."""
        m = t % num_m
        if CAUSAL:
            m = num_m - 1 - m
        return m * BLOCK_M, t // num_m

    @gluon.jit
    def _nth_tile(n):
        """This program's ``n``-th tile. The tiles are dealt in rounds of one per program, every
        other round in reverse ("snake" order): under a causal mask, where a head's tiles come
        longest first, that often deals a program a short tile after a long one (how evenly, for a
        shape: :func:`deal_balance`)."""
        pid = gl.program_id(0)
        programs = gl.num_programs(0)
        return n * programs + pid + (n % 2) * (programs - 1 - 2 * pid)

    @gluon.jit
    def _tile_count(num_tiles):
        """How many tiles :func:`_nth_tile` deals this program (the last round may be partial)."""
        rounds = num_tiles // gl.num_programs(0)
        return rounds + (_nth_tile(rounds) < num_tiles).to(gl.int32)

    @gluon.jit
    def _key_range(off_m, S_K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        """(blocks of keys a tile reads, the first of them that needs a mask)."""
        end = S_K
        mask_from = S_K // BLOCK_N
        if CAUSAL:  # key j is visible to query i when j <= i
            end = gl.minimum(S_K, off_m + BLOCK_M)
            mask_from = gl.minimum(mask_from, off_m // BLOCK_N)
        return gl.cdiv(end, BLOCK_N), mask_from

    @gluon.jit
    def _masked(s, start, rows, S_K, CAUSAL: gl.constexpr):
        """Scores ``s`` with -inf where key ``start + j`` is past the last key or (causal) after the row."""
        cols = start + gl.arange(0, s.shape[1], layout=gl.SliceLayout(0, s.type.layout))
        visible = gl.expand_dims(cols < S_K, 0)
        if CAUSAL:
            visible = visible & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
        return gl.where(visible, s, float("-inf"))

    @gluon.jit
    def _softmax(s, m_i, l_i, qk_scale):
        """One block's online softmax on raw scores ``s``: the probabilities (unnormalized), the new
        running maximum (raw units) and sum, and ``alpha``, how much the earlier terms shrink."""
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        alpha = gl.exp2((m_i - m_new) * qk_scale)
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_new * qk_scale, 1))  # one FMA per score, then exp2
        return p, m_new, l_i * alpha + gl.sum(p, axis=1), alpha

    @gluon.jit
    def _consumer(q_s, o_s, k_s, v_s, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn, o_desc, lse_ptr,
                  qk_scale, H, S_Q, S_K, num_tiles, WG: gl.constexpr, WGS: gl.constexpr, STAGES: gl.constexpr,
                  CAUSAL: gl.constexpr, HAS_LSE: gl.constexpr, OVERLAP: gl.constexpr, PINGPONG: gl.constexpr):
        """Warpgroup WG: rows ``64 * WG`` to ``64 * WG + 63`` of each of the program's tiles. With
        OVERLAP, the softmax of one block runs while the tensor cores multiply the previous one's
        probabilities by V; without, one thing at a time. With PINGPONG (two warpgroups), the two
        take turns to issue their matmuls (``turn`` barriers), so that one's softmax runs while the
        tensor cores work on the other's (the turns are taken around the overlapped issue, so PINGPONG
        needs OVERLAP: :func:`forward` passes it only with OVERLAP)."""
        D: gl.constexpr = q_s.type.shape[4]
        BN: gl.constexpr = k_s.type.shape[3]
        BM: gl.constexpr = 64 * WGS
        dtype: gl.constexpr = q_s.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BN, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, D, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        num_m = gl.cdiv(S_Q, BM)
        q = q_s.index(WG).reshape([64, D])
        s = gl.zeros([64, BN], gl.float32, s_layout)
        it = 0  # key blocks consumed so far: the ring's slot and phase
        turns = 0  # ping-pong turns taken so far
        for done in range(_tile_count(num_tiles)):  # done: this program's tiles done so far
            off_m, bh = _tile(_nth_tile(done), num_m, BM, CAUSAL)
            n_blocks, mask_from = _key_range(off_m, S_K, BM, BN, CAUSAL)
            rows = off_m + 64 * WG + gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
            m_i = gl.full([64], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
            l_i = gl.zeros([64], gl.float32, gl.SliceLayout(1, s_layout))
            acc = gl.zeros([64, D], gl.float32, o_layout)
            mbarrier.wait(q_ready, done & 1)

            # block 0: its scores alone (nothing to overlap them with yet)
            mbarrier.wait(k_ready.index(it % STAGES), (it // STAGES) & 1)
            s = warpgroup_mma(q, k_s.index(it % STAGES).reshape([BN, D]).permute((1, 0)), s, use_acc=False)
            mbarrier.arrive(k_empty.index(it % STAGES), count=1)
            if mask_from == 0:
                s = _masked(s, 0, rows, S_K, CAUSAL)
            p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale)
            if PINGPONG and WG == 1 and done == 0:
                mbarrier.arrive(turn.index(0), count=1)  # warpgroup 0 goes first
            for j in range(1, n_blocks):
                slot = (it + j) % STAGES
                prev = (it + j - 1) % STAGES
                k_phase = ((it + j) // STAGES) & 1
                v_phase = ((it + j - 1) // STAGES) & 1
                if OVERLAP:
                    mbarrier.wait(k_ready.index(slot), k_phase)
                    mbarrier.wait(v_ready.index(prev), v_phase)
                    p_op = gl.convert_layout(p.to(dtype), p_layout)
                    if PINGPONG:
                        mbarrier.wait(turn.index(WG), turns & 1)
                    s = warpgroup_mma(q, k_s.index(slot).reshape([BN, D]).permute((1, 0)), s, use_acc=False,
                                      is_async=True)
                    acc = warpgroup_mma(p_op, v_s.index(prev).reshape([BN, D]), acc, is_async=True)
                    if PINGPONG:
                        mbarrier.arrive(turn.index(1 - WG), count=1)  # the other warpgroup's turn
                        turns += 1
                    s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))  # S_j is done; P_{j-1} V_{j-1} may not be
                    mbarrier.arrive(k_empty.index(slot), count=1)
                    if j >= mask_from:
                        s = _masked(s, j * BN, rows, S_K, CAUSAL)
                    p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale)  # on the CUDA cores, under the wgmma
                    acc, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op))
                    mbarrier.arrive(v_empty.index(prev), count=1)
                else:  # one thing at a time: P_{j-1} V_{j-1}, then S_j, then its softmax
                    mbarrier.wait(v_ready.index(prev), v_phase)
                    acc = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout), v_s.index(prev).reshape([BN, D]),
                                        acc)
                    mbarrier.arrive(v_empty.index(prev), count=1)
                    mbarrier.wait(k_ready.index(slot), k_phase)
                    s = warpgroup_mma(q, k_s.index(slot).reshape([BN, D]).permute((1, 0)), s, use_acc=False)
                    mbarrier.arrive(k_empty.index(slot), count=1)
                    if j >= mask_from:
                        s = _masked(s, j * BN, rows, S_K, CAUSAL)
                    p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale)
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
            mbarrier.arrive(q_empty, count=1)  # this tile's scores are done: the next tile's Q may come
            last = it + n_blocks - 1
            mbarrier.wait(v_ready.index(last % STAGES), (last // STAGES) & 1)
            acc = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout), v_s.index(last % STAGES).reshape([BN, D]),
                                acc)
            mbarrier.arrive(v_empty.index(last % STAGES), count=1)
            it += n_blocks

            out = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, o_layout)), 1)
            if HAS_LSE:  # log2 of each row's softmax denominator, in the units of course.attention's
                gl.store(lse_ptr + bh * S_Q + rows, m_i * qk_scale + gl.log2(l_i), mask=rows < S_Q)
            tma.store_wait(pendings=0)  # the previous tile's output has left the staging buffer
            o_s.index(WG).reshape([64, D]).store(out.to(dtype))
            fence_async_shared()
            _tma_store(o_desc, [bh // H, bh % H, off_m + 64 * WG, 0], o_s.index(WG))  # TMA clips rows past S_Q
        tma.store_wait(pendings=0)

    @gluon.jit
    def _producer(q_desc, k_desc, v_desc, q_s, k_s, v_s, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, H,
                  GROUP, S_Q, S_K, num_tiles, WGS: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
        """One warp: each tile's Q rows, then its blocks of K and V, each as its slot frees up."""
        BN: gl.constexpr = k_desc.block_type.shape[2]
        BM: gl.constexpr = 64 * WGS
        num_m = gl.cdiv(S_Q, BM)
        it = 0
        for done in range(_tile_count(num_tiles)):
            off_m, bh = _tile(_nth_tile(done), num_m, BM, CAUSAL)
            n_blocks, _ = _key_range(off_m, S_K, BM, BN, CAUSAL)
            b = bh // H
            h = bh % H
            kv_h = h // GROUP  # GROUP query heads share one key/value head
            mbarrier.wait(q_empty, (done & 1) ^ 1)  # the first tile finds the slots free
            mbarrier.expect(q_ready, WGS * q_desc.block_type.nbytes)
            for w in gl.static_range(WGS):
                _tma_load(q_desc, [b, h, off_m + 64 * w, 0], q_ready, q_s.index(w))
            for j in range(n_blocks):
                slot = (it + j) % STAGES
                free = (((it + j) // STAGES) & 1) ^ 1
                mbarrier.wait(k_empty.index(slot), free)
                mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
                _tma_load(k_desc, [b, kv_h, j * BN, 0], k_ready.index(slot), k_s.index(slot))
                mbarrier.wait(v_empty.index(slot), free)
                mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
                _tma_load(v_desc, [b, kv_h, j * BN, 0], v_ready.index(slot), v_s.index(slot))
            it += n_blocks

    @gluon.jit(do_not_specialize=["H", "GROUP", "S_Q", "S_K", "num_tiles"])  # one build for every length
    def attention_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, qk_scale, H, GROUP, S_Q, S_K, num_tiles,
                         WGS: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, HAS_LSE: gl.constexpr,
                         CONSUMER_REGS: gl.constexpr, OVERLAP: gl.constexpr = True,
                         PINGPONG: gl.constexpr = False):
        """Tiles of ``64 * WGS`` query rows of one (batch, head), ``num_tiles`` of them over the
        programs of the grid (one each, or persistent: dealt by :func:`_nth_tile`); ``qk_scale`` is
        the softmax scale times log2(e). Descriptors are 4-D (batch, heads, seq, head_dim), with
        blocks of (1, 1, 64, D) for Q and the output and (1, 1, BLOCK_N, D) for K and V."""
        dtype: gl.constexpr = q_desc.dtype
        q_s = gl.allocate_shared_memory(dtype, [WGS] + q_desc.block_type.shape, q_desc.layout)
        o_s = gl.allocate_shared_memory(dtype, [WGS] + o_desc.block_type.shape, o_desc.layout)
        k_s = gl.allocate_shared_memory(dtype, [STAGES] + k_desc.block_type.shape, k_desc.layout)
        v_s = gl.allocate_shared_memory(dtype, [STAGES] + v_desc.block_type.shape, v_desc.layout)
        q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_ready, count=1)
        mbarrier.init(q_empty, count=WGS)
        mbarrier.init(turn.index(0), count=1)
        mbarrier.init(turn.index(1), count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(k_ready.index(i), count=1)  # the producer's expect + the TMA bytes
            mbarrier.init(v_ready.index(i), count=1)
            mbarrier.init(k_empty.index(i), count=WGS)  # one arrival per consumer warpgroup
            mbarrier.init(v_empty.index(i), count=WGS)
        # a consumer per warpgroup (the first is the default partition), then the producer; one
        # comprehension, as in course.gemm.gluon (joining tuples would turn constexprs into ints)
        gl.warp_specialize(
            [(_producer, (q_desc, k_desc, v_desc, q_s, k_s, v_s, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                          H, GROUP, S_Q, S_K, num_tiles, WGS, STAGES, CAUSAL)) if p == WGS else
             (_consumer, (q_s, o_s, k_s, v_s, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn, o_desc,
                          lse_ptr, qk_scale, H, S_Q, S_K, num_tiles, p, WGS, STAGES, CAUSAL, HAS_LSE, OVERLAP,
                          PINGPONG))
             for p in (0, 1, 2, 3)[:WGS + 1]],
            [4] * (WGS - 1) + [1], [CONSUMER_REGS] * (WGS - 1) + [24])  # warps, registers per thread


def consumer_registers(wgs: int) -> int:
    """Registers per thread of a consumer warpgroup: an equal share of the 512 a warpgroup's thread
    may hold (64K per SM over 128 threads) beside the producer's warpgroup at 24, at most 240
    (setmaxnreg works per warpgroup, so the one producer warp takes a warpgroup's share)."""
    return min(240, (512 - 24) // wgs // 8 * 8)


def unsupported(q, k, v) -> str | None:
    """Why :func:`forward` cannot run on these inputs (None when it can)."""
    if gluon is None:
        return "this Triton has no Gluon (triton.experimental.gluon); install Triton 3.6 or later"
    if runtime.INTERPRET or not torch.cuda.is_available() or q.device.type != "cuda":
        return "Gluon kernels need a GPU (Triton's interpreter cannot run them)"
    cap = hardware.device_capability(q.device.index)
    if cap != (9, 0):
        return f"it needs an sm_90 GPU (Hopper: wgmma); this one is sm_{cap[0]}{cap[1]}"
    if q.dtype not in (torch.float16, torch.bfloat16):
        return "it takes float16 or bfloat16"
    if q.shape[-1] not in SHAPES:
        return f"it takes head dims {', '.join(map(str, SHAPES))}, not {q.shape[-1]}"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1 or any(s * t.element_size() % 16 for s in t.stride()[:-1]) or t.data_ptr() % 16:
            return f"{name}'s rows must be contiguous and 16-byte aligned (TMA): pass {name}.contiguous()"
    return None


@functools.lru_cache(maxsize=None)
def _layout(block: tuple, bf16: bool):
    return gl.NVMMASharedLayout.get_default_for(list(block), gl.bfloat16 if bf16 else gl.float16)


def _descriptor(t: torch.Tensor, rows: int):
    block = (1, 1, rows, t.shape[-1])
    return TensorDescriptor(t, list(t.shape), list(t.stride()), list(block), _layout(block, t.dtype == torch.bfloat16))


# A persistent grid, under a causal mask, where the busiest program's keys are at most this much above
# the average (:func:`deal_balance`). H100, d = 128, 16k tokens: dealt 1.54 -> 459 TFLOP/s against 646 one
# program per tile; 1k-8k tokens dealt 1.03 -> 5-21 % (d = 128), 8-25 % (d = 64) faster than one per tile.
BALANCED = 1.05


def forward(q, k, v, out, lse, causal: bool, scale: float, *, shape: tuple | None = None,
            persistent: bool | None = None, overlap: bool = True, pingpong: bool = False) -> None:
    """``out`` (and ``lse``, log2 of each row's softmax denominator, where not None) for inputs that
    ``course.attention.check_inputs`` and :func:`unsupported` have passed, and a ``scale`` above 0;
    ``out`` laid out as :func:`unsupported` asks of ``q``. ``shape``: (warpgroups, stages), default
    ``SHAPES[head_dim]``; ``persistent``: one program per SM, dealt the tiles by :func:`_nth_tile`,
    or one per tile (default: persistent where that deal is within :data:`BALANCED`); ``overlap``
    and ``pingpong``: see :func:`_consumer` (ping-pong only with the overlap)."""
    B, H, S_Q, D = q.shape
    wgs, stages = shape or SHAPES[D]
    rows = 64 * wgs
    num_m = -(-S_Q // rows)  # tiles per head
    num_tiles = num_m * B * H
    programs = min(num_tiles, hardware.device_sms(q.device.index))
    if persistent is None:
        persistent = not causal or deal_balance(num_m, B * H, k.shape[2], rows, programs) <= BALANCED
    attention_kernel[(programs if persistent else num_tiles,)](
        _descriptor(q, 64), _descriptor(k, BLOCK_N), _descriptor(v, BLOCK_N), _descriptor(out, 64),
        lse if lse is not None else out, scale * math.log2(math.e), H, H // k.shape[1], S_Q, k.shape[2], num_tiles,
        WGS=wgs, STAGES=stages, CAUSAL=bool(causal), HAS_LSE=lse is not None, CONSUMER_REGS=consumer_registers(wgs),
        OVERLAP=overlap, PINGPONG=pingpong and overlap and wgs == 2, num_warps=4)


@functools.lru_cache(maxsize=256)
def deal_balance(num_m: int, heads: int, seq_k: int, rows: int, programs: int, snake: bool = True) -> float:
    """The busiest program's blocks of keys over the average, when :func:`_nth_tile` deals the causal
    tiles of ``heads`` heads (batch x heads) of ``num_m`` tiles of ``rows`` query rows each over
    ``programs`` programs (1.0: perfectly even); ``snake=False``: a plain round-robin instead, each
    program every ``programs``-th tile.

        >>> round(deal_balance(8, 256, 1024, 128, 132), 3), round(deal_balance(128, 16, 16384, 128, 132), 2)
        (1.031, 1.54)
    """
    t = torch.arange(num_m * heads)
    rounds, seat = t // programs, t % programs
    program = torch.where((rounds % 2 == 0) | (not snake), seat, programs - 1 - seat)
    m = num_m - 1 - t % num_m  # _tile's order
    blocks = ((m + 1) * rows).clamp(max=seq_k).add(BLOCK_N - 1).div(BLOCK_N, rounding_mode="floor")
    load = torch.zeros(programs, dtype=torch.float64).index_add_(0, program, blocks.double())
    return (load.max() / load.mean()).item()


# What the compiler's view of the two kernels is read for: the products, the waits for them and the exponentials.
LOOP_EVENTS = {"wgmma": r"wgmma\.mma_async", "wait {0}": r"wgmma\.wait_group\S* (\d+)", "exp2": r"ex2\.approx"}


def build(head_dim: int = 128, causal: bool = False, seq: int = 8192, dtype=torch.bfloat16, with_lse: bool = False,
          **options):
    """This kernel compiled for an H100 (a ``course.compile.Build``, on any machine) as :func:`forward`
    would launch it for 16 heads of ``seq`` tokens (``with_lse``: writing the log-sum-exp too);
    ``options`` as :func:`forward`'s ``overlap`` and ``pingpong``."""
    from course import compile

    wgs, stages = SHAPES[head_dim]
    x = torch.empty(1, 16, seq, head_dim, dtype=dtype)
    overlap = options.get("overlap", True)
    return compile.build(attention_kernel, _descriptor(x, 64), _descriptor(x, BLOCK_N), _descriptor(x, BLOCK_N),
                         _descriptor(x, 64), torch.empty(1), 0.1, 16, 1, seq, seq, 16 * seq // (64 * wgs),
                         WGS=wgs, STAGES=stages, CAUSAL=causal, HAS_LSE=with_lse, CONSUMER_REGS=consumer_registers(wgs),
                         OVERLAP=overlap, PINGPONG=options.get("pingpong", False) and overlap)


def plan(head_dim: int, causal: bool, seq_q: int, seq_k: int, grouped: bool = False) -> dict | None:
    """How :func:`course.attention.attention` runs this kernel by default (:func:`forward`'s keyword
    arguments: ``{}``, its defaults), or None where it keeps the course's Triton kernel: head dim 64
    below 2k keys (as fast there), fewer than 128 query rows (a tile would be mostly empty) and
    ``grouped`` query heads without a mask (the Triton kernel reads each key block once per group).
    H100 figures: notes/fusion.md, "The Hopper forward in Gluon"."""
    if (head_dim == 64 and seq_k < 2048) or seq_q < 128 or (grouped and not causal):
        return None
    return {}


# The techniques one at a time (forward's keyword arguments), as notebook 11 measures them.
# "in order": warp-specialized, each warpgroup one thing at a time; "+ overlap": the softmax under P V.
TECHNIQUES = {
    "in order": dict(persistent=False, overlap=False),
    "+ overlap": dict(persistent=False, overlap=True),
    "+ ping-pong": dict(persistent=False, overlap=True, pingpong=True),
    "+ persistent": dict(persistent=True, overlap=True, pingpong=True),
}


def schedule(kind: str, blocks: int = 4, matmul: float = 1.0, softmax: float = 1.0) -> dict:
    """A model of what runs when (not a measurement): ``{lane: [(start, end, label, warpgroup)]}`` for
    ``blocks`` blocks of keys, each of a warpgroup's two products (``S = Q Kᵀ``, ``O += P V``) taking
    ``matmul`` and its softmax ``softmax`` time units; the tensor cores are one lane (first come,
    first served), each warpgroup's CUDA cores another. ``kind``: "in order" (one warpgroup, one
    thing at a time), "overlap" (one warpgroup: ``S_j`` and ``P_{j-1} V`` issued together, the
    softmax of ``S_j`` under the second) or "ping-pong" (two warpgroups, each overlapped, taking
    turns to issue)."""
    groups = {"in order": 1, "overlap": 1, "ping-pong": 2}
    if kind not in groups:
        raise ValueError(f"schedule(kind={kind!r}): pass 'in order', 'overlap' or 'ping-pong'")
    lanes: dict = {"tensor cores": [], **{f"warpgroup {wg}": [] for wg in range(groups[kind])}}
    free = 0.0  # when the tensor cores are next free
    ready = [0.0] * groups[kind]  # when each warpgroup can issue its next step
    issued = 0.0  # when the last step was issued: turns keep the warpgroups' steps in order
    for j in range(blocks + 1):
        for wg in range(groups[kind]):
            t = max(ready[wg], issued)
            issued = t
            # step j: S_j (block 0's alone) and P_{j-1} V_{j-1}: in order the product first, then S_j
            work = ([f"S{j}"] if j < blocks else []) + ([f"PV{j - 1}"] if j else [])
            if kind == "in order":
                work.reverse()
            end = {}
            for name in work:
                start = max(t, free)
                lanes["tensor cores"].append((start, start + matmul, name, wg))
                free = end[name] = start + matmul
            if j < blocks:
                exp_start = end[f"S{j}"]
                lanes[f"warpgroup {wg}"].append((exp_start, exp_start + softmax, f"exp {j}", wg))
                ready[wg] = max(exp_start + softmax, end.get(f"PV{j - 1}", 0.0))
    return lanes
