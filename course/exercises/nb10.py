"""Notebook 10: layouts. A BlockedLayout whose loads are 16 bytes wide (read as Triton reads it: its
linear layout), and a swizzle that frees a shared-memory tile of bank conflicts (counted with the
course's bank model, ``layouts.wavefronts``)."""

from __future__ import annotations

import contextlib
import inspect
import math
import operator
import signal
import threading
import time
import types

from course.exercises.core import Failed, exercise, require_function, user_error

__all__ = ['check_vector_layout', 'check_bank_swizzle']


CALL_TIME_S = 10  # for a learner's vector_layout(), or all of one width's calls of their swizzle


class _Slow(BaseException):  # not an Exception: the learner's code and the check must not catch it
    pass


@contextlib.contextmanager
def _python_time_limit(seconds: int):
    """Raise :class:`_Slow` if the block (plain Python: the learner's function, no kernel) runs longer than
    ``seconds``, on a GPU machine as under the interpreter (main thread, POSIX only); an outer alarm (the
    check's time limit) is put back afterwards, less the time spent here."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def give_up(signum, frame):
        raise _Slow

    outer = signal.alarm(0)
    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds if not outer else min(seconds, outer))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.alarm(max(1, outer - int(time.monotonic() - started)))


def _of_course(value) -> str | None:
    """The module of the course that ``value`` is or comes from ("course.layouts"), or None."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
    else:
        try:
            module = getattr(getattr(value, "fn", value), "__module__", None)
        except Exception:  # an object whose attributes cannot be read
            return None
    if isinstance(module, str) and (module == "course" or module.startswith("course.")):
        return module
    return None


def _course_code(fn, seen=None) -> str | None:
    """The first piece of the course's own code that ``fn`` uses (``"layouts"``, ``"shared_offsets
    (course.layouts)"``), or None. Read from the compiled code, so comments and strings do not count;
    the learner's own functions that ``fn`` calls are followed."""
    seen = set() if seen is None else seen
    fn = getattr(fn, "fn", fn)
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return None
    seen.add(code)
    names, stack = [], [code]
    while stack:  # the function's code, then that of the functions and lambdas defined inside it
        c = stack.pop()
        names += c.co_names
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    for name in names:  # an import inside the function
        if name == "course" or name.startswith("course."):
            return name
    scope = dict(getattr(fn, "__globals__", {}))
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            pass
    names += [n for n in code.co_freevars if n not in names]
    for name in names:
        if name not in scope:
            continue
        value = scope[name]
        module = _of_course(value)
        if module:
            return name if module.rsplit(".", 1)[-1] == name else f"{name} ({module})"
        if inspect.isfunction(getattr(value, "fn", value)):  # a helper of the learner's: read it too
            inner = _course_code(value, seen)
            if inner:
                return inner
    return None


# --- 10 · vector_layout: a BlockedLayout whose loads are 16 bytes wide ---------------------------------

def _order_picture(layout, order):
    from course import layouts, plots

    owner = layouts.ownership(layout, (64, 64))
    corner = {key: value[:8, :16] for key, value in owner.items()}
    return plots.ownership({f"your layout (order={order}), rows 0-7, columns 0-15": corner}, number="register",
                           colour="warp", title="the register of its thread that holds each element")


