"""The catalogue of notebook 10's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import itertools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from course import exercises, layouts, solutions

from catalogue import ROOT, assert_survives, assert_wrong_answers_named, quiet

gl = pytest.importorskip("triton.experimental.gluon.language")


# --- 10: a layout of 16-byte loads --------------------------------------------------------------------

def every_blocked_layout():
    """Every BlockedLayout of a 64 x 64 tile on 4 warps whose tile fits it: sizes of powers of two, both orders."""
    powers = [1, 2, 4, 8, 16, 32, 64]
    for t0, w0, s0, s1, order in itertools.product([1, 2, 4, 8, 16, 32], [1, 2, 4], powers, powers, ([1, 0], [0, 1])):
        threads, warps = [t0, 32 // t0], [w0, 4 // w0]
        if s0 * threads[0] * warps[0] <= 64 and s1 * threads[1] * warps[1] <= 64:
            yield [s0, s1], threads, warps, order


def right(size, threads, warps, order):
    """What is true of a row-major float16 tile: Triton loads 16 bytes at once where a thread's registers
    0-7 hold 8 consecutive float16 of a row (8 along the row, numbered first: order [1, 0], or a block one
    row high), and a warp's load instruction reads whole 32-byte sectors where its lanes sit at least two
    side by side along a row and no run is longer than one load."""
    return size[1] == 8 and (order == [1, 0] or size[0] == 1) and threads[1] >= 2


VECTOR_RIGHT = [args for args in every_blocked_layout() if right(*args)]

VECTOR_WRONG = {  # label: (BlockedLayout arguments, words its message must contain)
    "8-byte runs": (([1, 4], [4, 8], [4, 1], [1, 0]), "How many float16"),
    "one float16 a thread": (([1, 1], [2, 16], [4, 1], [1, 0]), "holds 1 consecutive float16"),
    "a strip down a column": (([8, 1], [4, 8], [2, 2], [1, 0]), "down a column"),
    "64 threads": (([1, 8], [8, 8], [4, 1], [1, 0]), "a warp has 32"),
    "2 warps": (([1, 8], [4, 8], [2, 1], [1, 0]), "runs on 4"),
    "2-row block in column order": (([2, 8], [4, 8], [4, 1], [0, 1]),
                                    "registers 0 and 1 hold elements (0, 0) and (1, 0)"),
    "4-row block in column order": (([4, 8], [8, 4], [2, 2], [0, 1]), "down its 4 x 8 block first"),
    "order twice": (([1, 8], [4, 8], [4, 1], [1, 1]), "each once"),
    "order out of range": (([1, 8], [4, 8], [4, 1], [2, 1]), "each once"),
    "tile too wide": (([1, 8], [1, 32], [4, 1], [1, 0]), "larger than the 64 x 64 tile"),
    "32-byte runs": (([1, 16], [8, 4], [4, 1], [1, 0]), "half used. Make a thread's run"),
    "64-byte runs": (([1, 32], [16, 2], [4, 1], [0, 1]), "64 bytes: that is 4 16-byte loads"),
    "lanes down a column": (([1, 8], [32, 1], [1, 4], [1, 0]), "side by side along a row"),
    "lanes down a column, column order": (([1, 8], [32, 1], [2, 2], [0, 1]), "side by side along a row"),
    "not a power of two": (([1, 6], [4, 8], [4, 1], [1, 0]), "power of two"),
    "strings": ((["1", "8"], [4, 8], [4, 1], [1, 0]), "list of ints"),
    "lengths differ": (([1, 8], [4, 8, 1], [4, 1], [1, 0]), "each has two"),
    "rank 1": (([8], [32], [4], [0]), "rank 1"),
}


def test_vector_layout_passes_the_reference_and_every_layout_with_16_byte_loads_and_whole_sectors():
    assert quiet(exercises.check_vector_layout, solutions.vector_layout).passed
    assert len(VECTOR_RIGHT) == 20
    assert ([1, 8], [4, 8], [4, 1], [0, 1]) in [tuple(a) for a in VECTOR_RIGHT]  # the issue's: order [0, 1] is fine
    for args in VECTOR_RIGHT:
        verdict = quiet(exercises.check_vector_layout, lambda args=args: gl.BlockedLayout(*args))
        assert verdict.passed, (args, verdict.line)
    keywords = quiet(exercises.check_vector_layout, lambda: gl.BlockedLayout(
        size_per_thread=[2, 8], threads_per_warp=[8, 4], warps_per_cta=[2, 2], order=(1, 0)))
    assert keywords.passed, keywords.line


def test_vector_layout_rejects_every_other_layout():
    for args in every_blocked_layout():
        if not right(*args):
            verdict = quiet(exercises.check_vector_layout, lambda args=args: gl.BlockedLayout(*args))
            assert verdict.status == "failed", (args, verdict.line)


def forgot_return():
    gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])


def test_vector_layout_names_each_wrong_answer():
    table = {label: ((lambda args=args: gl.BlockedLayout(*args)), words)
             for label, (args, words) in VECTOR_WRONG.items()}
    table["a list"] = (lambda: [1, 8], "return gl.BlockedLayout")
    table["returns nothing"] = (forgot_return, "returned None")
    table["takes an argument"] = (lambda shape: solutions.vector_layout(), "must take")
    table["calls the solution"] = (lambda: solutions.vector_layout(), "uses the course's solutions")
    table["asks the course for an exercise"] = (lambda: exercises.solution("vector_layout"), "the course's exercises")
    table["a list short"] = (lambda: gl.BlockedLayout([1, 8], [4, 8], [4, 1]), "raised TypeError")
    table["a cluster"] = (lambda: gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0], cga_layout=[[1, 0]]),
                          "leave cga_layout out")
    assert_wrong_answers_named(exercises.check_vector_layout, table,
                               same_mistake=("lanes down a column", "lanes down a column, column order"))


def test_vector_layout_order_mistake_comes_with_a_picture_of_the_registers():
    import matplotlib.pyplot as plt

    from course.exercises import core

    shown = []
    original = core.show
    core.show = shown.append
    try:
        quiet(exercises.check_vector_layout, lambda: gl.BlockedLayout([2, 8], [4, 8], [4, 1], [0, 1]))
    finally:
        core.show = original
    assert len(shown) == 1 and "order=[0, 1]" in shown[0].axes[0].get_title()
    plt.close("all")


_COMPILE = textwrap.dedent("""
    import json, re, sys
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon import language as gl
    sys.path.insert(0, sys.argv[1])
    from copy_tile import copy_tile
    widths = {}
    for args in json.loads(sys.argv[2]):
        source = GluonASTSource(fn=copy_tile, signature={"src": "*fp16", "dst": "*fp16", "LAYOUT": "constexpr"},
                                constexprs={"LAYOUT": gl.BlockedLayout(*args)},
                                attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
        ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]
        widths[json.dumps(args)] = sorted(set(re.findall(r"ld\\.global[\\w.]*", ptx)))
    print(json.dumps(widths))
