"""Notebook 12: the capstone."""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import io
import math
import random
import re
import sys
import textwrap
from pathlib import Path

import torch

from course import runtime
from course.exercises.core import (
    Failed,
    NotAttempted,
    OutOfBounds,
    compiles_for_a_gpu,
    exercise,
    is_stub,
    launches,
    plural,
    programs_of,
    require_function,
    require_jit,
    user_error,
)

__all__ = ['check_mode_choice', 'check_feed_forward']


# --- mode_choice: which course.gemm mode for which shape ----------------------------------------------------

_MODES = ("persistent", "streamk", "tail", "gluon")
_PASS_GEOMEAN, _PASS_ROW = 0.99, 0.90  # of the best recorded mode's speed; within 3 % counts as the best


@exercise("mode_choice", "Write choose_mode above: the course.gemm mode for an M x N x K bfloat16 product on an H100")
def check_mode_choice(choose_mode) -> str:
    """Check ``choose_mode(M, N, K, tile) -> str`` against the recorded benchmark (``gemm_h100-sxm``):
    on each of its bfloat16 rows (``tile``: the Triton kernel's ``(block_m, block_n)`` there), the mode
    chosen is scored by its recorded speed over the best recorded mode's (the persistent kernel's
    speed where the record has none for the mode: it does not apply there), within 3 % counting as a
    tie. Passes at a geometric mean of at least 0.99 and at least 0.90 on every row, for a rule that
    neither calls course.gemm's own choice nor the reference, reads no record and names no shape,
    returns a mode for any shape, and decides as the waves do at eight shapes near the record's
    (``_NEAR_THE_RECORD``, tile (128, 256)), where a rule that copies the record's shapes does not."""
    from course import records

    require_function("choose_mode", choose_mode, ("M", "N", "K", "tile"))
    _no_lookup(choose_mode)
    bench = records.load("gemm_h100-sxm")
    scored = []
    for r in (r for r in bench.rows if r["dtype"] == "bf16"):
        M, N, K = r["M"], r["N"], r["K"]
        tile = tuple(int(v) for v in re.match(r"(\d+)x(\d+)", r["config"]).groups())
        mode = _mode_of(choose_mode, M, N, K, tile)
        speed = r.get(f"{mode}_ratio") or r["persistent_ratio"]
        best_mode = max(_MODES, key=lambda m: r.get(f"{m}_ratio") or 0)
        score = speed / r[f"{best_mode}_ratio"]
        scored.append((1.0 if score >= 0.97 else score, r, mode, speed, best_mode, tile))
    worst = min(scored, key=lambda s: s[0])
    score, r, mode, speed, best_mode, tile = worst
    where = f"{r['name']} ({r['M']} x {r['N']} x {r['K']}, Triton tiles {tile[0]} x {tile[1]})"
    if len({s[2] for s in scored}) == 1:
        why = {"gluon": "the Gluon kernel is slower than the Triton kernel where the waves are full",
               "persistent": "which shapes leave the last wave of the Triton kernel's tiles mostly empty?",
               "tail": "a tail split helps only shapes with several waves and a thin last one",
               "streamk": "Stream-K splits only the last wave, and gains little on an H100 (notebook 09)"}[mode]
        raise Failed(f"choose_mode returns {mode!r} for every shape: at {where} that runs at {score:.2f} of the best "
                      f"recorded mode. {why[0].upper() + why[1:]}")
    geomean = math.exp(sum(math.log(s[0]) for s in scored) / len(scored))
    if score < _PASS_ROW:
        best = r[f"{best_mode}_ratio"]
        raise Failed(f"at {where} your {mode!r} runs at {speed:.2f}x cuBLAS's speed, the best mode, {best_mode!r}, "
                      f"at {best:.2f}x (recorded): {score:.2f} of the best. Count that shape's tiles and waves for "
                      "each kernel's tiles (an idle part of the last wave costs about 1 / waves of the run)")
    if geomean < _PASS_GEOMEAN:
        losses = ", ".join(f"{s[1]['name']} ({s[2]}: {s[0]:.2f})" for s in sorted(scored, key=lambda s: s[0])[:3])
        raise Failed(f"your choices reach {geomean:.3f} of the best recorded mode on average (geometric mean over "
                      f"{len(scored)} shapes, within 3 % counted as a tie), under {_PASS_GEOMEAN}; the biggest "
                      f"losses: {losses}")
    for M, N, K, tile in _shapes_beyond_the_record():  # a rule, not a fit: any product gets a mode
        _mode_of(choose_mode, M, N, K, tile, beyond=True)
    for what, M, N, K in _NEAR_THE_RECORD:  # ... and the waves' mode where the waves leave no doubt
        _follows_the_waves(choose_mode, what, M, N, K)
    hits = sum(s[0] == 1.0 for s in scored)
    outside = "; ".join(f"{s[1]['name']}: {s[2]!r} at {s[0]:.2f} of {s[4]!r}"
                        for s in sorted(scored, key=lambda s: s[0]) if s[0] < 1.0)
    return (f"your choices reach {geomean:.3f} of the best recorded mode on average and at least {score:.2f} on every "
            f"shape, within 3 % of the best on {hits} of {len(scored)}"
            + (f" (the others: {outside})" if outside else "") + f". {bench.banner}")


def _shapes_beyond_the_record():
    """Products the record does not hold, tiny to tall, with tiles a Triton kernel could run."""
    fixed = [(1, 1, 1, (16, 64)), (1, 128256, 4096, (16, 128)), (7, 300, 5000, (16, 64)),
             (100000, 64, 64, (128, 256)), (4096, 4096, 4096, (64, 64)), (2047, 3001, 129, (128, 128))]
    rng = random.Random()  # fresh shapes every run: a rule must not depend on the record's sizes
    tiles = [(16, 64), (16, 128), (64, 64), (64, 128), (128, 128), (128, 256), (256, 128)]
    drawn = [(rng.randint(1, 20000), rng.randint(1, 30000), rng.randint(1, 30000), rng.choice(tiles))
             for _ in range(20)]
    return fixed + drawn


# Shapes the record does not hold, near its own, asked with the Triton kernel's big tile, (128, 256): a rule that
# names the record's shapes (by ranges, remainders or a table of sizes) gives them the mode it gives everything it
# does not know, where a rule that follows the waves decides them as it decides the record's. The first five leave
# the last of 1 to 3 waves of Triton tiles 45 % idle or more, where the Gluon kernel's best tile fills its waves
# (1537, 1664 and 3100 cubed have idle last waves too, but Gluon tiles that fill under 90 %, where the record lets a
# rule doubt them); the last three fill their waves, where the Gluon kernel is the slower one.
_NEAR_THE_RECORD = (
    ("a square just under the record's 1536", 1473, 1473, 1473),
    ("a square between the record's 2048 and 3072", 2111, 2111, 2111),
    ("Llama-3 8B's qkv projection at 384 tokens", 384, 6144, 4096),
    ("Llama-3 8B's o projection at 1152 tokens", 1152, 4096, 4096),
    ("Llama-3 70B's qkv projection at 1000 tokens", 1000, 10240, 8192),
    ("a square between the record's 1536 and 2048", 1856, 1856, 1856),
    ("Llama-3 8B's qkv projection at 1408 tokens", 1408, 6144, 4096),
    ("Llama-3 70B's o projection at 960 tokens", 960, 8192, 8192),
)
_NEAR_TILE = (128, 256)