@exercise("vector_layout", "Write vector_layout above: a BlockedLayout in which every thread loads 16 bytes at once")
def check_vector_layout(vector_layout) -> str:
    """Check ``vector_layout() -> gl.BlockedLayout`` for a 64 x 64 float16 tile, row-major in memory, on
    4 warps, read as Triton reads it (its linear layout, ``layouts.linear``): every element held by
    exactly one thread; each thread's registers 0-7, 8-15, ... hold 8 consecutive float16 of a row each
    (16 bytes: what Triton turns into one 16-byte load, LDG.E.128), and no longer runs; the runs one
    load instruction of a warp reads lie side by side in pairs along a row (whole 32-byte sectors).
    Any ``order`` that keeps those is right."""
    from course import layouts

    require_function("vector_layout", vector_layout, ())
    borrowed = _course_code(vector_layout)
    if borrowed:
        raise Failed(f"vector_layout uses the course's {borrowed}: build the layout yourself, with "
                      "gl.BlockedLayout and four lists")
    try:
        with _python_time_limit(CALL_TIME_S):
            layout = vector_layout()
    except _Slow:
        raise Failed(f"vector_layout did not return within {CALL_TIME_S} s: does every loop in it end?") from None
    except AssertionError as err:
        if str(err):
            raise user_error("your vector_layout", err) from None
        raise Failed("gl.BlockedLayout refused its arguments (an assertion without a message): its four lists "
                      "must have the same length, and each has two here, one for the rows and one for the "
                      "columns") from None
    except Exception as err:
        raise user_error("your vector_layout", err) from None
    if type(layout).__name__ != "BlockedLayout":
        raise Failed(f"vector_layout returned {type(layout).__name__ if layout is not None else 'None'}: return "
                      "gl.BlockedLayout(size_per_thread, threads_per_warp, warps_per_cta, order)")
    names = ("size_per_thread", "threads_per_warp", "warps_per_cta", "order")
    lists = [getattr(layout, name) for name in names]
    for name, values in zip(names, lists):
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                             for v in values):
            raise Failed(f"{name}={values!r}: pass a list of ints, one per dimension")
    size, threads, warps, order = (list(v) for v in lists)
    if len(size) != 2:
        raise Failed(f"the layout has rank {len(size)}: the tile is 2-D, so each list has two entries (rows, "
                      "columns)")
    if not len(threads) == len(warps) == len(order) == 2:
        raise Failed(f"the four lists have {len(size)}, {len(threads)}, {len(warps)} and {len(order)} entries: "
                      "each has two, one for the rows and one for the columns")
    for name, values in zip(names[:3], (size, threads, warps)):
        if any(v < 1 or v & (v - 1) for v in values):
            raise Failed(f"{name}={values}: every entry must be a power of two (1, 2, 4, 8, ...)")
    if math.prod(threads) != 32:
        raise Failed(f"threads_per_warp={threads} makes {math.prod(threads)} threads: a warp has 32")
    if math.prod(warps) != 4:
        raise Failed(f"warps_per_cta={warps} makes {math.prod(warps)} warps: the kernel runs on 4")
    if sorted(order) != [0, 1]:
        raise Failed(f"order={order}: order lists the dimensions, fastest first, each once")
    if getattr(layout, "cga_layout", None):
        raise Failed("cga_layout spreads a layout over a cluster of programs (CTAs): this tile lives in one "
                      "program, so leave cga_layout out")
    tile = [s * t * w for s, t, w in zip(size, threads, warps)]
    if tile[0] > 64 or tile[1] > 64:
        copies = int(layouts.ownership(layout, (64, 64))["copies"].max())
        raise Failed(f"the layout's tile is {tile[0]} x {tile[1]} (size x threads x warps per dimension), larger "
                      f"than the 64 x 64 tile: up to {copies} threads hold the same element. Keep each dimension's "
                      "product within 64")

    # Triton's own reading: one basis vector per bit of the register and lane index (layouts.linear).
    linear = layouts.linear(layout, (64, 64))
    reg = [tuple(b) for b in linear.reg_bases]
    lanes = [tuple(b) for b in linear.lane_bases]
    held = 1  # consecutive float16 of a row that one thread holds, in whatever registers
    while (0, held) in reg:
        held *= 2
    run = 1  # ... of them in consecutive registers 0, 1, 2, ...: what one vector load can fill
    while len(reg) > run.bit_length() - 1 and reg[run.bit_length() - 1] == (0, run):
        run *= 2
    if held < 8:
        if size[0] >= 8:
            raise Failed(f"size_per_thread={size} gives each thread a strip of {size[0]} float16 down a column: in a "
                          "row-major tile they are 128 bytes apart, and one load moves consecutive bytes only. "
                          "Which dimension is contiguous in memory?")
        raise Failed(f"each thread holds {held} consecutive float16 of a row, {2 * held} bytes: the widest load "
                      "moves 16 bytes at once. How many float16 is that?")
    if run < 8:
        raise Failed(f"order={order} numbers each thread's registers down its {size[0]} x {size[1]} block first: "
                      f"registers 0 and 1 hold elements (0, 0) and {reg[0]}, {128 * reg[0][0]} bytes apart, and a "
                      f"vector load fills consecutive registers from consecutive addresses, so Triton loads "
                      f"{2 * run} bytes at a time. order lists the dimensions fastest first, for a thread's "
                      "registers as for the lanes: which one is contiguous in memory?", _order_picture(layout, order))
    if run > 8:
        raise Failed(f"each thread holds {run} consecutive float16 of a row, {2 * run} bytes: that is {2 * run // 16} "
                      f"16-byte loads, and in each the lanes side by side along a row start {2 * run} bytes apart, "
                      "so every 32-byte sector a warp's load instruction fetches comes half used. Make a thread's "
                      "run exactly one 16-byte load")
    if (0, 8) not in lanes:
        raise Failed(f"threads_per_warp={threads} stacks a warp's 32 lanes down {threads[0]} rows, 16 bytes of "
                      "each: every 32-byte sector one load instruction of a warp fetches comes half used. Put "
                      "lanes side by side along a row")
    owner = layouts.ownership(layout, (64, 64))
    if (owner["copies"] != 1).any():
        raise Failed("some elements are held by several threads: the layout's tile must divide 64 x 64")
    return (f"every element held once, each thread's registers in runs of 8 float16 along a row: one 16-byte "
            f"load (LDG.E.128) per run, {(int(owner['register'].max()) + 1) // 8} per thread; each load "
            f"instruction of a warp reads {16 * threads[1]} contiguous bytes of each of {threads[0]} rows")


