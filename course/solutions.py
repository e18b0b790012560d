"""Reference solutions of the notebooks' exercises, kept apart so that the notebooks start blank.

Try first. When stuck, ``exercises.solution("axpy")`` in a new cell loads one of these into it.
Each exercise is listed in :data:`EXERCISES`: the pieces you write, and the check that tests them.
"""

from __future__ import annotations

import inspect

import triton
import triton.language as tl

from course import runtime  # noqa: F401  (decides GPU or interpreter before the kernels below)


# --- 00 · saxpy_cost -----------------------------------------------------------------------------

def saxpy_cost(n):
    flops = 2 * n  # one multiply and one add per element
    bytes_moved = 3 * 4 * n  # read x, read y, write y: three arrays of 4-byte floats
    return flops, bytes_moved


# --- 01 · axpy -----------------------------------------------------------------------------------

@triton.jit
def axpy_kernel(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n  # the last block may run past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def axpy(alpha, x, y, out, block_size=1024):
    n = x.numel()
    axpy_kernel[(triton.cdiv(n, block_size),)](alpha, x, y, out, n, BLOCK_SIZE=block_size)
    return out


# --- 02 · residual + relu ------------------------------------------------------------------------

def unfused_bytes(n):
    # x + residual: read two arrays, write one; relu: read that one, write one. 4 bytes each.
    return (3 * n + 2 * n) * 4


def fused_bytes(n):
    return 3 * n * 4  # read x and residual, write out


@triton.jit
def residual_relu_kernel(x_ptr, residual_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    s = tl.load(x_ptr + offsets, mask=mask) + tl.load(residual_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(s, 0.0), mask=mask)  # s stays in registers


def residual_relu(x, residual, out, block_size=1024):
    n = x.numel()  # contiguous tensors of any shape are flat memory to the kernel
    residual_relu_kernel[(triton.cdiv(n, block_size),)](x, residual, out, n, BLOCK_SIZE=block_size)
    return out


# --- 03 · transpose and matmul_kernel --------------------------------------------------------------

@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # this tile's rows of x: columns of out
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # its columns of x: rows of out
    mask = (rows[:, None] < M) & (cols[None, :] < N)  # the edge tiles hang over, in both dimensions
    tile = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)
    # x's (i, j) goes to out's (j, i): the same block of lanes, with x's rows along out's columns
    tl.store(out_ptr + rows[:, None] * stride_on + cols[None, :] * stride_om, tile, mask=mask)


def transpose(x, out, block_m, block_n):
    M, N = x.shape
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))  # round up: the edge tiles need programs
    transpose_kernel[grid](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                           BLOCK_M=block_m, BLOCK_N=block_n)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # the rows of C (and A) this program owns
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # the columns of C (and B)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # float32 whatever the inputs: long sums stay precise
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * stride_am + (k + ks)[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + ks)[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # zeros past K add nothing
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


# --- 04 · grouped_tile: course.tiled.grouped_tile's arithmetic, as an answer of its own ----------------
# (a copy, not an import: an answer that is the course's tiled.grouped_tile is refused as the course's own)

@triton.jit
def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    tiles_per_group = GROUP_M * num_pid_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)  # the last group may have fewer rows
    pid_m = first_m + (pid % tiles_per_group) % group_m
    pid_n = (pid % tiles_per_group) // group_m
    return pid_m, pid_n

# --- 04 · wave_blocks -----------------------------------------------------------------------------------

def wave_blocks(pid_m, pid_n, sms):
    rows, cols = pid_m.tolist(), pid_n.tolist()  # plain ints: a set of 0-d tensors would keep each apart
    return [(len(set(rows[start:start + sms])), len(set(cols[start:start + sms])))
            for start in range(0, len(rows), sms)]  # the last wave may hold fewer programs


# --- 05 · wave_count and prune_configs ------------------------------------------------------------------

def wave_count(M, N, block_m, block_n, sms):
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)  # edge tiles count whole
    waves = triton.cdiv(tiles, sms)  # a partial last wave takes a whole wave's time
    idle = (sms - tiles % sms) % sms  # 0 when the last wave is full
    return tiles, waves, idle


