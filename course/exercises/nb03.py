"""Notebook 03: a tile-by-tile transpose, then a tiled matmul.

Both checks launch the learner's kernel on guarded memory: every operand is a view into a buffer
of its own, with room around it, so a wrong stride reads or writes that room instead of memory the
process does not own (core's bounds check stops what still goes further). The output's buffer
starts as a poison NaN, so the check knows which elements were written, inside the output or
around it. When a case comes out wrong, the check replays typical mistakes (a swapped stride, one
operand's stride used for another, the steps of K, the masks, the program ids) in torch on the same
memory: the first that reproduces what the kernel wrote names the mistake. Cases run smallest
first, and the check stops at the first one that is wrong.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import math
import os
import random
import sys
import textwrap
from typing import Callable

import torch

from course import runtime
from course.exercises.core import (
    UNFILLED_LOADS,
    Failed,
    NotAttempted,
    OutOfBounds,
    compiles_for_a_gpu,
    constexpr_names,
    exercise,
    is_stub,
    loads_without_other,
    module_of,
    plural,
    require_function,
    require_jit,
    resolve,
    source_of,
    unmasked_loads,
    user_error,
    watching_loads,
)

__all__ = ['check_transpose', 'check_matmul_kernel']


# --- guarded views ---------------------------------------------------------------------------------

_POISON_BITS = {torch.float32: (torch.int32, 0x7FC0BEEF), torch.float16: (torch.int16, 0x7E5A)}


@dataclasses.dataclass
class _Memory:
    """A ``rows x cols`` view with ``strides`` into a flat buffer of its own, with four times as much room
    as the view spans on both sides (a wrong stride reads there, not outside the buffer)."""

    view: torch.Tensor
    flat: torch.Tensor  # the whole buffer
    owned: torch.Tensor  # bool per element of flat, on the CPU: the elements that belong to the view

    @property
    def offset(self) -> int:
        return self.view.storage_offset()

    @property
    def strides(self) -> tuple:
        return tuple(self.view.stride())

    def written(self) -> torch.Tensor:
        """Bool per element of flat: no longer the poison it started as."""
        int_dtype, bits = _POISON_BITS[self.flat.dtype]
        return self.flat.cpu().view(int_dtype) != _signed(bits, int_dtype)


def _signed(bits: int, int_dtype) -> int:
    width = torch.iinfo(int_dtype).bits
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


def _memory(rows: int, cols: int, strides: tuple, dtype, fill: str, generator=None) -> _Memory:
    """``fill``: "poison" (every element a NaN no arithmetic produces), "random" (every element of the
    buffer) or "ids" (the view's elements hold distinct positive numbers in random order, every other
    element of the buffer a distinct negative one)."""
    span = (rows - 1) * strides[0] + (cols - 1) * strides[1] + 1
    room = max(4 * span, 512)
    size = 2 * room + span
    device = runtime.DEVICE
    if fill == "ids":
        flat = -torch.arange(1, size + 1, dtype=torch.float64)
        ids = torch.randperm(rows * cols, generator=generator).to(torch.float64) + 1
        flat.as_strided((rows, cols), strides, room).copy_(ids.view(rows, cols))
        flat = flat.to(dtype).to(device)
    else:
        flat = torch.full((size,), float("nan"), dtype=dtype, device=device)
        if fill == "poison":
            int_dtype, bits = _POISON_BITS[dtype]
            flat.view(int_dtype).fill_(_signed(bits, int_dtype))
        else:  # random around the view too: a wrong address reads a value of its own, which a replay can match
            flat.copy_(torch.randn(size, generator=generator).to(dtype))
    owned = torch.zeros(size, dtype=torch.bool)
    owned.as_strided((rows, cols), strides, room).fill_(True)
    return _Memory(flat.as_strided((rows, cols), strides, room), flat, owned)


# --- what happened during the learner's call ---------------------------------------------------------

def _is_jit(obj) -> bool:
    return callable(getattr(obj, "fn", None)) and hasattr(obj, "arg_names")


@dataclasses.dataclass
class _Launch:
    kernel: object
    grid: tuple  # three ints
    args: dict  # every argument by name (tensors, ints, constexprs)
    axes: int = 3  # how many axes the launch gave its grid


class _Launches(contextlib.AbstractContextManager):
    """Record the Triton launches inside the block: the kernel, its grid and its arguments by name."""

    def __enter__(self):
        from triton.runtime.jit import JITFunction

        self.launched: list[_Launch] = []
        self._classes = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            self._classes.append(InterpretedFunction)
        except ImportError:
            pass
        self._originals = [cls.run for cls in self._classes]
        recorder = self

        def patch(original):
            def run(kernel, *args, grid, warmup, **kwargs):
                if not warmup:
                    recorder.launched.append(_launch(kernel, grid, args, kwargs))
                return original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            return run

        for cls, original in zip(self._classes, self._originals):
            cls.run = patch(original)
        return self

    def __exit__(self, *exc):
        for cls, original in zip(self._classes, self._originals):
            cls.run = original
        return False


def _launch(kernel, grid, args, kwargs) -> _Launch:
    named = {**dict(zip(getattr(kernel, "arg_names", []), args)), **kwargs}
    try:
        if callable(grid):
            grid = grid(named)
        if isinstance(grid, int):
            grid = (grid,)
        axes = len(grid)
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    except Exception:
        grid, axes = None, 3
    return _Launch(kernel, grid, named, axes)


_TRITON_DIR = None


def _inside_triton(frame) -> bool:
    """Whether a frame of Triton's own code is on the stack above ``frame``."""
    global _TRITON_DIR
    if _TRITON_DIR is None:
        import triton

        _TRITON_DIR = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep
    depth = 0
    while frame is not None and depth < 80:
        if frame.f_code.co_filename.startswith(_TRITON_DIR):
            return True
        frame, depth = frame.f_back, depth + 1
    return False


_FACTORIES = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "zeros_like", "zeros",
              "full", "full_like", "new_full", "new_zeros", "ones", "ones_like", "new_ones"}


class _TorchWork(torch.overrides.TorchFunctionMode):
    """Notice the first torch function called inside the block (outside Triton's own code) that writes
    into a tensor or computes a new one from tensors: the work an exercise asks a kernel to do. Reading
    sizes and strides, taking views (``x.T``, slices) and allocating are not work."""

    found: str | None = None

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if self.found is None:
            name = getattr(func, "__name__", "")
            if name == "__get__":
                name = getattr(getattr(func, "__self__", None), "__name__", name)
            if (_mutates(name, kwargs) or _computes(name, args, kwargs, result)) and \
                    not _inside_triton(sys._getframe(1)):
                self.found = name
        return result


def _mutates(name: str, kwargs) -> bool:
    in_place = name.endswith("_") and not name.startswith("_")
    return in_place or name == "__setitem__" or (name.startswith("__i") and name.endswith("__")) or \
        kwargs.get("out") is not None


def _computes(name: str, args, kwargs, result) -> bool:
    if name in _FACTORIES or not isinstance(result, torch.Tensor):
        return False
    inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if not inputs or result.numel() == 0:
        return False
    storages = {t.untyped_storage().data_ptr() for t in inputs}
    return result.untyped_storage().data_ptr() not in storages