# --- 10 · bank_swizzle: a swizzle without bank conflicts, for rows of any width -------------------------

ROWS = 64  # rows of the tile
WIDTHS = (8, 4, 2, 16)  # 16-byte chunks a row: 128-byte rows (the notebook's) first, then 64, 32 and 256
CHUNK = 8  # float16 in a 16-byte chunk
LEAST = 4  # passes for 32 lanes of 16 bytes: 8 lanes (128 bytes) a pass


def _places(swizzle, chunks) -> list:
    """``swizzle(row, chunk, chunks)`` for every row and chunk of the tile, checked to be ints."""
    try:
        with _python_time_limit(CALL_TIME_S):
            return _places_unlimited(swizzle, chunks)
    except _Slow:
        raise Failed(f"for rows of {chunks} chunks, swizzle did not return within {CALL_TIME_S} s (for the "
                      f"{ROWS * chunks} chunks of a tile): does every loop in it end?") from None


def _places_unlimited(swizzle, chunks) -> list:
    places = []
    for row in range(ROWS):
        places.append([])
        for chunk in range(chunks):
            call = f"swizzle({row}, {chunk}, {chunks})"
            try:
                place = swizzle(row, chunk, chunks)
            except Exception as err:
                failure = user_error(f"{call} (your swizzle)", err)
                if isinstance(err, ZeroDivisionError) and chunks > 8:
                    failure = Failed(f"{failure}\n  hint: a row of {chunks} chunks is longer than one trip around the "
                                     "banks (8 chunks): something you divide by is 0 there")
                raise failure from None
            if place is None:
                raise Failed(f"{call} returned None: end swizzle with return, the chunk's place in its row")
            try:
                if isinstance(place, bool):
                    raise TypeError
                place = operator.index(place)
            except TypeError:
                kind = type(place).__name__
                division = " (divide with //, not /)" if isinstance(place, float) else ""
                raise Failed(f"{call} returned {'an' if kind[0] in 'aeiou' else 'a'} {kind}: return an int, the "
                              f"chunk's place in its row{division}") from None
            places[-1].append(place)
    return places


