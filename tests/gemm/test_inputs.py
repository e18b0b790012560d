"""Bad and unusual input to the GEMM side (``course.gemm``, ``Config``, the ``course.stages`` views):
every case either raises a clear error whose message names the argument, or returns the product
of a float64 (int64) reference within the output dtype's tolerance (outputs start as NaN).

Each case says which outcome it expects. Outcomes are counted as

* ``clear error``: the expected exception, with a message that names the argument;
* ``correct``: no exception, and ``check`` (relative error against float64, NaN = unwritten) passes;
* ``wrong``: a result that fails the check, or no error where one was expected;
* ``crash``: any other exception (or the process dies, which fails the whole run).

The last two must be zero. ``python tests/gemm/test_inputs.py`` runs the table and prints the
counts; under pytest every case is a test of its own (ids start with the expected outcome).
Some expectations differ between the interpreter and a GPU (bf16, fp8, Gluon, tiny blocks):
``pick`` chooses. Items of issue 23 are marked ``[#23.n]``.
"""

import collections
import io
import re
import sys
from contextlib import redirect_stdout

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
import pytest
import torch
import triton
import triton.language as tl

from course import gemm
from course.gemm import config as gemm_config
from course.check import check, poisoned
from course.gemm import Config, matmul, matmul_int8
from course.runtime import DEVICE, INTERPRET, pick
from course.stages import (
    GemmContext, ScheduleContext, make_bias_view, make_input_view, make_output_view, make_scale_view,
    make_tensor_view,
)

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support:UserWarning",
                                        "ignore:The PyTorch API of nested tensors:UserWarning")

GAP = 2**30  # elements between the rows of an operand whose offsets reach 2^31


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------
def f16(*shape):
    return torch.randn(*shape, device=DEVICE).half()


def f32(*shape):
    return torch.randn(*shape, device=DEVICE)


def i8(*shape):
    return torch.randint(-128, 128, shape, dtype=torch.int8, device=DEVICE)


def scales(n):
    return torch.rand(n, device=DEVICE) / 32 + 1e-3


def ref_mm(a, b, bias=None):
    r = a.detach().cpu().double() @ b.detach().cpu().double()
    return r if bias is None else r + bias.detach().cpu().double()


def ref_int8(a, b, sa, sb, bias=None):
    r = (a.cpu().long() @ b.cpu().long()).double() * sa.detach().cpu().double()[:, None] \
        * sb.detach().cpu().double()[None, :]
    return r if bias is None else r + bias.detach().cpu().double()


def far_apart(rows, cols, dtype, gap=GAP):
    """Rows ``gap`` elements apart (storage reserved, only the rows used are written)."""
    storage = torch.empty((rows - 1) * gap + cols, dtype=dtype, device=DEVICE)
    t = storage.as_strided((rows, cols), (gap, 1))
    t.copy_(torch.randn(rows, cols).to(dtype) if dtype.is_floating_point
            else torch.randint(-8, 8, (rows, cols), dtype=dtype))
    return t


def mm_case(a, b, *, bias=None, out=None, out_dtype=None, **kw):
    """Run matmul into a poisoned ``out`` (default: a fresh (M, N) one); return (out, float64 ref)."""
    M, N = a.shape[0], b.shape[1]
    if out is None:
        out = poisoned((M, N), out_dtype or (torch.bfloat16 if a.dtype in gemm_config.FP8 else a.dtype), DEVICE)
    ref = ref_mm(a, b, bias)
    got = matmul(a, b, bias=bias, out=out, out_dtype=out_dtype, **kw)
    assert got is out, "matmul must return out"
    return out, ref


def int8_case(a, b, sa, sb, bias=None, *, out=None, out_dtype=torch.float32, **kw):
    M, N = a.shape[0], b.shape[1]
    out = poisoned((M, N), out_dtype, DEVICE) if out is None else out
    ref = ref_int8(a, b, sa, sb, bias)
    matmul_int8(a, b, sa, sb, bias, out_dtype=out_dtype, out=out, **kw)
    return out, ref


# ----------------------------------------------------------------------------------------------
# A stages kernel for the factories: each view built from the kernel's own arguments
# ----------------------------------------------------------------------------------------------
@triton.jit
def views_kernel(A, B, C, SA, SB, BIAS, M, N, K, K_B, s_am, s_ak, s_bk, s_bn, s_cm, s_cn, s_sa, s_sb, s_bias,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
                 QUANTIZED: tl.constexpr, HAS_BIAS: tl.constexpr, WIDE_A: tl.constexpr, ALIAS: tl.constexpr):
    if WIDE_A:  # the kernel author's way to offsets past 2^31: a 64-bit stride
        s_am = s_am.to(tl.int64)
    if ALIAS:
        tensorA = make_tensor_view(A, M, K, s_am, s_ak)
    else:
        tensorA = make_input_view(A, M, K, s_am, s_ak)
    tensorB = make_input_view(B, K_B, N, s_bk, s_bn)
    tensorC = make_output_view(C, M, N, s_cm, s_cn)
    scale = make_scale_view(SA, SB, M, N, s_sa, s_sb) if QUANTIZED else None
    bias = make_bias_view(BIAS, N, s_bias) if HAS_BIAS else None
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, 1, even_k=EVEN_K, quantized=QUANTIZED)
    sched = ScheduleContext(M, N, K, ctx)
    out_tile = sched.get_tile_from_coord(tl.program_id(0), tl.program_id(1))
    acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
    tensorC.store(acc, out_tile, scale=scale, bias=bias)


