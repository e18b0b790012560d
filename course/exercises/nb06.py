"""Notebook 06: persistent kernels (the loop over a program's tiles, and the chiplet remap of program ids)."""

from __future__ import annotations

import ast
import inspect
import linecache
import random
import textwrap
import types

import torch
import triton
import triton.language as tl

from course import runtime
from course.exercises import core
from course.exercises.core import (
    Failed,
    close,
    compiles_for_a_gpu,
    exercise,
    module_of,
    plural,
    require_jit,
    resolve,
    user_error,
)

__all__ = ['check_persistent_loop', 'check_chiplet_remap']


# --- what a learner's kernel calls --------------------------------------------------------------------

def _is_jit(obj) -> bool:
    return callable(getattr(obj, "fn", None)) and hasattr(obj, "arg_names")


def references(fn) -> list:
    """``(module, object)`` for each name or attribute in ``fn``'s body that stands for something of a
    module (a function, a ``@triton.jit`` function, a class, or the torch module itself), then the same
    for the ``@triton.jit`` helpers of the learner's that it uses. Reads the code with ``ast``, so
    comments and strings do not count."""
    found, seen = [], set()

    def visit(f) -> None:
        f = getattr(f, "fn", f)
        if f in seen:
            return
        seen.add(f)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        except (OSError, TypeError, SyntaxError):
            return
        scope = getattr(f, "__globals__", {})
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for statement in defs[0].body if defs else tree.body:
            for node in ast.walk(statement):
                if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
                    continue
                obj = resolve(node, scope)
                if obj is None or isinstance(obj, (int, float, str, bool)):
                    continue
                home = module_of(obj)
                if not home and isinstance(node, ast.Attribute):  # a builtin of a module: torch.matmul
                    base = resolve(node.value, scope)
                    home = base.__name__ if isinstance(base, types.ModuleType) else ""
                if isinstance(obj, types.ModuleType) and home.split(".")[0] != "torch":
                    continue  # a module is no call; what is taken from it is looked at by name
                found.append((home, obj))
                if _is_jit(obj) and not home.startswith("course"):  # the learner's own helper
                    visit(obj)

    visit(fn)
    return found


def borrowed_call(fn, allowed=()) -> str | None:
    """The first thing ``fn`` uses (see :func:`references`) that is torch or a function of the course
    not in ``allowed`` (objects, or module names such as ``"course.stages"``), named as
    ``"course.stages.chiplet_transform"``; None when there is none."""
    allowed_modules = tuple(a for a in allowed if isinstance(a, str))
    for home, obj in references(fn):
        if any(obj is a for a in allowed if not isinstance(a, str)):
            continue
        name = getattr(getattr(obj, "fn", obj), "__name__", "")
        if home.split(".")[0] == "torch":
            return "torch" if isinstance(obj, types.ModuleType) else f"{home}.{name}"
        if home.startswith("course") and not any(home == m or home.startswith(m + ".") for m in allowed_modules):
            return f"{home}.{name}"
    return None


# --- strided matrices with guard elements -------------------------------------------------------------

def strided(rows: int, cols: int, strides: tuple, fill, pad: int = 1) -> tuple:
    """A ``rows x cols`` view with ``strides`` into memory of its own (``fill(size)``), with ``pad`` times
    what the view spans before it and as much after it: a wrong stride or a tile off the grid reads or
    writes there, not outside the tensor. Also the memory and the mask of its elements that belong to
    the view."""
    span = (rows - 1) * strides[0] + (cols - 1) * strides[1] + 1
    size, offset = (1 + 2 * pad) * span, pad * span
    memory = fill(size)
    view = memory.as_strided((rows, cols), strides, offset)
    owned = torch.zeros(size, dtype=torch.bool)
    owned.as_strided((rows, cols), strides, offset).fill_(True)
    return view, memory, owned


def _randn(size):
    return torch.randn(size, device=runtime.DEVICE, dtype=torch.float16)


def _nan(size):
    return torch.full((size,), float("nan"), device=runtime.DEVICE, dtype=torch.float16)


# --- 06 · the persistent loop -------------------------------------------------------------------------

_PERSISTENT_PARAMS = ("a_ptr", "b_ptr", "c_ptr", "log_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                      "stride_bn", "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
                      "NUM_PROGRAMS", "LOG")
_MATMUL_TILE_ARGS = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                     "stride_cm", "stride_cn", "pid_m", "pid_n", "BLOCK_M", "BLOCK_N", "BLOCK_K")

# (M, N, K, BLOCK_M, BLOCK_N, programs, GROUP_M, strided): tiles that are not square, both ways round, ragged
# edges in M, N and K; fewer tiles than programs; a ragged last turn and a short last group; then every
# operand, C included, with two strides other than 1
_SCHEDULE_CASES = [(40, 100, 24, 16, 32, 5, 2, False), (20, 70, 16, 16, 32, 8, 2, False),
                   (150, 40, 16, 32, 16, 4, 3, False), (60, 140, 40, 16, 32, 3, 3, True)]
_PRODUCT_CASE = (70, 90, 40, 32, 16, 3, 2)  # LOG=False, strided


def _operands(M, N, K, is_strided):
    """A (M x K), B (K x N) and a NaN C (M x N), contiguous or each with two strides other than 1; C's
    memory and the mask of its own elements in it."""
    # a loop past the grid makes tiles outside it, whose masks (row < M, column < N) let negative indices
    # through: room on either side of each matrix keeps those reads and writes inside its memory
    if not is_strided:
        a, b = strided(M, K, (K, 1), _randn, pad=4)[0], strided(K, N, (N, 1), _randn, pad=4)[0]
        c, memory, owned = strided(M, N, (N, 1), _nan, pad=4)
        return a, b, c, memory, owned
    a = strided(M, K, (1, M + 3), _randn, pad=4)[0]  # column-major, its columns M + 3 apart
    b = strided(K, N, (2 * N + 5, 2), _randn, pad=4)[0]  # every other column of a wider matrix
    c, memory, owned = strided(M, N, (2, 2 * M + 3), _nan, pad=4)  # every other row of a column-major one
    return a, b, c, memory, owned


