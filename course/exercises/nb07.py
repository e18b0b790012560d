"""Notebook 07: kernels written with the stages (nn.Linear's C = A @ W.T, then with a residual added)."""

from __future__ import annotations

import ast

import torch

from course import runtime
from course.check import rel_error
from course.exercises import core
from course.exercises.core import Failed, close, compiles_for_a_gpu, exercise, require_jit, user_error
from course.exercises.nb06 import (
    borrowed_call,
    grouped_tile_in_python,
    references,
    strided,
)

__all__ = ['check_linear', 'check_linear_residual']


_LINEAR_PARAMS = ("A", "W", "C", "M", "N", "K", "stride_am", "stride_ak", "stride_wn", "stride_wk", "stride_cm",
                  "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_SMS", "EVEN_K")
_RESIDUAL_PARAMS = ("A", "W", "R", "C", "M", "N", "K", "stride_am", "stride_ak", "stride_wn", "stride_wk",
                    "stride_rm", "stride_rn", "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_SMS",
                    "EVEN_K")
_PROGRAMS = 3

# (what, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, strided): tiles that are not square, smallest case first; ragged
# M and N, a ragged K, a K shorter than one step; then A, W and C (and R) each with two strides other than 1
_CASES = [("whole tiles", 64, 64, 32, 32, 16, 16, False), ("ragged tiles", 50, 70, 32, 32, 16, 16, False),
          ("a ragged K", 48, 40, 40, 16, 32, 16, False), ("a K shorter than BLOCK_K", 32, 48, 8, 16, 16, 16, False),
          ("A, W and C strided", 48, 40, 40, 16, 32, 16, True)]


def _randn(size):
    return torch.randn(size, device=runtime.DEVICE, dtype=torch.float16)


def _nan(size):
    return torch.full((size,), float("nan"), device=runtime.DEVICE, dtype=torch.float16)


def _describe(what, M, N, K, block_m, block_n, block_k) -> str:
    return f"{what} ({M} x {N} x {K}, tiles of {block_m} x {block_n}, steps of K of {block_k})"


# Each matrix lies in memory of its own with room on either side (_PAD times what it spans): a view
# with a wrong stride reads values there (and the check names the mistake) instead of leaving the
# tensor, which the interpreter stops and a GPU may not.
_PAD = 4


def _inputs(M, N, K, is_strided):
    """A (M x K) and W (N x K): contiguous, or A column-major and W with two strides other than 1."""
    if not is_strided:
        return strided(M, K, (K, 1), _randn, _PAD)[0], strided(N, K, (K, 1), _randn, _PAD)[0]
    a = strided(M, K, (1, M + 3), _randn, _PAD)[0]  # column-major, columns M + 3 apart
    w = strided(N, K, (3 * K + 1, 3), _randn, _PAD)[0]  # every third column of a wider matrix
    return a, w


def _output(M, N, is_strided, fill=_nan):
    """C (M x N) in memory of its own with room on either side, the memory and the mask of C's elements."""
    return strided(M, N, (2, 2 * M + 3) if is_strided else (N, 1), fill, _PAD)


def _launch(case, kernel, tensors, M, N, K, block_m, block_n, block_k, programs=_PROGRAMS):
    """Launch the learner's kernel on ``programs`` programs: its errors, and loads or stores outside its
    tensors, become one ✗ line that names the case."""
    strides = [s for t in tensors for s in t.stride()]
    try:
        kernel[(programs,)](*tensors, M, N, K, *strides, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                            NUM_SMS=programs, EVEN_K=K % block_k == 0, num_warps=4, num_stages=2)
    except _OutOfBounds as stray:
        raise Failed(f"on {case}: {stray} (with the stages: the sizes and strides of that tensor's view)") from None
    except Exception as err:
        raise user_error(f"on {case}, your kernel", err) from None


_OutOfBounds = getattr(core, "OutOfBounds", type("_Never", (BaseException,), {}))


def _refuse_borrowed(name: str, kernel) -> None:
    borrowed = borrowed_call(kernel, allowed=("course.stages",))
    if borrowed:
        raise Failed(f"{name} calls {borrowed}: the exercise is a kernel of your own, written with the stages "
                      "(views, GemmContext, ScheduleContext)")


def _uses_the_stages(name: str, kernel) -> None:
    if not core.source_of(kernel):  # Python cannot find the source (python -c, exec): nothing to read
        return
    if not any(home.startswith("course.stages") for home, _ in references(kernel)):
        raise Failed(f"right, but {name} does not use the stages: this exercise is about them; build the views "
                      "with make_tensor_view and make_output_view, the K loop with GemmContext and the tiles with "
                      "ScheduleContext")