BLK = pick(cpu=16, gpu=32)


def stages_case(M=20, N=18, K=24, *, dtype=torch.float32, even_k=None, bias=False, quantized=False,
                a=None, a_scale_stride=1, bias_stride=1, override=None, wide_a=False, alias=False, k_b=None):
    """Launch ``views_kernel``; ``override`` replaces named kernel arguments (the misuse)."""
    if quantized:
        a_, b = (a if a is not None else i8(M, K)), i8(K, N)
    else:
        a_, b = (a if a is not None else f32(M, K).to(dtype)), f32(K, N).to(dtype)
    sa, sb = scales(M * a_scale_stride)[::a_scale_stride], scales(N)
    bv = f32(N * bias_stride)[::bias_stride]
    c = poisoned((M, N), torch.float32, DEVICE)
    args = dict(A=a_, B=b, C=c, SA=sa, SB=sb, BIAS=bv, M=M, N=N, K=K, K_B=K if k_b is None else k_b,
                s_am=a_.stride(0), s_ak=a_.stride(1), s_bk=b.stride(0), s_bn=b.stride(1), s_cm=c.stride(0),
                s_cn=c.stride(1), s_sa=sa.stride(0), s_sb=sb.stride(0), s_bias=bv.stride(0),
                BLOCK_M=BLK, BLOCK_N=BLK, BLOCK_K=2 * BLK if quantized else BLK,
                EVEN_K=(K % (2 * BLK if quantized else BLK) == 0) if even_k is None else even_k,
                QUANTIZED=quantized, HAS_BIAS=bias, WIDE_A=wide_a, ALIAS=alias)
    args.update(override or {})
    views_kernel[(triton.cdiv(M, BLK), triton.cdiv(N, BLK))](*args.values())
    ref = ref_int8(a_, b, sa, sb) if quantized else ref_mm(a_, b)
    return c, (ref + bv.cpu().double() if bias else ref)


# ----------------------------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------------------------
Case = collections.namedtuple("Case", "name run error")  # error: (type, regex) or None (a correct result)
CASES = []


def err(name, run, exc, regex):
    CASES.append(Case(name, run, (exc, regex)))


def ok(name, run):
    CASES.append(Case(name, run, None))


def either(name, run, *, cpu, gpu):
    """An expectation that differs between the interpreter and a GPU (each: (type, regex) or None)."""
    CASES.append(Case(name, run, pick(cpu=cpu, gpu=gpu)))


def _meta(*shape, dtype=torch.float16):
    return torch.empty(*shape, dtype=dtype, device="meta")


M_, N_, K_ = 20, 18, 24  # a small product (two tiles of 16 each way under the interpreter)

# --- matmul: what a and b may be --------------------------------------------------------------
err("a is a list", lambda: matmul([[1.0]], f16(1, 1)), TypeError, r"a must be a torch.Tensor, got list")
err("b is a numpy array", lambda: matmul(f16(2, 2), f16(2, 2).cpu().numpy()), TypeError,
    r"b must be a torch.Tensor, got ndarray")
err("a is 1-D", lambda: matmul(f16(5), f16(5, 6)), ValueError, r"a must be a 2-D matrix, got 1-D")
err("b is 3-D", lambda: matmul(f16(4, 5), f16(2, 5, 6)), ValueError, r"b must be a 2-D matrix, got 3-D")
err("a is 0-D", lambda: matmul(torch.tensor(1.0, device=DEVICE).half(), f16(1, 1)), ValueError,
    r"a must be a 2-D matrix, got 0-D")
err("inner dimensions differ", lambda: matmul(f16(4, 5), f16(6, 7)), ValueError, r"inner dimensions differ.*K=5")
err("a and b dtypes differ", lambda: matmul(f16(4, 5), f32(5, 6)), TypeError, r"a is float16 but b is float32")
err("float64", lambda: matmul(f16(4, 5).double(), f16(5, 6).double()), TypeError,
    r"dtype float64, which matmul does not support")
