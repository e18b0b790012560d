"""Notebook 03: a tiled matmul."""

from __future__ import annotations

import ast
import dataclasses

import torch

from course import runtime
from course.exercises.core import (Failed, compiles_for_a_gpu, exercise, plural, require_jit, source_of,
                                   unmasked_loads, user_error)

__all__ = ['check_matmul_kernel']


# Small blocks keep the interpreter quick; 16 is tl.dot's smallest size on a GPU.
_MM_BLOCKS = dict(block_m=32, block_n=32, block_k=16)


@dataclasses.dataclass
class _Product:
    """One launch of the learner's matmul kernel: what it wrote, and what it should have."""

    what: str
    a: torch.Tensor
    b: torch.Tensor
    out: torch.Tensor  # the M x N view the kernel was given
    spill: int  # elements written outside the view (padding columns, rows past M)
    ref: torch.Tensor  # float64

    def close(self, other: torch.Tensor) -> bool:
        """Within the output dtype's tolerance of ``other`` (float32 allows for TF32 on a GPU)."""
        from course.check import tolerance

        got = self.out.double().cpu()
        return bool(torch.linalg.vector_norm(got - other) <= tolerance(self.out.dtype) * torch.linalg.vector_norm(other))

    def error(self) -> float:
        got = self.out.double().cpu()
        return (torch.linalg.vector_norm(got - self.ref) / torch.linalg.vector_norm(self.ref)).item()


def _product(kernel, what: str, M: int, N: int, K: int, *, dtype=torch.float32, transposed=False,
             padded=True) -> _Product:
    """Launch ``kernel`` on fresh inputs; C sits in a NaN buffer with 32 spare rows (and, ``padded``,
    32 spare columns: C's rows are then longer than N)."""
    from course import tiled

    if transposed:  # A stored K-major (a transposed view), B a view of every other column
        a = _guarded_matrix(K, M, dtype).T
        b = _guarded_matrix(K, 2 * N, dtype)[:, ::2]
    else:
        a = _guarded_matrix(M, K, dtype)
        b = _guarded_matrix(K, N, dtype)
    device = runtime.DEVICE
    buffer = torch.full((M + 32, N + 32 * padded), float("nan"), dtype=dtype, device=device)
    out = buffer[:M, :N]
    tiled.launch(kernel, a, b, out, **_MM_BLOCKS)
    if runtime.DEVICE == "cuda":
        torch.cuda.synchronize()
    outside = buffer.clone()
    outside[:M, :N] = float("nan")
    spill = int((~torch.isnan(outside)).sum())
    return _Product(what, a, b, out, spill, a.double().cpu() @ b.double().cpu())


def _guarded_matrix(rows: int, cols: int, dtype) -> torch.Tensor:
    """A random contiguous matrix followed in memory by NaN: a read past its end (an unmasked
    edge) turns into NaN in the result, instead of garbage that may happen to be harmless (or a crash)."""
    buffer = torch.full(((rows + 32) * (cols + 32),), float("nan"), dtype=dtype, device=runtime.DEVICE)
    matrix = buffer[:rows * cols].view(rows, cols)
    matrix.copy_(torch.randn(rows, cols, dtype=dtype, device=runtime.DEVICE))
    return matrix