def prune_configs(configs, named_args, shared_limit, sms, min_fill, **kwargs):  # kwargs: the launch's (grid, ...)
    element = named_args["a_ptr"].element_size()  # the blocks of A and B sit in shared memory, not C's
    M, N = named_args["M"], named_args["N"]

    def shared(config):
        bm, bn, bk = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        return config.num_stages * (bm * bk + bk * bn) * element

    def fill(config):
        tiles = triton.cdiv(M, config.kwargs["BLOCK_M"]) * triton.cdiv(N, config.kwargs["BLOCK_N"])
        return tiles / (triton.cdiv(tiles, sms) * sms)  # a partial last wave takes a whole wave's time

    fits = [c for c in configs if shared(c) <= shared_limit]  # a new list: autotune keeps its own
    full = [c for c in fits if fill(c) >= min_fill]
    return full or fits  # no tile fills the waves: let the timing choose among those that fit


# --- 06 · persistent_loop: the course's own kernel is the reference ------------------------------------

from course.persistent import log_tile, persistent_matmul_kernel  # noqa: E402, F401

# --- 06 · chiplet_remap ---------------------------------------------------------------------------------

@triton.jit
def chiplet_remap(pid, num_sms, num_xcds):
    xcd = pid % num_xcds  # the hardware deals programs to XCDs round-robin
    local = pid // num_xcds  # how many programs of this XCD come before pid
    per_xcd = num_sms // num_xcds
    extra = num_sms % num_xcds  # the first `extra` XCDs hold one program more
    return xcd * per_xcd + tl.minimum(xcd, extra) + local  # the XCDs' runs, one after another


# --- 07 · linear: C = A @ W.T with the stages ---------------------------------------------------------

from course.stages import GemmContext, ScheduleContext, make_output_view, make_tensor_view  # noqa: E402


@triton.jit
def linear_kernel(A, W, C, M, N, K, stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr,
                  EVEN_K: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(W, K, N, stride_wk, stride_wn)  # W.T: element (k, n) is W[n, k]
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, even_k=EVEN_K)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        tensorC.store(ctx.reduce_axis(tensorA, tensorB, out_tile), out_tile)


# --- 07 · linear_residual: C = A @ W.T + R, R read through an output view ------------------------------

@triton.jit
def linear_residual_kernel(A, W, R, C, M, N, K, stride_am, stride_ak, stride_wn, stride_wk, stride_rm, stride_rn,
                           stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, EVEN_K: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(W, K, N, stride_wk, stride_wn)  # W.T, as in linear_kernel
    tensorR = make_output_view(R, M, N, stride_rm, stride_rn)  # R has C's shape: read it tile by tile
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, even_k=EVEN_K)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
        residual = tensorR.load(out_tile, boundary=True)  # read before C's store: R may be C itself
        tensorC.store(acc + residual.to(tl.float32), out_tile)


# --- 08 · gelu and quantize_rows ----------------------------------------------------------------------

@triton.jit
def stable_tanh(u):
    e = tl.exp(-2.0 * tl.abs(u))  # in (0, 1]: no overflow for any u
    t = (1.0 - e) / (1.0 + e)
    return tl.where(u < 0, -t, t)  # tanh is odd: tanh(-u) = -tanh(u)


@triton.jit
def gelu(x):
    return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@triton.jit
def quantize_rows_kernel(X, Q, S, M, N, stride_xm, stride_xn, stride_qm, stride_qn, stride_s,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_in = rows < M
    peak = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):  # first pass: each row's largest magnitude, block after block
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_in[:, None] & (cols[None, :] < N)
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
        peak = tl.maximum(peak, tl.max(tl.abs(x.to(tl.float32)), axis=1))
    scale = tl.where(peak > 0, peak / 127.0, 1.0)  # an all-zero row: 1, so that nothing divides by 0
    tl.store(S + rows * stride_s, scale, mask=row_in)
    for start in range(0, N, BLOCK_N):  # second pass: divide, round to the nearest integer, clamp
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_in[:, None] & (cols[None, :] < N)
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
        q = tl.floor(x.to(tl.float32) / scale[:, None] + 0.5)  # to the nearest (a tie goes up)
        q = tl.minimum(tl.maximum(q, -127.0), 127.0)
        tl.store(Q + rows[:, None] * stride_qm + cols[None, :] * stride_qn, q.to(tl.int8), mask=mask)