err("int32", lambda: matmul(i8(4, 5).int(), i8(5, 6).int()), TypeError, r"dtype int32, which matmul does not support")
err("bool", lambda: matmul(f16(4, 5) > 0, f16(5, 6) > 0), TypeError, r"dtype bool, which matmul does not support")
err("complex64", lambda: matmul(f32(4, 5).to(torch.complex64), f32(5, 6).to(torch.complex64)), TypeError,
    r"dtype complex64, which matmul does not support")
err("int8 to matmul", lambda: matmul(i8(4, 5), i8(5, 6)), TypeError, r"a and b are int8: use matmul_int8")
err("a on the meta device", lambda: matmul(_meta(4, 5), f16(5, 6)), ValueError, r"a is on meta but the kernels run on")
err("b on the meta device", lambda: matmul(f16(4, 5), _meta(5, 6)), ValueError, r"b is on meta")
err("a expanded (stride 0)", lambda: matmul(f16(1, 5).expand(4, 5), f16(5, 6)), ValueError,
    r"a has stride 0 in dimension 0.*a.contiguous\(\)")
err("b expanded (stride 0)", lambda: matmul(f16(4, 5), f16(5, 1).expand(5, 6)), ValueError,
    r"b has stride 0 in dimension 1")
err("a sparse [#23.9]", lambda: matmul(f16(4, 5).to_sparse(), f16(5, 6)), TypeError,
    r"a is a sparse_coo tensor.*a.to_dense\(\)")
err("b sparse CSR", lambda: matmul(f32(4, 5), f32(5, 6).to_sparse_csr()), TypeError, r"b is a sparse_csr tensor")
err("a nested", lambda: matmul(torch.nested.nested_tensor([f32(2, 5), f32(3, 5)]), f32(5, 6)), TypeError,
    r"a is a nested tensor")
err("a dimension of 2^31", lambda: matmul(_meta(2**31, 1), f16(1, 6)), ValueError,
    r"a has shape \(2147483648, 1\): each dimension must be below 2\^31")
either("bfloat16 inputs", lambda: mm_case(f16(M_, K_).bfloat16(), f16(K_, N_).bfloat16()),
       cpu=(TypeError, r"bfloat16 does not work under Triton's CPU interpreter"), gpu=None)
either("fp8 inputs", lambda: mm_case(f16(M_, 32).to(torch.float8_e4m3fn), f16(32, N_).to(torch.float8_e4m3fn)),
       cpu=(TypeError, r"float8_e4m3fn \(fp8\) needs a GPU"), gpu=None)

# --- matmul: arguments -------------------------------------------------------------------------
err("mode unknown", lambda: matmul(f16(4, 5), f16(5, 6), mode="fast"), ValueError, r"mode='fast': pass one of")
err("mode None", lambda: matmul(f16(4, 5), f16(5, 6), mode=None), ValueError, r"mode=None: pass one of")
err("out_dtype float64", lambda: matmul(f16(4, 5), f16(5, 6), out_dtype=torch.float64), TypeError,
    r"out_dtype=torch.float64: pass torch.float16")
err("out_dtype int32", lambda: matmul(f16(4, 5), f16(5, 6), out_dtype=torch.int32), TypeError, r"out_dtype=torch.int32")
err("out_dtype a string [#23.9]", lambda: matmul(f16(4, 5), f16(5, 6), out_dtype="float32"), TypeError,
    r"out_dtype='float32' is a str, not a torch.dtype")
either("out_dtype bfloat16", lambda: mm_case(f16(M_, K_), f16(K_, N_), out_dtype=torch.bfloat16),
       cpu=(TypeError, r"out_dtype=torch.bfloat16 does not work under Triton's CPU interpreter"), gpu=None)
err("config a tuple", lambda: matmul(f16(4, 5), f16(5, 6), config=(16, 16, 16)), TypeError,
    r"config must be a course.gemm.Config")
err("config dict, unknown key", lambda: matmul(f16(4, 5), f16(5, 6), config=dict(bm=16, block_n=16, block_k=16)),
    TypeError, r"config has unknown field\(s\) 'bm'")
err("config dict, block_m missing", lambda: matmul(f16(4, 5), f16(5, 6), config=dict(block_n=16, block_k=16)),
    TypeError, r"block_m")
err("config with mode='gluon'", lambda: matmul(f16(4, 8), f16(8, 8), mode="gluon", config=Config(16, 16, 16)),
    ValueError, r"mode='gluon' runs its own fixed tiles.*takes no config")
either("mode='gluon'", lambda: mm_case(f16(64, 64), f16(64, 128), mode="gluon"),
       cpu=(ValueError, r"mode='gluon' cannot run here: Gluon kernels need a GPU"), gpu=None)
either("config with 8-row blocks", lambda: mm_case(f16(M_, K_), f16(K_, N_), config=Config(8, 16, 16)),
       cpu=None, gpu=(ValueError, r"every block size must be at least 16"))