@exercise("matmul_kernel", "Write the body of matmul_kernel above: offsets, masks, the loop over K, the store")
def check_matmul_kernel(matmul_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``course.tiled.matmul_kernel``: whole
    tiles, ragged rows and columns, a ragged last step of K, transposed and sliced inputs, and a
    long float16 K (which needs a float32 accumulator). The check launches it itself."""
    require_jit("matmul_kernel", matmul_kernel, ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak",
                                                   "stride_bk", "stride_bn", "stride_cm", "stride_cn", "BLOCK_M",
                                                   "BLOCK_N", "BLOCK_K"), kind="kernel")
    cases = [("whole tiles (64 x 64 x 64)", 64, 64, 64, {"padded": False}),
             ("ragged rows and columns (50 x 70 x 64)", 50, 70, 64, {}),
             ("a ragged last step of K (64 x 64 x 40)", 64, 64, 40, {}),
             ("transposed and sliced inputs (48 x 40 x 32)", 48, 40, 32, {"transposed": True}),
             ("float16 with a long K (32 x 32 x 4096)", 32, 32, 4096, {"dtype": torch.float16})]
    if _sixteen_bit_accumulator(matmul_kernel):
        raise Failed("the accumulator is 16-bit: a long sum of K products loses precision in float16. "
                      "Accumulate in float32 (tl.zeros(..., dtype=tl.float32)) and convert once, at the store")
    products = []
    for what, M, N, K, options in cases:
        try:
            products.append(_product(matmul_kernel, what, M, N, K, **options))
        except Exception as err:
            raise user_error(f"on {what}, your kernel", err) from None
    whole, ragged, k_tail, strided, long_k = products
    _diagnose_whole(whole)
    _diagnose_edges(ragged)
    if not k_tail.close(k_tail.ref):
        bk = _MM_BLOCKS["block_k"]
        full = (k_tail.a.shape[1] // bk) * bk
        truncated = k_tail.a[:, :full].double().cpu() @ k_tail.b[:full].double().cpu()
        if k_tail.close(truncated):
            raise Failed(f"on {k_tail.what}: the last, partial step of K is missing. range(0, K, BLOCK_K) "
                          "includes it; K // BLOCK_K steps do not")
        raise Failed(f"on {k_tail.what}: the last step of K reads past K. Mask (k + offsets along K) < K in both "
                      "loads, with other=0.0, so the extra products are zero")
    if not strided.close(strided.ref):
        raise Failed(f"on {strided.what}: wrong values, though contiguous inputs are right. A transposed or "
                      "sliced view is not laid out row after row: compute every address from the strides "
                      "(stride_am, stride_ak, stride_bk, stride_bn), never from K or N")
    fp32_accumulator = (long_k.a.float().cpu() @ long_k.b.float().cpu()).half().double()
    floor = (torch.linalg.vector_norm(fp32_accumulator - long_k.ref) / torch.linalg.vector_norm(long_k.ref)).item()
    if long_k.error() > 3 * floor:
        raise Failed(f"on {long_k.what}: the result is {long_k.error() / floor:.0f} times less precise than "
                      "float16 allows: accumulate in float32 (tl.zeros(..., dtype=tl.float32)) and convert "
                      "once, at the store")
    if unmasked_loads(matmul_kernel):
        raise Failed("the results are right, but a tl.load has no mask: at the edges it reads past the ends "
                      "of A and B, which can fault on a GPU; mask rows, columns and K, with other=0.0")
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        compiles_for_a_gpu(matmul_kernel)
    return ("right on whole and ragged tiles, a ragged K, transposed and sliced inputs, and a long float16 K")


def _sixteen_bit_accumulator(kernel) -> bool:
    """True if the kernel starts a block of zeros in 16 bits or asks tl.dot for a 16-bit result."""

    try:
        tree = ast.parse(source_of(kernel))
    except SyntaxError:
        return False
    sixteen = lambda node: isinstance(node, ast.Attribute) and node.attr in ("float16", "bfloat16")  # noqa: E731
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("zeros", "full") and (any(sixteen(a) for a in node.args[1:]) or any(
                    k.arg == "dtype" and sixteen(k.value) for k in node.keywords)):
                return True
            if node.func.attr == "dot" and any(k.arg == "out_dtype" and sixteen(k.value) for k in node.keywords):
                return True
    return False


def _diagnose_whole(p: _Product) -> None:
    """The basic case: every tile whole, every input contiguous."""
    unwritten = int(torch.isnan(p.out).sum())
    if unwritten == p.out.numel():
        raise Failed(f"on {p.what}: nothing was stored into C. End the kernel with tl.store of the accumulator "
                      "(converted to C's dtype) at c_ptr + rows * stride_cm + columns * stride_cn")
    if unwritten:
        raise Failed(f"on {p.what}: {unwritten} of {p.out.numel()} elements of C were never stored. Each program "
                      "owns one tile: rows from tl.program_id(0), columns from tl.program_id(1)")
    if p.close(p.ref):
        return
    bk = _MM_BLOCKS["block_k"]
    a, b, K = p.a.double().cpu(), p.b.double().cpu(), p.a.shape[1]
    if p.close(a[:, :bk] @ b[:bk]):
        raise Failed(f"on {p.what}: only the first step of K counts. Loop over K and add every step into the "
                      "accumulator: acc = tl.dot(a, b, acc), or acc += tl.dot(a, b)")
    if p.close(a[:, K - bk:] @ b[K - bk:]):
        raise Failed(f"on {p.what}: only the last step of K counts: each step replaced the accumulator. Add "
                      "into it: acc = tl.dot(a, b, acc), or acc += tl.dot(a, b)")
    overlapping = sum(a[:, s:s + bk] @ b[s:s + bk] for s in range(K // bk))
    if p.close(overlapping):
        raise Failed(f"on {p.what}: the steps of K overlap: step k starts at k * BLOCK_K, not at k (or loop "
                      "with range(0, K, BLOCK_K) and use k itself)")
    if p.close(p.ref.T.contiguous()):
        raise Failed(f"on {p.what}: C comes out transposed: rows go with stride_cm, columns with stride_cn")
    raise Failed(f"on {p.what}: wrong values. A's element (i, k) is at a_ptr + i * stride_am + k * stride_ak, "
                  "B's (k, j) at b_ptr + k * stride_bk + j * stride_bn: rows of A go down [:, None], "
                  "columns of B across [None, :]")


def _which_missing(p: _Product) -> str:
    """Why some of C was not stored, judged from which elements are missing."""
    M, N = p.out.shape
    bm, bn = _MM_BLOCKS["block_m"], _MM_BLOCKS["block_n"]
    missing = torch.isnan(p.out).cpu()
    rows, cols = torch.arange(M)[:, None], torch.arange(N)[None, :]
    swapped = (rows < min(M, -(-N // bn) * bm)) & (cols < min(N, -(-M // bm) * bn))
    if torch.equal(missing, ~swapped.expand(M, N)):
        return ("The grid is (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)): rows come from tl.program_id(0), columns "
                "from tl.program_id(1); yours are swapped")
    return ("Check the store's mask, (rows < M)[:, None] & (columns < N)[None, :], and that rows come from "
            "tl.program_id(0), columns from tl.program_id(1)")


def _mask_swapped(p: _Product) -> bool:
    """Whether exactly the rows or columns past min(M, N) are missing: a store mask of rows < N and
    columns < M (which, where N > M, also writes rows past M)."""
    M, N = p.out.shape
    missing = torch.isnan(p.out).cpu()
    rows, cols = torch.arange(M)[:, None], torch.arange(N)[None, :]
    return bool(missing.any()) and (torch.equal(missing, (cols >= min(M, N)).expand(M, N))
                                    or torch.equal(missing, (rows >= min(M, N)).expand(M, N)))


def _diagnose_edges(p: _Product) -> None:
    """Rows and columns that are not multiples of the blocks."""
    unwritten = int(torch.isnan(p.out).sum())
    if unwritten and _mask_swapped(p):
        outside = f", and {plural(p.spill, 'element')} were stored outside it" if p.spill else ""
        raise Failed(f"on {p.what}: {unwritten} elements of C were never stored{outside}. The store's mask "
                      "compares rows with N or columns with M: rows < M, columns < N")
    if p.spill and not unwritten:
        raise Failed(f"on {p.what}: the store wrote {plural(p.spill, 'element')} outside C (past its last row or "
                      "column). Mask it with (rows < M)[:, None] & (columns < N)[None, :]")
    if unwritten and p.spill:
        raise Failed(f"on {p.what}: the store puts values in the wrong places, some outside C: C's rows here are "
                      "longer than N, so use stride_cm and stride_cn, never N")
    if unwritten:
        raise Failed(f"on {p.what}: {unwritten} elements of C were never stored. {_which_missing(p)}")
    if not p.close(p.ref):
        raise Failed(f"on {p.what}: wrong values at the edges. Mask the loads too (A's rows < M, B's columns "
                      "< N) with other=0.0, and use the strides of A, B and C")