# GemmContext's parameters in order: acc_dtype is the tenth
_CONTEXT_PARAMS = ("block_m", "block_n", "block_k", "num_sms", "num_xcds", "group_size_m", "chunk_size",
                   "cache_modifier_a", "cache_modifier_b", "acc_dtype")


def _accumulates_in_float32(name: str, kernel) -> None:
    """A ✗ for a GemmContext told another accumulator than float32 (read from the source: with K as short as the
    check's, an fp16 accumulator stays within the tolerance, and on a long K it does not)."""
    try:
        tree = ast.parse(core.source_of(kernel) or "")
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "GemmContext"
                                                or getattr(node.func, "attr", None) == "GemmContext")):
            continue
        given = [kw.value for kw in node.keywords if kw.arg == "acc_dtype"]
        given += node.args[len(_CONTEXT_PARAMS) - 1:len(_CONTEXT_PARAMS)]
        for value in given:
            if not (isinstance(value, (ast.Attribute, ast.Name))
                    and getattr(value, "attr", getattr(value, "id", None)) == "float32"):
                raise Failed(f"{name} gives GemmContext an accumulator other than float32: accumulate in float32 "
                             "(leave acc_dtype out); a float16 sum of K products loses the small ones once it grows, "
                             "far past the float16 of the inputs on a long K")


def _calls_reduce_tile(kernel) -> bool:
    return _calls_method(kernel, "reduce_tile")


def _calls_method(kernel, name: str) -> bool:
    """Whether the kernel's source calls ``<something>.name(...)`` (read with ``ast``)."""
    try:
        tree = ast.parse(core.source_of(kernel))
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
               for n in ast.walk(tree))


# A float16 product over a long K, on one tile (and 3 programs): K / BLOCK_K = 256 steps. An accumulator rounded
# to float16 at every step loses about sqrt(steps) times float16's last bit (measured: 12 times the error of a
# float32 sum rounded once at the store, on this data); a float32 one stays within 1.3 times that. The short
# cases above cannot tell them apart (K is at most 40 there, a few steps).
_LONG_K = ("a long K", 16, 32, 4096, 16, 32, 16)


def _long_k(kernel, residual: bool) -> None:
    """A ✗ when the result on a long K is more than 3 times less precise than a float32 accumulator allows."""
    what, M, N, K, block_m, block_n, block_k = _LONG_K
    case = _describe(what, M, N, K, block_m, block_n, block_k)
    generator = torch.Generator().manual_seed(31)
    a = torch.randn(M, K, generator=generator).half().to(runtime.DEVICE)
    w = torch.randn(N, K, generator=generator).half().to(runtime.DEVICE)
    r = torch.randn(M, N, generator=generator).half().to(runtime.DEVICE)
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device=runtime.DEVICE)
    _launch(case, kernel, (a, w, r, c) if residual else (a, w, c), M, N, K, block_m, block_n, block_k)
    extra = r.double().cpu() if residual else 0.0
    exact = a.double().cpu() @ w.double().cpu().T + extra
    float32 = (a.float().cpu() @ w.float().cpu().T + (r.float().cpu() if residual else 0.0)).half().double()
    error = lambda t: (torch.linalg.vector_norm(t - exact) / torch.linalg.vector_norm(exact)).item()  # noqa: E731
    floor, got = error(float32), error(c.double().cpu())
    if got <= 3 * floor:
        return
    if got < 0.05:
        raise Failed(f"on {case}: the result is {got / floor:.0f} times less precise than float16 allows (the cases "
                     "with a short K could not show it): the accumulator is rounded to 16 bits along the way. Keep "
                     "it in float32 over the whole K loop (ctx.init_accumulator(), or tl.zeros(..., dtype=tl.float32))"
                     " and convert once, at the store")
    raise Failed(f"on {case}: wrong values, where the cases with a short K were right: the K loop must cover all "
                 f"of K, tl.cdiv(K, BLOCK_K) steps{' (then R is added, once)' if residual else ''}")


# --- 07 · linear ----------------------------------------------------------------------------------------

