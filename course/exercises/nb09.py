"""Notebook 09: Stream-K."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import random
import textwrap

import numpy as np
import torch
import triton
import triton.language as tl

from course import runtime
from course.exercises.core import (
    Failed,
    NotAttempted,
    compiles_for_a_gpu,
    exercise,
    plural,
    require_jit,
    source_of,
    user_error,
)

__all__ = ['check_streamk_span', 'check_streamk_kernel']


# --- 09 · streamk_span: a program's share of the iterations ---------------------------------------------

# (num_pid_m, num_pid_n, iters per tile, programs, Stream-K tiles), drawn when wrong: an even split, a
# remainder, fewer iterations than programs
_SPAN_CASES = [(6, 5, 8, 4, 6), (2, 3, 7, 4, 6), (3, 3, 3, 8, 1)]
# (total, sharers) asked of span for every pid by ONE program: more remainders, one sharer, many sharers
_SPAN_TABLE = [(13, 5), (100, 7), (5, 1), (1, 3), (131, 132), (263, 24)]


@triton.jit
def _span_table_kernel(start_ptr, end_ptr, total, sharers, SPAN: tl.constexpr):
    # One program asks for every pid's range: a span must use its arguments, not the launch's ids.
    for p in range(0, sharers):
        pid = p + 0 * tl.program_id(0)  # a tensor, as in a kernel
        start, end = SPAN(pid, total, sharers)
        tl.store(start_ptr + p, start)
        tl.store(end_ptr + p, end)


@triton.jit
def _span_blocks_kernel(out_ptr, total, sharers, SPAN: tl.constexpr):
    # 1 for start, for end, if span returns it as a block (tl.zeros([1]) + ...) rather than a scalar
    pid = tl.program_id(0)
    start, end = SPAN(pid, total, sharers)
    if (start + 0 * pid).type.is_block():
        tl.store(out_ptr, 1)
    if (end + 0 * pid).type.is_block():
        tl.store(out_ptr + 1, 1)


def _span_returns_blocks(span) -> tuple:
    out = torch.zeros(2, dtype=torch.int32, device=runtime.DEVICE)
    _span_blocks_kernel[(1,)](out, 10, 3, SPAN=span)
    return tuple(bool(v) for v in out.cpu().tolist())


def _true_division(fn) -> str | None:
    """The first expression of ``fn``'s own source (read with ast) that divides with ``/``, else None."""
    try:
        tree = ast.parse(textwrap.dedent(source_of(fn)))
    except (SyntaxError, ValueError, OSError, TypeError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.Div):
            return ast.unparse(node)
    return None


def _span_table(span, total: int, sharers: int) -> tuple[list, list]:
    starts = torch.full((sharers,), -7, dtype=torch.int32, device=runtime.DEVICE)
    ends = torch.full((sharers,), -7, dtype=torch.int32, device=runtime.DEVICE)
    _span_table_kernel[(1,)](starts, ends, total, sharers, SPAN=span)
    return starts.cpu().tolist(), ends.cpu().tolist()


def _launch_ids(fn) -> str | None:
    """"program_id" or "num_programs" if ``fn``'s own source calls ``tl.<that>`` (read with ast), else None."""
    try:
        tree = ast.parse(textwrap.dedent(source_of(fn)))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("program_id", "num_programs"):
            return node.func.attr
    return None


@exercise("streamk_span", "Write the body of span above: program pid's (start, end) of the total iterations")
def check_streamk_span(span) -> str:
    """Check a ``@triton.jit`` function ``span(pid, total, sharers) -> (start, end)``: run in place of
    ``ScheduleContext.iter_range`` (``streamk.assignment``) and asked by one program for every pid,
    the ranges must cover every iteration once, lie in program order and differ in length by at most one.
    Under the interpreter it then builds span for an H100, whose compiler refuses what the interpreter lets through
    (``int()`` of a tensor, ``break``)."""
    from course import plots, streamk

    require_jit("span", span, ("pid", "total", "sharers"))
    launch_id = _launch_ids(span)
    if launch_id == "program_id":
        raise Failed("span calls tl.program_id: use its argument pid, the program asking (the kernel that calls "
                      "span decides who asks; this check asks for every pid from one program)")
    if launch_id == "num_programs":
        raise Failed("span calls tl.num_programs: use its argument sharers (a kernel may share the iterations among "
                      "fewer programs than it launches)")
    division = _true_division(span)
    if division:
        raise Failed(f"span divides with / (in `{division}`), which makes a float, even when turned back into an "
                      "int: a GPU divides floats only approximately, so a quotient that should be whole may come out "
                      "just under it and be cut one short (the interpreter divides exactly, and hides it). Count in "
                      "whole numbers, with // and %")
    try:
        blocks = _span_returns_blocks(span)
        floats = streamk.span_returns_floats(span)
    except Exception as err:
        raise user_error("your span", err) from None
    if any(blocks):
        which = "start and end" if all(blocks) else "start" if blocks[0] else "end"
        raise Failed(f"span returns {which} as a block of values (a tensor with a shape, such as tl.zeros([1]) + "
                      "...), where a kernel needs single numbers for its loop bounds: return two scalars, computed "
                      "from pid, total and sharers alone")
    if any(floats):
        raise Failed("span returns floats: ranges of iterations are counted in whole numbers, and a GPU refuses "
                      "float loop bounds; divide with // (integer division)")
    rng = random.Random()
    cases = [(shared * iters, programs, (num_pid_m, num_pid_n, iters, programs, shared))
             for num_pid_m, num_pid_n, iters, programs, shared in _SPAN_CASES]
    cases += [(total, sharers, None) for total, sharers in _SPAN_TABLE]
    cases += [(rng.randint(1, 400), rng.randint(2, 40), None) for _ in range(2)]
    for total, sharers, drawn in cases:
        if drawn:
            num_pid_m, num_pid_n, iters, programs, shared = drawn
            case = f"{total} iterations ({shared} tiles of {iters}) over {programs} programs"
        else:
            case = f"{total} iterations over {sharers} programs"
        try:
            starts, ends = _span_table(span, total, sharers)
        except Exception as err:
            raise user_error(f"on {case}, your span", err) from None

        def picture(drawn=drawn, case=case, ends=ends + starts, total=total):
            if not drawn or min(ends) < -total - 1 or max(ends) > 2 * total + 1:
                return None  # only splits near the iterations are drawn (the drawing walks every range)
            log = streamk.assignment(*drawn[:3], num_programs=drawn[3], streamk_tiles=drawn[4], span=span)
            return plots.streamk_map(log, title=f"yours: {case}")

        _diagnose_split(starts, ends, total, sharers, case, picture)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        kernel = _span_build_kernel(span)
        if kernel is not None:
            out = torch.zeros(8, dtype=torch.int32)
            compiles_for_a_gpu(kernel, out, out, 100, 7)
    return (f"right on {len(cases)} splits: even, with remainders, one sharer, more sharers than iterations, and "
            "random ones" + ("; and it builds for an H100" if runtime.INTERPRET else ""))


_SPAN_BUILD = """
@triton.jit
def _span_build_kernel(start_ptr, end_ptr, total, sharers):
    pid = tl.program_id(0)
    start, end = {name}(pid, total, sharers)
    tl.store(start_ptr + pid, start)
    tl.store(end_ptr + pid, end)
"""


def _span_build_kernel(span):
    """A kernel that calls the learner's ``span`` (a copy of it that the build carries as source, as a notebook's
    function), to build for a GPU; None where its source cannot be found."""
    import linecache
    import types

    fn = span.fn
    try:
        inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    scope = dict(fn.__globals__, __name__="__main__")  # the build carries __main__'s functions as source
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    scope[fn.__name__] = triton.jit(copy)
    source = _SPAN_BUILD.format(name=fn.__name__)
    filename = "<course.exercises.nb09 span build>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), scope)
    return scope["_span_build_kernel"]