# --- matmul: bias ------------------------------------------------------------------------------
err("bias of length M", lambda: matmul(f16(4, 5), f16(5, 6), bias=f32(4)), ValueError, r"bias must be 1-D of length N=6")
err("bias 2-D (1, N)", lambda: matmul(f16(4, 5), f16(5, 6), bias=f32(1, 6)), ValueError,
    r"bias must be 1-D of length N=6, got shape \(1, 6\)")
err("bias int32", lambda: matmul(f16(4, 5), f16(5, 6), bias=torch.ones(6, dtype=torch.int32, device=DEVICE)),
    TypeError, r"bias has dtype int32")
err("bias float64", lambda: matmul(f16(4, 5), f16(5, 6), bias=f32(6).double()), TypeError, r"bias has dtype float64")
err("bias a list", lambda: matmul(f16(4, 5), f16(5, 6), bias=[0.0] * 6), TypeError, r"bias must be a torch.Tensor")
err("bias on meta", lambda: matmul(f16(4, 5), f16(5, 6), bias=_meta(6, dtype=torch.float32)), ValueError,
    r"bias is on meta")
err("bias expanded", lambda: matmul(f16(4, 5), f16(5, 6), bias=f32(1).expand(6)), ValueError, r"bias has stride 0")
err("bias sparse", lambda: matmul(f16(4, 5), f16(5, 6), bias=f32(6).to_sparse()), TypeError,
    r"bias is a sparse_coo tensor")
either("bias bfloat16", lambda: mm_case(f16(M_, K_), f16(K_, N_), bias=f32(N_).bfloat16()),
       cpu=(TypeError, r"bias is bfloat16, which Triton's CPU interpreter cannot add"), gpu=None)

# --- matmul: out -------------------------------------------------------------------------------
err("out shape", lambda: matmul(f16(4, 5), f16(5, 6), out=f16(6, 4)), ValueError, r"out has shape \(6, 4\)")
err("out dtype", lambda: matmul(f16(4, 5), f16(5, 6), out=f32(4, 6)), TypeError, r"out has dtype float32")
err("out a list", lambda: matmul(f16(4, 5), f16(5, 6), out=[]), TypeError, r"out must be a torch.Tensor")
err("out on meta", lambda: matmul(f16(4, 5), f16(5, 6), out=_meta(4, 6)), ValueError, r"out is on meta")
err("out expanded", lambda: matmul(f16(4, 5), f16(5, 6), out=f16(1, 6).expand(4, 6)), ValueError,
    r"out has stride 0 in dimension 0")
_sq = lambda: f32(24, 24)  # noqa: E731


_x = _sq()
err("out is a [#23.2]", lambda: matmul(_x, _sq(), out=_x), ValueError, r"out and a share memory")
_y = _sq()
err("out is b [#23.2]", lambda: matmul(_sq(), _y, out=_y), ValueError, r"out and b share memory")
_big = f32(48, 24)
err("out overlaps a in part [#23.2]", lambda: matmul(_big[:24], _sq(), out=_big[12:36]), ValueError,
    r"out and a share memory")
err("out overlaps itself (rows) [#23.2]",
    lambda: matmul(_sq(), _sq(), out=torch.empty(48, device=DEVICE).as_strided((24, 24), (1, 1))), ValueError,
    r"out \(shape \(24, 24\), strides \(1, 1\)\) has elements that share one memory location")
err("out overlaps itself (odd strides) [#23.2]",
    lambda: matmul(f32(4, 8), f32(8, 4), out=torch.empty(64, device=DEVICE).as_strided((4, 4), (2, 3))),
    ValueError, r"out .* share one memory location")
_z = _sq()
err("bias is a row of out [#23.2]", lambda: matmul(_sq(), _sq(), bias=_z[3], out=_z), ValueError,
    r"out and bias share memory")
_w = f32(24, 24)
err("a is a float16 view of out's float32 memory [#23.2]",
    lambda: matmul(_w.view(torch.float16)[:, :24], f16(24, 24), out_dtype=torch.float32, out=_w), ValueError,
    r"out and a share memory")

# --- autograd [library issue] ------------------------------------------------------------------
err("a requires grad", lambda: matmul(f32(4, 5).requires_grad_(), f32(5, 6)), RuntimeError,
    r"a requires grad, but matmul is a forward-only kernel.*torch.no_grad\(\).*a.detach\(\)")
err("b requires grad", lambda: matmul(f32(4, 5), f32(5, 6).requires_grad_()), RuntimeError, r"b requires grad")
err("bias requires grad", lambda: matmul(f32(4, 5), f32(5, 6), bias=f32(6).requires_grad_()), RuntimeError,
    r"bias requires grad")