def _waves(M, N, tile=_NEAR_TILE, sms=132):
    """The wave arithmetic of the exercise's text: the Triton tiles, their waves and how full the last one
    is, and the same for the Gluon kernel's best tile (``gemm.gluon.tile_choices``)."""
    from course import gemm

    tiles = -(-M // tile[0]) * -(-N // tile[1])
    (gluon_tile, swap), *_ = gemm.gluon.tile_choices(M, N, sms)
    gluon_tiles = gemm.gluon.tiles(M, N, swap, gluon_tile)
    return tiles, -(-tiles // sms), ((tiles - 1) % sms + 1) / sms, ((gluon_tiles - 1) % sms + 1) / sms


def _sensible_modes(M, N, tile=_NEAR_TILE):
    """The modes the waves allow for an M x N output, ties included; None where they leave it open.
    At 1 to 3 waves whose last one is at most 60 % full (an idle part costs about 1 / waves of the run: 13 % or
    more) and Gluon tiles that fill at least 90 % of theirs: the Gluon kernel, or past one wave a split of the
    last one, the tail split's or Stream-K's (the record has them at 0.97 and 0.92 of Gluon at 512 x 10240 x
    8192); the persistent kernel pays for the idle SMs, and at one wave there is no tail to split and Stream-K,
    which then splits every tile, is slower still (0.66 against Gluon's 0.90 at 1536 cubed). Where the last wave
    is 90 % full or more and Gluon's tiles fill theirs worse: any mode but the Gluon kernel, which is the slower
    one where the waves are full (notebook 10); Stream-K and the tail split have next to nothing to split."""
    tiles, waves, last, gluon_last = _waves(M, N, tile)
    if waves <= 3 and last <= 0.6 and gluon_last >= 0.9:
        return {"gluon", "tail", "streamk"} if tiles > 132 else {"gluon"}
    if last >= 0.9 and gluon_last < last:
        return {"persistent", "streamk", "tail"}
    return None


def _follows_the_waves(choose_mode, what, M, N, K) -> None:
    """A ✗ for a mode the waves rule out at a shape near the record's (its tile: ``_NEAR_TILE``)."""
    sensible = _sensible_modes(M, N)
    mode = _mode_of(choose_mode, M, N, K, _NEAR_TILE, beyond=True)
    if sensible is None or mode in sensible:
        return
    tiles, waves, last, _ = _waves(M, N)
    if "gluon" in sensible:
        why = (f"there {tiles} Triton tiles of 128 x 256 make {plural(waves, 'wave')} of 132, the last only "
               f"{last:.0%} full, and the Gluon kernel's best tile fills its waves")
    else:
        why = (f"there {tiles} Triton tiles of 128 x 256 fill their {plural(waves, 'wave')} of 132 (the last "
               f"{last:.0%} full), where the Gluon kernel is the slower one")
    fits = (" A rule that names the record's shapes (by ranges, remainders or a table of sizes) fits its rows, not "
            "the waves." if _names_sizes(choose_mode) else "")
    raise Failed(f"choose_mode({M}, {N}, {K}, {_NEAR_TILE}), {what} (not in the record), returned {mode!r}: your "
                  f"rule does not follow the waves off the record: {why}.{fits} Decide from the tile counts and how "
                  "full the last wave is")


def _names_sizes(choose_mode) -> bool:
    """Whether the rule's own source names sizes: M, N or K between two numbers (``1500 < M < 1600``, or
    ``M > 400 and M < 600``), a remainder of one by a size (``M % 1024``), a string of them looked up
    (``f"{M}x{N}" in TABLE``), or any value looked up in a collection of numbers or compared equal to a number
    of 16 or more (``tiles in (72, 96)``, ``tiles == 561``). A threshold on a count of tiles or on how full a wave
    is names no size."""
    fn = inspect.unwrap(choose_mode)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        params = list(inspect.signature(fn).parameters)[:3]
    except (OSError, TypeError, SyntaxError, IndentationError, ValueError):
        return False
    globals_ = getattr(fn, "__globals__", {})

    def number(node, least=2):
        return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
            not isinstance(node.value, bool) and abs(node.value) >= least

    def sized(node):  # a number other than 0 and 1, or arithmetic on numbers only (132 * 3)
        if isinstance(node, ast.BinOp):
            return (sized(node.left) or number(node.left, 0)) and (sized(node.right) or number(node.right, 0)) \
                and (sized(node.left) or sized(node.right))
        return number(node)

    def param(node):  # M itself, or a string made of M, N, K
        if isinstance(node, ast.Name):
            return node.id in params
        return isinstance(node, ast.JoinedStr) and any(isinstance(n, ast.Name) and n.id in params
                                                       for n in ast.walk(node))

    def table(node):  # a collection of numbers, written out or held in a global
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return sum(number(e) for e in node.elts) >= 2
        return isinstance(node, ast.Name) and isinstance(globals_.get(node.id), (set, frozenset, list, tuple, dict))

    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and param(node.left) and number(node.right, 16):
            return True
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if len(sides) >= 3 and any(param(x) for x in sides[1:-1]) and sized(sides[0]) and sized(sides[-1]):
                return True
            for op, a, b in zip(node.ops, sides, sides[1:]):
                if isinstance(op, (ast.In, ast.NotIn)) and (param(a) or isinstance(a, ast.Name)) and table(b):
                    return True
                if isinstance(op, (ast.Eq, ast.NotEq)) and ((isinstance(a, ast.Name) and number(b, 16))
                                                           or (isinstance(b, ast.Name) and number(a, 16))):
                    return True
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            bounds = {}
            for v in node.values:
                if isinstance(v, ast.Compare) and len(v.ops) == 1 and isinstance(v.ops[0], (ast.Lt, ast.LtE, ast.Gt,
                                                                                              ast.GtE)):
                    a, b = v.left, v.comparators[0]
                    name = a.id if param(a) and sized(b) else (b.id if param(b) and sized(a) else None)
                    if isinstance(name, str):
                        bounds[name] = bounds.get(name, 0) + 1
            if any(n >= 2 for n in bounds.values()):
                return True
    return False


def _mode_of(choose_mode, M, N, K, tile, beyond=False) -> str:
    """``choose_mode(M, N, K, tile)``: one of the modes, from a rule that does not call course.gemm's own
    choice, the reference or the record; else a ✗."""
    call = f"choose_mode({M}, {N}, {K}, {tile})"
    with _watching_calls(choose_mode) as seen:
        try:
            mode = choose_mode(M, N, K, tile)
        except Exception as err:
            if seen:  # what it called is the first thing wrong, whatever that call raised
                raise Failed(f"choose_mode calls {seen[0]}: {_CALLED[seen[0]]}") from None
            if beyond:
                raise Failed(f"{call}, a shape beyond the record, raised {type(err).__name__}: {err}. Your rule "
                              "passes the record: make it work for any product (one token, a tiny or a huge "
                              "dimension)") from None
            raise _host_error(call, choose_mode, err) from None
    if seen:
        raise Failed(f"choose_mode calls {seen[0]}: {_CALLED[seen[0]]}")
    if not isinstance(mode, str):
        raise Failed(f"{call} returned {type(mode).__name__} {mode!r}: return a mode's name, a str")
    if mode == "auto":
        raise Failed(f"{call} returned 'auto': that asks course.gemm to choose, and choosing is the exercise. "
                      f"Return one of {', '.join(repr(m) for m in _MODES)}")
    if mode not in _MODES:
        raise Failed(f"{call} returned {mode!r}: return one of {', '.join(repr(m) for m in _MODES)}")
    return str(mode)


def _host_error(call: str, fn, err: Exception) -> Failed:
    """``user_error`` for an error raised in host code (a plain Python function): the line of the learner's
    function it came from, and for a missing attribute a hint about host code, not a kernel's."""
    import traceback

    failed = user_error(call, err)
    text = str(failed).split("\n  hint:")[0]
    try:
        source_file = inspect.getsourcefile(inspect.unwrap(fn))
    except TypeError:
        source_file = None
    theirs = [f for f in traceback.extract_tb(err.__traceback__) if source_file and f.filename == source_file]
    where = f"\n    at: {theirs[-1].line.strip()}" if theirs and theirs[-1].line else ""
    if isinstance(err, AttributeError):
        return Failed(f"{text}{where}\n  hint: an object has no such attribute: a misspelt name, or an object of "
                      "another kind than the code expects (tile is a tuple, (block_m, block_n))")
    hint = str(failed)[len(text):]
    return Failed(f"{text}{where}{hint}")


_CALLED = {
    "gemm.choose_mode": "that is course.gemm's own choice: the exercise is to make it yourself, from the waves",
    "gemm.gluon_tiles_for": "that is course.gemm's own test of where the Gluon tiles win: count the Gluon kernel's "
                            "tiles and waves yourself (gemm.gluon.tile_choices and gemm.gluon.tiles)",
    "the reference solution": "write your own rule (the solution is there for when you are stuck, not to be called)",
    "records.load": "a rule that reads the record it is scored against fits that record, not the waves: decide "
                    "from M, N, K and the tile",
    "open()": "a rule that reads a file (the record?) fits what it reads, not the waves: decide from M, N, K and "
              "the tile",
}


@contextlib.contextmanager
def _watching_calls(yours):
    """The names (keys of ``_CALLED``) of the forbidden functions called inside the block, at any depth
    and under any alias (a profile hook sees code objects, not names), but ``yours`` itself (the
    reference, checked as it is, passes)."""
    from course import records, solutions
    from course.gemm import config as gemm_config

    named = [(gemm_config.choose_mode, "gemm.choose_mode"), (gemm_config.gluon_tiles_for, "gemm.gluon_tiles_for"),
             (solutions.choose_mode, "the reference solution"), (records.load, "records.load"),
             (records.measured_or_recorded, "records.load")]
    codes = {inspect.unwrap(f).__code__: name for f, name in named}  # unwrap: some are lru_cache'd
    codes.pop(getattr(inspect.unwrap(yours), "__code__", None), None)
    opens = (io.open, open)
    seen: list[str] = []

    def watch(frame, event, arg):
        if event == "call":
            name = codes.get(frame.f_code)
            if name and name not in seen:
                seen.append(name)
        elif event == "c_call" and any(arg is o for o in opens) and "open()" not in seen:
            seen.append("open()")

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def _no_lookup(choose_mode) -> None:
    """A ✗ for a rule that names shapes (``M == 1536``, ``M in (16, 64)``, ``table[M, N, K]``) or reads a
    record held in a global: it fits the 47 rows it is scored on, not the waves."""
    from course import records

    fn = inspect.unwrap(choose_mode)
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    globals_ = getattr(fn, "__globals__", {})

    def names(c):
        yield from c.co_names
        for const in c.co_consts:
            if inspect.iscode(const):
                yield from names(const)

    for name in dict.fromkeys(names(code)):
        value = globals_.get(name)
        if isinstance(value, records.Record) or (isinstance(value, list) and value and isinstance(value[0], dict)
                                                 and "persistent_ratio" in value[0]):
            raise Failed(f"choose_mode reads {name}, a record of the benchmark: a rule that looks at the figures "
                          "it is scored against fits them, not the waves; decide from M, N, K and the tile")
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return
    params = list(inspect.signature(fn).parameters)[:3]

    def mentions(node, only_names=False):
        if only_names:  # the parameter itself, or a tuple of them: not arithmetic on it
            if isinstance(node, ast.Name):
                return node.id in params
            return isinstance(node, (ast.Tuple, ast.List)) and any(mentions(e, True) for e in node.elts)
        return any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(node))

    def number(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1)

    def sizes(node):  # a number other than 0 and 1, a collection of numbers, or a global one (M in SHAPES)
        if isinstance(node, ast.Constant):
            return number(node.value)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(sizes(e) for e in node.elts)
        if isinstance(node, ast.Name) and node.id not in params:  # M == N compares two sizes: a fair rule
            value = globals_.get(node.id)
            return number(value) or isinstance(value, (set, frozenset, list, tuple, dict))
        return False

    for node in ast.walk(tree):
        found = None
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:]):
                if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                    if (mentions(left, True) and sizes(right)) or (mentions(right, True) and sizes(left)
                                                                   and not isinstance(op, (ast.In, ast.NotIn))):
                        found = node
        elif isinstance(node, ast.Subscript) and mentions(node.slice):
            found = node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and any(mentions(a) for a in node.args):
            found = node
        elif isinstance(node, ast.Match) and mentions(node.subject):
            found = node.subject
        if found is not None:
            text = ast.get_source_segment(source, found) or "a comparison of the sizes"
            raise Failed(f"choose_mode picks by exact sizes ({text.splitlines()[0][:60]}): a rule that names the "
                          "record's shapes fits those rows, not the waves. Decide from the tile counts and how full "
                          "the last wave is")


