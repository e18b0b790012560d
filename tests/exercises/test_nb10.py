"""The catalogue of notebook 10's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import pytest

from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet


# --- 10: a layout of 16-byte loads --------------------------------------------------------------------

VECTOR_WRONG = {  # label: (BlockedLayout arguments, words its message must contain)
    "8-byte runs": (([1, 4], [4, 8], [4, 1], [1, 0]), "How many float16"),
    "64 threads": (([1, 8], [8, 8], [4, 1], [1, 0]), "a warp has 32"),
    "2 warps": (([1, 8], [4, 8], [2, 1], [1, 0]), "runs on 4"),
    "column order": (([1, 8], [4, 8], [4, 1], [0, 1]), "which dimension is contiguous"),
    "order twice": (([1, 8], [4, 8], [4, 1], [1, 1]), "each once"),
    "tile too wide": (([1, 8], [1, 32], [4, 1], [1, 0]), "larger than the 64 x 64 tile"),
    "32-byte runs": (([1, 16], [8, 4], [4, 1], [1, 0]), "half used. Make a thread's run"),
    "lanes down a column": (([1, 8], [32, 1], [1, 4], [1, 0]), "side by side along a row"),
    "not a power of two": (([1, 6], [4, 8], [4, 1], [1, 0]), "power of two"),
    "strings": ((["1", "8"], [4, 8], [4, 1], [1, 0]), "list of ints"),
    "lengths differ": (([1, 8], [4, 8, 1], [4, 1], [1, 0]), "each has two"),
    "rank 1": (([8], [32], [4], [0]), "rank 1"),
}


def test_vector_layout_reference_and_wrong_answers():
    gl = pytest.importorskip("triton.experimental.gluon.language")
    assert quiet(exercises.check_vector_layout, solutions.vector_layout).passed
    for other in (([2, 8], [8, 4], [2, 2], [1, 0]), ([1, 8], [8, 4], [4, 1], [1, 0])):  # also 16-byte, coalesced
        assert quiet(exercises.check_vector_layout, lambda args=other: gl.BlockedLayout(*args)).passed, other
    table = {label: ((lambda args=args: gl.BlockedLayout(*args)), words)
             for label, (args, words) in VECTOR_WRONG.items()}
    table["a list"] = (lambda: [1, 8], "return gl.BlockedLayout")
    table["takes an argument"] = (lambda shape: solutions.vector_layout(), "must take")
    assert_wrong_answers_named(exercises.check_vector_layout, table)