""")

_COPY_TILE = textwrap.dedent("""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl


    @gluon.jit
    def copy_tile(src, dst, LAYOUT: gl.constexpr):
        rows = gl.arange(0, 64, layout=gl.SliceLayout(1, LAYOUT))
        cols = gl.arange(0, 64, layout=gl.SliceLayout(0, LAYOUT))
        offsets = rows[:, None] * 64 + cols[None, :]
        gl.store(dst + offsets, gl.load(src + offsets))
""")


def test_vector_layout_agrees_with_the_loads_triton_compiles_for_an_h100(tmp_path):
    """The check's reading of 16-byte loads (registers 0-7 on 8 consecutive float16 of a row) against the PTX that
    Triton compiles notebook 10's copy_tile to, for layouts whose order and block shape matter."""
    (tmp_path / "copy_tile.py").write_text(_COPY_TILE)
    cases = [([1, 8], [4, 8], [4, 1], [0, 1]), ([1, 8], [4, 8], [4, 1], [1, 0]), ([2, 8], [4, 8], [4, 1], [0, 1]),
             ([2, 8], [4, 8], [4, 1], [1, 0]), ([4, 8], [8, 4], [2, 2], [0, 1]), ([1, 4], [4, 8], [4, 1], [1, 0]),
             ([8, 1], [4, 8], [2, 2], [1, 0]), ([1, 16], [8, 4], [4, 1], [0, 1]), ([1, 8], [32, 1], [1, 4], [0, 1])]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _COMPILE, str(tmp_path), json.dumps(cases)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    widths = json.loads(done.stdout.strip().splitlines()[-1])
    for args in cases:
        wide = widths[json.dumps(list(args))] == ["ld.global.v4.b32"]
        message = quiet(exercises.check_vector_layout, lambda args=args: gl.BlockedLayout(*args)).message
        narrow = any(words in message for words in ("How many float16", "down a column", "Triton loads"))
        assert wide != narrow, (args, widths[json.dumps(list(args))], message)


