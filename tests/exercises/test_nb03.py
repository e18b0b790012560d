"""The catalogue of notebook 03's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import pytest

import course
from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet, variant


# --- 03: the tiled matmul kernel ---------------------------------------------------------------------

def _matmul_variant(tmp_path, name, *edits):
    """The course's matmul_kernel (with its helper matmul_tile) with ``edits`` ((old, new) pairs)
    applied: a learner's mistake."""
    from course import tiled

    return variant(tmp_path, name, (tiled.matmul_tile, tiled.matmul_kernel), *edits)


MATMUL_WRONG = {  # label: (edits, words its message must contain)
    "nothing stored": ([("    c = acc.to(", "    return\n    c = acc.to(")], "nothing was stored"),
    "one K step": ([("range(0, K, BLOCK_K)", "range(0, BLOCK_K, BLOCK_K)")], "only the first step of K"),
    "K // BLOCK_K steps": ([("range(0, K, BLOCK_K)", "range(0, (K // BLOCK_K) * BLOCK_K, BLOCK_K)")],
                           "last, partial step of K is missing"),
    "no K mask": ([(" & ((k + ks)[None, :] < K)", ""), ("((k + ks)[:, None] < K) & ", "")], "reads past K"),
    "K as A's row stride": ([("rows[:, None] * stride_am", "rows[:, None] * K")], "compute every address from"),
    "N as C's row stride": ([("rows[:, None] * stride_cm", "rows[:, None] * N")], "use stride_cm and stride_cn, never N"),
    "no store mask": ([("""             mask=(rows[:, None] < M) & (cols[None, :] < N))""", "             )")],
                      "outside C"),
    "a float16 accumulator": ([("dtype=tl.float32)", "dtype=tl.float16)")], "Accumulate in float32"),
    "only the last K step": ([("acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b)")], "only the last step of K"),
    "program ids swapped": ([("tl.program_id(0), tl.program_id(1)", "tl.program_id(1), tl.program_id(0)")],
                            "yours are swapped"),
    "store mask with N and M swapped": ([("""             mask=(rows[:, None] < M) & (cols[None, :] < N))""",
                                          """             mask=(rows[:, None] < N) & (cols[None, :] < M))""")],
                                        "compares rows with N or columns with M"),
    "columns masked with M": ([("""             mask=(rows[:, None] < M) & (cols[None, :] < N))""",
                                """             mask=(rows[:, None] < M) & (cols[None, :] < M))""")],
                              "compares rows with N or columns with M"),
    "a scalar accumulator": ([("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)", "acc = 0.0"),
                              ("acc = tl.dot(a, b, acc)", "acc += tl.dot(a, b)")], "cannot compile it for a GPU"),
}


def test_matmul_kernel_reference_and_wrong_answers(tmp_path):
    assert quiet(exercises.check_matmul_kernel, solutions.matmul_kernel).passed
    table = {label: (_matmul_variant(tmp_path, f"variant_{i}", *edits), words)
             for i, (label, (edits, words)) in enumerate(MATMUL_WRONG.items())}
    assert_wrong_answers_named(exercises.check_matmul_kernel, table)


def test_matmul_kernel_misuse():
    assert "did you forget @triton.jit" in quiet(exercises.check_matmul_kernel, solutions.axpy).message
    assert "pass the @triton.jit kernel" in quiet(exercises.check_matmul_kernel, 3).message
    assert "keep the signature" in quiet(exercises.check_matmul_kernel, solutions.axpy_kernel).message


def test_a_kernel_that_never_ends_is_stopped(monkeypatch, tmp_path):
    if not course.INTERPRET:
        pytest.skip("a compiled kernel that hangs cannot be stopped from Python")
    monkeypatch.setattr(exercises.core, "TIME_LIMIT_S", 2)
    kernel = _matmul_variant(tmp_path, "endless", ("for k in range(0, K, BLOCK_K):", "k = 0\n    while k < K:"))
    verdict = quiet(exercises.check_matmul_kernel, kernel)
    assert verdict.status == "failed" and "gave up after 2 s" in verdict.message
