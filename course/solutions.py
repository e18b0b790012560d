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


# --- 03 · matmul_kernel and 04 · grouped_tile: the course's own functions are the references ------

from course.tiled import grouped_tile, matmul_kernel, matmul_tile  # noqa: E402

# --- 05 · wave_count ------------------------------------------------------------------------------------

def wave_count(M, N, block_m, block_n, sms):
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)  # edge tiles count whole
    waves = triton.cdiv(tiles, sms)  # a partial last wave takes a whole wave's time
    idle = (sms - tiles % sms) % sms  # 0 when the last wave is full
    return tiles, waves, idle


# --- 06 · persistent_loop: the course's own kernel is the reference ------------------------------------

from course.persistent import log_tile, persistent_matmul_kernel  # noqa: E402, F401

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


# --- 08 · gelu: the course's own epilogue is the reference ----------------------------------------------

from course.epilogues import stable_tanh, gelu  # noqa: E402, F401

# --- 09 · streamk_span ---------------------------------------------------------------------------------

@triton.jit
def span(pid, total, sharers):
    base = total // sharers
    extra = total % sharers  # the first `extra` programs take one iteration more
    start = pid * base + tl.minimum(pid, extra)
    end = start + base + (pid < extra).to(tl.int32)
    return start, end


# --- 10 · vector_layout ---------------------------------------------------------------------------------

def vector_layout():
    from triton.experimental.gluon import language as gl

    # 8 float16 (16 bytes) per thread along a row; 8 lanes cover a 128-byte row, 4 rows per warp, 4 warps
    return gl.BlockedLayout(size_per_thread=[1, 8], threads_per_warp=[4, 8], warps_per_cta=[4, 1], order=[1, 0])


# --- 11 · softmax_step ----------------------------------------------------------------------------------

@triton.jit
def softmax_step(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))  # the running maximum, with this block's scores
    alpha = tl.exp2(m_i - m_new)  # what the old terms are worth under the new maximum
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


# --- 12 · choose_mode -----------------------------------------------------------------------------------

def choose_mode(M, N, K, tile):
    from course import gluon_gemm

    def last_wave(tiles):  # how full the last wave of 132 SMs is
        return ((tiles - 1) % 132 + 1) / 132

    triton_tiles = -(-M // tile[0]) * -(-N // tile[1])
    (gluon_tile, swap), *_ = gluon_gemm.tile_choices(M, N, 132)
    gluon_tiles = gluon_gemm.tiles(M, N, swap, gluon_tile)
    # few waves and a partly idle last one: the Gluon tiles fill it; with many waves the idle part is small,
    # and with full waves Triton's own pipeline is faster
    if triton_tiles <= 3 * 132 and last_wave(triton_tiles) < 0.75 and last_wave(gluon_tiles) >= 0.85:
        return "gluon"
    if triton_tiles > 132 and last_wave(triton_tiles) < 0.6:
        return "tail"  # the whole waves with big tiles, the thin last strip with small ones
    return "persistent"


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
    "matmul_kernel": (("matmul_tile", "matmul_kernel"), "exercises.check_matmul_kernel(matmul_kernel)"),
    # 04
    "grouped_tile": (("grouped_tile",), "exercises.check_grouped_tile(grouped_tile)"),
    # 05
    "wave_count": (("wave_count",), "exercises.check_wave_count(wave_count)"),
    # 06
    "persistent_loop": (("persistent_matmul_kernel",),
                        "exercises.check_persistent_loop(persistent_matmul_kernel)"),
    # 07
    "linear": (("linear_kernel",), "exercises.check_linear(linear_kernel)"),
    # 08
    "gelu": (("stable_tanh", "gelu"), "exercises.check_gelu(gelu)"),
    # 09
    "streamk_span": (("span",), "exercises.check_streamk_span(span)"),
    # 10
    "vector_layout": (("vector_layout",), "exercises.check_vector_layout(vector_layout)"),
    # 11
    "softmax_step": (("softmax_step",), "exercises.check_softmax_step(softmax_step)"),
    # 12
    "mode_choice": (("choose_mode",), "exercises.check_mode_choice(choose_mode)"),
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