# --- feed_forward: a transformer block's MLP, bias and GELU fused into the first GEMM ---------------------------

_FFN_PARAMS = ("X", "W", "B", "H", "M", "N", "K", "stride_xm", "stride_xk", "stride_wn", "stride_wk", "stride_b",
               "stride_hm", "stride_hn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_SMS", "EVEN_K")

# The kernel's blocks in the check: non-square, at least 16 (tl.dot on a GPU), K's the smallest.
_BM, _BN, _BK, _PROGRAMS = 16, 32, 16, 3

# float32's unit roundoff times a few roundings, relative to the larger of |H| and 1: where a wrong result that
# the check diagnoses (a rounding to 16 bits, a wrong view) lies, and how close it comes.
_F32_TOL = 32 * torch.finfo(torch.float32).eps
# H's tolerance, per element, as notebook 08's gelu check derives it: |H - GELU(pre)| <= 2^-21 (|pre| + |GELU(pre)|).
# The pre-activation is exact (exact inputs, exact float32 sums), so all the error is the GELU's: a dozen float32
# operations, each rounding by 2^-24 of its result, reach H through 0.5 x (1 + tanh), which cancels for negative x.
# A sound formula stays within 1 unit of 2^-24 (|pre| + |H|) under the interpreter, 3 with a GPU's tl.exp; 8 units
# leave room, and a constant short of digits shows where the constants matter, |pre| near 1: 0.79788 for
# sqrt(2 / pi) is 15 to 19 units off at -1.25 .. -0.75, 0.0447 for 0.044715 hundreds.
_GELU_TOL = 2.0 ** -21
# float16's unit roundoff (2^-11) for rounding h, once more for rounding y, twice that for the products' sums
_F16_TOL = 4 * 2.0 ** -11


def _gelu64(x):
    """GELU's tanh form in float64 (what the block uses)."""
    return torch.nn.functional.gelu(x, approximate="tanh")