def _diagnose_split(starts: list, ends: list, total: int, sharers: int, case: str, picture) -> None:
    """A ✗ for the first thing wrong with the ranges ``[starts[p], ends[p])`` of ``total`` iterations."""
    owner = torch.full((total,), -1, dtype=torch.long)
    count = torch.zeros(total, dtype=torch.long)
    outside = 0
    for p, (s, e) in enumerate(zip(starts, ends)):
        inside = range(max(s, 0), min(e, total))
        outside += max(e - s, 0) - len(inside)
        owner[inside.start:inside.stop] = p
        count[inside.start:inside.stop] += 1
    never, twice = int((count == 0).sum()), int((count > 1).sum())
    one_past = "end is one past the last iteration, as in range(start, end): the next program's start"
    backwards = [p for p, (s, e) in enumerate(zip(starts, ends)) if s > e]
    if backwards:
        p = backwards[0]
        swapped = sorted((e, s) for s, e in zip(starts, ends))
        cover = all(a[1] == b[0] for a, b in zip(swapped, swapped[1:])) and swapped[0][0] == 0 and \
            swapped[-1][1] == total
        raise Failed(f"on {case}: program {p}'s start comes after its end ({starts[p]} > {ends[p]})"
                      + (": the ranges are right but returned the wrong way round; span returns (start, end), "
                         "start first" if cover else
                         f": a range runs from its start up to its end, {one_past}"), picture())
    if outside:
        if outside == 1 and twice == sharers - 1 and not never:
            raise Failed(f"on {case}: every range is one iteration too long: {one_past}", picture())
        raise Failed(f"on {case}: ranges run outside the iterations ({plural(outside, 'iteration')} "
                      "below 0 or from total on): they must stay within 0 .. total - 1", picture())
    if never or twice:
        sizes = torch.bincount(owner[count > 0], minlength=sharers)
        if twice:
            why = "ranges overlap: each program's range must start where the previous one's ends"
        elif total % sharers and int(sizes.sum()) == (total // sharers) * sharers:
            why = ("some iterations are left over: the total does not split evenly, and the remainder must go "
                   "to some of the programs")
        elif never == min(sharers, total):
            why = f"every range stops one iteration short: {one_past}"
        else:
            why = ("some ranges are empty or cut short: each one starts where the previous one ends, and "
                   "together they run from 0 to total")
        raise Failed(f"on {case}: {plural(twice, 'iteration')} computed more than once and {never} never: {why}",
                      picture())
    if (owner[1:] < owner[:-1]).any():
        raise Failed(f"on {case}: every iteration is taken once, but not in program order: program 0's range "
                      "comes first, then program 1's, and so on", picture())
    sizes = [max(e - s, 0) for s, e in zip(starts, ends)]
    if max(sizes) - min(sizes) > 1:
        shown = sizes if len(sizes) <= 12 else sizes[:12] + ["..."]
        raise Failed(f"on {case}: the ranges hold {shown} iterations: split as evenly as possible, "
                      "lengths differing by at most one (the slowest program sets the time)", picture())


# --- 09 · streamk_kernel: the Stream-K loop and its fix-up ----------------------------------------------

_KERNEL_PARAMS = ("A", "B", "C", "P", "FLAGS", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                  "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "PROGRAMS", "TILES")
# Block sizes (BLOCK_M, BLOCK_N, BLOCK_K) of the launches, two shapes: BLOCK_N differs from BLOCK_K in both (smaller
# in one, larger in the other), and BLOCK_M from BLOCK_N in one, so that a kernel that mixes them up, or hard-codes
# a slot's size, fails on some product; on a GPU too, where a slot BLOCK_M * BLOCK_K apart runs past the end of P
# in the second. 16 is tl.dot's smallest size on a GPU.
_WIDE, _LONG_K = (32, 32, 16), (16, 32, 64)
_RANDOM_BLOCKS = [_WIDE, _LONG_K, (32, 16, 32)]
_GIVEN = {"make_tensor_view", "make_output_view", "GemmContext", "ScheduleContext"}  # the stub's own lines


@dataclasses.dataclass
class _Case:
    what: str
    M: int
    N: int
    K: int
    programs: int
    blocks: tuple = _WIDE  # BLOCK_M, BLOCK_N, BLOCK_K
    strided: bool = False

    def __post_init__(self):
        bm, bn, bk = self.blocks
        self.what += f" ({self.M} x {self.N} x {self.K}, blocks {bm} x {bn} x {bk}, {self.programs} programs)"


_KERNEL_CASES = [
    _Case("one tile shared by two programs", 32, 32, 64, 2),
    _Case("ragged M, N and K, 24 K-iterations over 5 programs", 40, 40, 232, 5, _LONG_K),
    _Case("tiles shared by three and four programs, one program inside a tile", 48, 40, 200, 10),
    _Case("a transposed A, a sliced B and a strided C", 40, 24, 168, 6, _LONG_K, strided=True),
    _Case("more programs than K-iterations", 40, 16, 10, 3),
]


class _Spinning(BaseException):
    """Raised inside a launch under the interpreter: a program keeps reading another program's flag."""


class _Runaway(BaseException):
    """Raised inside a launch under the interpreter: a program does more work than the whole problem has."""


class _StoppedOnDown(BaseException):
    """A launch under the interpreter stopped with an error right after a program saw another's flag down."""


def _pieces(M: int, N: int, K: int, programs: int, blocks: tuple) -> dict:
    """The Stream-K schedule of the check's launches, as ``ScheduleContext`` makes it with every tile shared:
    ``{tile_id: [(program, k_begin, k_end), ...] in K order}``, ``"ranges"``: each program's
    ``(start, end)``, ``"coords"``: each tile id's ``(pid_m, pid_n)`` (grouped order, 8 rows a group),
    ``"by_program"``: each program's pieces ``(tile_id, k_begin, k_end)`` in the order of its range,
    ``"blocks"``: ``(BLOCK_M, BLOCK_N, BLOCK_K)``."""
    bm, bn, bk = blocks
    num_m, num_n, iters = triton.cdiv(M, bm), triton.cdiv(N, bn), triton.cdiv(K, bk)
    tiles = num_m * num_n
    total = tiles * iters
    base, extra = divmod(total, programs)
    ranges = []
    for p in range(programs):
        start = min(p * base + min(p, extra), total)
        ranges.append((start, min(start + base + (p < extra), total)))
    pieces = {t: [] for t in range(tiles)}
    by_program = [[] for _ in range(programs)]  # each program's pieces (tile, k_begin, k_end), in range order
    for p, (start, end) in enumerate(ranges):
        g = start
        while g < end:
            t, k = divmod(g, iters)
            k_end = min(iters, k + end - g)
            pieces[t].append((p, k, k_end))
            by_program[p].append((t, k, k_end))
            g += k_end - k
    coords = {}
    for t in range(tiles):  # ScheduleContext.get_tile_from_idx with group_size_m = 8
        per_group = 8 * num_n
        first_m = (t // per_group) * 8
        rows = min(num_m - first_m, 8)
        coords[t] = (first_m + (t % per_group) % rows, (t % per_group) // rows)
    return {"pieces": pieces, "ranges": ranges, "coords": coords, "iters": iters, "tiles": tiles,
            "by_program": by_program, "blocks": blocks}


class _Watch:
    """Under the interpreter, what every program of one launch does to C, P, FLAGS (and which parts of A
    and B it reads), recorded from the interpreter's memory operations. Raises ``_Spinning`` or
    ``_Runaway`` inside the launch when a program would never finish there.

    The interpreter runs the programs one after another, in id order, so a lower program's flag is always
    up by the time a higher one reads it. On a GPU it may not be up yet: the watch makes each program's
    first atomic on another program's flag see it down (0, and nothing written), so that only a wait that
    repeats its read until it sees the flag up gets past it; and the first wait of the launch sees it down
    for ``long_hold`` atomics, so that a wait that gives up after some number of tries gives up here."""

    def __init__(self, buffers: dict, programs: int, total_iters: int, blocks: tuple, long_hold: int = 1):
        self.ranges = {name: (t.data_ptr(), t.data_ptr() + t.numel() * t.element_size(), t.element_size())
                       for name, t in buffers.items()}
        self.programs = programs
        self.c_stores = []  # (program, element indices into C's buffer, (lane indices, lane mask) of the store)
        self.c_atomics = set()  # programs that used an atomic on C
        # the hand-over, in the order it happened: (program, ("p-store" or "p-load", slot of P, slots)),
        # (program, ("barrier",)) and (program, ("flag", op, flag index, value written or None, sem, value seen
        # or None)); sem is "relaxed", "acquire", "release", "acq_rel" or "plain" (tl.load, tl.store)
        self.events = []
        self.flag_reads = {}  # (program, flag index) -> how often read
        self.atomic_reads = {}  # (program, flag index) -> how many atomics on it so far
        self.holds = {}  # (program, another program's flag index) -> how many atomics on it see it down
        self.long_hold = long_hold  # ... for the launch's first such pair; 1 for the others
        self.a_lanes = [0] * programs  # elements of A loaded by each program
        self.first_a, self.first_b = {}, {}  # program -> element index of the first lane of its first load of A, B
        self.blocks = blocks
        self.p_overlaps = []  # (program, lanes, distinct places) of a write to P whose lanes share places
        self.a_limit = 3 * (total_iters + 1) * blocks[0] * blocks[2]
        self.read_limit = 20 + 4 * programs

    def _where(self, ptrs, mask=None):
        """``(name, element indices)`` of the buffer ``ptrs`` points into (masked lanes left out)."""
        addresses = np.asarray(ptrs.data).astype(np.int64).reshape(-1)
        if mask is not None:
            addresses = addresses[np.broadcast_to(np.asarray(mask.data), np.asarray(ptrs.data).shape).reshape(-1)]
        if addresses.size == 0:
            return None, addresses
        lo, hi = int(addresses.min()), int(addresses.max())
        for name, (start, end, size) in self.ranges.items():
            if start <= lo and hi < end:
                return name, (addresses - start) // size
        return None, addresses

    def _lanes(self, name: str, ptrs, mask):
        """The element index of every lane of ``ptrs`` in buffer ``name``, in the block's shape, and its mask."""
        start, _, size = self.ranges[name]
        addresses = np.asarray(ptrs.data).astype(np.int64)
        on = np.ones(addresses.shape, dtype=bool) if mask is None else \
            np.broadcast_to(np.asarray(mask.data), addresses.shape).astype(bool)
        return (addresses - start) // size, on

    def _slots(self, pid: int, kind: str, index) -> None:
        slots = np.unique(index // (self.blocks[0] * self.blocks[1])).tolist()
        for s in slots:
            self.events.append((pid, (kind, s, len(slots))))
        if kind == "p-store" and np.unique(index).size < np.asarray(index).size:  # lanes written to one place
            self.p_overlaps.append((pid, int(np.asarray(index).size), int(np.unique(index).size)))

    def _pid(self, builder) -> int:
        return int(builder.grid_idx[0])

    def _flag_read(self, pid: int, index, reads_only: bool = False) -> None:
        for q in np.unique(index).tolist():
            key = (pid, q)
            self.flag_reads[key] = self.flag_reads.get(key, 0) + 1
            if self.flag_reads[key] > self.read_limit + self.holds.get(key, 0):
                # its own flag: a wait on it if it only reads (nobody else raises it), else a loop that goes on
                raise _Runaway(pid) if q == pid and not reads_only else _Spinning(pid, q)

    def _held(self, pid: int, index) -> bool:
        """True if this atomic is to see another program's flag down: the program's first atomic on it (the
        launch's first such pair: its first ``long_hold`` atomics)."""
        held = False
        for q in np.unique(index).tolist():
            if q == pid:
                continue
            key = (pid, q)
            hold = self.holds.setdefault(key, 1 if self.holds else self.long_hold)
            count = self.atomic_reads.get(key, 0)
            held = held or count < hold
            self.atomic_reads[key] = count + 1
        return held

    def _flag_atomic(self, pid: int, op: str, ptr, mask, written, like, sem, real):
        """Record an atomic on FLAGS (``written``: the value it writes, None if it only reads; ``like``: the
        operand whose type the result has) and return its result: ``real()``, or, for a program's first
        atomic on another program's flag, zeros (the flag seen down) with memory left as it is."""
        from triton.runtime.interpreter import TensorHandle

        lanes, on = self._lanes("FLAGS", ptr, mask)
        lanes, on = lanes.reshape(-1), on.reshape(-1)
        if self._held(pid, lanes[on]):
            zeros = np.zeros(np.asarray(ptr.data).shape, dtype=np.asarray(like.data).dtype)
            result = TensorHandle(zeros, like.dtype.scalar)
        else:
            result = real()
        seen = np.broadcast_to(np.asarray(result.data), np.asarray(ptr.data).shape).reshape(-1)
        upper = str(sem).upper()
        sem_name = ("acq_rel" if "ACQUIRE_RELEASE" in upper else "acquire" if "ACQUIRE" in upper else
                    "release" if "RELEASE" in upper else "relaxed")
        for q in np.unique(lanes[on]).tolist():
            first = int(np.nonzero((lanes == q) & on)[0][0])
            self.events.append((pid, ("flag", op, q, written, sem_name, int(seen[first]))))
        self._flag_read(pid, lanes[on], reads_only=op == "read")
        return result

    def __enter__(self):
        from triton.runtime import interpreter

        # Wrap whatever the interpreter's builder does now (the core's bounds check may wrap it too),
        # on the instance, as the core does
        builder = interpreter.interpreter_builder
        self._builder = builder
        self._own = {name: builder.__dict__[name] for name in self._NAMES if name in builder.__dict__}
        saved = {name: getattr(builder, name) for name in self._NAMES}
        watch = self

        def create_masked_store(ptrs, value, mask, *rest):
            name, index = watch._where(ptrs, mask)
            pid = watch._pid(builder)
            if name == "C":
                watch.c_stores.append((pid, index, watch._lanes("C", ptrs, mask)))
            elif name == "P":
                watch._slots(pid, "p-store", index)
            elif name == "FLAGS":
                values = np.broadcast_to(np.asarray(value.data), np.asarray(ptrs.data).shape)
                written = int(values.reshape(-1)[0]) if values.size else 0
                for q in np.unique(index).tolist():
                    watch.events.append((pid, ("flag", "store", q, written, "plain", None)))
            return saved["create_masked_store"](ptrs, value, mask, *rest)

        def create_masked_load(ptrs, mask, *rest):
            name, index = watch._where(ptrs, mask)
            pid = watch._pid(builder)
            if name == "A":
                watch.a_lanes[pid] += int(np.asarray(ptrs.data).size)
                if pid not in watch.first_a:  # its first lane: the block's corner (masks and wrapping aside)
                    watch.first_a[pid] = int(watch._lanes("A", ptrs, None)[0].reshape(-1)[0])
                if watch.a_lanes[pid] > watch.a_limit:
                    raise _Runaway(pid)
            elif name == "B" and pid not in watch.first_b:
                watch.first_b[pid] = int(watch._lanes("B", ptrs, None)[0].reshape(-1)[0])
            elif name == "P":
                watch._slots(pid, "p-load", index)
            elif name == "FLAGS":
                for q in np.unique(index).tolist():
                    watch.events.append((pid, ("flag", "load", q, None, "plain", None)))
                watch._flag_read(pid, index, reads_only=True)
            return saved["create_masked_load"](ptrs, mask, *rest)

        def create_atomic_rmw(op, ptr, val, mask, sem, scope):
            name, index = watch._where(ptr, mask)
            pid = watch._pid(builder)
            real = lambda: saved["create_atomic_rmw"](op, ptr, val, mask, sem, scope)  # noqa: E731
            if name == "C":
                watch.c_atomics.add(pid)
            elif name == "P":
                watch._slots(pid, "p-store", index)
            elif name == "FLAGS":
                values = np.asarray(val.data).reshape(-1)
                written = int(values[0]) if values.size else 0
                kind = str(op).rsplit(".", 1)[-1].lower()  # xchg, add, or, ...
                reads = kind != "xchg" and written == 0  # atomic_add(flag, 0) and the like only read
                return watch._flag_atomic(pid, "read" if reads else kind, ptr, mask, None if reads else written,
                                          val, sem, real)
            return real()

        def create_atomic_cas(ptr, cmp, val, sem, scope):
            name, index = watch._where(ptr)
            pid = watch._pid(builder)
            real = lambda: saved["create_atomic_cas"](ptr, cmp, val, sem, scope)  # noqa: E731
            if name == "C":
                watch.c_atomics.add(pid)
            elif name == "FLAGS":
                expected = np.asarray(cmp.data).reshape(-1)
                wanted = np.asarray(val.data).reshape(-1)
                same = expected.size and wanted.size and int(expected[0]) == int(wanted[0])
                return watch._flag_atomic(pid, "read" if same else "cas", ptr, None, None if same else int(wanted[0]),
                                          cmp, sem, real)
            return real()

        def create_barrier(*args):
            watch.events.append((watch._pid(builder), ("barrier",)))
            return saved["create_barrier"](*args)

        for name, fn in (("create_masked_store", create_masked_store), ("create_masked_load", create_masked_load),
                         ("create_atomic_rmw", create_atomic_rmw), ("create_atomic_cas", create_atomic_cas),
                         ("create_barrier", create_barrier)):
            setattr(builder, name, fn)
        return self

    _NAMES = ("create_masked_store", "create_masked_load", "create_atomic_rmw", "create_atomic_cas", "create_barrier")

    def __exit__(self, *exc):
        for name in self._NAMES:
            if name in self._own:
                setattr(self._builder, name, self._own[name])
            else:
                delattr(self._builder, name)
        return False


@dataclasses.dataclass
class _Launch:
    """One launch of the learner's kernel and everything the diagnosis reads."""

    case: _Case
    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor  # the M x N view the kernel got (on the CPU after the launch)
    c_strides: tuple  # its strides in c_buffer
    a_strides: tuple  # A's and B's strides, as the kernel got them
    b_strides: tuple
    c_buffer: torch.Tensor  # all of C's memory: the view and NaN around it
    p_buffer: torch.Tensor  # P's slots, then NaN
    flag_buffer: torch.Tensor  # FLAGS, then zeros
    schedule: dict
    watch: _Watch | None


def _guarded(numel: int, dtype, fill) -> torch.Tensor:
    """A flat buffer of ``fill``: the kernel gets a part of it, and the rest shows what it should not have touched."""
    return torch.full((numel,), fill, dtype=dtype, device=runtime.DEVICE)


def _launch(kernel, case: _Case, long_hold: int = 1) -> _Launch:
    """Launch ``kernel`` on fresh inputs: fp16 A and B, float32 C inside a NaN buffer, P (NaN: garbage
    until written) with a slot per program, FLAGS zero; under the interpreter, watched."""
    M, N, K, programs = case.M, case.N, case.K, case.programs
    bm, bn, bk = case.blocks
    device = runtime.DEVICE
    g = torch.Generator().manual_seed(M * 10007 + N * 101 + K)
    a = torch.randn(M, K, generator=g).to(torch.float16)
    b = torch.randn(K, N, generator=g).to(torch.float16)
    if case.strided:  # A stored K-major (a transposed view), B every other column of a wider matrix
        a = a.T.contiguous().to(device).T
        wide = torch.zeros(K, 2 * N, dtype=torch.float16)
        wide[:, ::2] = b
        b = wide.to(device)[:, ::2]
        row = 2 * N + 6
        c_buffer = _guarded((M + 2) * row, torch.float32, float("nan"))
        c = c_buffer.as_strided((M, N), (row, 2))  # every other column of rows 2N + 6 apart
    else:
        a, b = a.to(device), b.to(device)
        c_buffer = _guarded(M * N + 4 * bm * bn, torch.float32, float("nan"))
        c = c_buffer[:M * N].view(M, N)
    p_buffer = _guarded((programs + 4) * bm * bn, torch.float32, float("nan"))
    flag_buffer = torch.zeros(programs + 16, dtype=torch.int32, device=device)
    schedule = _pieces(M, N, K, programs, case.blocks)
    watch = None
    args = (a, b, c, p_buffer[:programs * bm * bn], flag_buffer[:programs], M, N, K, *a.stride(), *b.stride(),
            *c.stride())
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, PROGRAMS=programs, TILES=schedule["tiles"], num_warps=4)
    if runtime.INTERPRET:
        def memory(t):  # all of a tensor's storage, from its start (a view's element indices count from there)
            return t.as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)

        watch = _Watch({"A": memory(a), "B": memory(b), "C": c_buffer, "P": p_buffer, "FLAGS": flag_buffer},
                       programs, schedule["tiles"] * schedule["iters"], case.blocks, long_hold)
        try:
            with watch:
                kernel[(programs,)](*args, **consts)
        except _Spinning as spin:  # say whether the flag is up, whether it ever went up, who kept it down
            pid, q = spin.args
            up = bool(flag_buffer[q]) if q < flag_buffer.numel() else False
            raised = any(p == q and item[0] == "flag" and item[2] == q and item[3] for p, item in watch.events)
            # raised with 0 (which reads as down): a write of 0 to its own flag after writing its partial
            written, zero = False, False
            for p, item in watch.events:
                if p == q and item[0] == "p-store":
                    written = True
                elif p == q and item[0] == "flag" and item[2] == q and item[3] == 0 and item[1] != "read":
                    zero = zero or written
            as_owner = None
            handed = [piece for piece in schedule["by_program"][q][-1:] if piece[2] < schedule["iters"]] \
                if q < programs else []
            if handed and any(p == q for p, *_ in watch.c_stores):  # program q stored into C what it should hand over
                as_owner = (handed[0][0], handed[0][2], schedule["iters"])
            raise _Spinning(pid, q, up, raised, as_owner, zero and not raised) from None
        except Exception as err:  # stopped right after a read that saw another program's flag down?
            pid = watch._pid(_interpreter_builder())
            last = next((item for p, item in reversed(watch.events) if p == pid and item[0] == "flag"), None)
            if last is not None and last[2] != pid and last[5] == 0:
                raise _StoppedOnDown(pid, last[2], err) from None
            raise
    else:
        kernel[(programs,)](*args, **consts)
        torch.cuda.synchronize()
    return _Launch(case, a.cpu(), b.cpu(), c.cpu(), c.stride(), a.stride(), b.stride(), c_buffer.cpu(),
                   p_buffer.cpu(), flag_buffer.cpu(), schedule, watch)


def _interpreter_builder():
    from triton.runtime import interpreter

    return interpreter.interpreter_builder


def _learner_sources(kernel) -> list:
    """The parsed source of the kernel (first) and of each ``@triton.jit`` helper it calls that is not the
    course's; empty where Python cannot find the kernel's source."""
    trees, seen = [], set()

    def visit(fn):
        if fn in seen or (trees and getattr(fn, "__module__", "").startswith("course.")):
            return
        seen.add(fn)
        try:
            trees.append((fn, ast.parse(textwrap.dedent(inspect.getsource(fn)))))
        except (SyntaxError, ValueError, OSError, TypeError):
            return
        for name in getattr(getattr(fn, "__code__", None), "co_names", ()):
            helper = getattr(fn, "__globals__", {}).get(name)
            if callable(getattr(helper, "fn", None)) and hasattr(helper, "arg_names"):
                visit(helper.fn)

    visit(getattr(kernel, "fn", kernel))
    return trees


def _not_attempted(kernel) -> bool:
    """True while the kernel's body is only the stub's given lines and ``...`` (read from its bytecode, which
    names nothing else: no tl, no method of the schedule)."""
    code = getattr(getattr(kernel, "fn", kernel), "__code__", None)
    return code is not None and set(code.co_names) <= _GIVEN


def _borrowed(kernel) -> str | None:
    """A ✗ message if the kernel calls torch, the course's fix-up or one of the course's GEMM kernels."""
    import types

    from course import solutions

    for fn, tree in _learner_sources(kernel):
        names = getattr(fn, "__globals__", {})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "streamk_fixup":
                return ("calls ScheduleContext.streamk_fixup, the course's own fix-up: writing it is the exercise "
                        "(hand over the partial, or wait for the lower programs' partials and add them)")
            private = node.attr if isinstance(node, ast.Attribute) else \
                node.id if isinstance(node, ast.Name) and node.id in names and \
                (getattr(getattr(names[node.id], "fn", names[node.id]), "__module__", "") or "").startswith("course") \
                else ""
            if private.startswith("_") and not private.startswith("__"):
                return (f"uses {private}, a private helper of the course (its name starts with _): the exercise is to "
                        "write that part yourself (the first program of a tile is the inverse of your span; or let "
                        "each flag say where its piece starts)")
            if isinstance(node, ast.Name) and node.id in names and node.id != fn.__name__:
                value = names[node.id]
                module = value.__name__ if isinstance(value, types.ModuleType) else \
                    getattr(getattr(value, "fn", value), "__module__", "") or ""
                if module == "torch" or module.startswith("torch."):
                    return "uses torch inside the kernel: a kernel computes with tl operations only"
                if value is solutions or value is getattr(solutions, "streamk_kernel", None):
                    return "calls the reference solution: write the loop and the fix-up yourself"
                if (module == "course.gemm" or module.startswith(("course.gemm.", "course.tiled", "course.persistent",
                                                                    "course.stages_kernels"))) and node.id not in _GIVEN:
                    return (f"uses {node.id} from {module}, the course's own GEMM: write the Stream-K loop and "
                            "its fix-up with the stages the stub gives you")
    return None


# --- the hand-over as written: wait loops and barriers, read from the learner's source with ast ---------

_ATOMICS = {"atomic_cas", "atomic_xchg", "atomic_add", "atomic_or", "atomic_and", "atomic_xor", "atomic_max",
            "atomic_min"}


def _called(node) -> str:
    """The name a call calls: ``tl.atomic_cas(...)`` -> "atomic_cas", ``wait(...)`` -> "wait", else ""."""
    if not isinstance(node, ast.Call):
        return ""
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _sem(call: ast.Call) -> str:
    for kw in call.keywords:
        if kw.arg == "sem":
            return str(kw.value.value) if isinstance(kw.value, ast.Constant) else "?"
    return "acq_rel"  # Triton's default for atomics


def _operand(call: ast.Call, position: int, name: str):
    if len(call.args) > position:
        return call.args[position]
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _is_zero(node) -> bool:
    return isinstance(node, ast.Constant) and node.value in (0, 0.0, False) and node.value is not None


def _raises(call: ast.Call) -> bool:
    """An atomic that writes something other than 0 (a flag going up), not a read such as
    ``atomic_cas(p, x, x)`` or ``atomic_add(p, 0)``, nor a lowering such as ``atomic_xchg(p, 0)``."""
    name = _called(call)
    if name not in _ATOMICS:
        return False
    if name == "atomic_cas":
        cmp, val = _operand(call, 1, "cmp"), _operand(call, 2, "val")
        return val is not None and not _is_zero(val) and not (cmp is not None and ast.dump(cmp) == ast.dump(val))
    val = _operand(call, 1, "val")
    return val is not None and not _is_zero(val)


def _functions(trees) -> list:
    return [node for _, tree in trees for node in tree.body if isinstance(node, ast.FunctionDef)]


def _flag_pointers(f: ast.FunctionDef) -> set:
    """The names in ``f`` that hold FLAGS or pointers made from it (``flag = FLAGS + q``)."""
    names = {"FLAGS"}
    changed = True
    while changed:
        changed = False
        for node in ast.walk(f):
            if isinstance(node, ast.Assign) and any(isinstance(n, ast.Name) and n.id in names
                                                    for n in ast.walk(node.value)):
                for target in node.targets:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name) and n.id not in names:
                            names.add(n.id)
                            changed = True
    return names


def _raisings(trees) -> list:
    """``(function, call)`` for each atomic that raises a flag: on FLAGS in the kernel, on anything in a helper
    (whose parameters have other names)."""
    found = []
    for i, f in enumerate(_functions(trees)):
        pointers = _flag_pointers(f) if i == 0 else None
        for call in ast.walk(f):
            if _raises(call) and (pointers is None or any(isinstance(n, ast.Name) and n.id in pointers
                                                          for n in ast.walk(_operand(call, 0, "pointer")
                                                                            or ast.Constant(0)))):
                found.append((f, call))
    return found


def _reads_and_tainted(trees):
    """``(is_read, tainted)``: ``is_read(node)`` for a call that reads a flag with acquire (an atomic with
    sem "acquire" or "acq_rel", or a call of a learner's helper that returns one); ``tainted[function]``: the
    names assigned from such reads, directly or through other such names."""
    functions = _functions(trees)
    readers = set()
    tainted = {f.name: set() for f in functions}

    def is_read(node) -> bool:
        name = _called(node)
        return (name in _ATOMICS and _sem(node) in ("acquire", "acq_rel")) or (name in readers and name)

    def depends(expr, names) -> bool:
        return any(is_read(n) or (isinstance(n, ast.Name) and n.id in names) for n in ast.walk(expr))

    changed = True
    while changed:
        changed = False
        for f in functions:
            names = tainted[f.name]
            for node in ast.walk(f):
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and \
                        node.value is not None and depends(node.value, names):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        for n in ast.walk(target):
                            if isinstance(n, ast.Name) and n.id not in names:
                                names.add(n.id)
                                changed = True
                if isinstance(node, ast.Return) and node.value is not None and f.name not in readers and \
                        depends(node.value, names):
                    readers.add(f.name)
                    changed = True
    return is_read, tainted


def _endless_wait(trees) -> str | None:
    """A ✗ message for a while loop that tests a flag read before it and never changes its condition."""
    is_read, tainted = _reads_and_tainted(trees)
    for f in _functions(trees):
        for loop in ast.walk(f):
            if not isinstance(loop, ast.While):
                continue
            tested = {n.id for n in ast.walk(loop.test) if isinstance(n, ast.Name)}
            if not tested & tainted[f.name] or any(isinstance(n, ast.Call) for n in ast.walk(loop.test)):
                continue
            changed = {n.id for stmt in loop.body for n in ast.walk(stmt)
                       if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if not tested & changed:
                return (f"your loop `while {ast.unparse(loop.test)}:` never reads the flag again: nothing in it "
                        "changes its condition, so once entered it never ends; repeat the atomic that acquires "
                        "inside the loop, until it sees the flag up")
    return None


def _changed(loop: ast.While) -> set:
    """The names a loop's body assigns."""
    return {n.id for stmt in loop.body for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _is_wait(loop, is_read, tainted: set) -> bool:
    """A wait loop: a while loop whose condition depends on a flag read with acquire, and that reads the same flag
    again on every turn (a read inside it whose operands the loop does not change: a loop that steps q down and
    reads each flag once is no wait)."""
    if not isinstance(loop, ast.While) or not any(is_read(n) or (isinstance(n, ast.Name) and n.id in tainted)
                                                  for n in ast.walk(loop.test)):
        return False
    changed = _changed(loop)
    return any(is_read(n) and not {m.id for arg in n.args for m in ast.walk(arg) if isinstance(m, ast.Name)} & changed
               for n in ast.walk(loop))


def _bounded_wait(trees) -> str | None:
    """A ✗ message for a wait loop whose condition also tests something the loop counts (a wait that gives up)."""
    is_read, tainted = _reads_and_tainted(trees)
    for f in _functions(trees):
        for loop in ast.walk(f):
            if not _is_wait(loop, is_read, tainted[f.name]):
                continue
            counted = sorted({n.id for n in ast.walk(loop.test) if isinstance(n, ast.Name)} & _changed(loop)
                             - tainted[f.name])
            if counted:
                names = " and ".join(counted)
                return (f"your wait loop `while {ast.unparse(loop.test)}:` can end before the flag is up: its "
                        f"condition also tests {names}, which the loop changes, so after some number of reads it "
                        "gives up and the owner adds a partial that may not be written yet. On a GPU a lower program "
                        "may be late by any amount: wait while the flag is down, and test nothing else")
    return None


def _plain_load_wait(trees) -> str | None:
    """The condition of a while loop that tests a value it reads with tl.load (a wait with a plain load), else None."""
    for f in _functions(trees):
        for loop in ast.walk(f):
            if not isinstance(loop, ast.While):
                continue
            loaded = {n.id for stmt in loop.body for node in ast.walk(stmt)
                      if isinstance(node, ast.Assign) and _called(node.value) == "load"
                      for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name)}
            tested = {n.id for n in ast.walk(loop.test) if isinstance(n, ast.Name)}
            if tested & loaded or any(_called(n) == "load" for n in ast.walk(loop.test)):
                return ast.unparse(loop.test)
    return None


def _hand_over_in_source(trees) -> str | None:
    """A ✗ message if the source has no wait loop (a while loop whose condition depends on an atomic that
    acquires, repeated inside it), or raises a flag with no tl.debug_barrier() before it. None without a source."""
    if not trees:
        return None
    is_read, tainted = _reads_and_tainted(trees)
    waits = any(_is_wait(loop, is_read, tainted[f.name]) for f in _functions(trees) for loop in ast.walk(f))
    if not waits:
        plain = _plain_load_wait(trees)
        if plain:
            return (f"your wait loop `while {plain}:` reads the flag with tl.load: a plain load, even with "
                    "volatile=True, is not an atomic that acquires. Nothing then keeps the partial's load from moving "
                    "before it on a GPU (it may read the slot before the flag), and a compiled loop may read the flag "
                    "once and spin forever; repeat an atomic that acquires (sem=\"acquire\") until it sees the flag "
                    "up")
        return ("your kernel has no wait loop: no while loop repeats an atomic that acquires until it sees the flag "
                "up. One atomic reads a flag once, and on a GPU the lower program may not have raised it yet: the "
                "owner must keep reading (sem=\"acquire\") while the flag is down")
    barriers = {f.name: [n.lineno for n in ast.walk(f) if _called(n) == "debug_barrier"] for f in _functions(trees)}
    for f, call in _raisings(trees):
        # a barrier earlier in the same function; or, where the flag is raised in a helper without one, anywhere
        if not any(line < call.lineno for line in barriers[f.name]) and \
                not (not barriers[f.name] and any(barriers.values())):
            return ("your kernel raises its flag with no tl.debug_barrier() before it: the atomic that raises it "
                    "is made by one thread, and its release covers only that thread's own stores, not the other "
                    "threads' parts of the partial; put tl.debug_barrier() between writing the partial and raising "
                    "the flag")
    return None


@exercise("streamk_kernel", "Write the rest of streamk_kernel above: this program's pieces, the partials handed "
                            "over through P and FLAGS, and the owner's fix-up")
def check_streamk_kernel(streamk_kernel) -> str:
    """Check a ``@triton.jit`` kernel with the signature of ``solutions.streamk_kernel``: every tile shared
    (Stream-K only), launched on 2 to 10 programs with float32 C, block sizes that differ between products
    (BLOCK_N and BLOCK_K unequal in some), ragged M, N and K, tiles shared by up to four programs, a
    transposed A, a sliced B and a strided C, more programs than K-iterations, and a random product. Before
    any launch it reads the wait loops from the source: one that never reads again, or whose condition tests
    a counter (a wait that gives up), is refused. Under the interpreter the check also watches each program's
    memory operations: every tile of C stored once, by its owner, each program computing exactly its range,
    last piece first, each partial written, then a barrier, then its flag raised with release, and read only
    after a wait that acquires saw its flag up (each program's first read of another's flag is made to see it
    down, as it may be on a GPU, and the first product's wait sees it down for over a thousand reads), the flags
    left at zero. On a GPU, where it cannot watch, it reads the wait loop and the barrier from the source."""
    require_jit("streamk_kernel", streamk_kernel, _KERNEL_PARAMS, kind="kernel")
    if _not_attempted(streamk_kernel):
        raise NotAttempted()
    borrowed = _borrowed(streamk_kernel)
    if borrowed:
        raise Failed(f"your kernel {borrowed}")
    trees = _learner_sources(streamk_kernel)
    endless = _endless_wait(trees) or _bounded_wait(trees)
    if endless:
        raise Failed(endless)
    if not runtime.INTERPRET and _raisings(trees):  # on a GPU a missing wait races, or hangs: read it first
        written = _hand_over_in_source(trees)
        if written:
            raise Failed(written)
    rng = random.Random()
    M, N = rng.choice([32, 64, 40, 44, 57, 70]), rng.choice([16, 32, 21, 26, 40, 53])
    extra = _Case("a random product", M, N, rng.randint(1, 180), rng.randint(2, 9), rng.choice(_RANDOM_BLOCKS))
    cases = _KERNEL_CASES + [extra]
    # the first product's wait sees its flag down for this many reads: more than a wait that gives up would try
    long_hold = rng.randint(1100, 1600)
    for i, case in enumerate(cases):
        try:
            launch = _launch(streamk_kernel, case, long_hold if i == 0 else 1)
        except _Spinning as spin:
            raise Failed(f"on {case.what}: {_spin_message(*spin.args)}") from None
        except _Runaway as runaway:
            raise Failed(f"on {case.what}: program {runaway.args[0]} computes more K-iterations than the whole "
                          "product has: does your loop over the pieces end? Each turn must move the end of the "
                          "range down (or its start up) by the piece's length") from None
        except _StoppedOnDown as stopped:
            pid, q, err = stopped.args
            raise Failed(f"on {case.what}: program {pid} read program {q}'s flag once, saw it down (here the first "
                          "read of each flag sees it down, as it may on a GPU, where program {q} may not have raised "
                          f"it yet), and stopped: {_one_line(err)}. A wait is a while loop that repeats the atomic "
                          "that acquires until it sees the flag up".replace("{q}", str(q))) from None
        except Exception as err:
            raise user_error(f"on {case.what}, your kernel", err) from None
        _diagnose_kernel(launch)
    written = _hand_over_in_source(trees)
    if written:
        raise Failed(written)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too
        a = torch.empty(64, 64, dtype=torch.float16)
        bm, bn, bk = _WIDE
        c, p, f = torch.empty(64, 64), torch.empty(4 * bm * bn), torch.zeros(4, dtype=torch.int32)
        compiles_for_a_gpu(streamk_kernel, a, a, c, p, f, 64, 64, 64, 64, 1, 64, 1, 64, 1, BLOCK_M=bm, BLOCK_N=bn,
                          BLOCK_K=bk, PROGRAMS=4, TILES=4)
        watched = ("; watched: each program computed its own range, last piece first; each tile was stored once, by "
                   "its owner; each partial was written, then a barrier, then its flag raised with release, and read "
                   "only after a wait that acquires saw the flag up (each first read of a flag sees it down, one wait "
                   "for over a thousand reads); FLAGS ended at zero")
    else:
        watched = ("; the hand-over read from your source (a wait loop that acquires, a barrier before each flag "
                   "goes up): on a GPU the check cannot watch the programs")
    return (f"right on {len(cases)} products: tiles shared by two to four programs, blocks of different shapes, "
            f"ragged edges, strided operands, idle programs and a random one{watched}")


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:160]}" if text else type(err).__name__


# --- building for a GPU, with the compiler's reason ------------------------------------------------------

# A program keeps reading program q's flag under the interpreter, where programs run one after another.
def _spin_message(pid: int, q: int, up: bool = False, raised: bool = False, as_owner: tuple | None = None,
                  zero: bool = False) -> str:
    if q > pid:
        return (f"program {pid} waits for program {q}'s flag, a higher program id, and never gets it (here programs "
                "run one after another, in id order; on a GPU a later program may not have started either). Only "
                "the owner of a tile, the program holding its LAST K-iteration, waits, and only for lower ones")
    if q == pid:
        return (f"program {pid} waits for its own flag (FLAGS + {pid}), a flag nobody raises for it: a program's "
                "flag goes up only when it hands a partial over, never for a tile it owns. The owner waits only "
                "for the flags of the lower programs (q < pid) that hold the tile's earlier K-iterations")
    if up:
        return (f"program {pid} keeps reading program {q}'s flag although it is up: your wait loop tests the wrong "
                "condition (wait while the flag is still down)")
    if raised:
        return (f"program {pid} waits for program {q}'s flag, which was lowered already: only the owner of the "
                f"tile that program {q} handed over waits for it (once), and lowers it after; wait only for the "
                "programs that hold earlier K-iterations of your tile")
    if zero:
        return (f"program {pid} waits for program {q}'s flag, which program {q} raised with the value 0 after writing "
                "its partial: 0 is what a flag reads when it is down (FLAGS start at zero), so the owner can never "
                "see it up. Raise a flag with a value that is never 0 (if it says where the piece starts, shift it "
                "so that no piece gives 0)")
    if as_owner:
        t, k_end, iters = as_owner
        return (f"program {pid} waits for program {q}'s flag, which program {q} never raised: program {q} took "
                f"itself for the owner of tile {t} and stored it into C, although its piece there stops after "
                f"K-iteration {k_end - 1} of the tile's {iters}. Check how your kernel decides that a piece ends its "
                "tile: its k_end reaches the tile's count of K-iterations (sched.iters_per_tile(), which counts a "
                "ragged last one)")
    return (f"program {pid} waits for program {q}'s flag, which program {q} never raised: a program that hands "
            "over a partial raises its flag (FLAGS + pid) once the partial is written")


def _tile_name(schedule: dict, t: int, M: int, N: int) -> str:
    pid_m, pid_n = schedule["coords"][t]
    bm, bn, _ = schedule["blocks"]
    rows = f"{pid_m * bm}-{min(M, (pid_m + 1) * bm) - 1}"
    cols = f"{pid_n * bn}-{min(N, (pid_n + 1) * bn) - 1}"
    return f"tile {t} (rows {rows}, columns {cols})"


def _programs(ps) -> str:
    ps = sorted(set(ps))
    return ("program " if len(ps) == 1 else "programs ") + ", ".join(str(p) for p in ps)


def _diagnose_kernel(launch: _Launch) -> None:
    """The first thing wrong with one launch, as a ✗ (from memory first, then values, then the protocol)."""
    case, schedule, watch = launch.case, launch.schedule, launch.watch
    what, M, N, programs = case.what, case.M, case.N, case.programs
    bm, bn, bk = case.blocks
    slot = bm * bn
    # 1. Memory outside what the kernel was given
    view = torch.zeros(launch.c_buffer.numel(), dtype=torch.bool)
    rows, cols = torch.meshgrid(torch.arange(M), torch.arange(N), indexing="ij")
    offsets = (rows * launch.c_strides[0] + cols * launch.c_strides[1]).flatten()
    view[offsets] = True
    around = launch.c_buffer[~view]
    if watch is not None:
        unmasked = _unmasked_edge(watch, launch.c_strides, M, N)
        if unmasked is not None:
            pid, rows, cols = unmasked
            past = " and ".join(([f"rows from M = {M} on"] if rows else []) + ([f"columns from N = {N} on"] if cols
                                                                                else []))
            raise Failed(f"on {what}: program {pid} stores a tile at C's edge without masking it: its {past} lie "
                          "outside C (in the memory around it, or on other elements of C); store with a mask that "
                          "keeps the rows below M and the columns below N (the output view does that)")
    if not torch.isnan(around).all() or (watch and any((~view[idx]).any() for _, idx, _ in watch.c_stores)):
        raise Failed(f"on {what}: stored into memory around C that is not part of C: address C's element (i, j) "
                      "through C's strides, stride_cm and stride_cn (here the output view does that)")
    if not torch.isnan(launch.p_buffer[programs * slot:]).all():
        raise Failed(f"on {what}: wrote past the end of P: P has one slot per program, BLOCK_M x BLOCK_N float32 "
                      "at P + pid * BLOCK_M * BLOCK_N")
    if launch.flag_buffer[programs:].any():
        raise Failed(f"on {what}: wrote past the end of FLAGS: FLAGS holds one flag per program, FLAGS + pid")
    # 2. Tiles never stored
    c = launch.c.double()
    tiles = schedule["tiles"]
    tile_of = torch.zeros(M, N, dtype=torch.long)
    for t, (pid_m, pid_n) in schedule["coords"].items():
        tile_of[pid_m * bm:(pid_m + 1) * bm, pid_n * bn:(pid_n + 1) * bn] = t
    unstored = torch.isnan(c) if watch is None else None
    if watch is not None:
        counts = torch.zeros(launch.c_buffer.numel(), dtype=torch.long)
        storers = {}
        for pid, idx, _ in watch.c_stores:
            counts.index_add_(0, torch.as_tensor(idx), torch.ones(len(idx), dtype=torch.long))
            for t in torch.unique(tile_of.flatten()[_positions(idx, launch.c_strides, N, view)]).tolist():
                storers.setdefault(t, []).append(pid)
        per_element = counts[offsets].view(M, N)
        unstored = per_element == 0
    if unstored.all() and not (watch and watch.c_atomics):
        raise Failed(f"on {what}: nothing was stored into C: the owner of each tile (the program holding its last "
                      "K-iteration) stores it, through tensorC.store")
    missing = sorted(torch.unique(tile_of[unstored]).tolist())
    if missing and not (watch and watch.c_atomics):
        t = missing[0]
        owner = schedule["pieces"][t][-1][0]
        raise Failed(f"on {what}: {plural(len(missing), 'tile')} of {tiles} never stored, the first "
                      f"{_tile_name(schedule, t, M, N)}, whose last K-iteration is program {owner}'s: a program's "
                      "range may cross into further tiles; walk every piece of it, and store each tile it owns")
    if watch is not None:
        # 3. The workspace: each program writes its own slot only, each element of its partial to a place of its own
        if watch.p_overlaps:
            pid, lanes, places = watch.p_overlaps[0]
            raise Failed(f"on {what}: program {pid} writes its {lanes}-element partial to only {places} places of P: "
                          "elements of it land on the same place and overwrite each other. Each element of the "
                          "BLOCK_M x BLOCK_N partial needs a place of its own in the slot: what is the distance "
                          "between two rows of it?" + (f" (here BLOCK_N = {bn}, BLOCK_K = {bk})" if bn != bk else ""))
        for pid, item in watch.events:
            if item[0] == "p-store" and item[2] > 1:
                raise Failed(f"on {what}: program {pid}'s partial spreads over {item[2]} slots of P: a slot holds a "
                              "whole BLOCK_M x BLOCK_N tile, so program pid's starts at P + pid * BLOCK_M * BLOCK_N")
            if item[0] == "p-store" and item[1] != pid:
                raise Failed(f"on {what}: program {pid} writes its partial into slot {item[1]} of P, not its own "
                              f"(slot {pid}): each program has one slot of BLOCK_M x BLOCK_N float32, numbered by its "
                              "program id (it hands over at most one partial per launch)")
        # 4. C stored once per tile, by one program, without atomics
        if watch.c_atomics:
            verb = "adds" if len(watch.c_atomics) == 1 else "add"
            raise Failed(f"on {what}: {_programs(watch.c_atomics)} {verb} into C with an atomic: C holds garbage "
                          "before the launch (never read or add to it); the owner stores each finished tile once")
        for t in range(tiles):
            who = storers.get(t, [])
            if len(who) > 1:
                if len(set(who)) == 1:
                    raise Failed(f"on {what}: program {who[0]} stores {_tile_name(schedule, t, M, N)} "
                                  f"{len(who)} times: a tile is stored once, when finished")
                raise Failed(f"on {what}: {_tile_name(schedule, t, M, N)} is stored by {_programs(who)}: only "
                              "its owner, the program holding its last K-iteration, stores it; the others hand "
                              "their partial sums over through P")
    # 5. Each program computes its own range, once (the K-steps of A it loads)
    if watch is not None:
        for pid, (start, end) in enumerate(schedule["ranges"]):
            done = watch.a_lanes[pid] // (bm * bk)
            if done != end - start:
                more = ("the owner of a tile adds the others' partials instead of redoing their K-iterations" if
                        done > end - start else "walk every piece of it")
                raise Failed(f"on {what}: program {pid} computed {plural(done, 'K-iteration')}, but its range "
                              f"(sched.iter_range()) holds {end - start}: each program computes exactly its own range; "
                              + more)
        # 5b. Last piece first, and the waits
        _diagnose_order(launch)
        _diagnose_waits(launch)
    # 6. The values, tile by tile
    _diagnose_values(launch, tile_of)
    if watch is None:
        _flags_left(launch)
        return
    # 7. The hand-over: partials written before their flag goes up, read only after it
    _diagnose_protocol(launch)
    _flags_left(launch)


def _diagnose_order(launch: _Launch) -> None:
    """Each program's first computed piece (from the corners of its first loads of A and of B) must be its range's
    last one: a ✗ for a program that starts with its range's first piece."""
    schedule, watch, what = launch.schedule, launch.watch, launch.case.what
    for pid, pieces in enumerate(schedule["by_program"]):
        if len(pieces) < 2 or pid not in watch.first_a or pid not in watch.first_b:
            continue
        row, k = _split(watch.first_a[pid], launch.a_strides)
        _, col = _split(watch.first_b[pid], launch.b_strides)
        bm, bn, bk = schedule["blocks"]
        k_iter, pid_m, pid_n = int(k) // bk, int(row) // bm, int(col) // bn

        def computes(piece):
            t, k0, k1 = piece
            return schedule["coords"][t] == (pid_m, pid_n) and k0 <= k_iter < k1

        if computes(pieces[-1]) or not computes(pieces[0]):
            continue  # last piece first; or an order this check cannot name (tiles numbered another way, say)
        t, k0, k1 = pieces[0]
        raise Failed(f"on {what}: program {pid} walks its range forwards: it starts with its first piece (tile {t}'s "
                      f"K-iterations {k0} to {k1 - 1}). Walk the range "
                      "backwards, last piece first (sched.streamk_span). The last piece is the one whose partial a "
                      "higher program may wait for, so it goes out at once; the first piece, which this program owns "
                      "and finishes by waiting for lower ones, comes last, when their partials are ready. Walked "
                      "forwards, each owner waits at its start for a partial the program below makes only at its "
                      "end, and on a GPU the programs run one after another")


def _plain_load(what: str, pid: int, q: int) -> str:
    return (f"on {what}: program {pid} reads program {q}'s flag with tl.load: a plain load, even with volatile=True, "
            "is not an atomic that acquires. Nothing then keeps the partial's load from moving before it on a GPU "
            "(it may read the slot before the flag), and a compiled wait loop may read the flag once and spin "
            "forever; wait with an atomic that acquires (sem=\"acquire\")")


def _diagnose_waits(launch: _Launch) -> None:
    """No flag of another program read with a plain load; no partial read (nor given up on) after a read that
    saw its flag down."""
    what, watch = launch.case.what, launch.watch
    for pid in range(launch.case.programs):
        items = [item for p, item in watch.events if p == pid]
        seen, loaded = {}, set()
        for item in items:
            if item[0] == "flag" and item[1] == "load" and item[2] != pid:
                raise Failed(_plain_load(what, pid, item[2]))
            if item[0] == "flag" and item[2] != pid and item[5] is not None:
                seen.setdefault(item[2], []).append((item[4], item[5]))
            elif item[0] == "p-load" and item[1] != pid:
                q = item[1]
                loaded.add(q)
                acquired = [value for sem, value in seen.get(q, []) if sem in ("acquire", "acq_rel")]
                downs = len(acquired) - len("".join("1" if v else "0" for v in acquired).rstrip("0"))
                if downs > 2:  # more than a read or two: a loop, that stopped
                    raise Failed(f"on {what}: program {pid} read program {q}'s flag {downs} times in a row, saw it "
                                  "down every time, then gave up waiting and read its partial anyway (here the first "
                                  "wait sees its flag down for over a thousand reads): a wait that stops after some "
                                  "number of tries reads a partial that may not be written yet, and on a GPU a lower "
                                  "program may be late by any amount. Wait until the flag is up, however many reads "
                                  "it takes")
                if acquired and acquired[-1] == 0:
                    raise Failed(f"on {what}: program {pid} reads program {q}'s partial although its last read of "
                                  f"program {q}'s flag saw it down (here the first read of each flag sees it down, as "
                                  f"it may on a GPU, where program {q} may not have raised it yet): a wait is a while "
                                  "loop that repeats the atomic that acquires until it sees the flag up")
        for q, reads in seen.items():
            if q not in loaded and q < pid and reads[-1][1] == 0:
                raise Failed(f"on {what}: program {pid} read program {q}'s flag, saw it down and went on without "
                              f"program {q}'s partial (here the first read of each flag sees it down, as it may on a "
                              "GPU): a wait is a while loop that repeats the atomic that acquires until it sees the "
                              "flag up")


def _split(index, strides: tuple):
    """Element indices of a strided matrix (the larger stride is the rows', or the columns' when it is the first
    one's smaller) -> ``(row, column)`` arrays."""
    index = np.asarray(index, dtype=np.int64)
    s0, s1 = strides
    if s0 >= s1:
        return index // s0, index % s0 // s1
    return index % s1 // s0, index // s1


def _unmasked_edge(watch: _Watch, strides: tuple, M: int, N: int):
    """``(program, past M, past N)`` for the first store into C of a whole tile laid out through C's strides
    whose masked-in lanes reach past C's edge (rows from M, columns from N); None if there is none."""
    for pid, _, (lanes, on) in watch.c_stores:
        if lanes.ndim != 2:
            continue
        rows, cols = np.arange(lanes.shape[0])[:, None], np.arange(lanes.shape[1])[None, :]
        if not (lanes == lanes[0, 0] + rows * strides[0] + cols * strides[1]).all():
            continue  # not a tile addressed through C's strides (indices wrapped, or wrong strides)
        i0, j0 = (int(v) for v in _split(lanes[0, 0], strides))
        past_m, past_n = (i0 + rows >= M) & on, (j0 + cols >= N) & on
        if past_m.any() or past_n.any():
            return pid, bool(past_m.any()), bool(past_n.any())
    return None


def _positions(idx, strides: tuple, N: int, view) -> torch.Tensor:
    """Positions (i * N + j) of C's elements among the stored element indices of C's buffer."""
    idx = torch.as_tensor(idx)
    idx = idx[view[idx]]
    i, j = idx // strides[0], idx % strides[0] // strides[1]
    return i * N + j


def _diagnose_values(launch: _Launch, tile_of) -> None:
    case, schedule = launch.case, launch.schedule
    what, M, N, K = case.what, case.M, case.N, case.K
    a, b, c = launch.a.double(), launch.b.double(), launch.c.double()
    tol = 8 * K * 2.0 ** -24  # float32 sums of K exact fp16 products, any order
    iters = schedule["iters"]
    bm, bn, bk = schedule["blocks"]
    for t in range(schedule["tiles"]):
        pid_m, pid_n = schedule["coords"][t]
        rs, cs = slice(pid_m * bm, min(M, (pid_m + 1) * bm)), slice(pid_n * bn, min(N, (pid_n + 1) * bn))
        got = c[rs, cs].flatten()
        parts = torch.stack([(a[rs, k * bk:(k + 1) * bk] @ b[k * bk:(k + 1) * bk, cs]).flatten()
                             for k in range(iters)])  # one row per K-iteration
        ref = parts.sum(0)
        error = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
        if error <= tol:
            continue
        name = _tile_name(schedule, t, M, N)
        pieces = schedule["pieces"][t]
        if torch.isnan(got).any():
            raise Failed(f"on {what}: {name} holds NaN: something read memory no program wrote, such as a slot of P "
                          "before its program wrote it (P holds garbage until then: never add into it)")
        why = _by_iterations(got, parts, pieces, error, tol)
        raise Failed(f"on {what}: {name} is wrong: {why}")


def _by_iterations(got, parts, pieces, error: float, tol: float) -> str:
    """Why a tile is wrong, from how often each of its K-iterations made it into the tile (a least-squares
    fit of the tile on its iterations' products)."""
    owner = pieces[-1][0]
    generic = ("and not by whole K-iterations of its own: did the owner add a partial of another tile (a wrong "
               "program's slot, or one read before its flag was up), or read it back in another layout?")
    if got.numel() < 2 * parts.shape[0]:
        return generic
    coef = torch.linalg.lstsq(parts.T, got[:, None]).solution.flatten()
    fit = (torch.linalg.vector_norm(parts.T @ coef - got) / torch.linalg.vector_norm(got)).item()
    whole = coef.round()
    if fit > 1e-3 or (coef - whole).abs().max() > 0.05:
        return generic
    if (whole == 1).all():
        return (f"right only to {error:.0e} (float32 allows {tol:.0e}): a partial lost precision on its way; keep "
                "partials in float32, as P is")
    times = {}
    for p, k0, k1 in pieces:
        seen = whole[k0:k1].unique().tolist()
        times[(p, k0, k1)] = seen[0] if len(seen) == 1 else None
    if any(v is None for v in times.values()) or any(v not in (0, 1, 2) for v in times.values()):
        odd = [k for k in range(parts.shape[0]) if whole[k] != 1]
        return (f"its K-iterations {odd} are counted {sorted(set(int(whole[k]) for k in odd))} times instead of "
                "once: check each piece's K range (k_begin, k_end) within the tile")
    lost = [p for (p, _, _), v in times.items() if v == 0]
    twice = [(p, k0, k1) for (p, k0, k1), v in times.items() if v == 2]
    if times[pieces[-1]] == 0:
        _, k0, k1 = pieces[-1]
        return (f"the owner's own K-iterations ({k0} to {k1 - 1}, program {owner}'s accumulator) are missing from it: "
                "did the owner replace its acc by a partial it read? Add each partial to the owner's acc")
    if lost and set(lost) == {p for p, _, _ in pieces} - {owner} and times[pieces[-1]] == 1:
        return (f"it holds only its owner's own K-iterations (program {owner}'s): add the partials of the lower "
                f"programs that hold its earlier K-iterations ({_programs(lost)})")
    if lost:
        return (f"the K-iterations of {_programs(lost)} are missing: the owner adds the partial of every lower "
                "program that holds a piece of the tile, down to the one holding its first K-iteration")
    if twice:
        p, k0, k1 = twice[0]
        return (f"program {p}'s K-iterations ({k0} to {k1 - 1}) are counted twice: add each partial once (and not "
                "the owner's own acc again)")
    return generic


def _diagnose_protocol(launch: _Launch) -> None:
    """The hand-over's order and its atomics, which only a GPU's parallel programs would punish."""
    what, watch = launch.case.what, launch.watch
    programs = launch.case.programs
    merged = {p: [] for p in range(programs)}
    for pid, item in watch.events:
        merged[pid].append(item)
    for pid, items in merged.items():
        partial_written, barrier_after, seen = False, False, {}
        for item in items:
            if item[0] == "barrier":
                barrier_after = partial_written
            elif item[0] == "p-store":
                partial_written, barrier_after = True, False
            elif item[0] == "p-load":
                q = item[1]
                if q == pid:
                    continue
                sems = [sem for sem, _ in seen.get(q, [])]
                if not sems:
                    raise Failed(f"on {what}: program {pid} reads program {q}'s partial without first waiting for "
                                  f"program {q}'s flag: on a GPU the partial may not be written yet (here programs "
                                  "run one after another, so it happened to be)")
                if not any(sem in ("acquire", "acq_rel") for sem in sems):
                    raise Failed(f"on {what}: program {pid} waits for program {q}'s flag, but with sem=\"{sems[-1]}\", "
                                  "which does not acquire: then the partial's load may move before the wait on a GPU "
                                  "and read the slot before the flag; wait with sem=\"acquire\"")
            else:
                _, op, q, written, sem, value = item
                if q == pid and written:  # raising its own flag
                    if op == "store":
                        raise Failed(f"on {what}: program {pid} raises its flag with tl.store: on a GPU that store "
                                      "may be seen before the partial; raise it with an atomic that releases, such as "
                                      "tl.atomic_xchg(..., sem=\"release\")")
                    if sem not in ("release", "acq_rel"):
                        raise Failed(f"on {what}: program {pid} raises its flag with sem=\"{sem}\", which does not "
                                      "release: then the partial may reach the owner after the flag; raise it with "
                                      "sem=\"release\"")
                    if not partial_written:
                        raise Failed(f"on {what}: program {pid} raises its flag before writing its partial to P: "
                                      "an owner could read the slot half-written; write the partial, then raise")
                    if not barrier_after:
                        raise Failed(f"on {what}: program {pid} raises its flag right after writing its partial, "
                                      "with no tl.debug_barrier() between: the atomic that raises it is made by one "
                                      "thread, and its release covers only that thread's own stores, not the other "
                                      "threads' parts of the partial; put tl.debug_barrier() between them")
                    partial_written = barrier_after = False
                elif q != pid and op == "load":
                    raise Failed(_plain_load(what, pid, q))
                elif q != pid and value is not None and (written is None or sem in ("acquire", "acq_rel")):
                    seen.setdefault(q, []).append((sem, value))  # a read, or a write that waits (not a lowering)


def _flags_left(launch: _Launch) -> None:
    raised = launch.flag_buffer[:launch.case.programs].nonzero().flatten().tolist()
    if raised:
        raise Failed(f"on {launch.case.what}: FLAGS is not all zeros after the launch ({_programs(raised)} left "
                      "raised): the owner lowers each flag it consumed, so that the next launch starts from zeros")