err("out requires grad", lambda: matmul(f32(4, 5), f32(5, 6), out=f32(4, 6).requires_grad_()), RuntimeError,
    r"out requires grad")
err("a is an nn.Parameter", lambda: matmul(torch.nn.Parameter(f32(4, 5)), f32(5, 6)), RuntimeError,
    r"a requires grad")


def _no_grad(run):
    def wrapped():
        with torch.no_grad():
            return run()
    return wrapped


ok("requires grad, under no_grad", _no_grad(lambda: mm_case(f32(M_, K_).requires_grad_(), f32(K_, N_))))
ok("nn.Parameter weights under inference_mode",
   lambda: _inference(lambda: mm_case(f32(M_, K_), torch.nn.Parameter(f32(K_, N_)),
                                      bias=torch.nn.Parameter(f32(N_)))))


def _inference(run):
    with torch.inference_mode():
        return run()


# --- Config ------------------------------------------------------------------------------------
err("Config block not a power of two", lambda: Config(24, 16, 16), ValueError, r"Config.block_m=24: pass a power of two")
err("Config block_m=True [#23.9]", lambda: matmul(f16(4, 5), f16(5, 6), config=Config(True, 16, 16)), ValueError,
    r"Config.block_m=True: pass a power of two")
err("Config block_k=0", lambda: Config(16, 16, 0), ValueError, r"Config.block_k=0")
err("Config block_n float", lambda: Config(16, 16.0, 16), ValueError, r"Config.block_n=16.0")
err("Config num_warps=3", lambda: Config(16, 16, 16, num_warps=3), ValueError, r"Config.num_warps=3: pass a power of two")
err("Config num_warps=0", lambda: Config(16, 16, 16, num_warps=0), ValueError, r"Config.num_warps=0: pass a positive")
err("Config num_stages=-1", lambda: Config(16, 16, 16, num_stages=-1), ValueError, r"Config.num_stages=-1")
err("Config group_size_m=True", lambda: Config(16, 16, 16, group_size_m=True), ValueError, r"Config.group_size_m=True")
err("Config store_halves=3", lambda: Config(16, 16, 16, store_halves=3), ValueError, r"Config.store_halves=3")
err("Config tma='yes'", lambda: Config(16, 16, 16, tma="yes"), ValueError, r"Config.tma='yes'")
err("Config tile over 2^20 elements", lambda: Config(2048, 16, 1024), ValueError,
    r"Config.block_m x Config.block_k = 2048 x 1024 is over Triton's 1048576")
ok("Config as a dict", lambda: mm_case(f32(M_, K_), f32(K_, N_), config=dict(block_m=32, block_n=16, block_k=16)))
ok("Config with tma=True (ignored where TMA cannot run)",
   lambda: mm_case(f16(M_, K_), f16(K_, N_), config=Config(16, 16, 16, tma=True, tma_store=True)))

# --- matmul: correct results -------------------------------------------------------------------
ok("row-major fp16", lambda: mm_case(f16(M_, K_), f16(K_, N_)))
ok("row-major fp32", lambda: mm_case(f32(M_, K_), f32(K_, N_)))
ok("a transposed", lambda: mm_case(f16(K_, M_).T, f16(K_, N_)))
ok("b transposed (K-major)", lambda: mm_case(f16(M_, K_), f16(N_, K_).T))
ok("a, b and out transposed", lambda: mm_case(f16(K_, M_).T, f16(N_, K_).T, out=poisoned((N_, M_), torch.float16,
                                                                                            DEVICE).T))
ok("a every third column", lambda: mm_case(f16(M_, 3 * K_)[:, ::3], f16(K_, N_)))
ok("b every other row, offset view", lambda: mm_case(f16(M_, K_), f16(2 * K_ + 1, N_ + 3)[1::2, 2:]))
ok("views with storage offsets", lambda: mm_case(f32(M_ + 3, K_ + 5)[3:, 5:], f32(K_ + 1, N_ + 2)[1:, 2:]))
ok("1 x 1 x 1", lambda: mm_case(f16(1, 1), f16(1, 1)))
ok("K smaller than a block", lambda: mm_case(f16(M_, 5), f16(5, N_)))
ok("ragged K", lambda: mm_case(f32(M_, 37), f32(37, N_)))
ok("one row, one column", lambda: mm_case(f16(1, 33), f16(33, 1)))
ok("size-1 dimension with stride 0", lambda: mm_case(f16(1, K_).as_strided((1, K_), (0, 1)), f16(K_, N_)))
ok("out every other row of a wider buffer", lambda: mm_case(f16(M_, K_), f16(K_, N_),
                                                            out=poisoned((2 * M_, N_ + 8), torch.float16,
                                                                         DEVICE)[::2, 4:4 + N_]))