@exercise("feed_forward", "Write ffn_up_kernel's body (H = gelu(X @ W.T + B) with the stages) and feed_forward above")
def check_feed_forward(ffn_up_kernel, feed_forward) -> str:
    """Check ``ffn_up_kernel`` (the signature of ``solutions.ffn_up_kernel``), ``H = gelu(X @ W.T + B)``
    with bias and GELU (tanh form) in the epilogue, launched by the check with 16 x 32 x 16 tiles on 3
    programs: one tile, whole tiles, ragged M, N and K, large pre-activations, pre-activations near +-1,
    every operand strided (the output too), exact inputs so the result must be float32-exact (within
    notebook 08's gelu tolerance); then ``feed_forward(x, w1, b1, w2, b2)``, ``gelu(x @ w1.T + b1) @
    w2.T + b2`` in float16, at one token, a hidden size in whole tiles with a ragged width, a ragged strided
    batch, a shape with more tiles than SMs and a random shape, against float64:
    the first launch of the kernel checked before it runs (tensors, h's dtype and shape, sizes, strides,
    EVEN_K, programs against NUM_SMS), exactly two kernels (the learner's, then a GEMM with its bias), no
    torch arithmetic, fill or copy, no course helper that does it all."""
    require_jit("ffn_up_kernel", ffn_up_kernel, _FFN_PARAMS, kind="kernel")
    require_function("feed_forward", feed_forward, ("x", "w1", "b1", "w2", "b2"))
    _not_the_course_kernel(ffn_up_kernel)
    if is_stub(ffn_up_kernel):
        raise NotAttempted("Write ffn_up_kernel's body above first (H = gelu(X @ W.T + B), bias and GELU in the "
                           "epilogue, with the stages)")
    cases = _kernel_cases()
    for what, inputs in cases:
        _run_kernel_case(ffn_up_kernel, what, *inputs)
    _each_program_its_own_tiles(ffn_up_kernel)
    if is_stub(feed_forward):
        raise NotAttempted(f"ffn_up_kernel is right on all {len(cases)} cases. Now write feed_forward above: "
                           "ffn_up_kernel for the first GEMM, a GEMM with its bias for the second")
    shapes = _block_shapes()
    for what, M, d, hidden, strided in shapes:
        _run_block(ffn_up_kernel, feed_forward, what, M, d, hidden, strided)
    if runtime.INTERPRET:  # the interpreter forgives what the compiler refuses: build it for an H100 too (~10 s)
        x = torch.empty(64, 64, dtype=torch.float16)
        compiles_for_a_gpu(ffn_up_kernel, x, x, x[0], x, 64, 64, 64, 64, 1, 64, 1, 1, 64, 1, BLOCK_M=32, BLOCK_N=32,
                            BLOCK_K=16, NUM_SMS=4, EVEN_K=True)
    return (f"ffn_up_kernel is float32-exact on {len(cases)} cases (ragged, strided, large and near-±1 "
            f"pre-activations), and feed_forward matches float64 on {len(shapes)} shapes with two kernels each: yours, "
            "with bias and GELU in its epilogue, and the second GEMM with its bias")


def _not_the_course_kernel(kernel) -> None:
    """A ✗ for a kernel that is, or calls, the course's fused linear layer or the reference solution."""
    from course import epilogues, mlp, solutions

    theirs = {id(epilogues.fused_linear_kernel): "the course's fused_linear_kernel (notebook 08)",
              id(mlp.swiglu_kernel): "the course's swiglu_kernel (notebook 11)"}
    if id(kernel) in theirs:
        raise Failed(f"that is {theirs[id(kernel)]}: write your own kernel (exercises.solution('feed_forward') "
                      "shows one when you are stuck)")
    fn = getattr(kernel, "fn", kernel)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return
    theirs[id(solutions.ffn_up_kernel)] = "the reference solution's ffn_up_kernel"  # passed as is, it passes
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = _resolve(node.func, getattr(fn, "__globals__", {}))
            if called is not None and id(called) in theirs:
                raise Failed(f"ffn_up_kernel calls {theirs[id(called)]}: write the GEMM and its epilogue with the "
                              "stages yourself")


def _resolve(node, namespace):
    """The object an expression ``a.b.c`` names in ``namespace`` (None if it names nothing there)."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, namespace)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _exact(shape, scale, generator, low=-64, high=64):
    """Random multiples of ``1 / scale`` in [low, high] / scale: exact in float16, their products and
    sums (a few dozen) exact in float32, on the interpreter and on tensor cores alike, and too fine
    for float16 (a sum rounded to 16 bits shows)."""
    return torch.randint(low, high + 1, shape, generator=generator).to(torch.float16) / scale


def _kernel_cases():
    """(what, (x, w, b, h, buffer)) of each kernel case, smallest first."""
    cases = []
    dev = runtime.DEVICE
    for what, M, N, K, kind in (("one tile (16 x 32 x 16)", 16, 32, 16, ""),
                                ("whole tiles, two per program (48 x 64 x 32)", 48, 64, 32, ""),
                                ("ragged M, N and K (37 x 45 x 40)", 37, 45, 40, ""),
                                ("large pre-activations (|x W^T + b| up to 60, 16 x 32 x 16)", 16, 32, 16, "large"),
                                ("pre-activations near -1 and 1, where GELU's constants show (16 x 32 x 16)", 16, 32,
                                 16, "near one"),
                                ("every operand strided: X column-major, W's rows 2K apart, B every 3rd element, "
                                 "H column-major (33 x 40 x 24)", 33, 40, 24, "strided")):
        g = torch.Generator().manual_seed(M * 1009 + N * 31 + K)
        x, w, b = _exact((M, K), 64, g), _exact((N, K), 128, g), _exact((N,), 8, g, -16, 16)
        if kind == "large":
            b[0::4], b[1::4] = 40.0, -40.0  # x W^T within +-16 of it
            x = _exact((M, K), 32, g)
        if kind == "near one":  # x W^T within +-0.3 of b; three columns in four below 0, where 1 + tanh cancels
            b = torch.tensor([-1.0, -1.25, -0.75, 1.0], dtype=torch.float16).repeat(N // 4)
            x = _exact((M, K), 64, g, -8, 8)
        x, w, b = x.to(dev), w.to(dev), b.to(dev)
        buffer = torch.full((M * N + 2 * (M + N + K) * 16,), float("nan"), device=dev)
        h = buffer[:M * N].view(M, N)  # the rest of the buffer catches stores past H
        if kind == "strided":  # between the elements: other values, which a wrong stride reads instead
            x = x.T.contiguous().T
            w = torch.cat([w, torch.full_like(w, 3.0)], dim=1)[:, :K]
            b = torch.stack([b, torch.full_like(b, -5.0), torch.full_like(b, 7.0)], dim=1).view(-1)[::3]
            h = buffer[:M * N].view(N, M).T
        cases.append((what, (x, w, b, h, buffer)))
    return cases


def _launch_up(kernel, x, w, b, h, programs=_PROGRAMS, grid=None):
    M, K = x.shape
    N = w.shape[0]
    kernel[(grid or programs,)](x, w, b, h, M, N, K, *x.stride(), *w.stride(), b.stride(0), *h.stride(),
                                BLOCK_M=_BM, BLOCK_N=_BN, BLOCK_K=_BK, NUM_SMS=programs, EVEN_K=K % _BK == 0,
                                num_warps=4, num_stages=2)


def _within(out, ref, tol) -> bool:
    """Every element within ``tol`` of the reference, relative to its size (to 1 where it is smaller)."""
    out = out.detach().double().cpu()
    if out.shape != ref.shape or not torch.isfinite(out).all():
        return False
    return bool(((out - ref).abs() <= tol * ref.abs().clamp(min=1.0)).all())


def _run_kernel_case(kernel, what, x, w, b, h, buffer) -> None:
    M, K = x.shape
    N = w.shape[0]
    try:
        _launch_up(kernel, x, w, b, h)
    except Exception as err:
        raise user_error(f"on {what}, your kernel", err) from None
    past = torch.nonzero(~torch.isnan(buffer[M * N:].cpu())).flatten() + M * N
    if len(past):
        if set(past.tolist()) <= _unmasked_offsets(h):
            raise Failed(f"on {what}: the kernel stored past H's last row or column, where the last, partial tiles "
                          "reach: mask the store to rows < M and columns < N (a plain tl.store needs mask=, an output "
                          "view masks to the sizes it is given)")
        raise Failed(f"on {what}: the kernel stored past the end of H: H's output view is M x N (M rows, N columns) "
                      "with H's strides, stride_hm and stride_hn")
    xd, wd, bd = x.double().cpu(), w.double().cpu(), b.double().cpu()
    pre = xd @ wd.T + bd
    ref = _gelu64(pre)
    out = h.double().cpu()
    missing = torch.isnan(out) & ~torch.isnan(ref)
    if missing.all():
        raise Failed(f"on {what}: nothing was stored into H: for every tile of the schedule, reduce it over K, "
                      "apply the epilogue and store it through an output view of H")
    if missing.any() and not (torch.isnan(out) & (pre.abs() > 10)).any():
        _diagnose_holes(what, missing, x, w, b, h)
    if not torch.isfinite(out).all():
        large = ~torch.isfinite(out) & (pre.abs() > 10)
        if large.any():
            raise Failed(f"on {what}: NaN or inf where x W^T + b is large (|.| > 10): your tanh overflows (exp of a "
                          "large number is inf, and inf / inf is NaN). Compute it from exp(-2|u|), which stays in "
                          "(0, 1] (notebook 08's stable_tanh)")
        raise Failed(f"on {what}: H holds NaN or inf where the right answer is finite: mask the loads of the last, "
                      "partial tiles (other=0), and check what each view reads")
    if _gelu_within(out, ref, pre):
        return
    _diagnose_up(what, x, w, b, h, xd, wd, bd, pre, ref, out)


def _gelu_off(out, ref, pre):
    """Each element's distance from the reference in units of float32's rounding, 2^-24 (|pre| + |ref|)."""
    return (out.detach().double().cpu() - ref).abs() / (2.0 ** -24 * (pre.abs() + ref.abs())).clamp(min=1e-300)


def _gelu_within(out, ref, pre) -> bool:
    """Every element of H within ``_GELU_TOL`` of GELU(pre), as notebook 08's check has it."""
    if out.shape != ref.shape or not torch.isfinite(out).all():
        return False
    return bool((_gelu_off(out, ref, pre) <= _GELU_TOL / 2.0 ** -24).all())