class _Reads(contextlib.AbstractContextManager):
    """Under the interpreter, count the loads of elements of ``memories`` ({name: _Memory}) that do not
    belong to the view (a mask that lets an edge through, a wrong stride): results can still be right
    when the store throws those values away, but a GPU may fault there."""

    def __init__(self, memories: dict):
        self.memories = memories
        self.strays: dict[str, int] = {name: 0 for name in memories}

    def __enter__(self):
        self._watch = watching_loads(self._see)
        self._regions = []
        if runtime.INTERPRET and runtime.DEVICE == "cpu":
            for name, m in self.memories.items():
                start = m.flat.untyped_storage().data_ptr() + m.flat.storage_offset() * m.flat.element_size()
                self._regions.append((name, start, start + m.flat.numel() * m.flat.element_size(),
                                      m.flat.element_size(), m.owned.numpy()))
        self._watch.__enter__()
        return self

    def _see(self, addresses):
        import numpy as np

        for name, start, end, size, owned in self._regions:
            inside = addresses[(addresses >= start) & (addresses < end)]
            if inside.size:
                self.strays[name] += int((~owned[((inside - np.uint64(start)) // np.uint64(size))]).sum())

    def __exit__(self, *exc):
        return self._watch.__exit__(*exc)


@contextlib.contextmanager
def _one_thread():
    """Torch on one CPU thread: the check's tensors are tiny, and on a busy machine a second thread
    makes each small operation wait far longer than it computes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _sync() -> None:
    if runtime.DEVICE == "cuda":
        torch.cuda.synchronize()


# --- what the learner's code calls (read with ast) --------------------------------------------------

def _course_function(kernel) -> str | None:
    """``"tiled.matmul_tile"`` when ``kernel`` calls a ``@triton.jit`` function of the course (the
    solutions included), directly or through helpers of its own; None otherwise."""
    seen = set()

    def visit(fn) -> str | None:
        fn = getattr(fn, "fn", fn)
        if fn in seen:
            return None
        seen.add(fn)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            return None
        scope = getattr(fn, "__globals__", {})
        for node in ast.walk(tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                obj = resolve(node, scope)
                if not _is_jit(obj):
                    continue
                home = module_of(obj)
                if home.startswith("course"):
                    return f"{home.split('.')[-1]}.{obj.fn.__name__}"
                found = visit(obj)
                if found:
                    return found
        return None

    return visit(kernel)


def _calls(kernel, *names) -> bool:
    """Whether the kernel's source (its helpers' included) calls a function of one of ``names``
    (``tl.dot``, ``dot``); True when the source cannot be read."""
    try:
        tree = ast.parse(source_of(kernel))
    except SyntaxError:
        return True
    if not tree.body:
        return True
    return any(isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in names
               for node in ast.walk(tree))


def _torch_call(kernel) -> str | None:
    """``"torch.matmul"`` when the kernel's source (its helpers' included) calls a function of torch."""
    try:
        tree = ast.parse(source_of(kernel))
    except SyntaxError:
        return None
    scope = getattr(getattr(kernel, "fn", kernel), "__globals__", {})
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            obj = resolve(node.func, scope)
            if obj is torch or module_of(obj).split(".")[0] == "torch" or \
                    (obj is None and ast.unparse(node.func).split(".")[0] == "torch"):
                return ast.unparse(node.func)
    return None


# --- replaying a kernel in torch -------------------------------------------------------------------

def _gather(flat: torch.Tensor, offsets: torch.Tensor, mask: torch.Tensor):
    """``flat`` at ``offsets`` where ``mask`` (0 elsewhere); None if an offset let through lies outside."""
    inside = (offsets >= 0) & (offsets < flat.numel())
    if bool((mask & ~inside).any()):
        return None
    return torch.where(mask, flat[torch.where(mask, offsets, 0)], torch.zeros((), dtype=flat.dtype))


def _store(values: torch.Tensor, written: torch.Tensor, offsets: torch.Tensor, mask: torch.Tensor,
           stored: torch.Tensor, unknown: torch.Tensor | None = None) -> bool:
    """Write ``stored`` at ``offsets`` where ``mask``, programs and lanes in order (the last write of an
    element wins, as under the interpreter), and count the writes of each element in ``written``;
    False if an offset lies outside. Lanes where ``unknown`` holds store a value the replay cannot know (a
    lane a load without other= masked off: undefined, inf under the check): they count as two writes
    more, so that only their being written is compared (see :func:`_same`)."""
    if unknown is not None:
        unknown = torch.broadcast_to(unknown, mask.shape)[mask]
    offsets, stored = offsets[mask], stored[mask]
    if offsets.numel() == 0:
        return True
    if bool(((offsets < 0) | (offsets >= values.numel())).any()):
        return False
    order = torch.arange(offsets.numel())
    last = torch.full((values.numel(),), -1, dtype=torch.long).scatter_reduce(0, offsets, order, "amax")
    hit = last >= 0
    values[hit] = stored[last[hit]]
    written += torch.bincount(offsets, minlength=values.numel())
    if unknown is not None and bool(unknown.any()):
        written += 2 * torch.bincount(offsets[unknown], minlength=values.numel())
    return True


def _value(expression, names: dict):
    """A model's expression ("stride_am", "K", "M + 1", 1, None) in the names of a launch."""
    if expression is None or isinstance(expression, int):
        return expression
    return int(eval(expression, {"__builtins__": {}}, names))  # the course's own expressions, never the learner's


def _program_ids(grid: tuple) -> list:
    """Program ids along each axis, in the order the interpreter runs the programs."""
    g0, g1, g2 = grid
    order = torch.arange(g0 * g1 * g2)
    return [order // (g1 * g2), (order // g2) % g1, order % g2]


def _bound_mask(rows, cols, bounds, names):
    """The 2-D mask (rows < bound)[:, None] & (cols < bound)[None, :] of a model, per program."""
    row_bound, col_bound = (_value(b, names) for b in bounds) if bounds else (None, None)
    mask = torch.ones(rows.shape[0], rows.shape[1], cols.shape[1], dtype=torch.bool)
    if row_bound is not None:
        mask &= (rows < row_bound)[:, :, None]
    if col_bound is not None:
        mask &= (cols < col_bound)[:, None, :]
    return mask


def _tile_indices(model, grid, names):
    """rows (programs x tile rows) and columns (programs x tile columns) of every program of a model."""
    pids = _program_ids(grid)
    sizes = [_value(s, names) for s in model.sizes]
    steps = [_value(s, names) for s in model.steps]
    rows = pids[model.axes[0]][:, None] * steps[0] + torch.arange(sizes[0])[None, :]
    cols = pids[model.axes[1]][:, None] * steps[1] + torch.arange(sizes[1])[None, :]
    return rows, cols


def _same(actual: _Memory, values: torch.Tensor, writes: torch.Tensor, tol: float) -> bool:
    """Whether the output buffer holds what a replay wrote: the same elements written (inside the output
    and around it), NaN where it has NaN, and values within ``tol`` (relative, over all of them). An
    element the replay writes more than once may hold any of its values (a GPU runs programs in no
    set order), so only its being written counts."""
    if not torch.equal(actual.written(), writes > 0):
        return False
    once = writes == 1
    got = actual.flat.detach().double().cpu()[once]
    want = values[once]
    if not torch.equal(torch.isnan(got), torch.isnan(want)) or not torch.equal(torch.isinf(got), torch.isinf(want)):
        return False
    finite = torch.isfinite(want)
    if tol == 0:
        return torch.equal(got[finite], want[finite])
    norm = torch.linalg.vector_norm(want[finite])
    return bool(torch.linalg.vector_norm(got[finite] - want[finite]) <= tol * max(norm.item(), 1e-30))


# ====================================================================================================
# 03 · transpose: out = x.T, tile by tile
# ====================================================================================================

_TRANSPOSE_PARAMS = ("x_ptr", "out_ptr", "M", "N", "stride_xm", "stride_xn", "stride_om", "stride_on",
                     "BLOCK_M", "BLOCK_N")


@dataclasses.dataclass(frozen=True)
class _TModel:
    """What a transpose kernel does, as far as a typical mistake changes it (the defaults are right).
    Lane (i, j) of a program's tile is x's row rows[i] and column cols[j]."""

    message: str = ""
    load: tuple = ("stride_xm", "stride_xn")  # x's strides of rows and columns, in the load
    store: tuple = ("stride_on", "stride_om")  # out's strides that x's rows and columns go along
    axes: tuple = (0, 1)  # the program-id axis of the rows, of the columns
    steps: tuple = ("BLOCK_M", "BLOCK_N")  # how far apart the first rows, first columns of tiles are
    sizes: tuple = ("BLOCK_M", "BLOCK_N")  # a tile's rows, columns
    load_mask: tuple | None = ("M", "N")  # bounds of rows and columns (None: no mask)
    store_mask: tuple | None = ("M", "N")
    rounding: torch.dtype | None = None  # the dtype the tile passes through on its way (a 16-bit store)


_T_RIGHT = _TModel()

_SWAP = "x's rows become out's columns"
_T_MODELS = [
    _TModel("every element of x landed at the same row and column of out: that is a copy, not a transpose. "
            f"x's element (i, j) belongs at out's (j, i): {_SWAP}", store=("stride_om", "stride_on")),
    _TModel("the load's strides are swapped: x's rows are stride_xm apart and its columns stride_xn",
            load=("stride_xn", "stride_xm")),
    _TModel("the load uses out's strides: x has its own, stride_xm and stride_xn", load=("stride_om", "stride_on")),
    _TModel("the load uses out's strides: x has its own, stride_xm and stride_xn", load=("stride_on", "stride_om")),
    _TModel("the store uses x's strides: out has its own, stride_om and stride_on", store=("stride_xn", "stride_xm")),
    _TModel("the store uses x's strides: out has its own, stride_om and stride_on", store=("stride_xm", "stride_xn")),
    _TModel("the load assumes a contiguous x (rows N elements apart, columns side by side): this x is a view "
            "whose rows and columns are further apart; take both from stride_xm and stride_xn", load=("N", 1)),
    _TModel("the load ignores stride_xn: x's columns are not always side by side (here they are "
            "{stride_xn} elements apart)", load=("stride_xm", 1)),
    _TModel("the store assumes a contiguous out (rows M elements apart, columns side by side): this out is a "
            "view; take its strides from stride_om and stride_on", store=(1, "M")),
    _TModel("the store ignores stride_on: out's columns are not always side by side (here they are "
            "{stride_on} elements apart)", store=(1, "stride_om")),
    _TModel("the values were rounded to 16 bits on the way (float16 keeps whole numbers exactly only up to 2048): "
            "out is float32 like x, and a transpose moves each value as it is; store the tile as it was loaded, "
            "with no .to(tl.float16)", rounding=torch.float16),
    _TModel("the values were rounded to 16 bits on the way (bfloat16 keeps whole numbers exactly only up to "
            "256): out is float32 like x, and a transpose moves each value as it is; store the tile as it was "
            "loaded, with no .to(tl.bfloat16)", rounding=torch.bfloat16),
    _TModel("the tiles are misplaced: rows of x come from tl.program_id(0), the grid's first axis (it counts "
            "tiles along M), and columns from tl.program_id(1); yours are swapped", axes=(1, 0)),
    _TModel("rows and columns both come from tl.program_id(0): the columns' tile is tl.program_id(1)", axes=(0, 0)),
    _TModel("rows and columns both come from tl.program_id(1): the rows' tile is tl.program_id(0)", axes=(1, 1)),
    _TModel("the tiles overlap or leave gaps: the rows step by BLOCK_N and the columns by BLOCK_M; a tile is "
            "BLOCK_M rows tall and BLOCK_N columns wide, so its rows start at a multiple of BLOCK_M, its "
            "columns at a multiple of BLOCK_N", steps=("BLOCK_N", "BLOCK_M")),
    _TModel("the tiles overlap or leave gaps: the rows step by BLOCK_N; a tile is BLOCK_M rows tall, so its "
            "rows start at a multiple of BLOCK_M", steps=("BLOCK_N", "BLOCK_N")),
    _TModel("the tiles overlap or leave gaps: the columns step by BLOCK_M; a tile is BLOCK_N columns wide, so "
            "its columns start at a multiple of BLOCK_N", steps=("BLOCK_M", "BLOCK_M")),
    _TModel("the tiles overlap or leave gaps: the rows step by 1 (tl.program_id(0) + ...); a tile is BLOCK_M "
            "rows tall, so its rows start at tl.program_id(0) times BLOCK_M", steps=(1, "BLOCK_N")),
    _TModel("the tiles overlap or leave gaps: the columns step by 1 (tl.program_id(1) + ...); a tile is "
            "BLOCK_N columns wide, so its columns start at tl.program_id(1) times BLOCK_N", steps=("BLOCK_M", 1)),
    # the models whose loads are unmasked where others' are masked come first: a lane a load masks off may hold
    # anything (see _store), so a model with a masked load matches a kernel whose load is not masked there too
    _TModel("nothing is masked: the edge tiles read past x and write past out; mask the load and the store with "
            "one 2-D mask, rows < M and columns < N", load_mask=None, store_mask=None),
    _TModel("the mask does not check x's columns (a condition that always holds, or none): the edge tiles read "
            "and write past x's last column; the 2-D mask needs columns < N too, combined with &",
            load_mask=("M", None), store_mask=("M", None)),
    _TModel("the mask does not check x's rows (a condition that always holds, or none): the edge tiles read and "
            "write past x's last row; the 2-D mask needs rows < M too, combined with &",
            load_mask=(None, "N"), store_mask=(None, "N")),
    _TModel("the store wrote outside out (past its last row or column): the edge tiles hang over; mask the "
            "store with the same 2-D mask as the load", store_mask=None),
    _TModel("the store wrote outside out: its mask checks only the rows, so the columns of the edge tiles "
            "spill; a 2-D mask needs both conditions, combined with &", store_mask=("M", None)),
    _TModel("the store wrote outside out: its mask checks only the columns, so the rows of the edge tiles "
            "spill; a 2-D mask needs both conditions, combined with &", store_mask=(None, "N")),
    _TModel("the masks compare rows with N and columns with M: x has M rows and N columns",
            load_mask=("N", "M"), store_mask=("N", "M")),
    _TModel("the mask compares x's columns with M: x has N columns (and M rows), so columns < N",
            load_mask=("M", "M"), store_mask=("M", "M")),
    _TModel("the mask compares x's rows with N: x has M rows (and N columns), so rows < M",
            load_mask=("N", "N"), store_mask=("N", "N")),
    _TModel("the store's mask compares rows with N and columns with M: x has M rows and N columns",
            store_mask=("N", "M")),
    _TModel("the masks drop x's last row (rows < M - 1): x's last row is M - 1, and rows < M keeps it",
            load_mask=("M - 1", "N"), store_mask=("M - 1", "N")),
    _TModel("the masks drop x's last column (columns < N - 1): x's last column is N - 1, and columns < N keeps it",
            load_mask=("M", "N - 1"), store_mask=("M", "N - 1")),
    _TModel("the masks drop x's last row and last column (rows < M - 1, columns < N - 1): x's last row is M - 1 "
            "and its last column N - 1, and rows < M, columns < N keep them",
            load_mask=("M - 1", "N - 1"), store_mask=("M - 1", "N - 1")),
    _TModel("the masks let one row and one column too many through (<= where < belongs): the last row of x is "
            "M - 1", load_mask=("M + 1", "N + 1"), store_mask=("M + 1", "N + 1")),
    _TModel("a tile has BLOCK_N rows and BLOCK_M columns: the other way round (tl.arange(0, BLOCK_M) counts its "
            "rows)", sizes=("BLOCK_N", "BLOCK_M")),
]


def _replay_transpose(model: _TModel, launches: list, x: _Memory, out: _Memory):
    """What the launches would leave in out's buffer if the kernel did ``model``: (values, written),
    or None where it would touch memory outside the buffers."""
    source = x.flat.detach().double().cpu()
    values = torch.full((out.flat.numel(),), float("nan"), dtype=torch.float64)
    written = torch.zeros(out.flat.numel(), dtype=torch.long)
    for launch in launches:
        names = {k: v for k, v in launch.args.items() if isinstance(v, int)}
        if launch.grid is None or not _points_at(launch.args.get("x_ptr"), x) or \
                not _points_at(launch.args.get("out_ptr"), out):
            return None
        try:
            rows, cols = _tile_indices(model, launch.grid, names)
            load = [_value(s, names) for s in model.load]
            store = [_value(s, names) for s in model.store]
            base_x = launch.args["x_ptr"].storage_offset()
            base_out = launch.args["out_ptr"].storage_offset()
            read = base_x + rows[:, :, None] * load[0] + cols[:, None, :] * load[1]
            loaded = _bound_mask(rows, cols, model.load_mask, names)
            tile = _gather(source, read, loaded)
            if tile is None:
                return None
            if model.rounding is not None:
                tile = tile.to(model.rounding).double()
            where = base_out + rows[:, :, None] * store[0] + cols[:, None, :] * store[1]
            # a lane the load masked off holds other= or, without it, anything: the store may spill it
            if not _store(values, written, where, _bound_mask(rows, cols, model.store_mask, names), tile,
                          unknown=~loaded):
                return None
        except (KeyError, NameError, TypeError, ValueError, RuntimeError):  # a launch the model cannot describe
            return None
    return values, written


def _points_at(arg, memory: _Memory) -> bool:
    return isinstance(arg, torch.Tensor) and arg.untyped_storage().data_ptr() == \
        memory.flat.untyped_storage().data_ptr()


@dataclasses.dataclass(frozen=True)
class _TCase:
    what: str
    M: int
    N: int
    block_m: int
    block_n: int
    x_strides: tuple
    out_strides: tuple
    hint: str  # what this case adds, for a wrong answer no typical mistake explains


def _transpose_cases(seed: int) -> list:
    cases = [
        _TCase("whole tiles (x is 32 x 96, tiles of 16 x 32: a grid of 2 x 3)", 32, 96, 16, 32, (96, 1), (32, 1),
               "x's element (i, j) belongs at out's (j, i): each program loads its tile with x's strides and stores "
               "it into out, where x's rows become columns (each tensor with its own strides); its rows come from "
               "tl.program_id(0) in steps of BLOCK_M, its columns from tl.program_id(1) in steps of BLOCK_N"),
        _TCase("ragged edges (x is 37 x 29, tiles of 16 x 8)", 37, 29, 16, 8, (29, 1), (37, 1),
               "the last row and column of tiles hang over the edges of x: the grid rounds up, and the load and "
               "the store are masked in both dimensions (rows < M and columns < N)"),
        _TCase("a strided x (every 2nd row and 3rd column of a larger tensor: 37 x 29, tiles of 8 x 16)",
               37, 29, 8, 16, (2 * 89, 3), (37, 1),
               "this x is a view whose rows and columns are not where a contiguous x has them: take every "
               "address in x from stride_xm and stride_xn"),
        _TCase("a strided out (its columns 75 elements apart: x is 29 x 37, tiles of 16 x 8)", 29, 37, 16, 8,
               (37, 1), (2, 75),
               "this out is a view whose rows and columns are not where a contiguous out has them: take every "
               "address in out from stride_om and stride_on"),
    ]
    rng = random.Random(seed)
    blocks = [(8, 32), (32, 8), (16, 64), (64, 16), (32, 16), (16, 32)]
    for _ in range(2):
        M, N = rng.randint(1, 70), rng.randint(1, 70)
        bm, bn = rng.choice(blocks)
        xs, x_layout = _random_layout(rng, M, N)
        os_, out_layout = _random_layout(rng, N, M)
        cases.append(_TCase(f"a random case (x is {M} x {N}, {x_layout}; out {out_layout}; tiles of {bm} x {bn})",
                            M, N, bm, bn, xs, os_,
                            "compare it with the fixed cases above: every address from the strides, both masks "
                            "in both dimensions, a grid that rounds up"))
    return cases


def _random_layout(rng, rows: int, cols: int) -> tuple:
    kind = rng.choice(["contiguous", "transposed", "sliced"])
    if kind == "contiguous":
        return (cols, 1), "contiguous"
    if kind == "transposed":
        return (1, rows + rng.randint(0, 5)), "stored transposed"
    step = rng.randint(2, 3)
    return (step * (step * cols + rng.randint(0, 5)), step), f"every {step}th row and column of a larger tensor"


@dataclasses.dataclass
class _TRun:
    case: _TCase
    x: _Memory
    out: _Memory
    launches: list
    torch_work: str | None
    x_changed: bool
    strays: int  # loads of x's buffer outside x
    transpose: Callable | None = None


def _run_transpose(transpose: Callable, case: _TCase, generator) -> _TRun:
    x = _memory(case.M, case.N, case.x_strides, torch.float32, "ids", generator)
    out = _memory(case.N, case.M, case.out_strides, torch.float32, "poison")
    before = x.flat.clone()
    work = _TorchWork()
    with _Launches() as seen, _Reads({"x": x}) as reads:
        try:
            with work:
                transpose(x.view, out.view, case.block_m, case.block_n)
            _sync()
        except (Failed, NotAttempted):
            raise
        except OutOfBounds as stray:
            raise Failed(f"on {case.what}: {stray}") from None
        except Exception as err:
            direct = _direct_kernel_call(transpose)
            if direct:
                raise Failed(_DIRECT.format(case=case.what, kernel=direct)) from None
            raise user_error(f"on {case.what}, transpose", err) from None
    return _TRun(case, x, out, seen.launched, work.found, not torch.equal(before, x.flat), reads.strays["x"],
                 transpose)


_DIRECT = ("on {case}, transpose calls {kernel}(...) like a Python function: a @triton.jit kernel runs only when "
           "launched on a grid of programs, {kernel}[grid](...)")


def _direct_kernel_call(fn) -> str | None:
    """The name of a @triton.jit function that ``fn`` calls without a grid (``kernel(...)``, not
    ``kernel[grid](...)``); None if it calls none or its source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    scope = getattr(fn, "__globals__", {})
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and \
                _is_jit(resolve(node.func, scope)):
            return ast.unparse(node.func)
    return None


@exercise("transpose", "Write transpose_kernel's body and the launch in transpose above")
def check_transpose(transpose: Callable) -> str:
    """Check ``transpose(x, out, block_m, block_n)``, which must write ``x.T`` into ``out`` with a Triton
    kernel on a 2-D grid of ``block_m x block_n`` tiles of x. Tries whole non-square tiles, ragged
    edges in both dimensions, strided views of x and of out (out's columns apart), and two random
    cases; x holds distinct numbers, so every element is traced to where it landed. torch doing the
    work (``out.copy_(x.T)``, ``x.T.contiguous()``) gets its own ✗."""
    require_function("transpose", transpose, ("x", "out", "block_m", "block_n"))
    seed = random.randrange(1 << 30)
    generator = torch.Generator().manual_seed(seed)
    cases = _transpose_cases(seed)
    kernel = None
    with _one_thread():
        try:
            for i, case in enumerate(cases):
                run = _run_transpose(transpose, case, generator)
                later = (lambda rest=cases[i + 1:]: (_run_transpose(transpose, c, generator) for c in rest))
                kernel = _judge_transpose(run, later)
        except Failed:
            # a transpose only moves what it loads, so core's hint about masked loads without other= (whose
            # lanes reach a sum, a maximum or a tl.dot) never applies: its masked lanes are never stored
            UNFILLED_LOADS.clear()
            raise
    if kernel is not None and not _reads_checked() and unmasked_loads(kernel):  # reads are counted only on a CPU
        raise Failed("the results are right, but the tl.load has no mask: the edge tiles read past x, which can "
                     "fault on a GPU; mask the load like the store")
    if kernel is not None and runtime.INTERPRET:  # the interpreter forgives what the compiler refuses
        _compiles_like(run.launches[-1])
    return (f"right on {len(cases)} cases: whole non-square tiles, ragged edges, strided x and out, and random "
            f"shapes; nothing {'read or ' if _reads_checked() else ''}written outside x and out")


def _compiles_like(launch: _Launch) -> None:
    """Build the launched kernel for an H100 with the arguments it was launched with."""
    constexprs = constexpr_names(launch.kernel)
    names = list(getattr(launch.kernel, "arg_names", []))
    if not names or any(n not in launch.args for n in names):
        return  # defaults the launch left out: the interpreter ran it, let that do
    compiles_for_a_gpu(launch.kernel, *[launch.args[n] for n in names if n not in constexprs],
                       **{n: launch.args[n] for n in names if n in constexprs})


def _reads_checked() -> bool:
    return runtime.INTERPRET and runtime.DEVICE == "cpu"


def _judge_transpose(run: _TRun, later: Callable = lambda: iter(())):
    """Raise the ✗ for the first thing wrong in one run; return the kernel when the run is right.
    ``later()`` yields runs of the later cases, to tell apart mistakes that this one cannot."""
    case, launches = run.case, run.launches
    stubs = [launch for launch in launches if is_stub(launch.kernel)]
    if stubs:
        raise NotAttempted(f"transpose launches {getattr(stubs[0].kernel, '__name__', 'a kernel')}, whose body is "
                           "still ...: write it")
    if run.torch_work:
        what = {"__setitem__": "item assignment (t[...] = ...)"}.get(run.torch_work, run.torch_work)
        if what.startswith("__"):
            what = f"operator {what}"
        raise Failed(f"transpose calls torch's {what}, which moves or computes the data itself: here the kernel "
                     "must move every element; transpose only computes the grid and launches it")
    out_right = _same(run.out, *_expected_transpose(run), tol=0)
    if not launches:
        if out_right:
            raise Failed("out is right, but no Triton kernel ran: write the transpose in transpose_kernel and "
                         "launch it from transpose")
        direct = _direct_kernel_call(run.transpose) if run.transpose else None
        if direct:
            raise Failed(_DIRECT.format(case=case.what, kernel=direct))
        raise Failed("transpose launched no Triton kernel: launch transpose_kernel[grid](...) with a 2-D grid")
    kernel = launches[0].kernel
    borrowed = _course_function(kernel)
    if borrowed:
        raise Failed(f"your kernel calls the course's {borrowed}: write the transpose yourself")
    if run.x_changed:
        raise Failed(f"on {case.what}: x was modified: a kernel writes only its output. Does the tl.store go to "
                     "out_ptr, and does transpose pass x and out in the kernel's order?")
    blocks = _launched_blocks(launches[0], case)
    if blocks:
        raise Failed(blocks)
    elsewhere = next((launch for launch in launches if isinstance(launch.args.get("out_ptr"), torch.Tensor) and
                      not _points_at(launch.args["out_ptr"], run.out) and
                      not _points_at(launch.args["out_ptr"], run.x)), None)
    if elsewhere is not None and not out_right:
        raise Failed(f"on {case.what}: the kernel wrote into another tensor than the out given to transpose (one "
                     "made inside transpose?): the caller reads the out it passed, so launch the kernel with "
                     "that out")
    if out_right:
        if run.strays:
            raise Failed(f"on {case.what}: the results are right, but the load read {plural(run.strays, 'element')} "
                         "outside x (the stores then threw them away): on a GPU such a read can fault. Mask the "
                         "load like the store, in both dimensions")
        return kernel
    if not any(launch.grid and math.prod(launch.grid) for launch in launches):
        raise Failed(f"on {case.what}: transpose launched no programs (a grid of 0): the grid rounds up, "
                     "triton.cdiv(M, block_m) tiles along M")
    written = run.out.written()
    if not written.any():
        raise Failed(f"on {case.what}: nothing was stored into out. End the kernel with a tl.store of the tile "
                     "into out_ptr (at addresses built from out's strides)")
    wrapper = _wrapper_mistake(run)
    if wrapper:
        raise Failed(f"on {case.what}: {wrapper}")
    matches = [model for model in _T_MODELS if _transpose_like(model, run)]
    if matches:
        if len(matches) > 1:  # this case cannot tell them apart: the later ones may
            for other in _later_runs(later):
                still = [model for model in matches if _transpose_like(model, other)]
                matches = still or matches
                if len(matches) == 1:
                    break
        names = {k: v for k, v in launches[0].args.items() if isinstance(v, int)}
        raise Failed(f"on {case.what}: {matches[0].message.format(**names)}")
    raise Failed(f"on {case.what}: {_transpose_damage(run)}. Hint: {case.hint}")


def _transpose_like(model: _TModel, run: _TRun) -> bool:
    """Whether the kernel did in ``run`` what ``model`` does."""
    if not run.launches:
        return False
    replay = _replay_transpose(model, run.launches, run.x, run.out)
    # a 16-bit dtype's conversion may round to nearest or cut off: one unit in the last place either way
    tol = {torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}.get(model.rounding, 0)
    return replay is not None and _same(run.out, *replay, tol=tol)


def _later_runs(later: Callable):
    """The runs of the later cases, up to the first that fails to run."""
    runs = later()
    while True:
        try:
            yield next(runs)
        except StopIteration:
            return
        except Exception:  # a Failed, or a crash: nothing more to learn
            return


def _expected_transpose(run: _TRun):
    """The out buffer of a right answer: values and written elements."""
    values = torch.full((run.out.flat.numel(),), float("nan"), dtype=torch.float64)
    written = run.out.owned.long()
    target = values.as_strided(run.out.view.shape, run.out.strides, run.out.offset)
    target.copy_(run.x.view.detach().double().cpu().T)
    return values, written


def _transpose_damage(run: _TRun) -> str:
    """What is wrong in out, counted: elements never written, wrong, written outside out."""
    written, owned = run.out.written(), run.out.owned
    values, _ = _expected_transpose(run)
    got = run.out.flat.detach().double().cpu()
    unwritten = int((owned & ~written).sum())
    wrong = int((owned & written & (got != values)).sum())
    spilled = int((~owned & written).sum())
    parts = []
    if wrong:
        parts.append(f"{wrong} of {run.out.view.numel()} elements of out hold the wrong element of x")
    if unwritten:
        parts.append(f"{plural(unwritten, 'element')} of out {'was' if unwritten == 1 else 'were'} never written")
    if spilled:
        parts.append(f"{plural(spilled, 'element')} {'was' if spilled == 1 else 'were'} written outside out")
    return "; ".join(parts) or "out is wrong"


def _launched_blocks(launch: _Launch, case: _TCase) -> str | None:
    """A message when transpose launched the kernel with other tiles than it was given."""
    bm, bn = launch.args.get("BLOCK_M"), launch.args.get("BLOCK_N")
    if not (isinstance(bm, int) and isinstance(bn, int)) or (bm, bn) == (case.block_m, case.block_n):
        return None
    if (bm, bn) == (case.block_n, case.block_m):
        return (f"transpose launched BLOCK_M={bm}, BLOCK_N={bn} for tiles of {case.block_m} x {case.block_n}: "
                "block_m and block_n are swapped (BLOCK_M counts a tile's rows)")
    return (f"transpose launched BLOCK_M={bm}, BLOCK_N={bn} for tiles of {case.block_m} x {case.block_n}: pass "
            "block_m and block_n on as BLOCK_M and BLOCK_N (the check tries tiles of several shapes)")


def _wrapper_mistake(run: _TRun) -> str | None:
    """When the kernel, given what transpose passed it, did exactly what a right kernel does, the mistake
    is in transpose: its grid or its arguments."""
    replay = _replay_transpose(_T_RIGHT, run.launches, run.x, run.out)
    if replay is None or not _same(run.out, *replay, tol=0) or len(run.launches) != 1:
        return None
    case, launch = run.case, run.launches[0]
    expected = {"M": case.M, "N": case.N, "stride_xm": run.x.strides[0], "stride_xn": run.x.strides[1],
                "stride_om": run.out.strides[0], "stride_on": run.out.strides[1]}
    passed = {name: launch.args.get(name) for name in expected}
    if (passed["M"], passed["N"]) == (case.N, case.M) and case.M != case.N:
        return "transpose passes M and N swapped: M is the number of x's rows, N of its columns"
    for tensor, names in (("x", ("stride_xm", "stride_xn")), ("out", ("stride_om", "stride_on"))):
        got = tuple(passed[n] for n in names)
        want = tuple(expected[n] for n in names)
        if got != want:
            if got == want[::-1]:
                return (f"transpose passes {tensor}'s strides in the wrong order: {names[0]} is "
                        f"{tensor}.stride(0), {names[1]} is {tensor}.stride(1)")
            return f"transpose passes {names[0]}, {names[1]} = {got[0]}, {got[1]}: they are {tensor}'s strides"
    wrong = next((n for n in expected if passed[n] != expected[n]), None)
    if wrong:
        return f"transpose passes {wrong} = {passed[wrong]}, which is not what the kernel's {wrong} stands for"
    tiles = (-(-case.M // case.block_m), -(-case.N // case.block_n))
    grid = launch.grid
    if grid[:2] == tiles:
        return None
    if grid[:2] == (case.M // case.block_m, case.N // case.block_n):
        return "the grid rounds down, so the edge tiles have no program: round up, with triton.cdiv"
    if grid[:2] == tiles[::-1]:
        return ("the grid's axes are swapped: axis 0 counts the tiles along M (x's rows), axis 1 those along "
                "N, as the kernel's tl.program_id(0) and (1) read them")
    if launch.axes >= 2 and grid[:2] == (-(-case.N // case.block_m), -(-case.M // case.block_n)):
        return ("the grid is sized from out's shape (N x M), but a program's tile is BLOCK_M of x's rows by BLOCK_N "
                "of its columns: cdiv(M, block_m) along axis 0 and cdiv(N, block_n) along axis 1, from x's shape")
    if grid[1] == 1 and grid[0] == tiles[0] * tiles[1]:
        return ("the grid is 1-D: with one axis, tl.program_id(1) is always 0; launch a 2-D grid, one "
                "program per tile along M and along N")
    return (f"the grid has {grid[0]} x {grid[1]} programs, but tiles of {case.block_m} x {case.block_n} "
            "need one program per tile: cdiv(M, block_m) along axis 0, cdiv(N, block_n) along axis 1")


# ====================================================================================================
# 03 · matmul_kernel: C = A @ B, one program per tile, a loop over K
# ====================================================================================================

_MATMUL_PARAMS = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                  "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K")



@dataclasses.dataclass(frozen=True)
class _MModel:
    """What a matmul kernel does, as far as a typical mistake changes it (the defaults are right)."""

    message: str = ""
    a: tuple = ("stride_am", "stride_ak")  # the strides A's rows and columns are read with
    b: tuple = ("stride_bk", "stride_bn")
    c: tuple = ("stride_cm", "stride_cn")
    b_from: str = "b"  # the pointer B's block is read from
    axes: tuple = (0, 1)
    steps: tuple = ("BLOCK_M", "BLOCK_N")
    sizes: tuple = ("BLOCK_M", "BLOCK_N")
    k_steps: str = "right"  # where each step of K starts, in A and in B (see _k_starts)
    accumulate: bool = True  # False: each step replaces the accumulator
    twice: bool = False  # each step adds the accumulator to itself as well (acc += tl.dot(a, b, acc))
    a_mask: tuple | None = ("M", "K")  # bounds of A's rows and of K (None inside: not masked)
    b_mask: tuple | None = ("K", "N")
    c_mask: tuple | None = ("M", "N")
    store_dtype: torch.dtype | None = None  # the dtype the accumulator is rounded to before C's (a 16-bit store)
    load_dtype: torch.dtype | None = None  # the dtype A's and B's blocks are rounded to before tl.dot
    rounded: str = "ab"  # which of them: "a", "b" or both


def _k_starts(kind: str, K: int, bk: int) -> tuple:
    right = list(range(0, K, bk))
    n = len(right)
    return {"right": (right, right), "first": ([0], [0]), "skip_first": (right[1:], right[1:]),
            "truncated": (right[:K // bk], right[:K // bk]), "overlap": (list(range(n)), list(range(n))),
            "same": ([0] * n, [0] * n), "same_a": ([0] * n, right), "same_b": (right, [0] * n),
            "ones": (list(range(K)), list(range(K))),
            "short": (list(range(0, K - bk, bk)), list(range(0, K - bk, bk))),
            "short_by_one": (list(range(0, K - 1, bk)), list(range(0, K - 1, bk)))}[kind]


_M_RIGHT = _MModel()

_ADD = "acc = tl.dot(a, b, acc), or acc += tl.dot(a, b)"
_SIXTEEN = ("C is float32 here, but the store rounded the accumulator to {dtype} first (acc.to(tl.{dtype})?): "
            "{why}. Convert to C's own dtype, c_ptr.dtype.element_ty")
_INPUTS = ("A and B are float32 here, but {which} rounded to {dtype} before tl.dot (.to(tl.{dtype})?): "
           "{why}. Give tl.dot the blocks as they were loaded; only the result is converted, at the store")
_M_MODELS = [
    # the inputs' rounding before the store's: a store through bfloat16 is close enough to hide them
    *(_MModel(_INPUTS.format(which=which, dtype=str(dtype).split(".")[1], why=why), load_dtype=dtype, rounded=rounded)
      for dtype, why in ((torch.float16, "float16 keeps 11 bits of float32's 24"),
                         (torch.bfloat16, "bfloat16 keeps 8 bits of float32's 24"))
      for rounded, which in (("ab", "their blocks were"), ("a", "A's block was"), ("b", "B's block was"))),
    _MModel(_SIXTEEN.format(dtype="float16", why="float16 keeps 11 bits of the float32 accumulator's 24, and stops "
                            "at 65504, past which C becomes inf"), store_dtype=torch.float16),
    _MModel(_SIXTEEN.format(dtype="bfloat16", why="bfloat16 keeps 8 bits of the float32 accumulator's 24"),
            store_dtype=torch.bfloat16),
    _MModel(f"only the first step of K counts: loop over K and add every step into the accumulator ({_ADD})",
            k_steps="first"),
    _MModel(f"only the last step of K counts: each step replaced the accumulator instead of adding to it ({_ADD})",
            accumulate=False),
    _MModel("the accumulator is added twice at every step: tl.dot(a, b, acc) already adds acc to the product, "
            "so acc += tl.dot(a, b, acc) doubles it; write acc = tl.dot(a, b, acc), or acc += tl.dot(a, b)",
            twice=True),
    # which load's mask: a step masked off in A or in B adds the same zeros, so one message for either
    *(_MModel("a mask along K drops K's last element: (k + offsets) < K - 1 stops at K - 2, but K's last element is "
              "K - 1; mask (k + offsets along K) < K in both loads", a_mask=a_mask, b_mask=b_mask)
      for a_mask, b_mask in ((("M", "K - 1"), ("K - 1", "N")), (("M", "K - 1"), ("K", "N")),
                             (("M", "K"), ("K - 1", "N")))),
    _MModel("the masks along K let one element past K through ((k + offsets) <= K, or < K + 1): K's last element "
            "is K - 1; mask (k + offsets along K) < K in both loads", a_mask=("M", "K + 1"), b_mask=("K + 1", "N")),
    *(_MModel(f"the offsets along K are masked with {bound}: K is the length of A's rows and of B's columns, so "
              "mask (k + offsets along K) < K in both loads", a_mask=("M", a_bound), b_mask=(b_bound, "N"))
      for bound in ("M", "N") for a_bound, b_bound in ((bound, bound), (bound, "K"), ("K", bound))),
    _MModel("every step of K loads the same first blocks of A and B: the offsets along K must move with the "
            "loop (the loop's k plus the offsets within one step)", k_steps="same"),
    _MModel("every step of K loads the same first block of A: its offsets along K must move with the loop, as "
            "B's do", k_steps="same_a"),
    _MModel("every step of K loads the same first block of B: its offsets along K must move with the loop, as "
            "A's do", k_steps="same_b"),
    _MModel("the steps of K overlap: step k starts at k * BLOCK_K, not at k (or loop with range(0, K, BLOCK_K) "
            "and use k itself)", k_steps="overlap"),
    _MModel("the steps of K overlap: the loop over K moves one element at a time (range(0, K) has a step of 1), "
            "but each step covers BLOCK_K elements of K, so every product is added up to BLOCK_K times; the "
            "loop's step is BLOCK_K", k_steps="ones"),
    _MModel("the first step of K is missing: the loop over K starts at 0", k_steps="skip_first"),
    _MModel("the last step of K, one element long here, is missing: the loop over K ends before K (range(0, K - 1, "
            "BLOCK_K) stops short exactly when K is a multiple of BLOCK_K plus one); range(0, K, BLOCK_K) takes every "
            "step, the last, masked one included", k_steps="short_by_one"),
    _MModel("the last, partial step of K is missing. range(0, K, BLOCK_K) includes it; K // BLOCK_K steps do not",
            k_steps="truncated"),
    _MModel("the last step of K is missing: range(0, K - BLOCK_K, BLOCK_K) stops one step short (range stops "
            "before its end); range(0, K, BLOCK_K) takes every step, the last, masked one included",
            k_steps="short"),
    _MModel("the last step of K reads past K. Mask (k + offsets along K) < K in both loads, with other=0.0, so "
            "the extra products are zero", a_mask=("M", None), b_mask=(None, "N")),
    _MModel("A's load reads past K in the last step: mask its offsets along K too (< K), with other=0.0",
            a_mask=("M", None)),
    _MModel("B's load reads past K in the last step: mask its offsets along K too (< K), with other=0.0",
            b_mask=(None, "N")),
    _MModel("A's strides are swapped: A's rows are stride_am apart, its columns (along K) stride_ak",
            a=("stride_ak", "stride_am")),
    _MModel("B's strides are swapped: B's rows (along K) are stride_bk apart, its columns stride_bn",
            b=("stride_bn", "stride_bk")),
    _MModel("B's rows are read with A's stride (stride_am): each tensor has its own strides; B's rows are "
            "stride_bk apart", b=("stride_am", "stride_bn")),
    _MModel("B is read with A's strides (stride_am, stride_ak): each tensor has its own strides",
            b=("stride_am", "stride_ak")),
    _MModel("B's rows (along K) are read with A's K stride (stride_ak): each tensor has its own strides; B's rows "
            "are stride_bk apart", b=("stride_ak", "stride_bn")),
    _MModel("A's columns (along K) are read with B's K stride (stride_bk): each tensor has its own strides; A's "
            "columns are stride_ak apart", a=("stride_am", "stride_bk")),
    _MModel("the store uses A's row stride (stride_am): C has its own strides; its rows are stride_cm apart",
            c=("stride_am", "stride_cn")),
    _MModel("A's load masks its rows with N: A has M rows, so its rows are masked with rows < M",
            a_mask=("N", "K")),
    _MModel("B's load masks its columns with M: B has N columns, so its columns are masked with columns < N",
            b_mask=("K", "M")),
    _MModel("A is read with B's strides (stride_bk, stride_bn): each tensor has its own strides",
            a=("stride_bk", "stride_bn")),
    _MModel("A's rows are taken K elements apart, as in a contiguous A: this A is a view; compute every "
            "address from the strides (stride_am, stride_ak), never from K or N", a=("K", "stride_ak")),
    _MModel("A's columns are taken side by side (stride 1): this A is a view whose columns are {stride_ak} "
            "elements apart", a=("stride_am", 1)),
    _MModel("B's rows are taken N elements apart, as in a contiguous B: this B is a view; compute every "
            "address from the strides (stride_bk, stride_bn), never from K or N", b=("N", "stride_bn")),
    _MModel("B's columns are taken side by side (stride 1): this B is a view whose columns are {stride_bn} "
            "elements apart",
            b=("stride_bk", 1)),
    _MModel("the store ignores C's column stride: here C's columns are {stride_cn} elements apart, not side by "
            "side", c=("stride_cm", 1)),
    _MModel("the store puts values in the wrong places: C's rows here are longer than N, so use stride_cm "
            "and stride_cn, never N", c=("N", "stride_cn")),
    _MModel("the store puts values in the wrong places: C here is not contiguous, so use stride_cm "
            "and stride_cn, never N", c=("N", 1)),
    _MModel("C comes out transposed: rows go with stride_cm, columns with stride_cn", c=("stride_cn", "stride_cm")),
    _MModel("B's block is read from a_ptr: B's addresses start at b_ptr", b_from="a"),
    _MModel("the tiles are misplaced: the grid is (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)), so rows come from "
            "tl.program_id(0) and columns from tl.program_id(1); yours are swapped", axes=(1, 0)),
    _MModel("rows and columns both come from tl.program_id(0): the columns' tile is tl.program_id(1)", axes=(0, 0)),
    _MModel("rows and columns both come from tl.program_id(1): the rows' tile is tl.program_id(0)", axes=(1, 1)),
    _MModel("the tiles overlap or leave gaps: a tile's rows start at a multiple of BLOCK_M, its columns at a "
            "multiple of BLOCK_N", steps=("BLOCK_N", "BLOCK_M")),
    _MModel("the tiles overlap or leave gaps: a tile's rows start at a multiple of BLOCK_M, its columns at a "
            "multiple of BLOCK_N", steps=("BLOCK_N", "BLOCK_N")),
    _MModel("the tiles overlap or leave gaps: a tile's rows start at a multiple of BLOCK_M, its columns at a "
            "multiple of BLOCK_N", steps=("BLOCK_M", "BLOCK_M")),
    _MModel("the tiles overlap or leave gaps: the rows step by 1 (tl.program_id(0) + ...); a tile is BLOCK_M "
            "rows tall, so its rows start at tl.program_id(0) in steps of BLOCK_M", steps=(1, "BLOCK_N")),
    _MModel("the tiles overlap or leave gaps: the columns step by 1 (tl.program_id(1) + ...); a tile is BLOCK_N "
            "columns wide, so its columns start at tl.program_id(1) in steps of BLOCK_N", steps=("BLOCK_M", 1)),
    _MModel("a tile's rows are counted with BLOCK_N (tl.arange(0, BLOCK_N)): a tile is BLOCK_M rows tall, so its "
            "rows are tl.arange(0, BLOCK_M) from its first row, and the accumulator is (BLOCK_M, BLOCK_N)",
            sizes=("BLOCK_N", "BLOCK_N")),
    _MModel("a tile's columns are counted with BLOCK_M (tl.arange(0, BLOCK_M)): a tile is BLOCK_N columns wide, so "
            "its columns are tl.arange(0, BLOCK_N) from its first column, and the accumulator is (BLOCK_M, BLOCK_N)",
            sizes=("BLOCK_M", "BLOCK_M")),
    _MModel("a tile has BLOCK_N rows and BLOCK_M columns here, the other way round: its rows are "
            "tl.arange(0, BLOCK_M) and its columns tl.arange(0, BLOCK_N), for an accumulator of (BLOCK_M, BLOCK_N)",
            sizes=("BLOCK_N", "BLOCK_M")),
    _MModel("the store wrote outside C (past its last row or column). Mask it with rows < M and columns < N, "
            "in both dimensions", c_mask=None),
    _MModel("the store's mask compares rows with N or columns with M: rows < M, columns < N",
            c_mask=("N", "M")),
    _MModel("the store's mask compares rows with N or columns with M: rows < M, columns < N",
            c_mask=("M", "M")),
    _MModel("the store's mask compares rows with N or columns with M: rows < M, columns < N",
            c_mask=("N", "N")),
    _MModel("nothing is masked: the edge tiles read past A and B and write past C; mask both loads (rows or "
            "columns, and K, with other=0.0) and the store (rows < M and columns < N)", a_mask=None, b_mask=None,
            c_mask=None),
    _MModel("the store wrote outside C: its mask checks only the rows, so the columns of the edge tiles spill; "
            "a 2-D mask needs both conditions, combined with &", c_mask=("M", None)),
    _MModel("the store wrote outside C: its mask checks only the columns, so the rows of the edge tiles spill; "
            "a 2-D mask needs both conditions, combined with &", c_mask=(None, "N")),
]


@dataclasses.dataclass(frozen=True)
class _MCase:
    what: str
    M: int
    N: int
    K: int
    a_strides: tuple
    b_strides: tuple
    c_strides: tuple
    hint: str
    dtype: torch.dtype = torch.float32
    # BLOCK_M, BLOCK_N, BLOCK_K: non-square tiles, so that BLOCK_M and BLOCK_N, or the two program ids,
    # cannot stand in for each other; 16 is tl.dot's smallest size on a GPU
    blocks: tuple = (32, 16, 16)
    scale: float = 1.0  # A's and B's values: this times standard normal numbers, rounded when not 1


def _matmul_cases() -> list:
    return [
        _MCase("one tile, three steps of K (32 x 16 x 48)", 32, 16, 48, (48, 1), (16, 1), (16, 1),
               "one program computes the whole of C here: rows from tl.program_id(0), columns from "
               "tl.program_id(1), a loop over K that adds tl.dot of a block of A and a block of B into the "
               "accumulator, and one masked store"),
        _MCase("float32 values of about ±100 (32 x 16 x 32: |C| up to about 10^5, past float16's largest, 65504)",
               32, 16, 32, (32, 1), (16, 1), (16, 1),
               "C is float32: the store converts the float32 accumulator to C's dtype, c_ptr.dtype.element_ty, "
               "and no 16-bit dtype on the way", scale=100.0),
        _MCase("whole tiles (64 x 48 x 80)", 64, 48, 80, (80, 1), (48, 1), (48, 1),
               "A's element (i, k) is at a_ptr + i * stride_am + k * stride_ak, B's (k, j) at b_ptr + k * "
               "stride_bk + j * stride_bn: rows of A go down [:, None], columns of B across [None, :]"),
        _MCase("ragged rows and columns (44 x 40 x 32, C's rows longer than N)", 44, 40, 32, (32, 1), (40, 1),
               (48, 1),
               "mask the loads (A's rows < M, B's columns < N) with other=0.0, and the store (rows < M, "
               "columns < N), and use the strides of A, B and C"),
        _MCase("tiles wider than tall (40 x 72 x 32, ragged, in tiles of 16 x 32)", 40, 72, 32, (32, 1), (72, 1),
               (72, 1),
               "the tiles here are 16 x 32, BLOCK_M < BLOCK_N: a tile's rows are tl.arange(0, BLOCK_M), its columns "
               "tl.arange(0, BLOCK_N), its accumulator (BLOCK_M, BLOCK_N); take every size from its own constexpr",
               blocks=(16, 32, 16)),
        _MCase("a ragged last step of K (64 x 48 x 40)", 64, 48, 40, (40, 1), (48, 1), (48, 1),
               "mask (k + offsets along K) < K in both loads, with other=0.0, so the extra products are zero"),
        _MCase("a last step of K one element long (32 x 16 x 33)", 32, 16, 33, (33, 1), (16, 1), (16, 1),
               "K is two steps of 16 and one more element: the loop over K runs up to K itself, and the last step's "
               "loads are masked (k + offsets along K) < K, with other=0.0"),
        _MCase("transposed A and sliced B (48 x 40 x 32: A stored K-major, B every other column)", 48, 40, 32,
               (1, 56), (80, 2), (40, 1),
               "a transposed or sliced view is not laid out row after row: compute every address from the "
               "strides (stride_am, stride_ak, stride_bk, stride_bn), never from K or N"),
        _MCase("strided views everywhere (24 x 40 x 48, N > M: A every other column, B stored K-major, C a "
               "transposed view whose columns are 45 apart)", 24, 40, 48, (100, 2), (1, 52), (1, 45),
               "C here is a view whose columns are not side by side: the store's addresses come from stride_cm "
               "and stride_cn, as the loads' come from A's and B's strides"),
        _MCase("float16 with a long K (32 x 16 x 4096, in steps of 64)", 32, 16, 4096, (4096, 1), (16, 1), (16, 1),
               "this case is float16, in steps of BLOCK_K = 64 (16 elsewhere): take every size from the "
               "constexprs, and keep the accumulator in float32 (tl.zeros(..., dtype=tl.float32)), converted once, "
               "at the store", torch.float16, (32, 16, 64)),
    ]


@dataclasses.dataclass
class _MRun:
    case: _MCase
    a: _Memory
    b: _Memory
    c: _Memory
    args: dict
    changed: str | None  # "A" or "B" when the kernel wrote into an input
    strays: dict  # loads outside A's and B's views


def _run_matmul(kernel, case: _MCase, generator) -> _MRun:
    from course import tiled

    a = _memory(case.M, case.K, case.a_strides, case.dtype, "random", generator)
    b = _memory(case.K, case.N, case.b_strides, case.dtype, "random", generator)
    if case.scale != 1.0:  # whole numbers (below 2048): exact in tf32 too, so every product and sum is exact
        for m in (a, b):
            m.flat.copy_((m.flat * case.scale).round().clamp(-2047, 2047))
    c = _memory(case.M, case.N, case.c_strides, case.dtype, "poison")
    before = [a.flat.clone(), b.flat.clone()]
    with _Reads({"A": a, "B": b}) as reads:
        try:
            bm, bn, bk = case.blocks
            tiled.launch(kernel, a.view, b.view, c.view, block_m=bm, block_n=bn, block_k=bk)
            _sync()
        except OutOfBounds as stray:
            raise Failed(f"on {case.what}: {stray}") from None
        except Exception as err:
            raise _kernel_error(kernel, case, err) from None
    changed = next((name for name, m, old in (("A", a, before[0]), ("B", b, before[1]))
                    if not _both_nan(m.flat, old)), None)
    args = {"M": case.M, "N": case.N, "K": case.K, "stride_am": a.strides[0], "stride_ak": a.strides[1],
            "stride_bk": b.strides[0], "stride_bn": b.strides[1], "stride_cm": c.strides[0],
            "stride_cn": c.strides[1], "BLOCK_M": case.blocks[0], "BLOCK_N": case.blocks[1],
            "BLOCK_K": case.blocks[2]}
    return _MRun(case, a, b, c, args, changed, reads.strays)


def _both_nan(new: torch.Tensor, old: torch.Tensor) -> bool:
    """Equal, NaN counting as equal to NaN."""
    return bool(((new == old) | (torch.isnan(new) & torch.isnan(old))).all())


def _kernel_error(kernel, case: _MCase, err: BaseException) -> Failed:
    text = str(err)
    if "make_shape_compatible" in text or "could not be broadcast" in text:
        if not _calls(kernel, "dot"):
            return Failed(f"on {case.what}: two blocks whose shapes do not fit were combined: a * b multiplies "
                          "element by element, and a (BLOCK_M, BLOCK_K) block of A and a (BLOCK_K, BLOCK_N) block "
                          "of B do not line up; their product is tl.dot(a, b)")
    if "accumulator shape" in text:
        return Failed(f"on {case.what}: tl.dot's product does not have the accumulator's shape: a block of A of "
                      "(rows, BLOCK_K) times a block of B of (BLOCK_K, columns) is (rows, columns), so the rows must "
                      "be tl.arange(0, BLOCK_M) and the columns tl.arange(0, BLOCK_N), for an accumulator of "
                      "(BLOCK_M, BLOCK_N) (the tiles here are not square)")
    bare_assert = isinstance(err, AssertionError) or text.strip() in ("AssertionError()", "AssertionError('')")
    if _calls(kernel, "dot") and (bare_assert or "reduction dimension" in text or
                                  ("dot" in text and ("shape" in text or "dimension" in text))):
        return Failed(f"on {case.what}: tl.dot refused its blocks: it multiplies a (BLOCK_M, BLOCK_K) block of A by "
                      "a (BLOCK_K, BLOCK_N) block of B, in that order, both of one dtype, into a float32 "
                      "accumulator of (BLOCK_M, BLOCK_N)")
    return user_error(f"on {case.what}, your kernel", err)


def _replay_matmul(model: _MModel, run: _MRun):
    """What the kernel would leave in C's buffer if it did ``model``: (values, written), or None where it
    would read or write outside the buffers."""
    names = run.args
    try:
        rows, cols = _tile_indices(model, (-(-run.case.M // names["BLOCK_M"]), -(-run.case.N // names["BLOCK_N"]), 1),
                                   names)
        sa = [_value(s, names) for s in model.a]
        sb = [_value(s, names) for s in model.b]
        sc = [_value(s, names) for s in model.c]
    except (KeyError, NameError, TypeError, ValueError):
        return None
    bk = names["BLOCK_K"]
    a_flat = run.a.flat.detach().double().cpu()
    b_memory = run.a if model.b_from == "a" else run.b
    b_flat = b_memory.flat.detach().double().cpu()
    ks = torch.arange(bk)
    acc = torch.zeros(rows.shape[0], rows.shape[1], cols.shape[1], dtype=torch.float64)
    a_row_bound, a_k_bound = (_value(v, names) for v in model.a_mask) if model.a_mask else (None, None)
    b_k_bound, b_col_bound = (_value(v, names) for v in model.b_mask) if model.b_mask else (None, None)
    a_starts, b_starts = _k_starts(model.k_steps, names["K"], bk)
    for start_a, start_b in zip(a_starts, b_starts):
        ka, kb = start_a + ks, start_b + ks
        a_mask = torch.ones(rows.shape[0], rows.shape[1], bk, dtype=torch.bool)
        if a_row_bound is not None:
            a_mask &= (rows < a_row_bound)[:, :, None]
        if a_k_bound is not None:
            a_mask &= (ka < a_k_bound)[None, None, :]
        b_mask = torch.ones(cols.shape[0], bk, cols.shape[1], dtype=torch.bool)
        if b_k_bound is not None:
            b_mask &= (kb < b_k_bound)[None, :, None]
        if b_col_bound is not None:
            b_mask &= (cols < b_col_bound)[:, None, :]
        a = _gather(a_flat, run.a.offset + rows[:, :, None] * sa[0] + ka[None, None, :] * sa[1], a_mask)
        b = _gather(b_flat, b_memory.offset + kb[None, :, None] * sb[0] + cols[:, None, :] * sb[1], b_mask)
        if a is None or b is None:
            return None
        if model.load_dtype is not None:
            a = a.to(model.load_dtype).double() if "a" in model.rounded else a
            b = b.to(model.load_dtype).double() if "b" in model.rounded else b
        product = torch.bmm(a, b)
        acc = (2 * acc if model.twice else acc) + product if model.accumulate else product
    values = torch.full((run.c.flat.numel(),), float("nan"), dtype=torch.float64)
    written = torch.zeros(run.c.flat.numel(), dtype=torch.long)
    where = run.c.offset + rows[:, :, None] * sc[0] + cols[:, None, :] * sc[1]
    if model.store_dtype is not None:
        acc = acc.to(model.store_dtype)
    stored = acc.to(run.case.dtype).double()  # the store converts to C's dtype
    if not _store(values, written, where, _bound_mask(rows, cols, model.c_mask, names), stored):
        return None
    return values, written


@exercise("matmul_kernel", "Write the body of matmul_kernel above: offsets, masks, the loop over K, the store")
def check_matmul_kernel(matmul_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``course.tiled.matmul_kernel`` (the check
    launches it, on non-square 32 x 16 and 16 x 32 tiles with steps of 16 along K): one tile, float32 values
    whose products pass float16's largest (a 16-bit store turns them to inf), whole tiles, ragged
    rows and columns, ragged last steps of K (one of them a single element), transposed and sliced inputs, a C
    whose columns are not side by side, and float16 with a long K (which needs a float32 accumulator). Smallest first;
    the first wrong case is diagnosed by replaying typical mistakes."""
    require_jit("matmul_kernel", matmul_kernel, _MATMUL_PARAMS, kind="kernel")
    home = module_of(matmul_kernel)
    if home.startswith("course") and home != "course.solutions":
        raise Failed(f"that is the course's own {home.split('.')[-1]}.matmul_kernel: write your own kernel "
                     "in the cell (the check tries yours)")
    borrowed = _course_function(matmul_kernel)
    if borrowed:
        raise Failed(f"your kernel calls the course's {borrowed}: write the work of the tile yourself")
    torch_call = _torch_call(matmul_kernel)
    if torch_call:
        raise Failed(f"your kernel calls {torch_call}: torch cannot run inside a @triton.jit kernel (torch works "
                     "on whole tensors, from the host; a kernel holds pointers and blocks). The product of two "
                     "blocks in a kernel is tl.dot(a, b)")
    if not _calls(matmul_kernel, "dot"):
        if _calls(matmul_kernel, "sum"):
            raise Failed("your kernel never calls tl.dot: a sum of broadcast products (tl.sum over a (BLOCK_M, "
                         "BLOCK_K, BLOCK_N) block) gives the same numbers, but on the ordinary arithmetic units, "
                         "with a block BLOCK_K times larger than C's tile held in registers. The exercise is the "
                         "product on the tensor cores, and only tl.dot(a, b) reaches them")
        raise Failed("your kernel never calls tl.dot: a * b multiplies two blocks element by element, but the "
                     "product of a (BLOCK_M, BLOCK_K) block of A and a (BLOCK_K, BLOCK_N) block of B is "
                     "tl.dot(a, b)")
    if _sixteen_bit_accumulator(matmul_kernel):
        raise Failed("the accumulator is 16-bit: a long sum of K products loses precision in float16. "
                     "Accumulate in float32 (tl.zeros(..., dtype=tl.float32)) and convert once, at the store")
    generator = torch.Generator().manual_seed(random.randrange(1 << 30))
    cases = _matmul_cases()
    with _one_thread():
        for i, case in enumerate(cases):
            later = (lambda rest=cases[i + 1:]: (_run_matmul(matmul_kernel, c, generator) for c in rest))
            _judge_matmul(_run_matmul(matmul_kernel, case, generator), later, matmul_kernel)
    if not _reads_checked() and unmasked_loads(matmul_kernel):
        raise Failed("the results are right, but a tl.load has no mask: at the edges it reads past the ends "
                     "of A and B, which can fault on a GPU; mask rows, columns and K, with other=0.0")
    if not runtime.INTERPRET and loads_without_other(matmul_kernel):  # the interpreter's NaN showed it already
        raise Failed("the results are right here, but a masked tl.load has no other=: the lanes it masks off are "
                     "undefined (this GPU happened to give zeros; another run or GPU may give garbage), and they "
                     "reach tl.dot. Give both loads other=0.0, so the padded products are zero")
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        compiles_for_a_gpu(matmul_kernel)
    return ("right on one tile, float32 values past float16's range, whole and ragged tiles of 32 x 16 and "
            "16 x 32, ragged steps of K, "
            f"transposed, sliced and strided A, B and C, and a long float16 K{'; no load outside A or B' if _reads_checked() else ''}")


def _judge_matmul(run: _MRun, later: Callable = lambda: iter(()), kernel=None) -> None:
    """Raise the ✗ for the first thing wrong in one run. ``later()`` yields runs of the later cases, to tell
    apart mistakes that this case cannot (a mask with N for M and rows counted with BLOCK_N store the same
    elements of a 32 x 16 C)."""
    case = run.case
    if run.changed:
        raise Failed(f"on {case.what}: your kernel wrote into {run.changed}: a kernel writes only its output, "
                     "through c_ptr")
    tol = _matmul_tolerance(case)
    right = _replay_matmul(_M_RIGHT, run)
    if right is not None and _same(run.c, *right, tol=tol):
        _precision(run)
        strays = {name: n for name, n in run.strays.items() if n}
        if strays:
            name, n = next(iter(strays.items()))
            raise Failed(f"on {case.what}: the results are right, but the loads read {plural(n, 'element')} "
                         f"outside {name} (thrown away later, so nothing showed): on a GPU such a read can fault. "
                         f"Hint: {case.hint}")
        return
    written = run.c.written()
    if not written.any():
        raise Failed(f"on {case.what}: nothing was stored into C. End the kernel with tl.store of the accumulator "
                     "(converted to C's dtype) at c_ptr + rows * stride_cm + columns * stride_cn")
    matches = [model for model in _M_MODELS if _matmul_like(model, run)]
    if len(matches) > 1:  # this case cannot tell them apart: the later ones may
        for other in _later_runs(later):
            matches = [model for model in matches if _matmul_like(model, other)] or matches
            if len(matches) == 1:
                break
    if matches:
        raise Failed(f"on {case.what}: {matches[0].message.format(**run.args)}")
    if runtime.INTERPRET and case.dtype == torch.float32 and kernel is not None and _converts_to_bfloat16(kernel):
        raise Failed(f"on {case.what}: {_matmul_damage(run, right)}. Your kernel converts to bfloat16: A, B and C "
                     "are float32 here, so give tl.dot the blocks as loaded and store C's dtype "
                     "(c_ptr.dtype.element_ty); and the CPU interpreter computes bfloat16 wrongly (as raw 16-bit "
                     "integers), so on a CPU keep to float16 and float32")
    raise Failed(f"on {case.what}: {_matmul_damage(run, right)}. Hint: {case.hint}")


def _converts_to_bfloat16(kernel) -> bool:
    try:
        tree = ast.parse(source_of(kernel))
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Attribute) and node.attr == "bfloat16" for node in ast.walk(tree))


def _matmul_like(model: _MModel, run: _MRun) -> bool:
    """Whether the kernel did in ``run`` what ``model`` does."""
    if run.case.dtype in (model.store_dtype, model.load_dtype):  # a no-op on this dtype: the mistake acts right
        model = dataclasses.replace(model, store_dtype=None, load_dtype=None)
    replay = _replay_matmul(model, run)
    # a 16-bit store: the kernel's conversion may round to nearest or cut off, and its sums and the
    # replay's may round to neighbouring 16-bit values: up to one unit in the last place apart
    extra = 4 * _UNIT_ROUNDOFF[model.store_dtype] if model.store_dtype is not None else 0.0
    return replay is not None and _same(run.c, *replay, tol=2 * _matmul_tolerance(run.case) + extra)


_UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def _matmul_tolerance(case: _MCase) -> float:
    """The relative error (in norm, over C) a right kernel may have on ``case``.

    float16: course.check's budget for float16 outputs (the float16 result rounds at 2^-11; _precision then
    holds a long K to what a float32 accumulator allows).
    float32 under the interpreter: tl.dot is numpy's float32 product, so only float32 rounding: unit
    roundoff 2^-24, grown as the square root of the K products and additions of each element, with a
    factor of 8 to spare. A store through float16 (2^-11) is hundreds of times past it.
    float32 compiled for a GPU: tl.dot rounds float32 inputs to tf32 by default (input_precision="tf32":
    10 bits of mantissa), so each input loses up to 2^-10 of itself where the hardware cuts the rest off
    (2^-11 where it rounds to nearest) and a product up to 2^-9; cut off, the products all shrink, by 2^-10
    on average, and on random data the relative error of C is about 2^-10. The budget is 2^-9, the worst
    loss of one product. A store
    through float16 adds only about 2^-12 to that, so on a GPU no tolerance tells it from tf32: the case
    whose values pass float16's largest (65504, then inf) does."""
    if case.dtype != torch.float32:
        from course.check import tolerance

        return tolerance(case.dtype)
    if runtime.INTERPRET:
        return 8 * math.sqrt(case.K) * 2.0 ** -24
    return 2.0 ** -9


def _precision(run: _MRun) -> None:
    """On float16 with a long K: within a few times what a float32 accumulator loses."""
    if run.case.dtype != torch.float16:
        return
    a, b = run.a.view.double().cpu(), run.b.view.double().cpu()
    exact = a @ b
    fp32 = (run.a.view.float().cpu() @ run.b.view.float().cpu()).half().double()
    error = lambda c: (torch.linalg.vector_norm(c - exact) / torch.linalg.vector_norm(exact)).item()  # noqa: E731
    floor, got = error(fp32), error(run.c.view.double().cpu())
    if got > 3 * floor:
        through_bf16 = error((a.float() @ b.float()).bfloat16().half().double())
        if got < 3 * through_bf16:  # as imprecise as a result rounded to bfloat16's 8 bits on the way
            raise Failed(f"on {run.case.what}: the result has bfloat16's precision, not float16's: the store "
                         "rounded the accumulator to bfloat16 first (acc.to(tl.bfloat16)?), or the loads did. "
                         "Convert the float32 accumulator to C's own dtype, c_ptr.dtype.element_ty")
        raise Failed(f"on {run.case.what}: the result is {got / floor:.0f} times less precise than float16 allows: "
                     "accumulate in float32 (tl.zeros(..., dtype=tl.float32)) and convert once, at the store")


def _matmul_damage(run: _MRun, right) -> str:
    """What is wrong in C, counted: elements never written, wrong, NaN, written outside C."""
    written, owned = run.c.written(), run.c.owned
    got = run.c.flat.detach().double().cpu()
    unwritten = int((owned & ~written).sum())
    spilled = int((~owned & written).sum())
    nan = int((owned & written & torch.isnan(got)).sum())
    parts = []
    if right is not None:
        values = right[0]
        from course.check import tolerance

        scale = torch.linalg.vector_norm(values[owned]).item() / max(1, int(owned.sum())) ** 0.5
        off = (got - values).abs() > 10 * tolerance(run.case.dtype) * max(scale, 1e-30)
        wrong = int((owned & written & ~torch.isnan(got) & off).sum())
        if wrong:
            parts.append(f"{wrong} of {run.c.view.numel()} elements of C are wrong")
    if nan:
        parts.append(f"{plural(nan, 'element')} of C {'is' if nan == 1 else 'are'} NaN")
    for name, n in run.strays.items():
        if n:
            parts.append(f"the loads read {plural(n, 'element')} outside {name}")
    if unwritten:
        parts.append(f"{plural(unwritten, 'element')} of C {'was' if unwritten == 1 else 'were'} never stored")
    if spilled:
        parts.append(f"{plural(spilled, 'element')} {'was' if spilled == 1 else 'were'} stored outside C")
    return "; ".join(parts) or "wrong values"


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