ok("fp16 in, fp32 out", lambda: mm_case(f16(M_, K_), f16(K_, N_), out_dtype=torch.float32))
ok("fp32 in, fp16 out", lambda: mm_case(f32(M_, K_), f32(K_, N_), out_dtype=torch.float16))
ok("bias fp32", lambda: mm_case(f16(M_, K_), f16(K_, N_), bias=f32(N_)))
ok("bias fp16", lambda: mm_case(f16(M_, K_), f16(K_, N_), bias=f16(N_)))
ok("bias every third element", lambda: mm_case(f16(M_, K_), f16(K_, N_), bias=f32(3 * N_)[::3]))
ok("a negated lazily [#23.3]", lambda: mm_case(torch._neg_view(f16(M_, K_)), f16(K_, N_)))
ok("b negated lazily [#23.3]", lambda: mm_case(f32(M_, K_), torch._neg_view(f32(K_, N_))))
ok("bias negated lazily [#23.3]", lambda: mm_case(f16(M_, K_), f16(K_, N_), bias=torch._neg_view(f32(N_))))
ok("out negated lazily [#23.3]", lambda: mm_case(f16(M_, K_), f16(K_, N_),
                                                 out=torch._neg_view(poisoned((M_, N_), torch.float16, DEVICE))))
ok("a conjugated (real: no-op)", lambda: mm_case(f32(M_, K_).conj(), f32(K_, N_)))
ok("K = 0 [library issue]", lambda: mm_case(f16(M_, 0), f16(0, N_)))
ok("K = 0 with bias", lambda: mm_case(f32(M_, 0), f32(0, N_), bias=f32(N_)))
ok("M = 0", lambda: mm_case(f16(0, K_), f16(K_, N_)))
ok("N = 0", lambda: mm_case(f16(M_, K_), f16(K_, 0), bias=f32(0)))
ok("a @ a (inputs may share memory)", lambda: (lambda x: mm_case(x, x))(f32(K_, K_)))
_buf = f32(2 * M_, K_)
ok("out interleaved with a in one buffer", lambda: mm_case(_buf[0::2], f32(K_, K_), out=_buf[1::2].fill_(float("nan"))))
ok("out and a disjoint parts of one buffer", lambda: (lambda buf: mm_case(buf[:M_], f32(K_, K_),
                                                                          out=buf[M_:].fill_(float("nan"))))(
    f32(2 * M_, K_)))
ok("out with odd strides, distinct elements",
   lambda: mm_case(f32(3, 5), f32(5, 3), out=poisoned((16,), torch.float32, DEVICE).as_strided((3, 3), (3, 2))))
ok("mode persistent", lambda: mm_case(f16(M_, K_), f16(K_, N_), mode="persistent"))
ok("mode streamk", lambda: mm_case(f32(40, 64), f32(64, 20), mode="streamk"))
ok("mode tail", lambda: mm_case(*pick(cpu=(f16(80, 40), f16(40, 64)), gpu=(f16(3000, 1048), f16(1048, 2984))),
                                mode="tail"))
ok("autotune=True", lambda: mm_case(f16(M_, K_), f16(K_, N_), autotune=True))
ok("a with offsets past 2^31 [#23.4]", lambda: mm_case(far_apart(3, K_, torch.float16), f16(K_, N_),
                                                       config=Config(16, 16, 16, tma=False, tma_store=False)))
ok("a huge stride in a size-1 dimension", lambda: mm_case(f16(1, K_).as_strided((1, K_), (2**40, 1)), f16(K_, N_)))

# --- matmul_int8 -------------------------------------------------------------------------------
err("int8: float a", lambda: matmul_int8(f16(4, 5), f16(5, 6), scales(4), scales(6)), TypeError,
    r"matmul_int8 takes int8 a and b, got float16")
err("int8: b int16", lambda: matmul_int8(i8(4, 5), i8(5, 6).short(), scales(4), scales(6)), TypeError,
    r"a is int8 but b is int16")
err("int8: no scales", lambda: matmul_int8(i8(4, 5), i8(5, 6), None, None), TypeError, r"needs a_scale.*b_scale")
err("int8: a_scale length", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(5), scales(6)), ValueError,
    r"a_scale must be 1-D of length M=4")
err("int8: b_scale length", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4), scales(5)), ValueError,
    r"b_scale must be 1-D of length N=6")
err("int8: a_scale float16", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4).half(), scales(6)), TypeError,
    r"a_scale has dtype float16.*float32")
err("int8: b_scale int32", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4), scales(6).int()), TypeError,
    r"b_scale has dtype int32")
err("int8: a_scale 2-D", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4)[:, None], scales(6)), ValueError,
    r"a_scale must be 1-D")
err("int8: a_scale a float", lambda: matmul_int8(i8(4, 5), i8(5, 6), 0.5, scales(6)), TypeError,
    r"a_scale must be a torch.Tensor")