def _unmasked_offsets(h) -> set:
    """The offsets from H's first element that the check's tiles reach with H's own strides, past H's last
    row or column: where an unmasked store (or one masked a row or a column too far) lands."""
    M, N = h.shape
    rows = torch.arange(-(-M // _BM) * _BM)[:, None]
    cols = torch.arange(-(-N // _BN) * _BN)[None, :]
    outside = (rows >= M) | (cols >= N)
    return set((rows * h.stride(0) + cols * h.stride(1))[outside].tolist())


def _strides_that_store(missing, x, w, b, h):
    """``(strides, whose)``: a pair of strides other than H's whose M x N view of H's memory reaches exactly
    the elements of H that were stored, and the tensors it belongs to ("" for none); None if no such pair."""
    M, N = missing.shape
    K = x.shape[1]
    own = tuple(h.stride())
    offsets = torch.arange(M)[:, None] * own[0] + torch.arange(N)[None, :] * own[1]
    stored = set(offsets[~missing].tolist())
    named = {"X's strides": tuple(x.stride()), "W's strides": tuple(w.stride()),
             "W's strides the wrong way round": tuple(w.stride())[::-1],
             "X's strides the wrong way round": tuple(x.stride())[::-1], "H's strides the wrong way round": own[::-1]}
    values = sorted({*x.stride(), *w.stride(), b.stride(0), *own, M, N, K, 1})
    for pair in [*named.values(), *((a, c) for a in values for c in values)]:
        if pair == own:
            continue
        reached = torch.arange(M)[:, None] * pair[0] + torch.arange(N)[None, :] * pair[1]
        if set(reached.flatten().tolist()) & set(offsets.flatten().tolist()) == stored:
            return pair, " or ".join(k for k, v in named.items() if v == pair)
    return None


def _diagnose_holes(what, missing, x, w, b, h) -> None:
    """A ✗ for elements of H never stored: whole tiles (one per program: no loop over the program's tiles),
    parts of tiles (the sizes given to the schedule or the output view), or the elements another pair of
    strides reaches (the output view built with another tensor's strides)."""
    M, N = missing.shape
    tiles_m, tiles_n = -(-M // _BM), -(-N // _BN)

    def per_tile(pad):  # each tile's elements in a row, the part past H's edge filled with ``pad``
        padded = torch.full((tiles_m * _BM, tiles_n * _BN), pad, dtype=torch.bool)
        padded[:M, :N] = missing
        return padded.view(tiles_m, _BM, tiles_n, _BN).permute(0, 2, 1, 3).reshape(tiles_m * tiles_n, -1)

    empty, stored = per_tile(True).all(dim=1), ~per_tile(False).any(dim=1)
    if bool((empty | stored).all()) and int(stored.sum()) <= _PROGRAMS < tiles_m * tiles_n:
        raise Failed(f"on {what}: only {plural(int(stored.sum()), 'tile')} of {tiles_m * tiles_n} were stored, at most "
                      f"one per program (the check runs {_PROGRAMS}): each program loops over all its tiles, pid, "
                      "pid + NUM_SMS, ... (with the stages: every tile ScheduleContext.persistent_tile_range gives "
                      "it)")
    rows, cols = missing.all(dim=1), missing.all(dim=0)
    if rows.any() and torch.equal(missing, rows[:, None].expand_as(missing)) or \
            cols.any() and torch.equal(missing, cols[None, :].expand_as(missing)):
        raise Failed(f"on {what}: whole rows or columns of H were never stored: every tile id must become its own "
                      "(row, column) of tiles, over cdiv(M, BLOCK_M) x cdiv(N, BLOCK_N) (with the stages: the sizes "
                      "you give ScheduleContext and the output view, M rows, N columns, K the shared dimension)")
    wrong = _strides_that_store(missing.cpu(), x, w, b, h)
    if wrong is not None:
        (sm, sn), whose = wrong
        raise Failed(f"on {what}: {int(missing.sum())} of {M * N} elements of H were never stored, and the stores "
                      f"that were made land where strides ({sm}, {sn}){f' ({whose})' if whose else ''} put "
                      "them, not H's: build H's output view (or the store's addresses) from H's own strides, "
                      "stride_hm and stride_hn")
    raise Failed(f"on {what}: {int(missing.sum())} of {M * N} elements of H were never stored: each program takes "
                  f"every one of its tiles (pid, pid + NUM_SMS, ...; the check runs {plural(_PROGRAMS, 'program')}; "
                  "with the stages, ScheduleContext.persistent_tile_range gives them) and stores all of it")


def _diagnose_up(what, x, w, b, h, xd, wd, bd, pre, ref, out) -> None:
    """The first mistake that explains H, or a ✗ that says where to look."""
    M, K = x.shape
    N = w.shape[0]
    f = torch.nn.functional
    candidates = [
        (lambda: f.gelu(pre), "that is GELU's erf form: the block uses the tanh approximation (notebook 08), "
                              "0.5 x (1 + tanh(...)), in float32"),
        (lambda: pre, "the GELU is missing: apply it to the tile after adding the bias, before the store"),
        (lambda: torch.relu(pre), "that is a ReLU: the block's activation is GELU (the tanh form of notebook 08)"),
        (lambda: f.silu(pre), "that is SiLU: the block's activation is GELU (the tanh form of notebook 08)"),
        (lambda: pre * torch.sigmoid(1.702 * pre), "that is not GELU's tanh form but its sigmoid approximation, "
                                                   "x σ(1.702 x), which differs from it by up to 0.02: the block uses "
                                                   "0.5 x (1 + tanh(...)) of notebook 08"),
        (lambda: _gelu64(pre - bd), "the bias is missing: add B (one value per column of H) to the accumulator "
                                    "before the GELU"),
        (lambda: _gelu64(pre - bd) + bd, "the bias is added after the GELU: add it first, then apply GELU to the "
                                         "sum (OutputView.store(..., bias=...) adds it after what you pass it)"),
        (lambda: _gelu64(xd @ wd.T + bd[:M, None]) if M <= N else None,
         "the bias goes down the rows: B has one value per column of H (per hidden unit), broadcast over the rows"),
        (lambda: _gelu64(pre.half().double()), "the pre-activation is rounded to 16 bits before the GELU: keep the "
                                               "accumulator in float32 through the epilogue"),
        (lambda: _gelu64(pre).float().half().double(), "H is rounded to 16 bits although it is float32: let the "
                                                        "output view convert the float32 tile to H's dtype"),
    ]
    wrong_w = _strided_as(w, (K, N))
    if wrong_w is not None:
        candidates.append((lambda: _gelu64(xd @ wrong_w + bd),
                           "B = W.T walks W with its strides the wrong way round: element (k, n) of W.T is W[n, k], "
                           "so its row stride is stride_wk and its column stride stride_wn"))
    truncated = (K // _BK) * _BK
    if K % _BK:
        candidates.append((lambda: _gelu64(xd[:, :truncated] @ wd[:, :truncated].T + bd),
                           "the last, partial step of K is missing or zero: the loop over K must reach K, its last "
                           "step masked where K is no multiple of BLOCK_K (with the stages: tell GemmContext whether "
                           "it is, even_k=EVEN_K)"))
    if b.stride(0) != 1:
        flat = _strided_as(b, (N,), (1,))
        if flat is not None:
            candidates.append((lambda: _gelu64(xd @ wd.T + flat),
                               "B is read with stride 1: give the bias view its stride, stride_b"))
    for compute, message in candidates:
        alt = compute()
        if alt is not None and not _within(alt, ref, _F32_TOL) and _within(out, alt, 2 * _F32_TOL):
            raise Failed(f"on {what}: {message}")
    if _within(out, ref, 2.0 ** -9):
        off = _gelu_off(out, ref, pre)
        worst = int(torch.argmax(off))
        raise Failed(f"on {what}: close to GELU, but {float(off.flatten()[worst]):.0f} units of float32's rounding off "
                      f"at a pre-activation of {float(pre.flatten()[worst]):.4g}, where a sound formula stays within "
                      f"{_GELU_TOL / 2.0 ** -24:.0f}: is one of GELU's constants short of digits (write each in full), "
                      "or a step computed in 16 bits?")
    if _within(out, ref, 0.05) and not _within(out, ref, 2.0 ** -9):  # some activation near GELU
        worst = int(torch.argmax((out - ref).abs() / ref.abs().clamp(min=1.0)))
        raise Failed(f"on {what}: close to GELU (off by {float((out - ref).flatten()[worst].abs()):.2g} at a "
                      f"pre-activation of {float(pre.flatten()[worst]):.4g}), but not GELU's tanh form: another "
                      "approximation, or a constant that is wrong, not just short of digits. The block uses the tanh "
                      "form of notebook 08, in float32")
    if "strided" in what:  # right on every contiguous case before it
        raise Failed(f"on {what}: wrong values, where the contiguous cases were right: build each view from the "
                      "stride arguments you are given (stride_xm, stride_xk, stride_wn, stride_wk, stride_b, "
                      "stride_hm, stride_hn), not from the sizes and 1")
    raise Failed(f"on {what}: wrong values. X is M x K, B = W.T is K x N (W is N x K), H is M x N; bias, then GELU, "
                  "in float32, then the store: check each view's sizes and strides")


def _strided_as(t, shape, strides=None):
    """``t``'s own memory read as ``shape`` with ``strides`` (default: t's own, in its order), as a
    kernel with its strides mixed up would; None if that reaches past t's memory."""
    strides = strides or t.stride()
    try:
        return torch.as_strided(t, shape, strides).double().cpu()
    except RuntimeError:
        return None


def _each_program_its_own_tiles(kernel) -> None:
    """One program of NUM_SMS = 3 launched: only its own tiles (ids 0 and 3 of 2 x 2) may be written."""
    M, N, K = 2 * _BM, 2 * _BN, _BK
    g = torch.Generator().manual_seed(7)
    dev = runtime.DEVICE
    x, w, b = _exact((M, K), 64, g).to(dev), _exact((N, K), 128, g).to(dev), _exact((N,), 8, g, -16, 16).to(dev)
    h = torch.full((M, N), float("nan"), device=dev)
    try:
        _launch_up(kernel, x, w, b, h, grid=1)
    except Exception as err:
        raise user_error("on one program of 3, your kernel", err) from None
    written = (~torch.isnan(h)).cpu().view(2, _BM, 2, _BN).all(dim=3).all(dim=1).flatten().tolist()
    if sum(written) > 2:
        raise Failed("right, but each program computes tiles that belong to other programs: with NUM_SMS programs, "
                      "program pid takes only the tile ids pid, pid + NUM_SMS, ... (with the stages: those of "
                      "persistent_tile_range, with NUM_SMS given to GemmContext)")


def _block_shapes():
    """(what, M, d, hidden, strided) of each feed_forward case, smallest first; the last one random. The fourth has
    more tiles than ``gemm.sm_count()`` (4 under the interpreter, 132 on an H100) even at 64 x 64: a launch of one
    program per tile, or of fewer programs than NUM_SMS, shows there (K small: it is about the programs)."""
    from course import gemm

    rng = random.Random()
    M, d, hidden = rng.randint(2, 24), rng.randint(16, 48), rng.randint(16, 64)
    sms = gemm.sm_count()
    wide = 64 * (sms // 2 + 1) + 8  # 2 x (sms // 2 + 2) tiles of 64 x 64 with M = 80
    return [("one token (M = 1, d = 24, hidden = 48)", 1, 24, 48, False),
            # hidden a multiple of every usual BLOCK_N, d of no BLOCK_K: an EVEN_K taken from N (hidden) shows here
            ("a hidden size in whole tiles, a ragged width (M = 8, d = 40, hidden = 128)", 8, 40, 128, False),
            ("a ragged batch, every input strided (M = 21, d = 40, hidden = 56)", 21, 40, 56, True),
            (f"more tiles than SMs (M = 80, d = 16, hidden = {wide}: more than {sms} tiles even at 64 x 64)", 80, 16,
             wide, False),
            (f"a random shape (M = {M}, d = {d}, hidden = {hidden})", M, d, hidden, False)]


# torch calls a host function may make: sizes, strides, views, empty outputs. Anything else that makes new
# values (or changes them in place) is a pass over memory the block should not need: a tensor filled with zeros
# (or ones, or any value) too, a kernel of torch's on a GPU before the learner's overwrites every element.
_ALLOCATE = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
_FILLS = {"zeros", "zeros_like", "new_zeros", "full", "full_like", "new_full", "ones", "ones_like", "new_ones", "zero_",
          "fill_"}
_PRODUCTS = {"matmul", "mm", "bmm", "addmm", "addmv", "mv", "linear", "einsum", "__matmul__", "__rmatmul__",
             "baddbmm", "addbmm", "dot", "tensordot", "inner", "outer", "chain_matmul"}
_COPIES = {"contiguous", "clone", "copy_", "to", "float", "half", "bfloat16", "double", "type", "reshape",
           "flatten", "cpu", "cuda"}
_INTERNAL = ("gemm", "stages.py", "runtime.py", "check.py", "records.py")  # course.gemm: the whole package


def _torch_name(name: str) -> str:
    return f"torch's {name}"


class _TorchSpy(torch.overrides.TorchFunctionMode):
    """Records the torch functions called from the learner's code (not from torch, Triton or course.gemm's
    internals) that compute new values: ``(name, kind)`` with kind "product", "copy" or "arithmetic"."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        import triton

        self._skip = (str(Path(torch.__file__).parent), str(Path(triton.__file__).parent),
                      *(str(Path(__file__).parents[1] / m) for m in _INTERNAL),
                      str(Path(__file__).parent))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        if name in ("__get__", "__set__") or not self._from_learner():
            return result
        if name in _PRODUCTS:
            self.calls.append((name, "product"))
        elif name in _ALLOCATE:
            pass
        elif name in _FILLS:
            self.calls.append((name, "fill"))
        elif name.endswith("_") or (name.startswith("__i") and name not in ("__index__", "__int__", "__iter__")):
            self.calls.append((name, "copy" if name == "copy_" else "in place"))
        elif isinstance(result, torch.Tensor) and not self._shares_memory(result, args, kwargs):
            self.calls.append((name, "copy" if name in _COPIES else "arithmetic"))
        return result

    def _from_learner(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(self._skip[0]):
            frame = frame.f_back
        return frame is not None and not frame.f_code.co_filename.startswith(self._skip[1:])

    @staticmethod
    def _shares_memory(result, args, kwargs) -> bool:
        inputs = [t for t in (*args, *(kwargs or {}).values()) if isinstance(t, torch.Tensor)]
        try:
            ptr = result.untyped_storage().data_ptr()
            return any(t.untyped_storage().data_ptr() == ptr for t in inputs)
        except (RuntimeError, NotImplementedError):
            return True


def _block_inputs(M, d, hidden, strided):
    """x, w1, b1, w2, b2 in float16 (weights as nn.Linear keeps them); strided: x column-major, w1's rows
    2d apart, b1 and b2 every 2nd and 3rd element, w2 stored as its transpose."""
    g = torch.Generator().manual_seed(M * 7919 + d * 31 + hidden)
    x, w1, b1 = torch.randn(M, d, generator=g), torch.randn(hidden, d, generator=g) / d ** 0.5, torch.randn(
        hidden, generator=g)
    w2, b2 = torch.randn(d, hidden, generator=g) / hidden ** 0.5, torch.randn(d, generator=g)
    x, w1, b1, w2, b2 = (t.to(runtime.DEVICE, torch.float16) for t in (x, w1, b1, w2, b2))
    if strided:
        x = x.T.contiguous().T
        w1 = torch.cat([w1, w1], dim=1)[:, :d]
        b1 = torch.stack([b1, b1], dim=1).view(-1)[::2]
        w2 = w2.T.contiguous().T
        b2 = torch.stack([b2, b2, b2], dim=1).view(-1)[::3]
    return x, w1, b1, w2, b2


# (module, name) of the course's kernels that do a feed-forward's work for it
_COURSE_KERNELS = {("course.epilogues", "fused_linear_kernel"): "the course's fused_linear_kernel (epilogues.linear, "
                                                                "mlp.mlp)",
                   ("course.mlp", "swiglu_kernel"): "the course's swiglu_kernel (mlp.swiglu)",
                   ("course.epilogues", "_apply_kernel"): "the course's elementwise kernel (epilogues.apply)",
                   ("course.solutions", "ffn_up_kernel"): "the reference solution's ffn_up_kernel"}


def _run_block(kernel, feed_forward, what, M, d, hidden, strided) -> None:
    from course import epilogues

    x, w1, b1, w2, b2 = inputs = _block_inputs(M, d, hidden, strided)
    kept = [t.clone() for t in inputs]
    spy = _TorchSpy()
    # feed_forward's first launch of the kernel is checked before it runs: a wrong stride or size would send
    # the kernel (which passed on its own) past h, and on a GPU nothing stops it
    first_launch = functools.partial(_check_launch, what, kernel, x=x, w1=w1, b1=b1)
    with launches() as seen, spy, _launches_of(kernel, first_launch):
        try:
            y = feed_forward(*inputs)
        except OutOfBounds:  # a launch the first one's check does not see sent a kernel astray
            raise Failed(f"on {what}: ffn_up_kernel passed on its own: check feed_forward's launches (each tensor, "
                          "then its sizes and its own strides, in the kernel's order): a kernel launched inside "
                          "feed_forward reached outside the tensors it was given") from None
        except Failed:  # the first launch's check, through the learner's code
            raise
        except Exception as err:
            raise user_error(f"on {what}, feed_forward", err) from None
    names = [n for n, _ in seen.kernels]
    for i, (k, _) in enumerate(seen.launched):
        theirs = _COURSE_KERNELS.get((getattr(getattr(k, "fn", k), "__module__", ""), names[i]))
        if theirs and k is not kernel and not (i == 1 and k is epilogues.fused_linear_kernel):  # a GEMM + bias: fine
            raise Failed(f"on {what}: feed_forward runs {theirs}: the first GEMM and its epilogue are your "
                          "ffn_up_kernel's to do")
    products = [n for n, kind in spy.calls if kind == "product"]
    if products:
        raise Failed(f"on {what}: feed_forward multiplies with torch ({_torch_name(products[0])}): both GEMMs run "
                      "as Triton kernels, ffn_up_kernel for the first and course.gemm.matmul (or a kernel of yours) "
                      "for the second")
    others = [(n, kind) for n, kind in spy.calls if kind != "product"]
    if others:
        name, kind = others[0]
        if kind == "in place":
            raise Failed(f"on {what}: feed_forward changes a tensor in place with torch ({_torch_name(name)}): a pass "
                          "over memory of its own. Leave the inputs as they are; bias and GELU belong in "
                          "ffn_up_kernel's epilogue, and b2 in the second GEMM's (bias=)")
        if kind == "fill":
            raise Failed(f"on {what}: feed_forward fills a tensor with torch ({_torch_name(name)}): on a GPU that is a "
                          "kernel of its own, a pass over memory that ffn_up_kernel overwrites anyway (it stores every "
                          "element of h): torch.empty is the allocation")
        if kind == "copy":
            raise Failed(f"on {what}: feed_forward copies or converts a tensor with torch ({_torch_name(name)}) on "
                          "every call: the kernels read any strides (pass views such as w2.T as they are), and h is "
                          "yours to allocate in x's dtype")
        raise Failed(f"on {what}: feed_forward computes with torch ({_torch_name(name)}): a separate pass over the "
                      "activations. Bias and GELU belong in ffn_up_kernel's epilogue, and b2 in the second GEMM's "
                      "(bias=)")
    if not seen.launched:
        raise Failed(f"on {what}: no Triton kernel ran: launch ffn_up_kernel for the first GEMM")
    if len(seen.launched) > 2:
        raise Failed(f"on {what}: {len(seen.launched)} kernels ran ({', '.join(names)}): a block's MLP needs two, one "
                      "GEMM each, with the bias (and the GELU) in its epilogue; anything more is a pass over the "
                      "activations that fusion removes")
    if seen.launched[0][0] is not kernel:
        raise Failed(f"on {what}: the first kernel that ran was {names[0]}, not the ffn_up_kernel you passed the "
                      "check: launch that one for x @ w1.T with its epilogue")
    if len(seen.launched) == 1:
        raise Failed(f"on {what}: only ffn_up_kernel ran: the second GEMM, h @ w2.T + b2, is missing (course.gemm"
                      ".matmul with bias=b2)")
    if any(not torch.equal(t, k) for t, k in zip(inputs, kept)):
        raise Failed(f"on {what}: feed_forward changed its inputs: leave x, the weights and the biases as they are")
    if not isinstance(y, torch.Tensor):
        raise Failed(f"on {what}: feed_forward returned {type(y).__name__}: return y, the (M, d) tensor of the "
                      "second GEMM")
    if tuple(y.shape) != (M, d):
        hint = " (the hidden activations h: return the second GEMM's result)" if tuple(y.shape) == (M, hidden) else ""
        raise Failed(f"on {what}: feed_forward returned a {' x '.join(map(str, y.shape))} tensor, not M x d = {M} x "
                      f"{d}{hint}")
    if y.dtype != x.dtype:
        raise Failed(f"on {what}: y is {str(y.dtype).replace('torch.', '')}: return it in x's dtype "
                      f"({str(x.dtype).replace('torch.', '')}), as nn.Linear does")
    xd, w1d, b1d, w2d, b2d = (t.double().cpu() for t in inputs)
    hd = _gelu64(xd @ w1d.T + b1d)
    ref = hd @ w2d.T + b2d
    out = y.detach().double().cpu()
    if torch.isnan(out).any():
        raise Failed(f"on {what}: y holds NaN: was every element of h (M x hidden) written before the second GEMM "
                      "read it? (N is the hidden size, K the width d, in the kernel's arguments)")
    if _normwise(out, ref) <= _F16_TOL:
        return
    if _normwise(out, ref - b2d) <= _F16_TOL:
        raise Failed(f"on {what}: y misses the second bias, b2: give it to the second GEMM (bias=b2), which adds "
                      "it in its epilogue")
    if _normwise(out, _gelu64(ref)) <= _F16_TOL:
        raise Failed(f"on {what}: GELU was applied to y too: the block's second GEMM adds only its bias")
    if _normwise(out, (xd @ w1d.T + b1d) @ w2d.T + b2d) <= _F16_TOL:
        raise Failed(f"on {what}: no GELU between the GEMMs: the first GEMM's epilogue adds b1 and applies GELU")
    for block_k in (16, 32, 64, 128, 256):  # compiled, a wrong EVEN_K drops the ragged K step without a word
        kept = d // block_k * block_k
        if kept < d and _normwise(out, _gelu64(xd[:, :kept] @ w1d[:, :kept].T + b1d) @ w2d.T + b2d) <= _F16_TOL:
            raise Failed(f"on {what}: the first GEMM dropped the last, partial step of K (d = {d} is no multiple of "
                          "your BLOCK_K): launch ffn_up_kernel with EVEN_K = d % BLOCK_K == 0")
    raise Failed(f"on {what}: y is wrong, where ffn_up_kernel passed on its own: check feed_forward's launch (x's and "
                  "w1's strides in the kernel's order, stride_xm, stride_xk, stride_wn, stride_wk; N is the hidden "
                  "size and K the width d; EVEN_K from your BLOCK_K) and the second GEMM (h @ w2.T + b2)")


@contextlib.contextmanager
def _launches_of(kernel, check_first=None):
    """``(args, kwargs, grid)`` of each launch of ``kernel`` inside the block (through its own ``run``, which
    ``kernel[grid](...)`` calls, so a class-wide hook such as ``launches`` still sees it); ``check_first(calls)``
    runs before the first launch does."""
    calls: list = []
    if not hasattr(kernel, "run") or "run" in vars(kernel):
        yield calls
        return

    def run(*args, grid, warmup, **kwargs):
        if not warmup:
            calls.append((args, kwargs, grid))
            if len(calls) == 1 and check_first is not None:
                check_first(calls)
        return type(kernel).run(kernel, *args, grid=grid, warmup=warmup, **kwargs)

    kernel.run = run
    try:
        yield calls
    finally:
        del kernel.run


def _check_launch(what, kernel, calls, x, w1, b1) -> None:
    """A ✗ naming what is wrong in feed_forward's first launch of ``kernel`` (which passed on its own): the
    tensors, h's dtype and shape, the sizes, each tensor's strides, EVEN_K, and the programs against NUM_SMS."""
    if not calls:
        return
    args, kwargs, grid = calls[0]
    named = {**dict(zip(getattr(kernel, "arg_names", ()), args)), **kwargs}
    M, d = x.shape
    hidden = w1.shape[0]
    launch = f"on {what}: ffn_up_kernel passed on its own: check feed_forward's launch"

    def number(name):
        try:
            return int(named[name])
        except (KeyError, TypeError, ValueError):
            return None

    X, W, B, H = (named.get(n) for n in "XWBH")
    for given, want, label in ((X, x, "X"), (W, w1, "W"), (B, b1, "B")):
        if not isinstance(given, torch.Tensor) or given.data_ptr() != want.data_ptr() or given.shape != want.shape:
            raise Failed(f"{launch}: its {label} is not {dict(X='x', W='w1', B='b1')[label]}: the kernel takes x, w1, "
                          "b1 and h, in that order (X, W, B, H), as they are")
    if not isinstance(H, torch.Tensor):
        raise Failed(f"{launch}: its H is {type(H).__name__}: pass h, the (M, hidden) tensor the kernel fills")
    if H.dtype != x.dtype:
        raise Failed(f"{launch}: h is {str(H.dtype).replace('torch.', '')}: allocate h in x's dtype "
                      f"({str(x.dtype).replace('torch.', '')}); the kernel's store converts its float32 tile to h's "
                      "dtype, and the second GEMM takes h and w2 in one dtype")
    if tuple(H.shape) != (M, hidden):
        raise Failed(f"{launch}: h is {' x '.join(map(str, H.shape))}, not M x hidden = {M} x {hidden}")
    sizes = tuple(number(n) for n in "MNK")
    if sizes != (M, hidden, d):
        raise Failed(f"{launch}: its M, N, K are {', '.join(map(str, sizes))}, where x is {M} x {d} and w1 {hidden} x "
                      f"{d}: M is x's rows, N the hidden size (w1's rows), K the width d, in that order")
    for names, tensor, label in ((("stride_xm", "stride_xk"), x, "x"), (("stride_wn", "stride_wk"), w1, "w1"),
                                 (("stride_b",), b1, "b1"), (("stride_hm", "stride_hn"), H, "h")):
        given = tuple(number(n) for n in names)
        own = tuple(tensor.stride())
        if all(g == o for g, o, size in zip(given, own, tensor.shape) if size > 1):  # a size-1 axis: any stride
            continue
        how = "the wrong way round" if given == own[::-1] else f"not {label}'s, {own}"
        raise Failed(f"{launch}: {', '.join(names)} are {given if len(given) > 1 else given[0]}, {how}: each stride "
                      "argument comes from its own tensor, in the kernel's order")
    block_m, block_n, block_k, num_sms = (number(n) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_SMS"))
    if named.get("EVEN_K") and block_k and d % block_k:
        raise Failed(f"{launch}: EVEN_K is True, but d = {d} is no multiple of BLOCK_K = {block_k}: the last step of K "
                      "would read past x's and w1's rows unmasked. EVEN_K tells whether K % BLOCK_K == 0")
    if not (block_m and block_n and num_sms):
        return
    programs = programs_of(grid, args, kwargs, kernel)
    tiles = -(-M // block_m) * -(-hidden // block_n)
    if programs > num_sms and num_sms < tiles:
        raise Failed(f"{launch}: {plural(programs, 'program')} with NUM_SMS = {num_sms}: program pid takes tiles pid, "
                      "pid + NUM_SMS, ..., so the programs past NUM_SMS compute tiles that others compute too. Each "
                      "program its own tiles: launch as many programs as NUM_SMS")
    if programs < min(num_sms, tiles):
        raise Failed(f"{launch}: {plural(programs, 'program')} with NUM_SMS = {num_sms}: program pid takes tiles pid, "
                      "pid + NUM_SMS, ..., so the tiles of the programs never launched are never computed: launch as "
                      "many programs as NUM_SMS")


def _normwise(out, ref) -> float:
    if out.shape != ref.shape:
        return math.inf
    return float((out - ref).norm() / ref.norm().clamp(min=1e-30))