# --- 10: a swizzle without bank conflicts ---------------------------------------------------------------

def reference_like(row, chunk, chunks):  # the reference's formula, written out (no call into the course)
    return chunk ^ (row // max(1, 8 // chunks)) % min(chunks, 8)


def no_return(row, chunk, chunks):
    place = chunk ^ (row % 8)  # noqa: F841


SWIZZLE_WRONG = {  # label: (swizzle, words its message must contain)
    "no swizzle": (lambda row, chunk, chunks: chunk, "leaves every chunk where it is"),
    "no swizzle on narrow rows": (lambda row, chunk, chunks: chunk ^ (row % 8) if chunks >= 8 else chunk,
                                  "for rows of 4 chunks (64 bytes), your swizzle leaves every chunk"),
    "the course's model": (lambda row, chunk, chunks: int(layouts.shared_offsets(
        (64, 8 * chunks), vec=8, per_phase=max(1, 8 // chunks), max_phase=min(chunks, 8))[row, 8 * chunk])
        // 8 % chunks, "uses the course's layouts"),
    "the solution": (lambda row, chunk, chunks: solutions.swizzle(row, chunk, chunks), "uses the course's solutions"),
    "128-byte phases on every row width": (lambda row, chunk, chunks: chunk ^ (row % 8),
                                           "swizzle(4, 0, 4) = 4: outside the row"),
    "row XOR chunk": (lambda row, chunk, chunks: row ^ chunk, "swizzle(8, 0, 8) = 8: outside the row"),
    "places in bytes": (lambda row, chunk, chunks: 16 * reference_like(row, chunk, chunks), "float16 or bytes"),
    "places in float16": (lambda row, chunk, chunks: 8 * reference_like(row, chunk, chunks), "float16 or bytes"),
    "a phase every row on narrow rows": (lambda row, chunk, chunks: chunk ^ (row % chunks),
                                         "rows 0 and 4 put that chunk in the same 4 banks"),
    "phases multiplied": (lambda row, chunk, chunks: chunk ^ (row * max(1, 8 // chunks)) % min(chunks, 8),
                          "rows 0 and 2 put that chunk"),
    "4 phases": (lambda row, chunk, chunks: chunk ^ (row // max(1, 8 // chunks)) % min(chunks, 4),
                 "for rows of 8 chunks (128 bytes), a warp reading chunk 0 of rows 0-31"),
    "the same move in every row": (lambda row, chunk, chunks: (chunk + 1) % chunks, "same place in every row"),
    "the row alone": (lambda row, chunk, chunks: row % chunks, "row 0 stores chunks 0 and 1 both at place 0"),
    "true division": (lambda row, chunk, chunks: (chunk + row / max(1, 8 / chunks)) % chunks, "returned a float"),
    "a string": (lambda row, chunk, chunks: str(chunk), "returned a str"),
    "no return": (no_return, "returned None"),
    "division by 8 // chunks": (lambda row, chunk, chunks: chunk ^ (row // (8 // chunks)) % min(chunks, 8),
                                "something you divide by is 0"),
    "256-byte rows in pairs": (lambda row, chunk, chunks: (row + chunk // 2) % 8 + 8 * (chunk % 2) if chunks == 16
                               else reference_like(row, chunk, chunks), "chunks 0 and 1 of row 0 land in the same"),
    "two arguments": (lambda row, chunk: chunk, "must take 3 arguments"),
    # columns free of conflicts, rows not: on 256-byte rows the whole-row rule fails on its own (the review)
    "256-byte rows: chunks 1 and 8 swapped": (lambda row, chunk, chunks: {1: 8, 8: 1}.get(chunk, chunk) ^ (row % 8)
                                              if chunks == 16 else reference_like(row, chunk, chunks),
                                              "reading rows 0-1 whole"),
}


def test_bank_swizzle_passes_the_reference_and_other_conflict_free_swizzles():
    verdict = quiet(exercises.check_bank_swizzle, solutions.swizzle)
    assert verdict.passed and "the one Triton picks" in verdict.message, verdict.line

    def by_bits(row, chunk, chunks):
        shift = {2: 2, 4: 1}.get(chunks, 0)
        return chunk ^ ((row >> shift) & (min(chunks, 8) - 1))

    def phase(row, chunks):  # a helper of the learner's own: not the course's
        return (row // max(1, 8 // chunks)) % min(chunks, 8)

    table = {2: [[c ^ (r // 4 % 2) for c in range(2)] for r in range(8)],
             4: [[c ^ (r // 2 % 4) for c in range(4)] for r in range(8)]}
    others = {
        "bits": by_bits,
        "a helper": lambda row, chunk, chunks: chunk ^ phase(row, chunks),
        "rotation": lambda row, chunk, chunks: (chunk + row // max(1, 8 // chunks)) % chunks,
        "XOR over 16 chunks": lambda row, chunk, chunks: chunk ^ (row // max(1, 8 // chunks)) % chunks,
        "phases counted down": lambda row, chunk, chunks: chunk ^ (min(chunks, 8) - 1 - phase(row, chunks)),
        "a table for narrow rows": lambda row, chunk, chunks: table[chunks][row % 8][chunk] if chunks in table
        else chunk ^ (row % 8),
        "a numpy int": lambda row, chunk, chunks: np.int64(reference_like(row, chunk, chunks)),
        "a torch int": lambda row, chunk, chunks: torch.tensor(reference_like(row, chunk, chunks)),
        # the review: true division turned back into an int is right too (the text asks for an int, by any means)
        "int() of a true division": lambda row, chunk, chunks: chunk ^ (int(row / (8 / chunks)) % chunks)
        if chunks < 8 else chunk ^ (row % 8),
    }
    for label, swizzle in others.items():
        verdict = quiet(exercises.check_bank_swizzle, swizzle)
        assert verdict.passed, (label, verdict.line)
    assert "differs from Triton's XOR swizzle" in quiet(exercises.check_bank_swizzle, others["rotation"]).message


def test_bank_swizzle_names_each_wrong_answer():
    assert_wrong_answers_named(exercises.check_bank_swizzle, SWIZZLE_WRONG,
                               same_mistake=("places in bytes", "places in float16", "256-byte rows in pairs",
                                             "256-byte rows: chunks 1 and 8 swapped"))


def test_bank_swizzle_hints_only_where_they_apply():
    """The units hint only for places that are a row's chunks scaled by 8 or 16; the // hint only for floats."""
    moved = quiet(exercises.check_bank_swizzle, SWIZZLE_WRONG["row XOR chunk"][0]).message
    assert "float16 or bytes" not in moved, moved
    text = quiet(exercises.check_bank_swizzle, SWIZZLE_WRONG["a string"][0]).message
    assert "//" not in text, text


def test_bank_swizzle_conflicts_come_with_a_picture_of_the_banks():
    import matplotlib.pyplot as plt

    from course.exercises import core

    shown = []
    original = core.show
    core.show = shown.append
    try:
        quiet(exercises.check_bank_swizzle, SWIZZLE_WRONG["a phase every row on narrow rows"][0])
        quiet(exercises.check_bank_swizzle, lambda row, chunk, chunks: chunk ^ (row % 2) if chunks == 2
              else chunk ^ (row // max(1, 8 // chunks)) % min(chunks, 8))  # conflicts on 32-byte rows only
    finally:
        core.show = original
    assert len(shown) == 2
    for fig in shown:  # rows of 4 and of 2 chunks: 32 rows drawn across, readable (the review: 655 x 3851 px)
        width, height = fig.get_size_inches()
        assert width > 2 * height and height <= 6, (width, height)
        labels = [ax.get_xlabel() + ax.get_ylabel() for ax in fig.axes]
        assert not any(" - " in label for label in labels), labels
    plt.close("all")


def test_vector_layout_gives_up_on_an_endless_loop():
    source = "def vector_layout():\n    while True:\n        pass\n"
    assert_survives("check_vector_layout", "from course.exercises import nb10\nnb10.CALL_TIME_S = 2\n" + source,
                    "vector_layout", "did not return within 2 s", time_limit_s=60)


def test_bank_swizzle_gives_up_on_an_endless_loop():
    source = "def swizzle(row, chunk, chunks):\n    while True:\n        pass\n"
    assert_survives("check_bank_swizzle", "from course.exercises import nb10\nnb10.CALL_TIME_S = 2\n" + source,
                    "swizzle", "did not return within 2 s", time_limit_s=60)