@exercise("linear", "Write the body of linear_kernel above with the stages: C = A @ W.T for a weight W of (N, K)")
def check_linear(linear_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``solutions.linear_kernel``: ``C = A @ W.T``
    for ``W`` of shape (N, K), on 3 programs, tiles that are not square, ragged M and N, a ragged K, a K
    shorter than one step, then A, W and C each with two strides other than 1; then a float16 K of 4096, whose
    result must be as precise as a float32 accumulator makes it (a float16 one is 12 times less)."""
    require_jit("linear_kernel", linear_kernel, _LINEAR_PARAMS, kind="kernel")
    _refuse_borrowed("linear_kernel", linear_kernel)
    _accumulates_in_float32("linear_kernel", linear_kernel)
    for what, M, N, K, block_m, block_n, block_k, is_strided in _CASES:
        case = _describe(what, M, N, K, block_m, block_n, block_k)
        torch.manual_seed(0)
        a, w = _inputs(M, N, K, is_strided)
        c, memory, owned = _output(M, N, is_strided)
        _launch(case, linear_kernel, (a, w, c), M, N, K, block_m, block_n, block_k)
        _stored_inside(case, memory, owned)
        _holes(case, c, block_m, block_n)
        _diagnose_product(case, linear_kernel, a, w, c, block_k, is_strided)
        # within float16's tolerance, yet off by more than its rounding (a GPU rounds bfloat16 to nearest)
        got, exact = c.double().cpu(), a.double().cpu() @ w.double().cpu().T
        err, floor = _precision(got, exact)
        if err > 3 * floor + 1e-7:
            _rounded_to_bfloat16(case, got, exact)
            _scaled(case, got, exact)
    _long_k(linear_kernel, residual=False)
    _each_program_its_own_tiles(lambda grid, a, w, c, **kw: linear_kernel[grid](a, w, c, *_sizes(a, w),
                                                                                 *a.stride(), *w.stride(),
                                                                                 *c.stride(), **kw))
    _uses_the_stages("linear_kernel", linear_kernel)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t = torch.empty(64, 64, dtype=torch.float16)
        compiles_for_a_gpu(linear_kernel, t, t, t, 64, 64, 64, 64, 1, 64, 1, 64, 1, BLOCK_M=32, BLOCK_N=16,
                            BLOCK_K=16, NUM_SMS=4, EVEN_K=True)
    return (f"right on {len(_CASES)} products: tiles that are not square, ragged M, N and K, K shorter than a "
            "step, strided A, W and C; and as precise as a float32 accumulator on a K of 4096")


def _sizes(a, w):
    return a.shape[0], w.shape[0], a.shape[1]


def _stored_inside(case: str, memory, owned) -> None:
    if (~torch.isnan(memory.cpu()) & ~owned).any():
        raise Failed(f"on {case}: the kernel stored into memory between or past C's elements: C's output view is "
                      "M x N (M rows, N columns) with C's own strides, stride_cm and stride_cn")


def _holes(case: str, c, block_m: int, block_n: int) -> None:
    """A ✗ if some of C was never stored (C was NaN before the launch)."""
    holes = torch.isnan(c).cpu()
    missing = int(holes.sum())
    if missing == 0:
        return
    if missing == c.numel():
        raise Failed(f"on {case}: nothing was stored into C: for every tile of the schedule, reduce it over K and "
                      "store the accumulator through an output view of C")
    M, N = c.shape
    num_pid_m, num_pid_n = -(-M // block_m), -(-N // block_n)
    first = [grouped_tile_in_python(t, num_pid_m, num_pid_n, 8) for t in range(min(_PROGRAMS, num_pid_m * num_pid_n))]
    stored = {(i, j) for i in range(num_pid_m) for j in range(num_pid_n)
              if not holes[i * block_m:(i + 1) * block_m, j * block_n:(j + 1) * block_n].any()}
    total = num_pid_m * num_pid_n
    for step in range(1, 2 * _PROGRAMS + 2):  # a loop with another step than the number of programs
        visited = {grouped_tile_in_python(t, num_pid_m, num_pid_n, 8) for p in range(_PROGRAMS)
                   for t in range(p, total, step)}
        if step != _PROGRAMS and visited == stored and stored != set(first):
            raise Failed(f"on {case}: {missing} of {c.numel()} elements of C were never stored: your loop over the "
                          "tile ids takes another step than persistent_tile_range's stride (the number of programs, "
                          f"{_PROGRAMS} here), so some tiles fall between the programs' ids")
    if stored == set(first):
        raise Failed(f"on {case}: each program stored only its first tile, and {missing} of {c.numel()} elements "
                      "of C were never stored: a program takes every tile of persistent_tile_range, (start, total, "
                      "stride), one after another")
    rows, cols = holes.all(dim=1), holes.all(dim=0)
    if rows.any() and torch.equal(holes, rows[:, None].expand_as(holes)) or \
            cols.any() and torch.equal(holes, cols[None, :].expand_as(holes)):
        raise Failed(f"on {case}: whole rows or columns of C were never stored: check the sizes you give "
                      "ScheduleContext and the output view (M rows, N columns, K the shared dimension)")
    raise Failed(f"on {case}: {missing} of {c.numel()} elements of C were never stored: take every tile "
                  f"that ScheduleContext.persistent_tile_range gives this program (the kernel runs on {_PROGRAMS} "
                  "programs)")


def _wrapped_k(a, w, block_k):
    """A @ W.T as a K loop whose last, partial step reads columns wrapped into K (k % K) instead of zeros."""
    K = a.shape[1]
    steps = -(-K // block_k)
    cols = torch.arange(steps * block_k) % K
    return a.double().cpu()[:, cols] @ w.double().cpu()[:, cols].T


def _diagnose_product(case: str, kernel, a, w, c, block_k: int, is_strided: bool, extra: str = "") -> None:
    """A ✗ naming the likeliest mistake when ``c`` is not ``a @ w.T`` (``extra``: what the result holds
    besides the product, for the message)."""
    K, N = a.shape[1], w.shape[0]
    A, Wd = a.double().cpu(), w.double().cpu()
    if close(c, A @ Wd.T):
        return
    try:  # W's own memory read with its strides the wrong way round (as the kernel would)
        wrong_strides = torch.as_strided(w, (K, N), w.stride()).double().cpu()
    except RuntimeError:  # that view would reach past W's memory
        wrong_strides = None
    if K == N and close(c, A @ Wd):
        raise Failed(f"on {case}: you computed A @ W, not A @ W.T{extra}: B must be W's transpose, a K x N view of "
                      "W's own memory. Which of W's two strides moves you along k, and which along n?")
    as_stored = Wd[(torch.arange(K) % N)[:, None], (torch.arange(N) % K)[None, :]]  # a view of W, N x K, read as B
    if K != N and close(c, A @ as_stored):
        raise Failed(f"on {case}: B's view is W as stored, N x K{extra}: B = W.T is K x N, a view of W's own memory "
                      "with its sizes and strides swapped")
    if wrong_strides is not None and close(c, A @ wrong_strides):
        raise Failed(f"on {case}: B's view walks W with the strides the wrong way round{extra}: element (k, n) of "
                      "W.T is W[n, k], so B's row stride is stride_wk and its column stride stride_wn")
    if K % block_k and close(c, _wrapped_k(a, w, block_k)):
        raise Failed(f"on {case}: the last, partial step of K read columns past K, which the unmasked loads wrap "
                      "back to the first columns of A and W: with reduce_tile, the last step needs "
                      "boundary=True (its loads masked, zeros past K); reduce_axis does it when told "
                      "even_k=EVEN_K")
    truncated = (K // block_k) * block_k
    if K % block_k and close(c, A[:, :truncated] @ Wd[:, :truncated].T):
        if _calls_method(kernel, "reduce_k_range"):
            raise Failed(f"on {case}: the last, partial step of K is missing: the range of steps you give "
                          "reduce_k_range ends before it (K // BLOCK_K rounds down; a partial step counts as a step, "
                          "as in tl.cdiv)")
        if _calls_reduce_tile(kernel):
            raise Failed(f"on {case}: the last, partial step of K is missing: your K loop stops before it; it "
                          "takes tl.cdiv(K, BLOCK_K) steps, the last one with boundary=True")
        raise Failed(f"on {case}: the last, partial step of K is missing or zero: tell GemmContext whether K is a "
                      "multiple of BLOCK_K (even_k=EVEN_K)")
    _diagnose_value_error(case, kernel, c, A, Wd, block_k, extra)
    if is_strided:  # right on every contiguous case before it
        raise Failed(f"on {case}: wrong values, where the contiguous cases were right: build each view from the "
                      "stride arguments you are given (stride_am, stride_ak, stride_wn, stride_wk), not from the "
                      "sizes and 1")
    raise Failed(f"on {case}: wrong values{extra}, in the wrong places: C is not A @ W.T up to a rounding, a "
                  "constant factor or a missing K step. A is M x K (stride_am, stride_ak), B = W.T is K x N, C is "
                  "M x N (stride_cm, stride_cn); check each view's sizes and strides")


def _roundings(exact):
    """``exact`` (float64) as the float32 accumulator rounded to bfloat16 before C's float16 store: to nearest (a
    GPU) and toward 0 (Triton's interpreter)."""
    f32 = exact.float()
    return [f32.bfloat16().double(), (f32.view(torch.int32) & -65536).view(torch.float32).double()]


def _precision(got, exact):
    """(C's relative error, that of a float32 accumulator rounded once to float16 at the store)."""
    return rel_error(got, exact), rel_error(exact.float().half().double(), exact)


def _rounded_to_bfloat16(case: str, got, exact, extra: str = "") -> None:
    """A ✗ when C (float64, on the CPU) is ``exact`` rounded to bfloat16 on its way to the store."""
    err, floor = _precision(got, exact)
    if err > 3 * floor + 1e-7 and any(rel_error(got, r) < 0.5 * err for r in _roundings(exact)):
        raise Failed(f"on {case}: C's values{extra} are in their places, but rounded to bfloat16 on their way to the "
                      "store: every element is off by bfloat16's rounding (8 bits), coarser than C's float16 (11). "
                      "Store the float32 accumulator as it is: the output view converts it to C's type, once")


def _less_precise(case: str, kernel, got, exact, extra: str = "") -> None:
    """A ✗ when every element of C is near its value, but C is less precise than float16 allows."""
    err, floor = _precision(got, exact)
    near = ((got - exact).abs() <= 0.07 * exact.abs() + 0.01 * exact.pow(2).mean().sqrt()).all()
    if err > 3 * floor + 1e-7 and near:
        narrow = _narrow_types(kernel)
        raise Failed(f"on {case}: C's values{extra} are in their places, each near its value, but {err / floor:.0f} "
                      f"times less precise than float16 allows (off by {err:.2g}, relative): something rounds to "
                      "fewer bits on the way" + (f" (your kernel converts to {narrow})" if narrow else "")
                      + ", or scales the values a little. Keep the accumulator in float32 up to the store, and store "
                      "it as it is: the output view converts it once")


def _scaled(case: str, got, exact, extra: str = "") -> None:
    """A ✗ when C (float64, on the CPU) is ``exact`` times a constant other than 1 (within float16's tolerance
    of it, and much nearer it than to ``exact``)."""
    err, floor = _precision(got, exact)
    factor = float((got * exact).sum() / (exact * exact).sum())
    explained = rel_error(got, factor * exact) < max(0.25 * err, 2 * floor)  # the factor accounts for the error
    if abs(factor - 1) > 2 * floor and close(got, factor * exact) and explained:
        raise Failed(f"on {case}: C's values{extra} are in their places, but all scaled by the same factor, about "
                      f"{factor:.4g}: C is A @ W.T, stored as the accumulator comes out of the K loop, with nothing "
                      "multiplying it")


def _diagnose_value_error(case: str, kernel, c, A, Wd, block_k: int, extra: str = "") -> None:
    """A ✗ for C's elements all in their places, their values off: rounded to bfloat16, a K step missing or added
    twice, a constant factor or offset, another rounding. Nothing when it is none of these (the addressing
    messages follow)."""
    got, exact = c.double().cpu(), A @ Wd.T
    _rounded_to_bfloat16(case, got, exact, extra)
    K = A.shape[1]
    steps = -(-K // block_k)
    for j in range(steps) if steps > 1 else ():
        part = A[:, j * block_k:(j + 1) * block_k] @ Wd[:, j * block_k:(j + 1) * block_k].T
        which = "the first step" if j == 0 else "the last step" if j == steps - 1 else f"step {j}"
        where = f"{which} of K (k from {j * block_k} to {min(K, (j + 1) * block_k)})"
        if close(got, exact - part):
            if _calls_method(kernel, "reduce_k_range"):
                how = ("the range of steps you give reduce_k_range is [k_begin, k_end): it runs from 0 to "
                       "tl.cdiv(K, BLOCK_K)")
            elif _calls_reduce_tile(kernel):
                how = "your K loop must visit every k_idx, from 0 to tl.cdiv(K, BLOCK_K) - 1"
            else:
                how = "the K loop must cover every step, from 0 to tl.cdiv(K, BLOCK_K)"
            raise Failed(f"on {case}: C's values{extra} are in their places, but {where} is missing from the sum "
                          f"({steps} steps of BLOCK_K here): {how}")
        if close(got, exact + part):
            raise Failed(f"on {case}: C's values{extra} are in their places, but {where} is added twice: each step of "
                          "K counts once, from 0 to tl.cdiv(K, BLOCK_K)")
    _scaled(case, got, exact, extra)
    err, floor = _precision(got, exact)
    offset = float((got - exact).mean())
    explained = rel_error(got, exact + offset) < max(0.25 * err, 2 * floor)
    if abs(offset) > 2 * floor * exact.abs().mean() and close(got, exact + offset) and explained:
        raise Failed(f"on {case}: C's values{extra} are in their places, but all shifted by the same amount, about "
                      f"{offset:.3g}: C is A @ W.T, stored as the accumulator comes out of the K loop, with nothing "
                      "added to it")
    _less_precise(case, kernel, got, exact, extra)


def _each_program_its_own_tiles(launch) -> None:
    """Launch one program of NUM_SMS = 3: only the tiles of program 0 (ids 0, 3, 6, ...) may be written;
    a kernel whose programs all compute every tile is right, and three times too slow."""
    M = N = K = 64  # 2 x 2 tiles of 32: program 0 of 3 owns tile ids 0 and 3
    a = torch.randn(M, K, device=runtime.DEVICE, dtype=torch.float16)
    w = torch.randn(N, K, device=runtime.DEVICE, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device=runtime.DEVICE, dtype=torch.float16)
    launch((1,), a, w, c, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NUM_SMS=3, EVEN_K=True, num_warps=4, num_stages=2)
    written = (~torch.isnan(c)).cpu().view(2, 32, 2, 32).all(dim=3).all(dim=1).flatten().tolist()
    if sum(written) > 2:
        raise Failed("right, but each program computes tiles that belong to other programs: with NUM_SMS "
                      "programs, program pid takes only the tile ids of persistent_tile_range (pid, pid + NUM_SMS, "
                      "...), with NUM_SMS given to GemmContext")


# --- 07 · linear with a residual ---------------------------------------------------------------------

# the cases of linear, then R and C one tensor (x = x + f(x), in place), both strided
_RESIDUAL_CASES = _CASES + [("in place, R is C", 48, 40, 24, 16, 32, 16, True)]


@exercise("linear_residual", "Write the body of linear_residual_kernel above with the stages: C = A @ W.T + R")
def check_linear_residual(linear_residual_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``solutions.linear_residual_kernel``:
    ``C = A @ W.T + R`` with R read through a view of its own, on the cases of ``linear`` (R strided
    too, with strides of its own), once in place (R is C) and on a float16 K of 4096 (a float32
    accumulator's precision). An answer that calls torch or a kernel of the course other than the stages
    gets its own ✗."""
    kernel = linear_residual_kernel
    require_jit("linear_residual_kernel", kernel, _RESIDUAL_PARAMS, kind="kernel")
    _refuse_borrowed("linear_residual_kernel", kernel)
    _accumulates_in_float32("linear_residual_kernel", kernel)
    for what, M, N, K, block_m, block_n, block_k, is_strided in _RESIDUAL_CASES:
        case = _describe(what, M, N, K, block_m, block_n, block_k)
        in_place = what.startswith("in place")
        torch.manual_seed(0)
        a, w = _inputs(M, N, K, is_strided)
        if in_place:
            c, memory, owned = _output(M, N, True)
            c.copy_(_randn(M * N).view(M, N))
            r, r_memory = c, memory
        else:
            r, r_memory = _residual(M, N, is_strided)
            c, memory, owned = _output(M, N, is_strided)
        r0 = r.double().cpu().clone()
        _launch(case, kernel, (a, w, r, c), M, N, K, block_m, block_n, block_k)
        _stored_inside(case, memory, owned)
        product = a.double().cpu() @ w.double().cpu().T
        if close(c, product + r0):
            continue
        if in_place:
            _diagnose_in_place(case, c, product, r0)
        if torch.isnan(c).all():
            _nothing_or_c_read(case, kernel, a, w, r, M, N, K, block_m, block_n, block_k, is_strided, product)
        _holes(case, c, block_m, block_n)
        _diagnose_residual(case, c, product, r, r_memory, M, N)
        _r_on_some_tiles(case, c, product, r0, block_m, block_n)
        _product_alone(case, kernel, a, w, M, N, K, block_m, block_n, block_k, is_strided)
    _precise_r(kernel)
    _long_k(kernel, residual=True)
    _each_program_its_own_tiles(lambda grid, a, w, c, **kw: kernel[grid](
        a, w, torch.zeros_like(c), c, *_sizes(a, w), *a.stride(), *w.stride(), *c.stride(), *c.stride(), **kw))
    _uses_the_stages("linear_residual_kernel", kernel)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t = torch.empty(64, 64, dtype=torch.float16)
        compiles_for_a_gpu(kernel, t, t, t, t, 64, 64, 64, 64, 1, 64, 1, 64, 1, 64, 1, BLOCK_M=32, BLOCK_N=16,
                            BLOCK_K=16, NUM_SMS=4, EVEN_K=True)
    return (f"right on {len(_RESIDUAL_CASES)} cases: tiles that are not square, ragged M, N and K, strided A, W, "
            "R and C, and in place (R is C); and as precise as a float32 accumulator on a K of 4096")


# R 16 times larger than A @ W.T (K = 32: the product's entries are about sqrt(32) in size), on one tile: C is then
# mostly R, so R rounded to fewer bits on its way in (.to(tl.bfloat16): 8 bits, where float16 has 11) costs C about
# 8 times float16's own rounding at the store, which the tolerance of the cases above (float16's) lets through.
_BIG_R = ("R much larger than the product", 16, 32, 32, 16, 32, 16, 16.0)


def _precise_r(kernel) -> None:
    """A ✗ when C, with an R that dominates it, is more than 3 times less precise than R added in float32 allows."""
    what, M, N, K, block_m, block_n, block_k, scale = _BIG_R
    case = _describe(what, M, N, K, block_m, block_n, block_k)
    generator = torch.Generator().manual_seed(7)
    a = torch.randn(M, K, generator=generator).half().to(runtime.DEVICE)
    w = torch.randn(N, K, generator=generator).half().to(runtime.DEVICE)
    r = (scale * K ** 0.5 * torch.randn(M, N, generator=generator)).half().to(runtime.DEVICE)
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device=runtime.DEVICE)
    _launch(case, kernel, (a, w, r, c), M, N, K, block_m, block_n, block_k)
    exact = a.double().cpu() @ w.double().cpu().T + r.double().cpu()
    float32 = (a.float().cpu() @ w.float().cpu().T + r.float().cpu()).half().double()
    error = lambda t: (torch.linalg.vector_norm(t - exact) / torch.linalg.vector_norm(exact)).item()  # noqa: E731
    floor, got = error(float32), error(c.double().cpu())
    if got <= 3 * floor:
        return
    narrow = _narrow_types(kernel)
    raise Failed(f"on {case}: C is {got / floor:.0f} times less precise than float16 allows, where R is much larger "
                 "than A @ W.T: R's values lose bits on their way into the accumulator"
                 + (f" (your kernel converts to {narrow}, which keeps fewer bits than R's float16)" if narrow else "")
                 + ". Add R's tile to the float32 accumulator as it is loaded, with no .to() to a narrower type: "
                 "C is rounded once, at the store")


def _narrow_types(kernel) -> str | None:
    """The first 16-bit or 8-bit float type other than float16 that the kernel's source names (tl.bfloat16), if
    any."""
    try:
        tree = ast.parse(core.source_of(kernel) or "")
    except SyntaxError:
        return None
    return next((f"tl.{node.attr}" for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                 and (node.attr == "bfloat16" or node.attr.startswith("float8"))), None)


def _residual(M, N, is_strided):
    """R (M x N), contiguous or with strides of its own (unlike C's), and its memory."""
    view, memory, _ = strided(M, N, (3 * N + 1, 3) if is_strided else (N, 1), _randn, _PAD)
    return view, memory


def _diagnose_in_place(case, c, product, r0) -> None:
    stored_first = product.half().double()  # the product stored, then read back as R
    if close(c, product + stored_first) or close(c, 2 * product):
        raise Failed(f"on {case}: C holds the product twice: your kernel stored the product, then read R, which is "
                      "C here, and added it; read R's tile before storing C's (in place, x = x + f(x))")
    if close(c, product):
        raise Failed(f"on {case}: C holds the product without R, where R is C (in place): read R's tile before "
                      "storing C's")


def _nothing_or_c_read(case, kernel, a, w, r, M, N, K, block_m, block_n, block_k, is_strided, product) -> None:
    """C is all NaN: nothing was stored, or C's own (NaN) contents were added. Run once more with C zero."""
    c, _, _ = _output(M, N, is_strided, fill=lambda size: torch.zeros(size, device=runtime.DEVICE,
                                                                      dtype=torch.float16))
    _launch(case, kernel, (a, w, r, c), M, N, K, block_m, block_n, block_k)
    if close(c, product):
        raise Failed(f"on {case}: your kernel added C's old contents (NaN in this check), not R: read R through a "
                      "view of R (its own pointer and strides), not through C's view")


def _diagnose_residual(case, c, product, r, r_memory, M, N) -> None:
    """Mistakes in what is added to the product."""
    R = r.double().cpu()
    if close(c, product):
        raise Failed(f"on {case}: C is A @ W.T without R: load R's tile (a view of R, .load(out_tile)) and add it "
                      "to the accumulator before the store")
    if close(c, R):
        raise Failed(f"on {case}: C holds R alone: the product is missing; reduce each tile over K and add R's "
                      "tile to that accumulator")
    if close(c, product + 2 * R):
        raise Failed(f"on {case}: R was added twice: add R's tile once, to the accumulator, before the store")
    if close(c, product - R):
        raise Failed(f"on {case}: R was subtracted: C = A @ W.T + R")
    if close(c, product * R):
        raise Failed(f"on {case}: C is the product times R: R is added to the accumulator, not multiplied")
    for strides, why in ((r.stride()[::-1], "R's view has its two strides the wrong way round: element (m, n) of R "
                                            "is at R + m * stride_rm + n * stride_rn"),
                         (c.stride(), "R was read with C's strides: R's view takes R's own, stride_rm and "
                                      "stride_rn (here R and C are laid out differently)")):
        if tuple(strides) == tuple(r.stride()):
            continue
        try:
            wrong = torch.as_strided(r_memory, (M, N), strides, r.storage_offset()).double().cpu()
        except RuntimeError:
            continue
        if close(c, product + wrong):
            raise Failed(f"on {case}: {why}")


def _r_on_some_tiles(case, c, product, r0, block_m: int, block_n: int) -> None:
    """A ✗ when every tile of C is either A @ W.T + R or A @ W.T alone, and both kinds occur: R is added under a
    condition (on the tile id, the program, the tile's place)."""
    M, N = c.shape
    got = c.double().cpu()
    num_pid_m, num_pid_n = -(-M // block_m), -(-N // block_n)
    total = num_pid_m * num_pid_n
    ids = {grouped_tile_in_python(t, num_pid_m, num_pid_n, 8): t for t in range(total)}
    with_r, without_r = [], []
    for (i, j), t in sorted(ids.items(), key=lambda item: item[1]):
        rows, cols = slice(i * block_m, (i + 1) * block_m), slice(j * block_n, (j + 1) * block_n)
        if close(got[rows, cols], product[rows, cols] + r0[rows, cols]):
            with_r.append(t)
        elif close(got[rows, cols], product[rows, cols]):
            without_r.append(t)
        else:
            return
    if not with_r or not without_r:
        return

    def tiles(ts):
        shown = ", ".join(str(t) for t in ts[:6]) + (f" and {len(ts) - 6} more" if len(ts) > 6 else "")
        programs = sorted({t % _PROGRAMS for t in ts})
        return (f"tile id{'s' if len(ts) > 1 else ''} {shown} (of program{'s' if len(programs) > 1 else ''} "
                f"{', '.join(map(str, programs))})")

    which = ""
    if with_r == list(range(min(_PROGRAMS, total))):
        which = ", each program's first"
    elif len({t % _PROGRAMS for t in with_r}) == 1 and len(with_r) == len(range(with_r[0] % _PROGRAMS, total,
                                                                                  _PROGRAMS)):
        which = f", all those of program {with_r[0] % _PROGRAMS} and no other's"
    raise Failed(f"on {case}: R was added on {len(with_r)} of {total} tiles only{which}: {tiles(with_r)} got it, "
                  f"{tiles(without_r)} hold A @ W.T without R. Every tile adds its own tile of R: load it and add "
                  "it inside the loop over the tiles, with no condition on the tile id, the program or the tile's "
                  "place")


def _product_alone(case, kernel, a, w, M, N, K, block_m, block_n, block_k, is_strided) -> None:
    """Run with R = 0: a wrong product gets linear's messages, a right one says that R is read wrong."""
    zero = _output(M, N, is_strided, fill=lambda size: torch.zeros(size, device=runtime.DEVICE,
                                                                   dtype=torch.float16))[0]
    c, _, _ = _output(M, N, is_strided)
    _launch(case, kernel, (a, w, zero, c), M, N, K, block_m, block_n, block_k)
    if close(c, a.double().cpu() @ w.double().cpu().T):
        raise Failed(f"on {case}: the product is right (with R = 0), but R's tile is read wrong: R is M x N, read "
                      "through a view with R's own strides (stride_rm, stride_rn), at the output tile")
    _holes(case, c, block_m, block_n)
    _diagnose_product(case, kernel, a, w, c, block_k, is_strided, extra=" (with R = 0)")