def _tile(places, chunks):
    """The offset, in float16, of every element of the tile under ``places``."""
    import torch

    place = torch.tensor(places)  # rows x chunks
    element = torch.arange(chunks * CHUNK)
    return torch.arange(ROWS)[:, None] * chunks * CHUNK + place[:, element // CHUNK] * CHUNK + element % CHUNK


def _quads(offsets):
    """The group of 4 banks (0-7: 16 bytes of the 128 a pass serves) each offset starts in."""
    return offsets * 2 // 16 % 8


def _swizzle_picture(places, chunks, first, title, passes=False):
    import torch

    from course import plots

    # The 32 rows a warp reads run across, the row's chunks down: 32 rows of 2 to 16 chunks drawn upright would
    # be a strip many times taller than wide, its numbers too small to read.
    rows = slice(first, first + 32)
    quads = _quads(_tile(places, chunks)[rows, ::CHUNK]).T
    fig = plots.category_maps({title: quads}, categories=8, label="banks",
                              names=[f"banks {4 * q}-{4 * q + 3}" for q in range(8)],
                              numbers={title: torch.tensor(places)[rows].T},
                              xlabel="row of the tile; number: the place of the chunk in its row",
                              ylabel="chunk")
    ax = fig.axes[0]
    ax.set_xticks(range(0, 32, 4), [str(first + k) for k in range(0, 32, 4)])
    ax.set_yticks(range(chunks))
    for edge in range(8, 32, 8) if passes else ():  # a column's passes: 8 lanes, one row each
        ax.axvline(edge - 0.5, color="black", linewidth=1.5)
    return fig


def _same_banks(rows, quads) -> tuple:
    """Two entries of ``rows`` whose reads share banks within one pass (8 lanes), the first found."""
    for start in range(0, 32, 8):
        seen = {}
        for lane in range(start, start + 8):
            quad = int(quads[lane])
            if quad in seen:
                return rows[seen[quad]], rows[lane]
            seen[quad] = lane
    return rows[0], rows[1]


def _triton_swizzle(chunks):
    """Triton's swizzle for a 64-row float16 tile of ``chunks`` chunks a row, as offsets (None where its
    NVMMASharedLayout is not one row-major tile: rows wider than its 128-byte swizzle)."""
    from triton.experimental.gluon import language as gl

    from course import layouts

    width = gl.NVMMASharedLayout.get_default_for([ROWS, chunks * CHUNK], gl.float16).swizzle_byte_width
    if chunks * 16 > width:
        return None, width
    # its XOR pattern: within each swizzle width, the 16-byte chunk's index XOR the index of the 128-byte line
    # (a trip around the banks) it lies in, modulo width // 16: a new phase every 128 bytes of rows
    phases = width // 16
    return layouts.shared_offsets((ROWS, chunks * CHUNK), vec=CHUNK, per_phase=max(1, 8 // chunks),
                                  max_phase=phases), width


@exercise("bank_swizzle", "Write swizzle(row, chunk, chunks) above: the place of each 16-byte chunk of a row, so "
                          "that no read of a warp has bank conflicts")
def check_bank_swizzle(swizzle) -> str:
    """Check ``swizzle(row, chunk, chunks) -> int``: the place, in 16-byte chunks from the start of its
    row, of chunk ``chunk`` of row ``row`` of a row-major float16 tile of 64 rows of ``chunks`` chunks
    (2, 4, 8, 16: rows of 32 to 256 bytes). Each row's chunks must stay in the row at different places,
    and with the course's bank model (``layouts.wavefronts``) every read of a warp, 16 bytes a lane,
    must take the least passes, 4: chunk c of rows 8k .. 8k + 31 (ldmatrix's and wgmma's column of
    8-row blocks), and whole consecutive rows (what a copy from global memory writes; on rows of up to 128
    bytes the permutation rule implies it, on 256-byte rows it is a rule of its own). Only the values are
    checked: any Python arithmetic that returns the right ints passes."""
    from course import layouts

    require_function("swizzle", swizzle, ("row", "chunk", "chunks"))
    borrowed = _course_code(swizzle)
    if borrowed:
        raise Failed(f"swizzle uses the course's {borrowed}: compute the place yourself, from row, chunk and "
                      "chunks (^, // and % are all it takes)")
    like_triton, unlike_triton = [], []
    for chunks in WIDTHS:
        width = f"rows of {chunks} chunks ({16 * chunks} bytes)"
        places = _places(swizzle, chunks)
        for row, row_places in enumerate(places):
            outside = next((c for c, p in enumerate(row_places) if not 0 <= p < chunks), None)
            if outside is not None:
                place = row_places[outside]
                scaled = any(all(p % unit == 0 for p in row_places) and
                             sorted(p // unit for p in row_places) == list(range(chunks)) for unit in (CHUNK, 16))
                units = " Is it counted in float16 or bytes? A place counts 16-byte chunks" if scaled else ""
                raise Failed(f"for {width}, swizzle({row}, {outside}, {chunks}) = {place}: outside the row, whose "
                              f"places are 0 to {chunks - 1}. A swizzle moves chunks within their row; it never "
                              f"pads it nor moves a chunk to another row.{units}")
            if len(set(row_places)) < chunks:
                first = next(c for c, p in enumerate(row_places) if row_places.index(p) != c)
                other = row_places.index(row_places[first])
                raise Failed(f"for {width}, row {row} stores chunks {other} and {first} both at place "
                              f"{row_places[first]}: one overwrites the other. Each row's chunks must go to different "
                              "places")
        if all(p == c for row_places in places for c, p in enumerate(row_places)):
            raise Failed(f"for {width}, your swizzle leaves every chunk where it is: a column of chunks then sits in "
                          "the same 4 banks in every trip around the banks, and a warp reading one takes up to 32 "
                          f"passes instead of {LEAST}")
        if all(row_places == places[0] for row_places in places):
            raise Failed(f"for {width}, your swizzle moves chunk c to the same place in every row: the rows still "
                          "line up in the banks as without a swizzle. The place must depend on the row")
        offsets = _tile(places, chunks)
        for first in range(0, 33, 8):
            rows = list(range(first, first + 32))
            for chunk in range(chunks):
                column = offsets[first:first + 32, chunk * CHUNK]
                passes = layouts.wavefronts(column, 2, vector=CHUNK)
                if passes > LEAST:
                    a, b = _same_banks(rows, _quads(column))
                    raise Failed(f"for {width}, a warp reading chunk {chunk} of rows {first}-{first + 31} (16 bytes a "
                                  f"lane) takes {passes} passes, {LEAST} at least: rows {a} and {b} put that chunk in "
                                  "the same 4 banks, and they are served in the same pass (8 lanes, 128 bytes)",
                                  _swizzle_picture(places, chunks, first, f"yours, {width}: colour = banks; "
                                                   "lines: the warp's passes, 8 rows each", passes=True))
        step = max(1, 32 // chunks)  # rows one warp reads whole
        for first in range(0, ROWS, step):
            lane = list(range(32))
            rows = [first + l // chunks for l in lane]
            chunk_of = [l % chunks for l in lane]
            read = offsets[rows, [c * CHUNK for c in chunk_of]]
            passes = layouts.wavefronts(read, 2, vector=CHUNK)
            if passes > LEAST:
                quads = _quads(read)
                a, b = _same_banks(lane, quads)
                raise Failed(f"for {width}, a warp reading rows {first}-{first + step - 1} whole (16 bytes a "
                              f"lane, as a copy from global memory writes them) takes {passes} "
                              f"passes, {LEAST} at least: chunks {chunk_of[a]} and {chunk_of[b]} of row {rows[a]} land "
                              "in the same 4 banks. Within a trip around the banks, a row's chunks need different "
                              "banks", _swizzle_picture(places, chunks, first // 32 * 32,
                                                        f"yours, {width}: colour = banks"))
        theirs, swizzle_bytes = _triton_swizzle(chunks)
        if theirs is not None:
            (like_triton if bool((theirs == offsets).all()) else unlike_triton).append((16 * chunks, swizzle_bytes))
    listed = lambda numbers: ", ".join(map(str, numbers[:-1])) + (" and " if len(numbers) > 1 else "") + \
        str(numbers[-1])  # noqa: E731
    verdict = (f"every read of a warp takes {LEAST} passes, the least for 16 bytes a lane, on rows of "
               f"{listed(sorted(16 * chunks for chunks in WIDTHS))} bytes")
    like_triton.sort()
    unlike_triton.sort()
    if like_triton:
        verdict += (f"; on rows of {listed([b for b, _ in like_triton])} bytes your placement is the one Triton "
                    f"picks (NVMMASharedLayout.get_default_for: {listed([s for _, s in like_triton])}-byte "
                    f"swizzle{'s' if len(like_triton) > 1 else ''})")
    if unlike_triton:
        verdict += (f"; on rows of {listed([b for b, _ in unlike_triton])} bytes it differs from Triton's XOR "
                    "swizzle, and is as free of conflicts")
    return verdict