def grouped_tile_in_python(t: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple:
    """``tiled.grouped_tile`` in Python (for the expected logs of right and wrong loops)."""
    per_group = group_m * num_pid_n
    first = (t // per_group) * group_m
    rows = min(num_pid_m - first, group_m)
    return first + (t % per_group) % rows, (t % per_group) // rows


def _expected_log(initial, programs, group_m, loop_tiles, grid, logged) -> torch.Tensor | None:
    """The log a loop leaves: tile ids ``pid, pid + programs, ...`` below ``loop_tiles``, mapped with
    ``grouped_tile`` on a ``grid`` (num_pid_m, num_pid_n), logged by ``log_tile`` with ``logged``
    (num_tiles, num_pid_n) as its last two arguments. None if it would not fit the log."""
    log = initial.clone()
    num_tiles, num_pid_n = logged
    if 3 * num_tiles >= len(log):
        return None
    for pid in range(programs):
        for t in range(pid, loop_tiles, programs):
            pid_m, pid_n = grouped_tile_in_python(t, *grid, group_m)
            tile = pid_m * num_pid_n + pid_n
            if pid_m >= 0 and pid_n >= 0 and pid_n < num_pid_n and tile < num_tiles:
                log[tile] += 1
                log[num_tiles + tile] = pid
                log[2 * num_tiles + tile] = t
            else:
                log[3 * num_tiles] += 1
    return log


def _grid_mistakes(M, N, block_m, block_n) -> list:
    """``(num_pid_m, num_pid_n, num_pid_n given to log_tile, message)`` of the likely wrong grids."""
    nm, nn = triton.cdiv(M, block_m), triton.cdiv(N, block_n)
    shape = f"here {block_m} x {block_n}"
    wrong = [(nm, triton.cdiv(N, block_m), None, "num_pid_n divides N by BLOCK_M: the tiles are not square "
              f"({shape}), and the tiles along N are each BLOCK_N columns wide"),
             (triton.cdiv(M, block_n), nn, None, "num_pid_m divides M by BLOCK_N: the tiles are not square "
              f"({shape}), and the tiles along M are each BLOCK_M rows tall"),
             (triton.cdiv(M, block_n), triton.cdiv(N, block_m), None, "num_pid_m and num_pid_n divide by each "
              f"other's block: the tiles are not square ({shape}); M is cut into BLOCK_M rows, N into BLOCK_N "
              "columns"),
             (M // block_m, N // block_n, None, "the ragged last row and column of tiles were never computed: "
              "num_pid_m and num_pid_n round down; a partial tile counts as a whole one (tl.cdiv)"),
             (nm, N // block_n, None, "the ragged last column of tiles was never computed: num_pid_n rounds down; "
              "a partial tile counts as a whole one (tl.cdiv)"),
             (M // block_m, nn, None, "the ragged last row of tiles was never computed: num_pid_m rounds down; "
              "a partial tile counts as a whole one (tl.cdiv)"),
             (nm, nn, nm, "log_tile was given num_pid_m where it takes num_pid_n: its arguments are (log_ptr, "
              "tile_id, pid_m, pid_n, num_tiles, num_pid_n)")]
    return [(m, n, logged, why) for m, n, logged, why in wrong
            if (m, n, logged) != (nm, nn, None) and (logged is None or logged != nn)]


def _case_name(M, N, K, block_m, block_n, programs, group_m, is_strided) -> str:
    nm, nn = triton.cdiv(M, block_m), triton.cdiv(N, block_n)
    layout = ", A, B and C strided" if is_strided else ""
    return (f"{nm} x {nn} tiles of {block_m} x {block_n} (M = {M}, N = {N}, K = {K}{layout}) on "
            f"{plural(programs, 'program')}, GROUP_M = {group_m}")


def _out_of_bounds(kind: str):
    """The bounds check's exception (core.OutOfBounds), or an exception type nothing raises."""
    return getattr(core, kind, type("_Never", (BaseException,), {}))


def _launch_logged(kernel, case: str, M, N, K, block_m, block_n, programs, group_m, is_strided) -> dict:
    """Run the kernel with LOG=True; what it logged (read as the log's layout says), C and the reference."""
    from course import persistent

    nm, nn = triton.cdiv(M, block_m), triton.cdiv(N, block_n)
    tiles = nm * nn
    a, b, c, memory, owned = _operands(M, N, K, is_strided)
    # room for the log of a grid counted in tiles of 8 x 8: a miscounted grid writes inside it
    capacity = 3 * triton.cdiv(M, 8) * triton.cdiv(N, 8) + 1
    log = torch.zeros(capacity, dtype=torch.int32, device=runtime.DEVICE)
    log[tiles:3 * tiles] = -1
    initial = log.cpu().clone()
    try:
        persistent.launch(kernel, a, b, c, log, num_programs=programs, group_m=group_m, block_m=block_m,
                          block_n=block_n, block_k=16, num_warps=4, num_stages=2)
    except _out_of_bounds("OutOfBounds") as stray:
        if "log_ptr" in str(stray):
            raise Failed(f"on {case}: log_tile wrote past the end of the log, which has room for the tiles of "
                          "the grid: the num_tiles and num_pid_n given to log_tile must count the tiles of C "
                          "(cdiv of each size by its own block)") from None
        raise Failed(f"on {case}: {stray}{_argument_slip(kernel)}") from None
    except Exception as err:
        raise user_error(f"on {case}, your kernel", err) from None
    raw = log.cpu()
    count, program, tile_id = raw[:3 * tiles].view(3, nm, nn)
    return {"count": count, "program": program, "tile_id": tile_id, "outside": int(raw[3 * tiles]),
            "step": torch.where(tile_id >= 0, tile_id // programs, -1), "c": c,
            "ref": a.double().cpu() @ b.double().cpu(), "raw": raw, "initial": initial,
            "memory": memory, "owned": owned, "strided": is_strided}


def _expected(initial, M, N, block_m, block_n, programs, group_m) -> dict:
    """The reference log, from the Python model of the right loop."""
    nm, nn = triton.cdiv(M, block_m), triton.cdiv(N, block_n)
    tiles = nm * nn
    raw = _expected_log(initial, programs, group_m, tiles, (nm, nn), (tiles, nn))
    count, program, tile_id = raw[:3 * tiles].view(3, nm, nn)
    return {"count": count, "program": program, "tile_id": tile_id, "outside": 0, "raw": raw,
            "step": torch.where(tile_id >= 0, tile_id // programs, -1), "c": None, "ref": None}


@exercise("persistent_loop", "Write the body of persistent_matmul_kernel above: the loop over program pid's tiles")
def check_persistent_loop(persistent_matmul_kernel) -> str:
    """Check a kernel with the signature of ``course.persistent.persistent_matmul_kernel``: run on a
    few programs with ``LOG=True``, every tile must be computed once, by the program the round-robin
    gives it, in grouped order, and the product must be right; the tiles are not square, the edges
    ragged in M, N and K, and A, B and C strided in the last cases (also with ``LOG=False``)."""
    from course import persistent, plots, tiled

    kernel = persistent_matmul_kernel
    require_jit("persistent_matmul_kernel", kernel, _PERSISTENT_PARAMS, kind="kernel")
    borrowed = borrowed_call(kernel, allowed=(tiled.grouped_tile, tiled.matmul_tile, persistent.log_tile,
                                              "course.stages"))
    if borrowed:
        raise Failed(f"your kernel calls {borrowed}: write the loop yourself, with grouped_tile, matmul_tile "
                      "and log_tile")
    hard_coded = _size_not_passed(kernel)
    if hard_coded:
        raise Failed(hard_coded)
    contiguous_right = False
    for M, N, K, block_m, block_n, programs, group_m, is_strided in _SCHEDULE_CASES:
        case = _case_name(M, N, K, block_m, block_n, programs, group_m, is_strided)
        torch.manual_seed(0)
        mine = _launch_logged(kernel, case, M, N, K, block_m, block_n, programs, group_m, is_strided)
        ref = _expected(mine["initial"], M, N, block_m, block_n, programs, group_m)
        if not torch.equal(mine["raw"], ref["raw"]):
            _flat_num_tiles(case, mine, kernel, M, N, block_m, block_n, programs, group_m)
            for nm, nn, logged_nn, why in _grid_mistakes(M, N, block_m, block_n):
                logged = (nm * nn, nn) if logged_nn is None else (nm * nn, logged_nn)
                wrong = _expected_log(mine["initial"], programs, group_m, nm * nn, (nm, nn), logged)
                if wrong is not None and torch.equal(mine["raw"], wrong):
                    raise Failed(f"on {case}: {why}")
            _wrong_num_tiles(case, mine, M, N, block_m, block_n, programs, group_m)
        picture = lambda: plots.schedules({"yours": mine, "the reference": ref}, title=case)  # noqa: E731
        _diagnose_schedule(case, mine, ref, programs, picture, kernel, contiguous_right and is_strided)
        contiguous_right = contiguous_right or not is_strided
    M, N, K, block_m, block_n, programs, group_m = _PRODUCT_CASE
    case = f"{_case_name(M, N, K, block_m, block_n, programs, group_m, True)} with LOG=False"
    if _unguarded_log_tile(kernel):
        raise Failed(f"on {case}: your kernel calls log_tile outside `if LOG:`; with LOG=False it still writes "
                      "through log_ptr (which then points at C's memory): call log_tile only under `if LOG:`")
    a, b, c, memory, owned = _operands(M, N, K, True)
    try:
        persistent.launch(kernel, a, b, c, num_programs=programs, group_m=group_m, block_m=block_m,
                          block_n=block_n, block_k=16, num_warps=4, num_stages=2)
    except _out_of_bounds("OutOfBounds") as stray:
        raise Failed(f"on {case}: {stray}{_argument_slip(kernel)}") from None
    except Exception as err:
        raise user_error(f"on {case}, your kernel", err) from None
    _c_memory_untouched(case, memory, owned, kernel, True)
    if torch.isnan(c).all():
        raise Failed(f"on {case}: C was never written, though it was with LOG=True: only the call of log_tile "
                      "belongs under `if LOG:`, the tile's work runs either way")
    if not close(c, a.double().cpu() @ b.double().cpu()):
        raise Failed(f"on {case} the product is wrong, though it was right with LOG=True: only the call of "
                      "log_tile belongs under `if LOG:`, the tile's work runs either way")
    _long_k(kernel)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        t = torch.empty(64, 64, dtype=torch.float16)
        compiles_for_a_gpu(kernel, t, t, t, torch.empty(64, dtype=torch.int32), 64, 64, 64, 64, 1, 64, 1, 64, 1,
                            BLOCK_M=32, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, NUM_PROGRAMS=4, LOG=True)
    return (f"right on {len(_SCHEDULE_CASES)} schedules (tiles that are not square, ragged edges, fewer tiles "
            "than programs, a ragged last turn, a short last group, strided A, B and C), with LOG=False, and as "
            "precise as a float32 accumulator on a K of 4096")


# One tile of a float16 product over a long K on 2 programs: K / BLOCK_K = 256 steps. An accumulator rounded to
# float16 at every step (a tile written inline with tl.zeros(..., dtype=tl.float16)) loses about sqrt(steps) times
# float16's last bit: measured 12 times the error of a float32 sum rounded once at the store, on this data; a
# float32 one stays within 1.3 times that. The cases above (K of 40 at most) cannot tell them apart.
_LONG_K = (16, 32, 4096, 16, 32, 16, 2)  # M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, programs


def _long_k(kernel) -> None:
    """A ✗ when the product on a long K is more than 3 times less precise than a float32 accumulator allows."""
    from course import persistent

    M, N, K, block_m, block_n, block_k, programs = _LONG_K
    case = f"one tile of {block_m} x {block_n}, M = {M}, N = {N} and a long K = {K} in steps of {block_k}"
    generator = torch.Generator().manual_seed(31)
    a = torch.randn(M, K, generator=generator).half().to(runtime.DEVICE)
    b = torch.randn(K, N, generator=generator).half().to(runtime.DEVICE)
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device=runtime.DEVICE)
    try:
        persistent.launch(kernel, a, b, c, num_programs=programs, group_m=1, block_m=block_m, block_n=block_n,
                          block_k=block_k, num_warps=4, num_stages=2)
    except _out_of_bounds("OutOfBounds") as stray:
        raise Failed(f"on {case}: {stray}{_argument_slip(kernel)}") from None
    except Exception as err:
        raise user_error(f"on {case}, your kernel", err) from None
    exact = a.double().cpu() @ b.double().cpu()
    error = lambda t: (torch.linalg.vector_norm(t - exact) / torch.linalg.vector_norm(exact)).item()  # noqa: E731
    floor, got = error((a.float().cpu() @ b.float().cpu()).half().double()), error(c.double().cpu())
    if got <= 3 * floor:
        return
    if got < 0.05:
        raise Failed(f"on {case}: the product is {got / floor:.0f} times less precise than float16 allows (the "
                     "cases with a short K could not show it): the accumulator is rounded to 16 bits along the way. "
                     "Keep it in float32 over the whole K loop (tl.zeros(..., dtype=tl.float32), as matmul_tile "
                     "does) and convert once, at the store")
    raise Failed(f"on {case}: the product is wrong, where it was right with a short K: each tile's K loop must "
                 "cover all of K")


def _flat_num_tiles(case, mine, kernel, M, N, block_m, block_n, programs, group_m) -> None:
    """A ✗ where the log is that of a loop up to cdiv(M * N, BLOCK_M * BLOCK_N) on the right grid, and the
    source counts num_tiles from M and N (the same log can come from a wrong num_pid_m)."""
    nm, nn = triton.cdiv(M, block_m), triton.cdiv(N, block_n)
    flat = triton.cdiv(M * N, block_m * block_n)
    if flat == nm * nn or not _num_tiles_from_sizes(kernel):
        return
    for logged in ((flat, nn), (nm * nn, nn)):
        wrong = _expected_log(mine["initial"], programs, group_m, flat, (nm, nn), logged)
        if wrong is not None and torch.equal(mine["raw"], wrong):
            raise Failed(f"on {case}: num_tiles counts C's elements divided by a tile's, which with ragged edges is "
                          "not the number of tiles: num_tiles must be num_pid_m * num_pid_n (a partial tile counts "
                          "as a whole one)")


def _wrong_num_tiles(case, mine, M, N, block_m, block_n, programs, group_m) -> None:
    """A ✗ where the log is that of the right grid and tile mapping, but a loop over another count of tile
    ids, one made of the wrong sizes (num_pid_m * num_pid_m, ...), whether log_tile got that count or not."""
    nm, nn = triton.cdiv(M, block_m), triton.cdiv(N, block_n)
    counts = {"num_pid_m * num_pid_m": nm * nm, "num_pid_n * num_pid_n": nn * nn, "num_pid_m": nm,
              "num_pid_n": nn, "num_pid_m + num_pid_n": nm + nn}
    for expression, count in counts.items():
        if count == nm * nn:
            continue
        for logged in ((count, nn), (nm * nn, nn)):
            wrong = _expected_log(mine["initial"], programs, group_m, count, (nm, nn), logged)
            if wrong is not None and torch.equal(mine["raw"], wrong):
                raise Failed(f"on {case}: the loop runs over {count} tile ids ({expression} here), but C has "
                             f"num_pid_m x num_pid_n = {nm} x {nn} = {nm * nn} tiles: num_tiles = num_pid_m * "
                             "num_pid_n, and the loop takes every id below it")


def _num_tiles_from_sizes(kernel) -> bool:
    """Whether the source assigns num_tiles from an expression that reads both M and N (or has no source)."""
    try:
        tree = ast.parse(textwrap.dedent(core.source_of(kernel) or ""))
    except SyntaxError:
        return False
    if not tree.body:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "num_tiles" for t in node.targets):
            names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if {"M", "N"} <= names:
                return True
    return False


def _calls_to(fn, name: str) -> list:
    """The calls of ``name`` in ``fn``'s source, with the ``if`` statements around each: ``(call, ifs)``."""
    try:
        tree = ast.parse(textwrap.dedent(core.source_of(fn) or ""))
    except SyntaxError:
        return []
    found = []

    def visit(node, ifs):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
            found.append((node, ifs))
        inner = ifs + [node] if isinstance(node, ast.If) else ifs
        for child in ast.iter_child_nodes(node):
            visit(child, ifs if child is getattr(node, "test", None) else inner)

    visit(tree, [])
    return found


def _unguarded_log_tile(kernel) -> bool:
    """Whether the kernel calls log_tile outside every ``if`` whose test reads LOG."""
    return any(not any(isinstance(n, ast.Name) and n.id == "LOG" for i in ifs for n in ast.walk(i.test))
               for _, ifs in _calls_to(kernel, "log_tile"))


def _group_m_hard_coded(kernel) -> bool:
    """Whether a call of grouped_tile passes something other than the name GROUP_M as its group size."""
    for call, _ in _calls_to(kernel, "grouped_tile"):
        group = call.args[3] if len(call.args) > 3 else next((k.value for k in call.keywords if k.arg == "GROUP_M"),
                                                              None)
        if group is not None and not (isinstance(group, ast.Name) and group.id == "GROUP_M"):
            return True
    return False


# The sizes the launch chooses, where the learner's calls take them: (function, position, name, what it is).
_LAUNCH_SIZES = (("grouped_tile", 3, "GROUP_M", "group size"), ("matmul_tile", 14, "BLOCK_M", "tile height"),
                 ("matmul_tile", 15, "BLOCK_N", "tile width"), ("matmul_tile", 16, "BLOCK_K", "step along K"))


def _size_not_passed(kernel) -> str | None:
    """A ✗ message where a call of grouped_tile or matmul_tile is given a number of the learner's own, or
    another of the kernel's parameters, for a size the launch chooses (GROUP_M, BLOCK_M, BLOCK_N, BLOCK_K):
    some are right by luck on the check's sizes (a BLOCK_K of 32 computes the same product), none is on
    another launch. Read from the source; a local name (an alias) is left to the runs."""
    for fn, position, want, what in _LAUNCH_SIZES:
        for call, _ in _calls_to(kernel, fn):
            given = call.args[position] if len(call.args) > position else next(
                (k.value for k in call.keywords if k.arg == want), None)
            if isinstance(given, ast.Constant):
                said = repr(given.value)
            elif isinstance(given, ast.Name) and given.id != want and given.id in _PERSISTENT_PARAMS:
                said = given.id
            else:
                continue
            return (f"{fn} is not given the kernel's {want}: your call passes {said} where it takes {want}. Pass "
                    f"{want} itself, the launch's {what}: the kernel must work with whatever sizes it is launched "
                    "with, not only with the check's")
    return None


def _argument_slip(kernel) -> str:
    """Where the learner's call of matmul_tile passes an argument of the kernel in another's place
    (read from the source: positional arguments that are plain names), or ""."""
    try:
        tree = ast.parse(core.source_of(kernel))
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "matmul_tile":
            given = [arg.id if isinstance(arg, ast.Name) else None for arg in node.args]
            for want, got in zip(_MATMUL_TILE_ARGS, given):
                if got is not None and got != want and got in _MATMUL_TILE_ARGS:
                    return (f": your call of matmul_tile passes {got} where it takes {want} (its arguments: "
                            f"{', '.join(_MATMUL_TILE_ARGS)})")
    return ""


def _c_memory_untouched(case: str, memory, owned, kernel, is_strided: bool) -> None:
    touched = ~torch.isnan(memory.cpu()) & ~owned
    if not touched.any():
        return
    if is_strided:
        raise Failed(f"on {case}: your kernel stored into memory between or past C's elements: C's strides "
                      "are not 1 here; matmul_tile must get stride_cm and stride_cn in their places"
                      + _argument_slip(kernel))
    raise Failed(f"on {case}: your kernel stored outside C, into memory before or after it: each tile is "
                  "stored by matmul_tile, masked to rows < M and columns < N, from the strides of C"
                  + _argument_slip(kernel))


def _diagnose_schedule(case: str, mine: dict, ref: dict, programs: int, picture, kernel,
                       only_strides_new: bool) -> None:
    """What a persistent loop's log says is wrong, from the likeliest mistake to the least."""
    count, c = mine["count"], mine["c"]
    tiles = count.numel()
    written = not torch.isnan(c).all()
    product_right = close(c, mine["ref"])
    if mine["outside"]:
        if product_right and not bool((count == 1).all()):  # computed right, logged under swapped coordinates
            raise Failed(f"on {case}: the product is right, but {plural(mine['outside'], 'tile')} were logged outside "
                          "the grid: grouped_tile returns (pid_m, pid_n), and log_tile takes (log_ptr, tile_id, "
                          "pid_m, pid_n, num_tiles, num_pid_n) in that order")
        raise Failed(f"on {case}: your loop went past the grid: {plural(mine['outside'], 'tile')} logged outside it. "
                      "Tile ids run from 0 to num_tiles - 1 (num_tiles = num_pid_m * num_pid_n); grouped_tile "
                      "takes (tile_id, num_pid_m, num_pid_n, GROUP_M) and returns (pid_m, pid_n), in that order")
    _c_memory_untouched(case, mine["memory"], mine["owned"], kernel, mine["strided"])
    if int(count.sum()) == 0:
        if not written:
            raise Failed(f"on {case}: no tile was computed. Each program loops over its own tile ids (tl.range "
                          "works like range); for each id, grouped_tile gives the tile and matmul_tile computes it")
        if product_right:
            raise Failed(f"on {case}: the product is right, but no tile was logged: after computing a tile, "
                          "call log_tile when LOG is set")
    ids = ref["tile_id"]  # each tile's id in grouped order
    never, twice = int((count == 0).sum()), int((count > 1).sum())
    if never or twice:
        missed = sorted(ids[count == 0].tolist())
        if twice == 0 and torch.equal(count == 0, ids >= programs):
            why = ("each program computed only its first tile: a program must go on to the ids NUM_PROGRAMS "
                   "further on, and so on to the end")
        elif never == 0 and torch.equal(count, torch.clamp(ids, max=programs - 1) + 1):
            why = "program pid took every tile from pid on: step from one id to the next by the number of programs"
        elif bool((count[ids % programs == 0] == programs).all()) and torch.equal(count == 0, ids % programs != 0):
            why = "every program started at tile 0: each one starts at its own id"
        elif never == 0 and bool((count == programs).all()):
            why = ("every program computed every tile: program pid starts at tile id pid and steps by "
                   "NUM_PROGRAMS")
        elif _other_loop(count, ids, programs):
            why = _other_loop(count, ids, programs)
        elif int(count.max()) >= 2 and never:
            why = ("several programs computed the same tiles, and some tiles none: program pid takes the tile ids "
                   "pid, pid + NUM_PROGRAMS, … below num_tiles, and maps each (not its own pid) with grouped_tile")
        elif not missed:
            doubled = sorted(ids[count > 1].tolist())
            why = (f"tile ids {_ids(doubled)} were taken by more than one program: each id from 0 to num_tiles - 1 "
                   "needs exactly one program")
        elif twice == 0 and missed == list(range(tiles - never, tiles)):
            why = (f"the last tile ids ({_ids(missed)}) were never taken: the loop stops early; it runs up to "
                   "num_tiles, the tiles of the whole grid")
        elif twice == 0 and missed == list(range(never)):
            why = f"the first tile ids ({_ids(missed)}) were never taken: check where each program's loop starts"
        else:
            why = f"tile ids {_ids(missed)} were never taken: each id from 0 to num_tiles - 1 needs exactly one program"
        raise Failed(f"on {case}: {plural(twice, 'tile')} computed more than once and {never} never "
                      f"(of {tiles}): {why}", picture())
    if not written:
        slip = _argument_slip(kernel)
        raise Failed(f"on {case}: every tile was logged once, but C was never written"
                     + (slip or ": compute each tile with matmul_tile"))
    if not product_right:
        if only_strides_new:
            raise Failed(f"on {case}: every tile was computed once, but the product is wrong, where it was right "
                          "with contiguous matrices: pass each stride argument to matmul_tile in its own place"
                          + _argument_slip(kernel))
        raise Failed(f"on {case}: every tile was computed once, but the product is wrong: call matmul_tile with "
                      "the tile's pid_m, pid_n from grouped_tile (in that order) and the kernel's own arguments"
                      + _argument_slip(kernel))
    if not torch.equal(mine["program"], ref["program"]):
        row_major = torch.arange(tiles).view_as(ids)
        if torch.equal(mine["tile_id"], row_major):
            why = "the tile ids go row by row: map each id to its tile with grouped_tile, as in notebook 04"
        elif _group_m_hard_coded(kernel):
            why = ("grouped_tile is not given the kernel's GROUP_M: pass GROUP_M (the launch's group size), "
                   "not a number of your own")
        else:
            why = ("program pid must take every NUM_PROGRAMS-th tile id from its own id on, and map each to a "
                   "tile with grouped_tile")
        raise Failed(f"on {case}: every tile was computed once and the product is right, but not by the "
                      f"programs of the grouped round-robin: {why}", picture())
    if not torch.equal(mine["tile_id"], ids):
        raise Failed(f"on {case}: right, but log_tile got other tile ids than the loop's: pass the loop's tile "
                      "id, then pid_m and pid_n", picture())


def _counts_of(visits, ids) -> torch.Tensor:
    """How often each tile (laid out as ``ids``, its tile id in grouped order) is computed when the programs
    together take the tile ids ``visits``."""
    times = torch.bincount(torch.tensor(visits, dtype=torch.int64), minlength=ids.numel() + 1)
    return times[ids.flatten().long()].view_as(ids).to(torch.int32)


def _other_loop(count, ids, programs: int) -> str | None:
    """What is wrong with a loop whose tile counts are those of a loop with another step than the number of
    programs, another start than pid * 1, or the program id mapped instead of the tile id; None otherwise."""
    tiles = ids.numel()
    count = count.to(torch.int32)
    for step in range(2, 2 * programs + 2):
        if step != programs and torch.equal(count, _counts_of([t for p in range(programs)
                                                               for t in range(p, tiles, step)], ids)):
            return (f"program pid's tile ids go up by {step} from one turn to the next, where {programs} programs "
                    "share the tiles: the loop's step must be the number of programs, NUM_PROGRAMS, so that the ids "
                    "pid, pid + NUM_PROGRAMS, … of one program never meet another's and together cover all")
    for k in range(2, 2 * programs + 2):
        if torch.equal(count, _counts_of([t for p in range(programs) for t in range(p * k, tiles, programs)], ids)):
            start = "pid * NUM_PROGRAMS" if k == programs else f"pid * {k}"
            return (f"the loop starts at tile id {start}, so some ids fall to no program and others to several: "
                    "program pid starts at its own id, pid, and steps by NUM_PROGRAMS")
    if torch.equal(count, _counts_of([p for p in range(min(programs, tiles)) for _ in range(p, tiles, programs)],
                                     ids)):
        return ("each program computed one tile over and over: map the loop's tile id, not the program id, to a "
                "tile with grouped_tile")
    return None


def _ids(ids: list) -> str:
    return ", ".join(map(str, ids[:4])) + (f", … ({len(ids)} in all)" if len(ids) > 4 else "")


# --- 06 · the chiplet remap ---------------------------------------------------------------------------

_REMAP_PARAMS = ("pid", "num_sms", "num_xcds")


@triton.jit
def _remap_kernel(out_ptr, num_sms, num_xcds, REMAP: tl.constexpr, CONSTANT: tl.constexpr,
                  NUM_SMS: tl.constexpr, NUM_XCDS: tl.constexpr, REVERSED: tl.constexpr = False):
    # Each program stores the id the learner's remap gives pid: -2 where that id is not an integer. REVERSED:
    # program p asks for pid NUM_SMS - 1 - p, so a remap that reads tl.program_id instead of pid goes wrong.
    pid = tl.program_id(0)
    if REVERSED:
        pid = NUM_SMS - 1 - pid
    if CONSTANT:  # as ScheduleContext calls it, with the sizes known at compile time
        new = REMAP(pid, NUM_SMS, NUM_XCDS)
    else:
        new = REMAP(pid, num_sms, num_xcds)
    new = pid * 0 + new  # a Python number becomes a tensor; a float stays a float
    if new.dtype.is_floating():
        tl.store(out_ptr + pid, -2)
    else:
        tl.store(out_ptr + pid, new.to(tl.int64))


def _reference_remap(num_sms: int, num_xcds: int) -> list:
    """``stages.chiplet_transform`` of every program id, in Python."""
    per, extra = divmod(num_sms, num_xcds)
    return [(p % num_xcds) * per + min(p % num_xcds, extra) + p // num_xcds for p in range(num_sms)]


def _remap_cases() -> list:
    """``(num_sms, num_xcds, constant)``: a multiple first, then counts that are not, fewer programs than
    XCDs, one XCD, an MI300X's 304 compute units, a few drawn at random, and sizes given as constexprs."""
    fixed = [(24, 4), (10, 4), (5, 8), (7, 1), (13, 3), (38, 8), (30, 4), (304, 8)]
    rng = random.Random(6)
    drawn = [(rng.randint(9, 60), rng.randint(2, 12)) for _ in range(4)]
    return [(n, x, False) for n, x in fixed + drawn] + [(44, 8, True)]


@exercise("chiplet_remap", "Write the body of chiplet_remap above: the new id of program pid")
def check_chiplet_remap(chiplet_remap) -> str:
    """Check a ``@triton.jit`` function ``chiplet_remap(pid, num_sms, num_xcds)`` against
    ``stages.chiplet_transform`` for every program of many launches: a multiple of the XCD count first,
    then counts that are not, fewer programs than XCDs, one XCD, 304 programs on 8 XCDs, random sizes,
    and sizes given as constexprs. An answer that calls the course's remap gets its own ✗."""
    require_jit("chiplet_remap", chiplet_remap, _REMAP_PARAMS)
    _no_imports_inside(chiplet_remap)
    borrowed = borrowed_call(chiplet_remap)
    if borrowed:
        raise Failed(f"chiplet_remap calls {borrowed}: the exercise is to write the remap yourself, with "
                      "integer arithmetic on pid, num_sms and num_xcds")
    if not _returns_a_value(chiplet_remap):
        raise Failed("chiplet_remap returns nothing: end it with return and the new id of program pid")
    values = _values_returned(chiplet_remap)
    if values > 1:
        raise Failed(f"chiplet_remap returns {values} values: return one value, the new id of program pid")
    cases = _remap_cases()
    for num_sms, num_xcds, constant in cases:
        case = f"{num_sms} programs on {plural(num_xcds, 'XCD')}" + (" (sizes as constexprs)" if constant else "")
        out = torch.full((num_sms,), -1, dtype=torch.int64, device=runtime.DEVICE)
        try:
            _remap_kernel[(num_sms,)](out, num_sms, num_xcds, REMAP=chiplet_remap, CONSTANT=constant,
                                      NUM_SMS=num_sms, NUM_XCDS=num_xcds)
        except Exception as err:
            raise _remap_error(f"chiplet_remap, for {case},", err) from None
        mine = out.cpu().tolist()
        ref = _reference_remap(num_sms, num_xcds)
        if mine != ref:
            _diagnose_remap(case, num_sms, num_xcds, mine, ref, cases)
    for num_sms, num_xcds in _REMAP_REVERSED:  # pid is not the calling program's id (as notebook 04's check does)
        case = f"{num_sms} programs on {plural(num_xcds, 'XCD')}"
        out = torch.full((num_sms,), -1, dtype=torch.int64, device=runtime.DEVICE)
        try:
            _remap_kernel[(num_sms,)](out, num_sms, num_xcds, REMAP=chiplet_remap, CONSTANT=False,
                                      NUM_SMS=num_sms, NUM_XCDS=num_xcds, REVERSED=True)
        except Exception as err:
            raise _remap_error(f"chiplet_remap, for {case} called with pid other than the program's id,",
                               err) from None
        mine, ref = out.cpu().tolist(), _reference_remap(num_sms, num_xcds)
        if mine != ref:
            reads = _reads_program_id(chiplet_remap)
            raise Failed(f"for {case}, right when pid is the calling program's id, but wrong when the check passes "
                          "another pid: chiplet_remap must compute from its argument pid alone"
                          + (f", not from {reads} (the id of the program that calls it)" if reads else
                             ", nothing else") + ". A remap is a function of its arguments: whoever calls it "
                          "decides which id it maps")
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        _compiles(chiplet_remap)
    return (f"the same ids as stages.chiplet_transform for every program of {len(cases)} launches (XCD counts "
            "that divide the programs and counts that do not, 1 to 12 XCDs, up to 304 programs)")


# (num_sms, num_xcds) launched again with program p asking for the id of pid num_sms - 1 - p.
_REMAP_REVERSED = [(13, 3), (38, 8)]


def _reads_program_id(fn) -> str | None:
    """``tl.program_id`` (or ``tl.num_programs``) if ``fn``'s body calls it; None otherwise."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn.fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    return next((f"tl.{node.attr}" for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                 and node.attr in ("program_id", "num_programs")), None)


# core.user_error's hint for "has no attribute" is about a misspelt name; here the likely cause is another one.
_BOOL_HAS_NO_TO = "'bool' object has no attribute"
_BOOL_HINT = ("with the sizes given as constexprs (as ScheduleContext passes them), a comparison of plain numbers "
              "(or of a loop counter over them) is a Python bool, which has no .to(): turn it into a number with "
              "tl.where(condition, 1, 0) or int(condition)")


def _remap_error(what: str, err: BaseException) -> Failed:
    """:func:`core.user_error`, with :data:`_BOOL_HINT` in place of its hint for a Python bool's missing
    method."""
    failure = user_error(what, err)
    text = str(failure)
    if _BOOL_HAS_NO_TO not in text:
        return failure
    return Failed(text.split("\n  hint:", 1)[0] + "\n  hint: " + _BOOL_HINT)


def _no_imports_inside(fn) -> None:
    """A ✗ for an import inside the function's body (the compiler refuses it; often the course's remap)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn.fn)))
    except (OSError, TypeError, SyntaxError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = ", ".join(a.name for a in node.names)
            why = (": the exercise is to write the remap yourself, not to call the course's" if "chiplet" in names
                   or "stages" in (getattr(node, "module", None) or "") else "")
            raise Failed(f"chiplet_remap imports {names} inside its body: a @triton.jit function cannot import "
                          f"(Triton compiles only the body's arithmetic){why}; write it with integer arithmetic on "
                          "pid, num_sms and num_xcds")


def _values_returned(fn) -> int:
    """The most values one return statement of ``fn`` gives back (a tuple counts its elements)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn.fn)))
    except (OSError, TypeError, SyntaxError):
        return 1
    return max([len(n.value.elts) if isinstance(n.value, ast.Tuple) else 1
                for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None] or [1])


def _returns_a_value(fn) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn.fn)))
    except (OSError, TypeError, SyntaxError):
        return True  # unknown: let the run tell
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(tree))


def _runs_per_xcd(ids: list, num_xcds: int) -> bool:
    """Whether the programs of each XCD (p % num_xcds) hold one contiguous run of ids."""
    for x in range(num_xcds):
        mine = sorted(ids[x::num_xcds])
        if mine and mine != list(range(mine[0], mine[0] + len(mine))):
            return False
    return True


def _diagnose_remap(case, num_sms, num_xcds, mine, ref, cases) -> None:
    """The first wrong thing about a remap's ids, from the plainest symptom to the subtlest."""
    if -2 in mine:
        raise Failed(f"for {case}, chiplet_remap returned a float: ids are integers; divide with //, not /")
    if mine == list(range(num_sms)):
        raise Failed(f"for {case}, chiplet_remap gave every program its own id back: that is the hardware's "
                      "round-robin order, which spreads neighbouring ids over all XCDs; give the programs of one "
                      "XCD (pid % num_xcds) consecutive ids")
    if num_xcds != 8 and mine == _reference_remap(num_sms, 8):
        raise Failed(f"for {case}, your ids are those of 8 XCDs: use the num_xcds argument, not a constant")
    divides = num_sms % num_xcds == 0
    outside = [(p, q) for p, q in enumerate(mine) if not 0 <= q < num_sms]
    if outside:
        p, q = outside[0]
        why = ("; when num_sms is no multiple of num_xcds, the XCDs do not all hold the same number of programs"
               if not divides else "")
        raise Failed(f"for {case}, program {p} got id {q}, outside 0 … {num_sms - 1}: every id must be one of the "
                      f"launch's{why}")
    taken = [mine.count(q) for q in range(num_sms)]
    if max(taken) > 1:
        doubled = [q for q in range(num_sms) if taken[q] > 1]
        why = (": the XCDs do not all hold the same number of programs when num_sms is no multiple of num_xcds; "
               "the first num_sms % num_xcds XCDs hold one more" if not divides else "")
        raise Failed(f"for {case}, {plural(len(doubled), 'id')} ({_ids(doubled)}) went to two programs or more, "
                      f"and as many to none: a remap must give each id to exactly one program{why}")
    inverse = [0] * num_sms
    for p, q in enumerate(ref):
        inverse[q] = p
    if mine == inverse:
        raise Failed(f"for {case}, you computed the remap backwards: for an id, which program gets it; "
                      "chiplet_remap(pid, ...) is the id that program pid gets", _remap_picture(case, mine, ref,
                                                                                                 num_xcds))
    if not _runs_per_xcd(mine, num_xcds):
        raise Failed(f"for {case}, every id is taken once, but the programs of an XCD (pid % num_xcds) do not "
                      "hold consecutive ids: their tiles are not neighbours, so the XCD's L2 is not shared",
                      _remap_picture(case, mine, ref, num_xcds))
    firsts = [min(mine[x::num_xcds]) for x in range(min(num_xcds, num_sms))]
    if firsts != sorted(firsts):
        raise Failed(f"for {case}, each XCD holds a run of consecutive ids, but not in the XCDs' order: XCD 0 takes "
                      "the first run, XCD 1 the next, and so on", _remap_picture(case, mine, ref, num_xcds))
    raise Failed(f"for {case}, each XCD holds its run of ids, but its programs take them in another order: an "
                  "XCD's programs, in the order of their pids, take its ids in increasing order",
                  _remap_picture(case, mine, ref, num_xcds))


def _remap_picture(case, mine, ref, num_xcds):
    """The ids in rows, each coloured by the XCD of the program that took it, yours beside the reference's."""
    from course import plots

    width = min(len(mine), 16)
    rows = -(-len(mine) // width)

    def xcd_of_id(ids):
        table = torch.full((rows * width,), -1, dtype=torch.int64)
        for p, q in enumerate(ids):
            if 0 <= q < len(ids):
                table[q] = p % num_xcds
        return table.view(rows, width)

    return plots.category_maps({"yours": xcd_of_id(mine), "stages.chiplet_transform": xcd_of_id(ref)},
                               categories=num_xcds, label="XCD", title=f"{case}: the XCD that takes each id",
                               xlabel=f"id % {width}", ylabel=f"id // {width}")


_COMPILE_WRAPPER = '''
@triton.jit
def remap_check_kernel(out_ptr, num_sms, num_xcds):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, {name}(pid, num_sms, num_xcds))
'''


def _compiles(fn) -> None:
    """Build a kernel that calls ``fn`` for an H100 (a ✗ with the compiler's words if it refuses).
    The kernel is made in a module of its own, with ``fn``'s source, so it travels to the build as
    source wherever ``fn`` was defined."""
    name = fn.fn.__name__
    try:
        text = textwrap.dedent(inspect.getsource(fn.fn))
    except (OSError, TypeError):  # defined where Python keeps no source: nothing to send to the build
        return
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
    text = "@triton.jit\n" + "\n".join(lines[start:]) + "\n\n" + _COMPILE_WRAPPER.format(name=name)
    filename = f"<chiplet_remap check {id(fn)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    scope = {k: v for k, v in fn.fn.__globals__.items() if k in fn.fn.__code__.co_names}
    scope.update({"__name__": "__main__", "triton": triton, "tl": tl})
    exec(compile(text, filename, "exec"), scope)
    compiles_for_a_gpu(scope["remap_check_kernel"], torch.empty(8, dtype=torch.int32), 300, 8)