err("int8: b_scale on meta", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4), _meta(6, dtype=torch.float32)),
    ValueError, r"b_scale is on meta")
err("int8: a_scale expanded", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(1).expand(4), scales(6)), ValueError,
    r"a_scale has stride 0")
err("int8: mode='gluon'", lambda: matmul_int8(i8(4, 8), i8(8, 8), scales(4), scales(8), mode="gluon"), ValueError,
    r"mode='gluon' takes float16 or bfloat16 inputs, not int8")
err("int8: out_dtype int32", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4), scales(6), out_dtype=torch.int32),
    TypeError, r"out_dtype=torch.int32")
err("int8: bias length", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4), scales(6), f32(7),
                                             out_dtype=torch.float32), ValueError, r"bias must be 1-D of length N=6")
_c = poisoned((M_, N_), torch.float32, DEVICE)
err("int8: a_scale is a column of out [#23.2]", lambda: matmul_int8(i8(M_, K_), i8(K_, N_), _c[:, 0], scales(N_),
                                                                    out_dtype=torch.float32, out=_c), ValueError,
    r"out and a_scale share memory")
err("int8: b_scale requires grad", lambda: matmul_int8(i8(4, 5), i8(5, 6), scales(4), scales(6).requires_grad_(),
                                                       out_dtype=torch.float32), RuntimeError, r"b_scale requires grad")
ok("int8 basic", lambda: int8_case(i8(M_, K_), i8(K_, N_), scales(M_), scales(N_)))
ok("int8 with bias", lambda: int8_case(i8(M_, K_), i8(K_, N_), scales(M_), scales(N_), f32(N_)))
ok("int8 a_scale every other [#23.1]", lambda: int8_case(i8(M_, K_), i8(K_, N_), scales(2 * M_)[::2], scales(N_)))
ok("int8 b_scale every third [#23.1]", lambda: int8_case(i8(M_, K_), i8(K_, N_), scales(M_), scales(3 * N_)[::3]))
ok("int8 bias every fourth [#23.1]", lambda: int8_case(i8(M_, K_), i8(K_, N_), scales(M_), scales(N_),
                                                       f32(4 * N_)[::4]))
ok("int8 scale negated lazily [#23.3]", lambda: int8_case(i8(M_, K_), i8(K_, N_), torch._neg_view(scales(M_)),
                                                          scales(N_)))
ok("int8 K-major b", lambda: int8_case(i8(M_, 64), i8(N_, 64).T, scales(M_), scales(N_)))
ok("int8 K = 0 with bias", lambda: int8_case(i8(M_, 0), i8(0, N_), scales(M_), scales(N_), f32(N_)))
ok("int8 to fp16", lambda: int8_case(i8(M_, K_), i8(K_, N_), scales(M_), scales(N_), out_dtype=torch.float16))
ok("int8 extremes accumulate exactly", lambda: int8_case(torch.full((16, 48), -128, dtype=torch.int8, device=DEVICE),
                                                         torch.full((48, 16), -128, dtype=torch.int8, device=DEVICE),
                                                         torch.ones(16, device=DEVICE), torch.ones(16, device=DEVICE)))
ok("int8 streamk", lambda: int8_case(i8(40, 64), i8(64, 20), scales(40), scales(20), mode="streamk"))

# --- stages factories: host-side misuse seen when the views are built --------------------------
_ANY = Exception  # a kernel's errors reach the host wrapped (CompilationError, InterpreterError)
err("make_input_view: ptr is a.data_ptr()", lambda: stages_case(override=dict(A=f32(20, 24).data_ptr())), _ANY,
    r"InputView: ptr must be a pointer \(pass the torch tensor itself")
err("make_tensor_view: ptr is a number", lambda: stages_case(alias=True, override=dict(A=3.5)), _ANY,
    r"InputView: ptr must be a pointer")
err("make_input_view: float stride", lambda: stages_case(override=dict(s_am=24.0)), _ANY,
    r"InputView: stride_row must be an integer")
err("make_input_view: float rows", lambda: stages_case(override=dict(M=20.0)), _ANY,
    r"InputView: rows must be an integer")
err("make_input_view: float cols of B", lambda: stages_case(override=dict(N=18.5)), _ANY,
    r"InputView: cols must be an integer")
err("make_output_view: ptr is a number", lambda: stages_case(override=dict(C=7)), _ANY,
    r"OutputView: ptr must be a pointer")
err("make_output_view: float stride_col", lambda: stages_case(override=dict(s_cn=1.0)), _ANY,
    r"OutputView: stride_col must be an integer")
err("make_scale_view: a_scale_ptr is a number", lambda: stages_case(quantized=True, override=dict(SA=123)), _ANY,
    r"ScaleView: a_scale_ptr must be a pointer")