# --- 09 · streamk_span ---------------------------------------------------------------------------------

@triton.jit
def span(pid, total, sharers):
    base = total // sharers
    extra = total % sharers  # the first `extra` programs take one iteration more
    start = pid * base + tl.minimum(pid, extra)
    end = start + base + (pid < extra).to(tl.int32)
    return start, end


# --- 09 · streamk_kernel: the Stream-K loop and its fix-up ----------------------------------------------

@triton.jit
def streamk_kernel(A, B, C, P, FLAGS, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PROGRAMS: tl.constexpr,
                   TILES: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, PROGRAMS, even_k=False)
    sched = ScheduleContext(M, N, K, ctx, streamk_tiles=TILES)  # every tile is shared
    pid = tl.program_id(0)
    in_slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    start, end = sched.iter_range()
    while end > start:  # the pieces of the range, the last one first
        tile_id, k_begin, k_end = sched.streamk_span(start, end)
        out_tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_k_range(tensorA, tensorB, out_tile, k_begin, k_end)
        if k_end < sched.iters_per_tile():  # a higher program finishes this tile: hand the partial over
            tl.store(P + pid * BLOCK_M * BLOCK_N + in_slot, acc)
            tl.debug_barrier()  # all of the partial is written before the flag goes up
            tl.atomic_xchg(FLAGS + pid, k_begin + 1, sem="release")  # up (non-zero), and where the piece starts
        else:  # this program owns the tile: add the partials of the lower programs, nearest first
            q = pid
            k = k_begin  # the tile's K-iterations before k are still to add
            while k > 0:
                q -= 1  # the program holding the iterations just before k
                flag = tl.atomic_cas(FLAGS + q, 0, 0, sem="acquire")  # reads the flag, changes nothing
                while flag == 0:
                    flag = tl.atomic_cas(FLAGS + q, 0, 0, sem="acquire")
                tl.atomic_xchg(FLAGS + q, 0, sem="relaxed")  # down again, for the next launch
                acc += tl.load(P + q * BLOCK_M * BLOCK_N + in_slot)
                k = flag - 1  # where program q's piece starts
            tensorC.store(acc, out_tile)
        end -= k_end - k_begin


# --- 10 · vector_layout ---------------------------------------------------------------------------------

def vector_layout():
    from triton.experimental.gluon import language as gl

    # 8 float16 (16 bytes) per thread along a row; 8 lanes cover a 128-byte row, 4 rows per warp, 4 warps
    return gl.BlockedLayout(size_per_thread=[1, 8], threads_per_warp=[4, 8], warps_per_cta=[4, 1], order=[1, 0])


# --- 10 · bank_swizzle ----------------------------------------------------------------------------------

