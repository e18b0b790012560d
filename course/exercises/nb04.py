"""Notebook 04: what a wave reads, and the grouped launch order."""

from __future__ import annotations

import ast
import builtins
import collections.abc
import inspect
import numbers
import textwrap

import torch
import triton
import triton.language as tl

from course.exercises.core import (
    Failed,
    exercise,
    plural,
    require_function,
    require_jit,
    user_error,
)
from course.exercises.nb02 import whole_number

__all__ = ['check_wave_blocks', 'check_grouped_tile']


# --- calls an exercise must not make ------------------------------------------------------------------

_MISSING = object()


def resolve_name(node, namespace, local=frozenset()):
    """The object that a name or a dotted name (``tiled.waves``) stands for in ``namespace`` (none for
    the ``local`` names: arguments and variables of the function itself)."""
    if isinstance(node, ast.Name):
        return _MISSING if node.id in local else namespace.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        base = resolve_name(node.value, namespace, local)
        if base is _MISSING:
            return _MISSING
        try:
            return getattr(base, node.attr)
        except Exception:
            return _MISSING
    return _MISSING


def read_sources(fn):
    """(tree, namespace, local names) of ``fn`` and of each function of its own module it calls (plain
    or ``@triton.jit``), read with ``ast``; nothing for a function whose source Python cannot find (code
    given to ``python -c``)."""
    root = getattr(fn, "fn", fn)
    seen, todo = set(), [root]
    while todo:
        function = todo.pop(0)
        if id(function) in seen:
            continue
        seen.add(id(function))
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        except (OSError, TypeError, SyntaxError, IndentationError):
            continue
        namespace = {**vars(builtins), **getattr(function, "__globals__", {})}
        try:
            namespace.update(inspect.getclosurevars(function).nonlocals)
        except (TypeError, ValueError):
            pass
        local = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                local.update(a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not tree.body[0]:
                local.add(n.name)
        yield tree, namespace, local
        for node in ast.walk(tree):
            if isinstance(node, (ast.Name, ast.Attribute)):
                obj = resolve_name(node, namespace, local)
                inner = getattr(obj, "fn", obj)  # a helper of the learner's own: read it too
                if inspect.isfunction(inner) and inner.__module__ == root.__module__ and inner is not root:
                    todo.append(inner)


def forbidden_call(fn, forbidden, attributes: dict | None = None) -> str | None:
    """The label of the first call that ``fn`` makes (in its source, read with ``ast``, and in the
    source of the functions of its own module it calls) to an object of ``forbidden`` ((object,
    label) pairs, or a dict) or to an attribute whose name is a key of ``attributes`` ({name: label}); None if none
    (or when Python cannot find the source, as for code given to ``python -c``)."""
    attributes = attributes or {}
    targets = {}
    for obj, label in getattr(forbidden, "items", lambda: forbidden)():  # the first label wins where two
        # names are one object
        targets.setdefault(id(getattr(obj, "fn", obj)), label)
    for tree, namespace, local in read_sources(fn):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in attributes:
                return attributes[node.attr]
            if not isinstance(node, (ast.Name, ast.Attribute)):
                continue
            obj = resolve_name(node, namespace, local)
            if obj is _MISSING:
                continue
            label = targets.get(id(getattr(obj, "fn", obj)))
            if label:
                return label
    return None


def course_helper(fn) -> str | None:
    """``"tiled.waves"`` when ``fn`` is a function of the course itself (the solutions aside, which core
    refuses on their own), or wraps one without code of its own (``functools.partial``, a decorator's
    ``__wrapped__``): an answer that is the course's helper, given under the exercise's name
    (``wave_count = tiled.waves``). None otherwise."""
    import functools

    from course.exercises.core import module_of

    seen = 0
    while seen < 10:  # unwrap partials and decorators, never endlessly
        seen += 1
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif getattr(fn, "__wrapped__", None) is not None and not hasattr(fn, "exercise"):
            fn = fn.__wrapped__
        else:
            break
    home = module_of(fn)
    if not home.startswith("course.") or home == "course.solutions" or home.startswith("course.exercises"):
        return None
    name = getattr(getattr(fn, "fn", fn), "__name__", None)
    return f"{home.split('.')[-1]}.{name}" if name else None


def uses(fn, found) -> bool | None:
    """Whether ``found(node)`` holds for some ``ast`` node of ``fn``'s source (or of its own helpers');
    None when Python cannot find the source."""
    trees = [tree for tree, _, _ in read_sources(fn)]
    if not trees:
        return None
    return any(found(node) for tree in trees for node in ast.walk(tree))


def _sorts(node) -> bool:
    """A call of ``sorted(...)``, ``.sort()``, ``.argsort()`` or ``.msort()``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "sorted") or \
        (isinstance(f, ast.Attribute) and f.attr in ("sort", "sorted", "argsort", "msort"))


def _divides(node) -> bool:
    """``a / b`` or ``a /= b``: true division."""
    return isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.Div)


# --- 04 · exercise 1: the blocks each wave reads ----------------------------------------------------

def _grouped_order(num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The grouped launch order in torch (``tiled.grouped_tile``'s arithmetic, without a kernel)."""
    pid = torch.arange(num_pid_m * num_pid_n)
    first = pid // (group_m * num_pid_n) * group_m
    height = torch.clamp(num_pid_m - first, max=group_m)
    within = pid % (group_m * num_pid_n)
    return (first + within % height).int(), (within // height).int()


def _blocks(pid_m, pid_n, sms: int) -> list[tuple[int, int]]:
    rows, cols = pid_m.tolist(), pid_n.tolist()
    return [(len(set(rows[s:s + sms])), len(set(cols[s:s + sms]))) for s in range(0, len(rows), sms)]


def _orders():
    """(what, pid_m, pid_n, sms): the smallest first; row-major, grouped, column-major and shuffled
    orders, a partial last wave, more SMs than programs, one SM, and the notebook's 4096^2 on an H100."""
    def row_major(m, n):
        return _grouped_order(m, n, 1)

    def column_major(m, n):
        pid = torch.arange(m * n)
        return (pid % m).int(), (pid // m).int()

    shuffle = torch.randperm(7 * 5, generator=torch.Generator().manual_seed(4))
    rows, cols = row_major(7, 5)
    return [("6 x 9 tiles in row-major order", *row_major(6, 9), 12),
            ("6 x 9 tiles in grouped order (GROUP_M = 3)", *_grouped_order(6, 9, 3), 12),
            ("5 x 7 tiles in grouped order (GROUP_M = 2)", *_grouped_order(5, 7, 2), 4),
            ("4 x 6 tiles in column-major order", *column_major(4, 6), 5),
            ("3 x 4 tiles in row-major order", *row_major(3, 4), 20),
            ("2 x 3 tiles in grouped order (GROUP_M = 2)", *_grouped_order(2, 3, 2), 1),
            ("7 x 5 tiles in a shuffled order", rows[shuffle], cols[shuffle], 6),
            ("32 x 32 tiles in grouped order (GROUP_M = 8)", *_grouped_order(32, 32, 8), 132),
            ("20 x 13 tiles in grouped order (GROUP_M = 4)", *_grouped_order(20, 13, 4), 108)]


def _pairs(got, call: str) -> list[tuple[int, int]]:
    """The learner's result as a list of (A, B) pairs of ints, or a ✗ that says what shape to return."""
    shape = "return a list with one (A blocks, B blocks) pair per wave: [(a0, b0), (a1, b1), ...]"
    if isinstance(got, (str, bytes, dict)) or isinstance(got, numbers.Number) or got is None:
        raise Failed(f"{call} returned {_short(got)}: {shape}")
    if isinstance(got, collections.abc.Iterator):  # a generator: the caller can go through it once only
        raise Failed(f"{call} returned a {type(got).__name__}, which can be read only once (the plot after the "
                     f"check would find it empty): {shape} (list(...) of it, or a list comprehension)")
    try:
        items = list(got)
    except TypeError:
        raise Failed(f"{call} returned {_short(got)}: {shape}") from None
    pairs = []
    for item in items:
        try:
            a, b = item
        except (TypeError, ValueError):
            raise Failed(f"{call} returned {_short(got)}: each wave's entry must be two counts; {shape}") from None
        a, b = whole_number(a), whole_number(b)
        if a is None or b is None:
            raise Failed(f"{call} returned {_short(got)}: the counts must be whole numbers; {shape}")
        fraction = next((v for v in (a, b) if isinstance(v, float) and not v.is_integer()), None)
        if fraction is not None:
            raise Failed(f"{call} returned {_short(got)}: the counts must be whole numbers, one per wave "
                         f"({fraction} is not); {shape}")
        if isinstance(a, float) or isinstance(b, float):
            raise Failed(f"{call} returned {_short(got)}: the counts must be ints, not floats like "
                         f"{a if isinstance(a, float) else b!r} (a count of blocks is a whole number: len() gives "
                         "one, / always gives a float)")
        pairs.append((a, b))
    return pairs


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@exercise("wave_blocks", "Fill in the body of wave_blocks above: one (A blocks, B blocks) pair per wave")
def check_wave_blocks(wave_blocks) -> str:
    """Check ``wave_blocks(pid_m, pid_n, sms)``: for a launch order (program ``p`` takes tile
    ``(pid_m[p], pid_n[p])``, two int32 tensors as ``tiled.launch_order`` returns), one pair per wave
    of ``sms`` consecutive programs (the last may hold fewer): the distinct row blocks of A and the
    distinct column blocks of B its programs read."""
    from course import solutions, tiled

    require_function("wave_blocks", wave_blocks, ("pid_m", "pid_n", "sms"))
    own = course_helper(wave_blocks)
    if own:
        raise Failed(f"wave_blocks is the course's own {own}: write a function of your own that counts the blocks "
                     "(the distinct pid_m and pid_n of each wave)")
    helper = forbidden_call(wave_blocks, [(tiled.wave_footprint, "tiled.wave_footprint"),
                                          (tiled.waves_footprint, "tiled.waves_footprint"),
                                          (solutions.wave_blocks, "the solution")])
    if helper:
        raise Failed(f"wave_blocks calls {helper}, which does the counting for you: count the blocks yourself "
                     "(the distinct pid_m and pid_n of each wave)")
    cases = _orders()
    for what, pid_m, pid_n, sms in cases:
        call = f"on {what} with {plural(sms, 'SM')}, wave_blocks"
        try:
            got = wave_blocks(pid_m.clone(), pid_n.clone(), sms)
        except Exception as err:
            raise user_error(call, err) from None
        mine, want = _pairs(got, call), _blocks(pid_m, pid_n, sms)
        if mine != want:
            raise Failed(f"{call}: {_blocks_hint(mine, want, pid_m, pid_n, sms, wave_blocks)}")
    return f"right on {len(cases)} launch orders: row-major, grouped, column-major and shuffled, partial last waves"


def _blocks_hint(mine, want, pid_m, pid_n, sms: int, wave_blocks=None) -> str:
    """What a wrong list of (A, B) pairs most likely got wrong (``wave_blocks``: the learner's function, whose
    source tells some mistakes apart)."""
    programs = len(pid_m)
    sizes = [min(sms, programs - s) for s in range(0, programs, sms)]
    for other in (sms - 1, sms + 1):
        if other >= 1 and mine == _blocks(pid_m, pid_n, other):
            return (f"your waves are {other} programs long: a wave is exactly sms programs, one per SM, "
                    "the last one possibly fewer")
    if len(mine) != len(want):
        if len(mine) == 1 and mine == want[:1]:
            return ("one pair for the first wave only: return one pair per wave, in launch order (later waves "
                    "can read other blocks)")
        if len(mine) == 1 and mine == _blocks(pid_m, pid_n, programs):
            return ("one pair for the whole launch: the blocks a wave reads are those of its own sms programs; "
                    "return one pair per wave, in launch order")
        if len(mine) == 1:
            return f"one pair for {plural(len(want), 'wave')}: return one pair per wave, in launch order"
        if len(mine) == len(want) - 1 and sizes[-1] < sms:
            return (f"{len(mine)} pairs: the last wave holds only {sizes[-1]} programs, but it is a wave too "
                    "(its programs run at the same time): count it")
        if len(mine) == programs - sms + 1:
            return ("one pair per window of sms programs starting at every program: waves do not overlap, wave w "
                    "is programs w·sms up to (w+1)·sms − 1")
        return (f"{len(mine)} pairs for {programs} programs on {plural(sms, 'SM')}: one pair per wave of sms "
                "consecutive programs, the last one possibly shorter")
    if mine == [(b, a) for a, b in want]:
        return "A's and B's counts are swapped: A's blocks are rows of tiles (pid_m), B's are columns (pid_n)"
    sorted_counts = _blocks(pid_m.sort().values, pid_n.sort().values, sms)
    sorts = wave_blocks and uses(wave_blocks, _sorts)
    if mine == sorted_counts and sorts is not False:
        return ("these are the counts of pid_m and pid_n sorted before they are cut into waves: a wave is the next "
                "sms programs in launch order (program ids), so keep the order you were given")
    if mine == [(a, a) for a, _ in want]:
        return ("B's counts are A's: both count the distinct pid_m of each wave; B's blocks are the distinct "
                "columns of tiles, pid_n")
    if mine == [(b, b) for _, b in want]:
        return ("A's counts are B's: both count the distinct pid_n of each wave; A's blocks are the distinct "
                "rows of tiles, pid_m")
    if mine == [(n, n) for n in sizes]:
        hint = "every count equals the programs in the wave: count the distinct rows and columns, not the programs"
        tolist = wave_blocks and uses(wave_blocks, lambda n: isinstance(n, ast.Attribute) and n.attr == "tolist")
        if not tolist:  # a set of 0-d tensors: the likely cause, unless the elements were made ints
            hint += (" (a set() of a tensor's elements keeps them all apart, since each is a tensor of its own: "
                     ".tolist() gives plain ints)")
        return hint
    rows, cols = pid_m.tolist(), pid_n.tolist()
    if mine == [(len(set(rows[:s + sms])), len(set(cols[:s + sms]))) for s in range(0, programs, sms)]:
        return ("later waves count the blocks of the waves before them too: count each wave's programs on "
                "their own")
    span = lambda v: max(v) - min(v) + 1  # noqa: E731
    if mine == [(span(rows[s:s + sms]), span(cols[s:s + sms])) for s in range(0, programs, sms)]:
        return ("you count from the lowest row (column) to the highest; a wave may skip some in between: count "
                "the distinct ones")
    if mine == sorted_counts:
        return ("these are the counts of pid_m and pid_n in sorted order: a wave is the next sms programs in launch "
                "order (program ids), so keep the order you were given")
    w = next(i for i, (x, y) in enumerate(zip(mine, want)) if x != y)
    part, count = ("A row blocks", mine[w][0]) if mine[w][0] != want[w][0] else ("B column blocks", mine[w][1])
    return (f"wave {w} (programs {w * sms} to {w * sms + sizes[w] - 1}): {count} {part} is not what its "
            "programs read; each distinct pid_m of the wave is one block of A, each distinct pid_n one of B")


# --- 04 · exercise 2: the grouped launch order -------------------------------------------------------

# (num_pid_m, num_pid_n, GROUP_M): whole groups, short last groups (two of them 2 rows high and starting at
# an odd program id: 5 x 3 and 5 x 7 with GROUP_M = 3), a group taller than the grid, a single column, and a
# 4096^2 product in 128^2 tiles.
_ORDER_CASES = [(4, 6, 2), (5, 3, 3), (5, 7, 2), (5, 7, 3), (10, 3, 4), (2, 5, 4), (9, 1, 2), (32, 32, 8)]
# (num_pid_m, num_pid_n, GROUP_M, programs): the mapping called with tile ids from a loop, as a persistent
# kernel calls it (notebook 06), not with the program id.
_LOOP_CASES = [(5, 7, 3, 4), (10, 3, 4, 6)]


@triton.jit
def _tile_loop_kernel(m_ptr, n_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr,
                      MAPPING: tl.constexpr):
    """Program p maps tile ids p, p + PROGRAMS, ... with ``MAPPING`` and records each id's tile."""
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, PROGRAMS):
        pid_m, pid_n = MAPPING(tile, num_pid_m, num_pid_n, GROUP_M)
        tl.store(m_ptr + tile, pid_m)
        tl.store(n_ptr + tile, pid_n)


def _tile_loop(num_pid_m: int, num_pid_n: int, group_m: int, programs: int, mapping):
    from course import runtime

    tiles = num_pid_m * num_pid_n
    pid_m = torch.full((tiles,), -1, dtype=torch.int32, device=runtime.DEVICE)
    pid_n = torch.full((tiles,), -1, dtype=torch.int32, device=runtime.DEVICE)
    _tile_loop_kernel[(programs,)](pid_m, pid_n, num_pid_m, num_pid_n, GROUP_M=group_m, PROGRAMS=programs,
                                   MAPPING=mapping)
    return pid_m.cpu(), pid_n.cpu()


def _variant(pid, m: int, n: int, g: int, *, size=None, group=None, row_from_pid=False, column_from_pid=False):
    """The grouped order with one step changed: (pid_m, pid_n, where it is defined: a group height > 0)."""
    size = g * n if size is None else size  # programs per group
    first = (pid // size if group is None else group(pid)) * g
    height = torch.clamp(m - first, max=g)
    defined = height > 0
    height = torch.where(defined, height, torch.ones_like(height))
    within = pid % size
    return first + (pid if row_from_pid else within) % height, (pid if column_from_pid else within) // height, defined


# Mappings with one step wrong, and what each gets wrong: the first that explains the learner's tiles
# (everywhere it is defined, the first wrong program included) gets its hint.
_MAPPING_MISTAKES = [
    (dict(row_from_pid=True),
     "in the short last group the row is pid % height, but that group starts at program {start}, no multiple of its "
     "height {height}: the row within a group must count from the group's first program, (pid % the programs "
     "per group) % height, in the last group too"),
    (dict(column_from_pid=True),
     "pid_n counts from program 0: the column within a group comes from the program's position within its "
     "group (pid % the programs per group), not from pid itself"),
    (dict(group=lambda pid, g, n: pid // g),
     "pid // GROUP_M is not the group of pid: a group is GROUP_M whole rows of tiles, GROUP_M × num_pid_n programs"),
    (dict(size=lambda g, m, n: g * m),
     "a group holds GROUP_M rows of num_pid_n tiles each, so GROUP_M × num_pid_n programs, not GROUP_M × num_pid_m"),
    (dict(group=lambda pid, g, n: pid // n),
     "pid // num_pid_n is pid's row in row-major order, not its group: a group is GROUP_M rows of tiles, "
     "GROUP_M × num_pid_n programs"),
]


def _named_mistake(mine, reference, m: int, n: int, g: int) -> str | None:
    """The hint of the one-step mistake of :data:`_MAPPING_MISTAKES` that gives the learner's tiles, or None."""
    wrong = ((mine[0] != reference[0]) | (mine[1] != reference[1])).nonzero().flatten()
    if not len(wrong):
        return None
    first_wrong = int(wrong[0])
    pid = torch.arange(m * n)
    for mistake, hint in _MAPPING_MISTAKES:
        args = dict(mistake)
        if "size" in args:
            args["size"] = args["size"](g, m, n)
        if "group" in args:
            args["group"] = (lambda rule: lambda p: rule(p, g, n))(args["group"])
        pid_m, pid_n, defined = _variant(pid, m, n, g, **args)
        if defined[first_wrong] and torch.equal(pid_m[defined], mine[0][defined].long()) and \
                torch.equal(pid_n[defined], mine[1][defined].long()):
            start = first_wrong // (g * n) * g * n
            return hint.format(start=start, height=min(m - start // n, g))
    return None


@exercise("grouped_tile", "Write the body of grouped_tile above: the tile (pid_m, pid_n) of program pid")
def check_grouped_tile(grouped_tile) -> str:
    """Check a ``@triton.jit`` function ``grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)`` that
    returns program ``pid``'s tile in grouped order, by running it in a kernel on several grids and
    comparing with the course's order (``course.tiled.grouped_tile``); then called with tile ids from a
    loop, as a persistent kernel calls it."""
    from course import plots, solutions, tiled

    require_jit("grouped_tile", grouped_tile, ("pid", "num_pid_m", "num_pid_n", "GROUP_M"))
    own = course_helper(grouped_tile)
    if own:
        raise Failed(f"grouped_tile is the course's own {own}: write your own @triton.jit function in the cell "
                     "(the group of pid, its first row and height, then pid_m and pid_n)")
    helper = forbidden_call(grouped_tile, [(tiled.grouped_tile, "the course's tiled.grouped_tile"),
                                           (tiled.swizzled_tile, "the course's tiled.swizzled_tile"),
                                           (solutions.grouped_tile, "the solution"),
                                           (tl.swizzle2d, "tl.swizzle2d"), (tl.program_id, "tl.program_id"),
                                           (tl.num_programs, "tl.num_programs")],
                            {"swizzle2d": "tl.swizzle2d", "program_id": "tl.program_id",
                             "num_programs": "tl.num_programs"})
    if helper == "tl.swizzle2d":
        raise Failed("grouped_tile calls tl.swizzle2d, Triton's built-in for this very order: write the "
                     "arithmetic yourself (the group of pid, its first row and height, then pid_m and pid_n)")
    if helper in ("tl.program_id", "tl.num_programs"):
        raise Failed(f"grouped_tile calls {helper}: it must work from its arguments only, since pid is not always "
                     "the program's id (notebook 06's persistent kernel calls it with tile ids, several per program)")
    if helper:
        raise Failed(f"grouped_tile calls {helper}, which is the answer: write the arithmetic yourself "
                     "(the group of pid, its first row and height, then pid_m and pid_n)")
    for num_pid_m, num_pid_n, group_m in _ORDER_CASES:
        grid = f"{num_pid_m} x {num_pid_n} tiles with GROUP_M = {group_m}"
        try:
            mine = tiled.launch_order(num_pid_m, num_pid_n, group_m, mapping=grouped_tile)
        except Exception as err:
            raise user_error(f"on {grid}, your function", err) from None
        reference = _grouped_order(num_pid_m, num_pid_n, group_m)  # tiled.grouped_tile's order, without a launch
        pid_m, pid_n = mine
        if torch.equal(pid_m, reference[1]) and torch.equal(pid_n, reference[0]):
            raise Failed(f"on {grid}: pid_m and pid_n are swapped; return pid_m, pid_n in that order")
        named = _named_mistake(mine, reference, num_pid_m, num_pid_n, group_m)
        outside = ((pid_m < 0) | (pid_m >= num_pid_m) | (pid_n < 0) | (pid_n >= num_pid_n)).nonzero().flatten()
        if len(outside):
            p = int(outside[0])
            in_last_group = p >= (num_pid_m // group_m) * group_m * num_pid_n
            short = int(pid_m[p]) >= num_pid_m and num_pid_m % group_m and in_last_group
            if named:
                hint = f": {named}"
            elif short:
                hint = (": the last group has fewer rows when num_pid_m is no multiple of GROUP_M; its height "
                        "is the rows that are left (tl.minimum)")
            elif bool((pid_m - reference[0] == 1).all()) or bool((pid_n - reference[1] == 1).all()):
                hint = ": tiles are numbered from 0, pid_m up to num_pid_m − 1 and pid_n up to num_pid_n − 1"
            elif uses(grouped_tile, _divides):
                hint = ": pid_m must stay below num_pid_m and pid_n below num_pid_n (integer division: //)"
            else:
                hint = (": pid_m must stay below num_pid_m and pid_n below num_pid_n; check what each division and "
                        "remainder of yours divides by")
            raise Failed(f"on {grid}: program {p} got tile ({int(pid_m[p])}, {int(pid_n[p])}), outside the grid{hint}")
        picture = lambda: plots.launch_orders(  # noqa: E731
            {"yours": tiled.order_map(*mine, num_pid_m, num_pid_n),
             "the grouped order": tiled.order_map(*reference, num_pid_m, num_pid_n)}, title=grid)
        tiles = pid_m.long() * num_pid_n + pid_n.long()
        counts = torch.bincount(tiles, minlength=num_pid_m * num_pid_n)
        if (counts != 1).any():
            twice, never = int((counts > 1).sum()), int((counts == 0).sum())
            if named:
                why = named
            elif int(pid_m.max()) < group_m < num_pid_m:
                why = ("every program stays in the first GROUP_M rows: add the first row of the program's own "
                       "group to pid_m")
            else:
                why = "every program must get a tile of its own: check how pid_m and pid_n follow from the position"
            raise Failed(f"on {grid}: {plural(twice, 'tile')} taken by several programs and {never} by none: {why}",
                          picture())
        if not (torch.equal(pid_m, reference[0]) and torch.equal(pid_n, reference[1])):
            why = f": {named}" if named else f". {_order_hint(mine, reference, num_pid_m, num_pid_n, group_m)}"
            raise Failed(f"on {grid}: every tile is taken once, but not in the grouped order{why}", picture())
    for num_pid_m, num_pid_n, group_m, programs in _LOOP_CASES:
        grid = f"{num_pid_m} x {num_pid_n} tiles with GROUP_M = {group_m}"
        try:
            mine = _tile_loop(num_pid_m, num_pid_n, group_m, programs, grouped_tile)
        except Exception as err:
            raise user_error(f"on {grid}, called with tile ids from a loop, your function", err) from None
        reference = _grouped_order(num_pid_m, num_pid_n, group_m)
        if not (torch.equal(mine[0], reference[0]) and torch.equal(mine[1], reference[1])):
            raise Failed(f"on {grid}, called with tile ids from a loop ({programs} programs, program p taking tiles "
                         f"p, p + {programs}, ..., as notebook 06's persistent kernel does), grouped_tile gives "
                         "other tiles than for pid = the program's id: it must work from its arguments only, not "
                         "from which program runs it")
    return (f"right on {len(_ORDER_CASES)} grids, short last groups included, and called with tile ids from a "
            "loop")


def _order_hint(mine, reference, num_pid_m: int, num_pid_n: int, group_m: int) -> str:
    """What a permutation that is not the grouped order most likely got wrong."""
    pids = torch.arange(num_pid_m * num_pid_n)
    if torch.equal(mine[0], pids // num_pid_n) and torch.equal(mine[1], pids % num_pid_n):
        return "This is row-major order: GROUP_M is not used"
    if torch.equal(mine[0], pids % num_pid_m) and torch.equal(mine[1], pids // num_pid_m):
        return "This is column-major order over the whole grid: only GROUP_M rows form a group"
    first = int(((mine[0] != reference[0]) | (mine[1] != reference[1])).nonzero()[0])
    group_rows = first // (group_m * num_pid_n) * group_m
    if num_pid_m - group_rows < group_m:
        return ("The last group has fewer rows (num_pid_m is no multiple of GROUP_M): its height is the rows that "
                "are left, and both the row and the column within it depend on that height")
    return (f"Program {first} takes tile ({int(mine[0][first])}, {int(mine[1][first])}); in grouped order, "
            "consecutive programs go down the GROUP_M rows of their group, then one column right")