err("make_scale_view: float stride_b", lambda: stages_case(quantized=True, override=dict(s_sb=1.5)), _ANY,
    r"ScaleView: stride_b must be an integer")
err("make_bias_view: ptr is a number", lambda: stages_case(bias=True, override=dict(BIAS=0.0)), _ANY,
    r"BiasView: ptr must be a pointer")
err("make_bias_view: float stride", lambda: stages_case(bias=True, override=dict(s_bias=2.0)), _ANY,
    r"BiasView: stride must be an integer")
err("GemmContext: int8 without quantized", lambda: stages_case(override=dict(A=i8(20, 24), B=i8(24, 18))), _ANY,
    r"integer \(int8\) inputs need GemmContext\(..., quantized=True\)")
err("GemmContext: block not a power of two", lambda: stages_case(override=dict(BLOCK_K=24)), _ANY,
    r"block_k=24 is not a power of two")
if INTERPRET:  # compiled, these two are device assertions (debug mode only; a failed one ends the context)
    err("even_k=True with a ragged K [#23.5]", lambda: stages_case(K=BLK + 5, even_k=True), _ANY,
        r"GemmContext\(even_k=True\) promises K % block_k == 0")
    err("even_k=True with K < block_k [#23.5]", lambda: stages_case(K=BLK - 5, even_k=True), _ANY,
        r"GemmContext\(even_k=True\) promises K % block_k == 0")
    err("A and B views disagree on K", lambda: stages_case(k_b=20), _ANY,
        r"A has K columns but B has a different number of rows")
ok("stages: fp16 views", lambda: stages_case(dtype=torch.float16))
ok("stages: ragged K with even_k=False", lambda: stages_case(K=37))
ok("stages: K < block_k with even_k=False", lambda: stages_case(K=5))
ok("stages: make_tensor_view alias", lambda: stages_case(alias=True))
ok("stages: bias with stride 3", lambda: stages_case(bias=True, bias_stride=3))
ok("stages: int8, scale with stride 2, bias", lambda: stages_case(quantized=True, K=64, a_scale_stride=2, bias=True))
ok("stages: transposed A", lambda: stages_case(a=f32(24, 20).T))
ok("stages: A rows 2^30 apart, 64-bit stride [#23.4]",
   lambda: stages_case(M=3, a=far_apart(3, 24, torch.float32), wide_a=True))


# ----------------------------------------------------------------------------------------------
# Running the table
# ----------------------------------------------------------------------------------------------
def error_text(exc):
    """The messages of an exception and of its causes and context (Triton wraps inner errors)."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def outcome(case) -> tuple:
    """``(kind, detail)`` with kind one of "clear error", "correct", "wrong", "crash"."""
    try:
        with redirect_stdout(io.StringIO()):
            result = case.run()
    except Exception as e:  # noqa: BLE001  (classified below)
        if case.error is None:
            return "crash", error_text(e)
        exc, regex = case.error
        if isinstance(e, exc) and re.search(regex, error_text(e), re.S):
            return "clear error", str(e).splitlines()[0] if str(e) else type(e).__name__
        return "crash", f"expected {exc.__name__} matching {regex!r}, got {error_text(e)}"
    if case.error is not None:
        return "wrong", f"no error (expected {case.error[0].__name__} matching {case.error[1]!r})"
    out, ref = result
    try:
        with redirect_stdout(io.StringIO()):
            check(case.name, out, ref)
    except AssertionError as e:
        return "wrong", str(e)
    return "correct", ""


def counts() -> collections.Counter:
    """Run every case; the number of each outcome."""
    return collections.Counter(outcome(case)[0] for case in CASES)


def test_the_table_is_big_enough():
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names), "case names must be unique"
    expected = collections.Counter("error" if c.error else "correct" for c in CASES)
    assert len(CASES) >= 80 and expected["error"] >= 30 and expected["correct"] >= 30, expected


@pytest.mark.parametrize("case", CASES, ids=[("error: " if c.error else "correct: ") + c.name for c in CASES])
def test_case(case):
    kind, detail = outcome(case)
    assert kind == ("clear error" if case.error else "correct"), f"{kind}: {detail}"


if __name__ == "__main__":
    tally = collections.Counter()
    for case in CASES:
        kind, detail = outcome(case)
        tally[kind] += 1
        if kind in ("wrong", "crash") or "-v" in sys.argv:
            print(f"{kind:12s} {case.name}: {detail[:200]}")
    where = "interpreter (CPU)" if INTERPRET else f"compiled ({torch.cuda.get_device_name()})"
    print(f"{len(CASES)} cases on {where}: " + ", ".join(f"{k} {tally[k]}" for k in
                                                          ("clear error", "correct", "wrong", "crash")))
    sys.exit(1 if tally["wrong"] or tally["crash"] else 0)