def swizzle(row, chunk, chunks):
    # A trip around the 32 banks is 128 bytes, 8 chunks. Rows shorter than that share a trip, so a new phase
    # starts every 8 // chunks rows; the phase XORs a chunk's index only within the chunks a trip holds.
    rows_per_trip = max(1, 8 // chunks)
    phase = (row // rows_per_trip) % min(chunks, 8)
    return chunk ^ phase


# --- 11 · softmax_step ----------------------------------------------------------------------------------

@triton.jit
def softmax_step(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))  # the running maximum, with this block's scores
    # a row that has seen no key yet keeps m = -inf: shift it by 0, since -inf - (-inf) would be NaN
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - shift)  # what the old terms are worth under the new maximum
    p = tl.exp2(s - shift[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


# --- 11 · flash_forward ---------------------------------------------------------------------------------

@triton.jit
def flash_forward(Q, K, V, O, L, sm_scale, S_Q, S_K, stride_qs, stride_qd, stride_ks, stride_kd, stride_vs,
                  stride_vd, stride_os, stride_od, stride_l, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + rows[:, None] * stride_qs + d[None, :] * stride_qd, mask=rows[:, None] < S_Q, other=0.0)
    qk_scale = sm_scale * 1.4426950408889634  # scores in base 2: exp(x) = exp2(x log2 e)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    end = S_K
    if CAUSAL:  # keys past this block's last row are hidden from all its rows: never read them
        end = tl.minimum(S_K, (tl.program_id(0) + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(K + cols[None, :] * stride_ks + d[:, None] * stride_kd, mask=cols[None, :] < S_K, other=0.0)
        v = tl.load(V + cols[:, None] * stride_vs + d[None, :] * stride_vd, mask=cols[:, None] < S_K, other=0.0)
        visible = cols[None, :] < S_K
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, tl.dot(q, k) * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(O + rows[:, None] * stride_os + d[None, :] * stride_od, out.to(O.dtype.element_ty),
             mask=rows[:, None] < S_Q)
    tl.store(L + rows * stride_l, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=rows < S_Q)  # back to base e


# --- 12 · choose_mode -----------------------------------------------------------------------------------

def choose_mode(M, N, K, tile):
    from course import gemm

    def last_wave(tiles):  # how full the last wave of 132 SMs is
        return ((tiles - 1) % 132 + 1) / 132

    triton_tiles = -(-M // tile[0]) * -(-N // tile[1])
    (gluon_tile, swap), *_ = gemm.gluon.tile_choices(M, N, 132)
    gluon_tiles = gemm.gluon.tiles(M, N, swap, gluon_tile)
    # few waves and a partly idle last one: the Gluon tiles fill it; with many waves the idle part is small,
    # and with full waves Triton's own pipeline is faster
    if triton_tiles <= 3 * 132 and last_wave(triton_tiles) < 0.75 and last_wave(gluon_tiles) >= 0.85:
        return "gluon"
    if triton_tiles > 132 and last_wave(triton_tiles) < 0.6:
        return "tail"  # the whole waves with big tiles, the thin last strip with small ones
    return "persistent"


# --- 12 · feed_forward ----------------------------------------------------------------------------------

import torch  # noqa: E402

from course import epilogues, gemm  # noqa: E402
from course.stages import (GemmContext, ScheduleContext, make_bias_view, make_output_view,  # noqa: E402, F811
                           make_tensor_view)


@triton.jit
def ffn_up_kernel(X, W, B, H, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_b, stride_hm, stride_hn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr,
                  EVEN_K: tl.constexpr):
    tensorX = make_tensor_view(X, M, K, stride_xm, stride_xk)
    tensorW = make_tensor_view(W, K, N, stride_wk, stride_wn)  # W.T: element (k, n) is W[n, k]
    tensorH = make_output_view(H, M, N, stride_hm, stride_hn)
    bias = make_bias_view(B, N, stride_b)  # one value per column of H
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, even_k=EVEN_K)
    sched = ScheduleContext(M, N, K, ctx)
    start, total, stride = sched.persistent_tile_range()
    for tile_id in range(start, total, stride):
        tile = sched.get_tile_from_idx(tile_id)
        acc = ctx.reduce_axis(tensorX, tensorW, tile)
        # bias, then GELU, on the float32 tile in registers; the store converts to H's dtype
        tensorH.store(epilogues.gelu(bias.apply(acc, tile)), tile)


def feed_forward(x, w1, b1, w2, b2):
    M, d = x.shape
    hidden = w1.shape[0]
    h = torch.empty((M, hidden), device=x.device, dtype=x.dtype)  # written once, read once
    programs = min(triton.cdiv(M, 32) * triton.cdiv(hidden, 32), 132)  # at most one per SM of an H100
    ffn_up_kernel[(programs,)](x, w1, b1, h, M, hidden, d, *x.stride(), *w1.stride(), b1.stride(0), *h.stride(),
                               BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NUM_SMS=programs, EVEN_K=d % 32 == 0)
    return gemm.matmul(h, w2.T, bias=b2)  # w2.T is a view: course.gemm reads any strides; b2 in its epilogue


# --- 13 · dkdv_step -------------------------------------------------------------------------------------

@triton.jit
def dkdv_step(k, v, dk, dv, q, do, lse, delta, cols, rows, qk_scale, MASKED: tl.constexpr):
    # Pᵀ recomputed from the forward's base-2 log-sum-exp: [BLOCK_N keys, BLOCK_M rows]
    p_t = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
    if MASKED:  # a row sees the keys at or before it
        p_t = tl.where(cols[:, None] <= rows[None, :], p_t, 0.0)
    dv += tl.dot(p_t.to(do.dtype), do)
    ds_t = p_t * (tl.dot(v, tl.trans(do)) - delta[None, :])  # dSᵀ = Pᵀ ∘ (dPᵀ − D)
    dk += tl.dot(ds_t.to(q.dtype), q)  # the factor scale comes once, at the end of the kernel
    return dk, dv


# --- 13 · linear_grads ----------------------------------------------------------------------------------

def linear_grads(x, w, dy):
    dx = gemm.matmul(dy, w)  # (M x N)(N x K): w as stored
    dw = gemm.matmul(dy.T, x)  # (N x M)(M x K): dy.T is a view, no copy
    db = dy.sum(0)
    return dx, dw, db


#: exercise name -> (the pieces the learner writes, in order; the check call that ends the cell)
EXERCISES = {
    # 00
    "saxpy_cost": (("saxpy_cost",), "exercises.check_saxpy_cost(saxpy_cost)"),
    # 01
    "axpy": (("axpy_kernel", "axpy"), "exercises.check_axpy(axpy)"),
    # 02
    "residual_relu_bytes": (("unfused_bytes", "fused_bytes"),
                            "exercises.check_residual_relu_bytes(unfused_bytes, fused_bytes)"),
    "residual_relu": (("residual_relu_kernel", "residual_relu"), "exercises.check_residual_relu(residual_relu)"),
    # 03
    "transpose": (("transpose_kernel", "transpose"), "exercises.check_transpose(transpose)"),
    "matmul_kernel": (("matmul_kernel",), "exercises.check_matmul_kernel(matmul_kernel)"),
    # 04
    "wave_blocks": (("wave_blocks",), "exercises.check_wave_blocks(wave_blocks)"),
    "grouped_tile": (("grouped_tile",), "exercises.check_grouped_tile(grouped_tile)"),
    # 05
    "wave_count": (("wave_count",), "exercises.check_wave_count(wave_count)"),
    "prune_configs": (("prune_configs",), "exercises.check_prune_configs(prune_configs)"),
    # 06
    "persistent_loop": (("persistent_matmul_kernel",),
                        "exercises.check_persistent_loop(persistent_matmul_kernel)"),
    "chiplet_remap": (("chiplet_remap",), "exercises.check_chiplet_remap(chiplet_remap)"),
    # 07
    "linear": (("linear_kernel",), "exercises.check_linear(linear_kernel)"),
    "linear_residual": (("linear_residual_kernel",), "exercises.check_linear_residual(linear_residual_kernel)"),
    # 08
    "gelu": (("stable_tanh", "gelu"), "exercises.check_gelu(gelu)"),
    "quantize_rows": (("quantize_rows_kernel",), "exercises.check_quantize_rows(quantize_rows_kernel)"),
    # 09
    "streamk_span": (("span",), "exercises.check_streamk_span(span)"),
    "streamk_kernel": (("streamk_kernel",), "exercises.check_streamk_kernel(streamk_kernel)"),
    # 10
    "vector_layout": (("vector_layout",), "exercises.check_vector_layout(vector_layout)"),
    "bank_swizzle": (("swizzle",), "exercises.check_bank_swizzle(swizzle)"),
    # 11
    "softmax_step": (("softmax_step",), "exercises.check_softmax_step(softmax_step)"),
    "flash_forward": (("flash_forward",), "exercises.check_flash_forward(flash_forward)"),
    # 12
    "mode_choice": (("choose_mode",), "exercises.check_mode_choice(choose_mode)"),
    "feed_forward": (("ffn_up_kernel", "feed_forward"), "exercises.check_feed_forward(ffn_up_kernel, feed_forward)"),
    # 13
    "dkdv_step": (("dkdv_step",), "exercises.check_dkdv_step(dkdv_step)"),
    "linear_grads": (("linear_grads",), "exercises.check_linear_grads(linear_grads)"),
}


def function(name: str):
    """The reference function that exercise ``name``'s check takes (its last piece)."""
    return globals()[EXERCISES[name][0][-1]]


def source(name: str) -> str:
    """The source of exercise ``name``'s solution as a cell: its pieces, then its check."""
    pieces, check = EXERCISES[name]
    # A kernel's Python function starts at its decorator, so @triton.jit comes along.
    parts = [inspect.getsource(getattr(globals()[piece], "fn", globals()[piece])).rstrip() for piece in pieces]
    return "\n\n\n".join(parts) + "\n\n\n" + check + "\n"
