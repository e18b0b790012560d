"""The catalogue of notebook 03's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import importlib.util

import pytest

import course
from course import exercises, solutions, tiled

from catalogue import (
    assert_survives,
    assert_wrong_answers_named,
    edited_source,
    interpreter_only,
    quiet,
    stub,
    stub_kernel,
    variant,
)


def _module(tmp_path, name: str, source: str):
    """``source`` (a learner's cell: triton and tl are imported for it) as a module of its own."""
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\nimport triton\nimport triton.language as tl\n\n" + source)
    # named __main__, as a notebook's cell is: course.compile then ships its helpers as source too
    spec = importlib.util.spec_from_file_location("__main__", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _on_this_machine(words: str) -> str:
    """The words a crash test expects here: on a GPU nothing stops a stray address before it faults (the
    check then reports the CUDA error), and a kernel that never ends cannot be stopped."""
    if course.INTERPRET:
        return words
    if words == "gave up":
        pytest.skip("a compiled kernel that hangs cannot be stopped from Python")
    return "on " if words == "outside every tensor" else words


# --- 03: transpose ---------------------------------------------------------------------------------

_PIECES = (solutions.transpose_kernel, solutions.transpose)
_LOAD = "tile = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)"
_STORE = "tl.store(out_ptr + rows[:, None] * stride_on + cols[None, :] * stride_om, tile, mask=mask)"
_ROWS = "rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)"
_COLS = "cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)"
_MASK = "mask = (rows[:, None] < M) & (cols[None, :] < N)"
_GRID = "grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))"
_ARGS = "x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1)"
_BLOCKS = "BLOCK_M=block_m, BLOCK_N=block_n)"
_LAUNCH = "    transpose_kernel[grid]("


def _transpose_source(*edits) -> str:
    return edited_source(_PIECES, *edits)


def _transpose(tmp_path, name, *edits):
    """The reference transpose_kernel and transpose with ``edits`` ((old, new) pairs): a learner's answer."""
    return _module(tmp_path, name, _transpose_source(*edits)).transpose


def _torch_after(code):
    return [(_LAUNCH, f"    {code}\n{_LAUNCH}")]


TRANSPOSE_WRONG = {  # label: (edits, words its message must contain)
    "a copy, not a transpose": ([(_STORE, _STORE.replace("stride_on + cols[None, :] * stride_om",
                                                         "stride_om + cols[None, :] * stride_on"))],
                                "that is a copy, not a transpose"),
    "the load's strides swapped": ([(_LOAD, _LOAD.replace("stride_xm + cols[None, :] * stride_xn",
                                                          "stride_xn + cols[None, :] * stride_xm"))],
                                   "the load's strides are swapped"),
    "the load with out's strides": ([(_LOAD, _LOAD.replace("stride_xm + cols[None, :] * stride_xn",
                                                           "stride_om + cols[None, :] * stride_on"))],
                                    "the load uses out's strides"),
    "the store with x's strides": ([(_STORE, _STORE.replace("stride_on + cols[None, :] * stride_om",
                                                            "stride_xn + cols[None, :] * stride_xm"))],
                                   "the store uses x's strides"),
    "a contiguous x assumed": ([(_LOAD, _LOAD.replace("rows[:, None] * stride_xm + cols[None, :] * stride_xn",
                                                      "rows[:, None] * N + cols[None, :]"))],
                               "assumes a contiguous x"),
    "stride_xn ignored": ([(_LOAD, _LOAD.replace("cols[None, :] * stride_xn", "cols[None, :]"))],
                          "the load ignores stride_xn"),
    "a contiguous out assumed": ([(_STORE, _STORE.replace("rows[:, None] * stride_on + cols[None, :] * stride_om",
                                                          "rows[:, None] + cols[None, :] * M"))],
                                 "assumes a contiguous out"),
    "stride_on ignored": ([(_STORE, _STORE.replace("rows[:, None] * stride_on", "rows[:, None]"))],
                          "the store ignores stride_on"),
    "program ids swapped": ([(_ROWS, _ROWS.replace("program_id(0)", "program_id(1)")),
                             (_COLS, _COLS.replace("program_id(1)", "program_id(0)"))], "yours are swapped"),
    "one program id for both": ([(_COLS, _COLS.replace("program_id(1)", "program_id(0)"))],
                                "both come from tl.program_id(0)"),
    "rows step by BLOCK_N": ([(_ROWS, _ROWS.replace("* BLOCK_M", "* BLOCK_N"))], "overlap or leave gaps"),
    "tile sizes swapped": ([(_ROWS, _ROWS.replace("arange(0, BLOCK_M)", "arange(0, BLOCK_N)")),
                            (_COLS, _COLS.replace("arange(0, BLOCK_N)", "arange(0, BLOCK_M)"))],
                           "BLOCK_N rows and BLOCK_M columns"),
    "no store mask": ([(_STORE, _STORE.replace(", mask=mask)", ")"))], "mask the store with the same 2-D mask"),
    "a store mask on rows only": ([(_STORE, _STORE.replace("mask=mask", "mask=rows[:, None] < M"))],
                                  "checks only the rows"),
    "M and N swapped in the mask": ([(_MASK, "mask = (rows[:, None] < N) & (cols[None, :] < M)")],
                                    "compare rows with N and columns with M"),
    "<= in the mask": ([(_MASK, "mask = (rows[:, None] <= M) & (cols[None, :] <= N)")],
                       "one row and one column too many"),
    "no masks at all": ([(_LOAD, _LOAD.replace(", mask=mask)", ")")), (_STORE, _STORE.replace(", mask=mask)", ")"))],
                        "nothing is masked"),
    "an unmasked load": ([(_LOAD, _LOAD.replace(", mask=mask)", ")"))], "the results are right, but the"),
    "nothing stored": ([(_STORE, "pass")], "nothing was stored into out"),
    "stores into x": ([(_STORE, _STORE.replace("tl.store(out_ptr", "tl.store(x_ptr"))], "x was modified"),
    "a grid that rounds down": ([(_GRID, "grid = (M // block_m, N // block_n)")], "rounds down"),
    "grid axes swapped": ([(_GRID, "grid = (triton.cdiv(N, block_n), triton.cdiv(M, block_m))")],
                          "the grid's axes are swapped"),
    "a 1-D grid": ([(_GRID, "grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)")], "the grid is 1-D"),
    "M and N swapped in the launch": ([("M, N = x.shape", "N, M = x.shape")], "M and N swapped"),
    "x's strides in the wrong order": ([(_ARGS, _ARGS.replace("x.stride(0), x.stride(1)", "x.stride(1), x.stride(0)"))],
                                       "x's strides in the wrong order"),
    "block_m and block_n swapped": ([(_BLOCKS, "BLOCK_M=block_n, BLOCK_N=block_m)")], "are swapped (BLOCK_M"),
    "fixed square tiles": ([(_BLOCKS, "BLOCK_M=16, BLOCK_N=16)")], "pass block_m and block_n on"),
    "x and out swapped in the launch": ([(_ARGS, _ARGS.replace("x, out, M", "out, x, M"))], "x was modified"),
    "torch copies, no kernel": ([(_LAUNCH, "    out.copy_(x.T)\n    return\n" + _LAUNCH)], "calls torch's copy_"),
    "torch fixes the kernel's output": (_torch_after("out.copy_(x.T)"), "calls torch's copy_"),
    "torch transposes, the kernel copies": ([("    M, N = x.shape", "    x = x.T.contiguous().T\n    M, N = x.shape")],
                                            "calls torch's contiguous"),
    "item assignment": ([(_LAUNCH, "    out[:, :] = x.T\n    return\n" + _LAUNCH)], "item assignment"),
    "no launch": ([(_LAUNCH, "    return out\n" + _LAUNCH)], "launched no Triton kernel"),
    # from the learner's review
    "columns step by BLOCK_M": ([(_COLS, _COLS.replace("* BLOCK_N", "* BLOCK_M"))], "the columns step by BLOCK_M"),
    "columns step by 1": ([(_COLS, "cols = tl.program_id(1) + tl.arange(0, BLOCK_N)")], "the columns step by 1"),
    "rows step by 1": ([(_ROWS, "rows = tl.program_id(0) + tl.arange(0, BLOCK_M)")], "the rows step by 1"),
    "a new out made in transpose": ([(_LAUNCH, "    out = torch.empty_like(out)\n" + _LAUNCH)],
                                    "another tensor than the out given"),
    "a float16 store": ([(_STORE, _STORE.replace(", tile,", ", tile.to(tl.float16),"))], "rounded to 16 bits"),
    "a bfloat16 store": ([(_STORE, _STORE.replace(", tile,", ", tile.to(tl.bfloat16),"))], "rounded to 16 bits"),
    "the kernel called without a grid": ([(_LAUNCH, "    transpose_kernel(")], "transpose_kernel[grid](...)"),
    "columns masked with M": ([(_MASK, "mask = (rows[:, None] < M) & (cols[None, :] < M)")],
                              "compares x's columns with M"),
    "rows masked with N": ([(_MASK, "mask = (rows[:, None] < N) & (cols[None, :] < N)")], "compares x's rows with N"),
    # from the second review
    "no column mask (a condition that always holds)": ([(_MASK, "mask = (rows[:, None] < M) & (cols[None, :] >= 0)")],
                                                       "does not check x's columns"),
    "no row mask (a condition that always holds)": ([(_MASK, "mask = (rows[:, None] >= 0) & (cols[None, :] < N)")],
                                                    "does not check x's rows"),
    # from the third review
    "the grid sized from out's shape": ([(_GRID, "grid = (triton.cdiv(out.shape[0], block_m), "
                                                 "triton.cdiv(out.shape[1], block_n))")], "sized from out's shape"),
    "rows < M - 1": ([(_MASK, "mask = (rows[:, None] < M - 1) & (cols[None, :] < N)")], "drop x's last row"),
    "columns < N - 1": ([(_MASK, "mask = (rows[:, None] < M) & (cols[None, :] < N - 1)")], "drop x's last column"),
}
SAME_MISTAKE = ("torch copies, no kernel", "torch fixes the kernel's output", "stores into x",
                "x and out swapped in the launch")


def test_transpose_reference_passes(capsys):
    exercises.check_transpose(solutions.transpose)
    assert capsys.readouterr().out.startswith("✓ transpose: right on 6 cases")


def test_transpose_wrong_answers_get_their_own_messages(tmp_path):
    table = {label: (_transpose(tmp_path, f"transpose_{i}", *edits), words)
             for i, (label, (edits, words)) in enumerate(TRANSPOSE_WRONG.items())}
    assert_wrong_answers_named(exercises.check_transpose, table, same_mistake=SAME_MISTAKE)


TRANSPOSE_RIGHT = {
    "tl.trans, then a store in out's own order": [
        (_STORE, "tl.store(out_ptr + cols[:, None] * stride_om + rows[None, :] * stride_on, tl.trans(tile), "
                 "mask=tl.trans(mask))")],
    "a plain copy kernel into out.T": [
        (_STORE, _STORE.replace("stride_on + cols[None, :] * stride_om", "stride_om + cols[None, :] * stride_on")),
        (_ARGS, "x, out.T, M, N, x.stride(0), x.stride(1), out.T.stride(0), out.T.stride(1)")],
    "the grid and the program ids both swapped": [
        (_GRID, "grid = (triton.cdiv(N, block_n), triton.cdiv(M, block_m))"),
        (_ROWS, _ROWS.replace("program_id(0)", "program_id(1)")),
        (_COLS, _COLS.replace("program_id(1)", "program_id(0)"))],
    "masks written apart, other=0.0, returns out": [
        (_MASK, "in_rows = rows[:, None] < M\n    in_cols = cols[None, :] < N"),
        (_LOAD, _LOAD.replace("mask=mask)", "mask=in_rows & in_cols, other=0.0)")),
        (_STORE, _STORE.replace("mask=mask)", "mask=in_cols & in_rows)")),
        (_BLOCKS, _BLOCKS + "\n    return out")],
    "a grid given as a function of the launch": [
        (_GRID, "grid = lambda meta: (triton.cdiv(M, meta['BLOCK_M']), triton.cdiv(N, meta['BLOCK_N']))")],
}


@pytest.mark.parametrize("label", TRANSPOSE_RIGHT)
def test_a_correct_transpose_written_another_way_passes(tmp_path, label):
    verdict = quiet(exercises.check_transpose, _transpose(tmp_path, "transpose_right", *TRANSPOSE_RIGHT[label]))
    assert verdict.passed, verdict.line


def test_the_solution_cell_of_transpose_passes(tmp_path):
    module = _module(tmp_path, "transpose_cell", solutions.source("transpose").replace("exercises.check", "# "))
    assert quiet(exercises.check_transpose, module.transpose).passed


def test_transpose_stubs_and_misuse(tmp_path):
    assert quiet(exercises.check_transpose, stub).status == "not attempted"
    blank = ("@triton.jit\n"
             "def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,\n"
             "                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n    ...\n\n\n")
    half = _module(tmp_path, "half", blank + edited_source(solutions.transpose))
    verdict = quiet(exercises.check_transpose, half.transpose)
    assert verdict.status == "not attempted" and "transpose_kernel, whose body is still" in verdict.message
    assert "got None" in quiet(exercises.check_transpose, None).message
    assert "got a Triton kernel" in quiet(exercises.check_transpose, solutions.transpose_kernel).message
    assert "must take 4 arguments" in quiet(exercises.check_transpose, lambda x, out: out).message


@pytest.mark.parametrize("label, edits, words", [
    ("no masks, huge strides", [(_LOAD, "tile = tl.load(x_ptr + rows[:, None] * stride_xm * 1000 + cols[None, :])"),
                                (_STORE, _STORE.replace(", mask=mask)", ")"))], "outside every tensor"),
    ("program ids swapped, no masks", [(_ROWS, _ROWS.replace("program_id(0)", "program_id(1)")),
                                       (_COLS, _COLS.replace("program_id(1)", "program_id(0)")),
                                       (_LOAD, _LOAD.replace(", mask=mask)", ")")),
                                       (_STORE, _STORE.replace(", mask=mask)", ")"))], "never written"),
    ("the store's rows with x's row stride, unmasked", [(_STORE, _STORE.replace("stride_on", "stride_xm * stride_xm")
                                                         .replace(", mask=mask)", ")"))], "outside every tensor"),
    ("a while loop that never ends", [(_STORE, "j = 0\n    while j < 1:\n        j = j * 1\n    " + _STORE)],
     "gave up"),
    ("a Python loop that never ends", [("    M, N = x.shape", "    while True:\n        pass\n    M, N = x.shape")],
     "gave up"),
    ("raises in the wrapper", [("    M, N = x.shape", "    M, N, K = x.shape")], "raised ValueError"),
])
def test_a_transpose_that_strays_hangs_or_raises_ends_with_one_line(label, edits, words):
    words = _on_this_machine(words)
    assert_survives("check_transpose", _transpose_source(*edits), "transpose", words, time_limit_s=5)


# --- 03: the tiled matmul kernel ---------------------------------------------------------------------

_A = "a = tl.load(a_ptr + rows[:, None] * stride_am + (k + ks)[None, :] * stride_ak"
_A_MASK = "mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)"
_B = "b = tl.load(b_ptr + (k + ks)[:, None] * stride_bk + cols[None, :] * stride_bn"
_B_MASK = "mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)"
_C = "tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn"
_C_MASK = "mask=(rows[:, None] < M) & (cols[None, :] < N))"
_MROWS = "rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)"
_MCOLS = "cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)"
_LOOP = "for k in range(0, K, BLOCK_K):"
_DOT = "acc = tl.dot(a, b, acc)"
_ACC = "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)"


def _matmul(tmp_path, name, *edits):
    """The reference matmul_kernel with ``edits`` ((old, new) pairs) applied: a learner's mistake."""
    return variant(tmp_path, name, solutions.matmul_kernel, *edits)


MATMUL_WRONG = {  # label: (edits, words its message must contain)
    # named in issue 31
    "ks instead of k + ks": ([("(k + ks)", "ks")], "loads the same first blocks of A and B"),
    "a * b instead of tl.dot": ([(_DOT, "acc += a * b")], "never calls tl.dot"),
    "a * b, summed": ([(_DOT, "acc += tl.sum(a * b)")], "never calls tl.dot"),
    "B's rows with stride_am": ([(_B, _B.replace("stride_bk", "stride_am"))], "B's rows are read with A's stride"),
    "A's strides swapped": ([(_A, _A.replace("stride_am + (k + ks)[None, :] * stride_ak",
                                             "stride_ak + (k + ks)[None, :] * stride_am"))], "A's strides are swapped"),
    "stride_cn ignored": ([(_C, _C.replace("cols[None, :] * stride_cn", "cols[None, :]"))],
                          "ignores C's column stride"),
    # the loop over K
    "nothing stored": ([("    tl.store(", "    return\n    tl.store(")], "nothing was stored"),
    "one K step": ([(_LOOP, "for k in range(0, BLOCK_K, BLOCK_K):")], "only the first step of K"),
    "the first K step skipped": ([(_LOOP, "for k in range(BLOCK_K, K, BLOCK_K):")], "first step of K is missing"),
    "K // BLOCK_K steps": ([(_LOOP, "for k in range(0, (K // BLOCK_K) * BLOCK_K, BLOCK_K):")],
                           "last, partial step of K is missing"),
    "steps of 1": ([(_LOOP, "for k in range(0, tl.cdiv(K, BLOCK_K)):")], "steps of K overlap"),
    "only A's K offsets stay": ([(_A, _A.replace("(k + ks)", "ks")), (_A_MASK, _A_MASK.replace("(k + ks)", "ks"))],
                                "same first block of A"),
    "no K mask": ([(" & ((k + ks)[None, :] < K)", ""), ("((k + ks)[:, None] < K) & ", "")], "reads past K"),
    "no K mask on B": ([("((k + ks)[:, None] < K) & ", "")], "the loads read 768 elements outside B"),
    "only the last K step": ([(_DOT, "acc = tl.dot(a, b)")], "only the last step of K"),
    "a float16 accumulator": ([("dtype=tl.float32)", "dtype=tl.float16)")], "Accumulate in float32"),
    "a scalar accumulator": ([("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)", "acc = 0.0"),
                              (_DOT, "acc += tl.dot(a, b)")], "cannot compile it for a GPU"),
    # addresses
    "K as A's row stride": ([(_A, _A.replace("rows[:, None] * stride_am", "rows[:, None] * K"))],
                            "A's rows are taken K elements apart"),
    "stride_ak ignored": ([(_A, _A.replace("(k + ks)[None, :] * stride_ak", "(k + ks)[None, :]"))],
                          "A's columns are taken side by side"),
    "B's strides swapped": ([(_B, _B.replace("stride_bk + cols[None, :] * stride_bn",
                                             "stride_bn + cols[None, :] * stride_bk"))], "B's strides are swapped"),
    "N as B's row stride": ([(_B, _B.replace("* stride_bk", "* N"))], "B's rows are taken N elements apart"),
    "stride_bn ignored": ([(_B, _B.replace("cols[None, :] * stride_bn", "cols[None, :]"))],
                          "B's columns are taken side by side"),
    "B read from a_ptr": ([(_B, _B.replace("b_ptr", "a_ptr"))], "B's block is read from a_ptr"),
    "N as C's row stride": ([(_C, _C.replace("rows[:, None] * stride_cm", "rows[:, None] * N"))],
                            "use stride_cm and stride_cn, never N"),
    "C's strides swapped": ([(_C, _C.replace("stride_cm + cols[None, :] * stride_cn",
                                             "stride_cn + cols[None, :] * stride_cm"))], "C comes out transposed"),
    "stores into A": ([(_C, _C.replace("c_ptr", "a_ptr"))], "wrote into A"),
    # tiles and masks
    "program ids swapped": ([(_MROWS, _MROWS.replace("program_id(0)", "program_id(1)")),
                             (_MCOLS, _MCOLS.replace("program_id(1)", "program_id(0)"))], "yours are swapped"),
    "one program id for both": ([(_MCOLS, _MCOLS.replace("program_id(1)", "program_id(0)"))],
                                "both come from tl.program_id(0)"),
    "rows step by BLOCK_N": ([(_MROWS, _MROWS.replace("* BLOCK_M", "* BLOCK_N"))], "overlap or leave gaps"),
    "no store mask": ([(", acc.to(c_ptr.dtype.element_ty),\n             " + _C_MASK,
                        ", acc.to(c_ptr.dtype.element_ty))")], "outside C"),
    "store mask with N and M swapped": ([(_C_MASK, "mask=(rows[:, None] < N) & (cols[None, :] < M))")],
                                        "compares rows with N or columns with M"),
    "columns masked with M": ([(_C_MASK, "mask=(rows[:, None] < M) & (cols[None, :] < M))")],
                              "compares rows with N or columns with M"),
    "a store mask on rows only": ([(_C_MASK, "mask=rows[:, None] < M)")], "checks only the rows"),
    "loads unmasked at the edges of M and N": ([("(rows[:, None] < M) & ((k + ks)", "((k + ks)"),
                                                (" & (cols[None, :] < N), other", ", other")],
                                               "the results are right, but the loads read"),
    "tl.dot(b, a)": ([(_DOT, "acc = tl.dot(b, a, acc)")], "tl.dot"),
    # from the learner's review
    "a float16 store into a float32 C": ([("acc.to(c_ptr.dtype.element_ty)", "acc.to(tl.float16)")],
                                         "rounded the accumulator to float16"),
    "a bfloat16 store into a float32 C": ([("acc.to(c_ptr.dtype.element_ty)", "acc.to(tl.bfloat16)")],
                                          "rounded the accumulator to bfloat16"),
    "a sum of broadcast products, no tl.dot": ([(_DOT, "acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)")],
                                               "only tl.dot(a, b) reaches them"),
    "torch.matmul in the kernel": ([(_DOT, "acc += torch.matmul(a, b)")], "torch cannot run inside"),
    "rows step by 1": ([(_MROWS, "rows = tl.program_id(0) + tl.arange(0, BLOCK_M)")], "the rows step by 1"),
    "columns step by 1": ([(_MCOLS, "cols = tl.program_id(1) + tl.arange(0, BLOCK_N)")], "the columns step by 1"),
    "B's K stride taken from A": ([(_B, _B.replace("stride_bk", "stride_ak"))], "read with A's K stride"),
    "A's K stride taken from B": ([(_A, _A.replace("stride_ak", "stride_bk"))], "read with B's K stride"),
    "the store with stride_am": ([(_C, _C.replace("stride_cm", "stride_am"))], "the store uses A's row stride"),
    "range(0, K) in steps of 1": ([(_LOOP, "for k in range(0, K):")], "range(0, K) has a step of 1"),
    "A's rows masked with N": ([(_A_MASK, _A_MASK.replace("rows[:, None] < M", "rows[:, None] < N"))],
                               "masks its rows with N"),
    # the interpreter sees the stray loads where M > N; a GPU, the zeros where N > M
    "B's columns masked with M": ([(_B_MASK, _B_MASK.replace("cols[None, :] < N", "cols[None, :] < M"))],
                                  "read 8 elements outside B" if course.INTERPRET else "masks its columns with M"),
    "range(0, K - BLOCK_K, BLOCK_K)": ([(_LOOP, "for k in range(0, K - BLOCK_K, BLOCK_K):")],
                                       "stops one step short"),
    # from the second review
    "range(0, K - 1, BLOCK_K)": ([(_LOOP, "for k in range(0, K - 1, BLOCK_K):")], "one element long here, is missing"),
    "columns counted with BLOCK_M": ([(_MCOLS, _MCOLS.replace("arange(0, BLOCK_N)", "arange(0, BLOCK_M)")),
                                      (_ACC, _ACC.replace("(BLOCK_M, BLOCK_N)", "(BLOCK_M, BLOCK_M)"))],
                                     "columns are counted with BLOCK_M"),
    "rows counted with BLOCK_N": ([(_MROWS, _MROWS.replace("arange(0, BLOCK_M)", "arange(0, BLOCK_N)")),
                                   (_ACC, _ACC.replace("(BLOCK_M, BLOCK_N)", "(BLOCK_N, BLOCK_N)"))],
                                  "rows are counted with BLOCK_N"),
    "rows and columns sized the other way round": (
        [(_MROWS, _MROWS.replace("arange(0, BLOCK_M)", "arange(0, BLOCK_N)")),
         (_MCOLS, _MCOLS.replace("arange(0, BLOCK_N)", "arange(0, BLOCK_M)")),
         (_ACC, _ACC.replace("(BLOCK_M, BLOCK_N)", "(BLOCK_N, BLOCK_M)"))], "the other way round"),
    "rows counted with BLOCK_N, the accumulator kept": ([(_MROWS, _MROWS.replace("arange(0, BLOCK_M)",
                                                                                 "arange(0, BLOCK_N)"))],
                                                        "does not have the accumulator's shape"),
    # a GPU may give garbage in the masked-off lanes; under the interpreter the check gives NaN there
    "loads without other=": ([(_A_MASK, _A_MASK.replace(", other=0.0", "")),
                              (_B_MASK, _B_MASK.replace(", other=0.0", ""))], "other="),
    "A's load without other=": ([(_A_MASK, _A_MASK.replace(", other=0.0", ""))], "other="),
    # from the third review
    "inputs rounded to float16": ([(_DOT, "acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)")],
                                  "rounded to float16 before tl.dot"),
    "B's block rounded to float16": ([(_DOT, "acc = tl.dot(a, b.to(tl.float16).to(tl.float32), acc)")],
                                     "B's block was rounded to float16 before tl.dot"),
    "inputs rounded to bfloat16": ([(_DOT, "acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)")],
                                   "converts to bfloat16"),
    "B's K masked with M": ([(_B_MASK, _B_MASK.replace("(k + ks)[:, None] < K", "(k + ks)[:, None] < M"))],
                            "the offsets along K are masked with M"),
    "A's K masked with N": ([(_A_MASK, _A_MASK.replace("(k + ks)[None, :] < K", "(k + ks)[None, :] < N"))],
                            "the offsets along K are masked with N"),
    "acc += tl.dot(a, b, acc)": ([(_DOT, "acc += tl.dot(a, b, acc)")], "the accumulator is added twice"),
    "K masked with K - 1": ([(_A_MASK, _A_MASK.replace("< K)", "< K - 1)")),
                             (_B_MASK, _B_MASK.replace("< K)", "< K - 1)"))], "drops K's last element"),
    "B's K masked with K - 1": ([(_B_MASK, _B_MASK.replace("< K)", "< K - 1)"))], "drops K's last element"),
    "K masked with <= K": ([(_A_MASK, _A_MASK.replace("< K)", "<= K)")), (_B_MASK, _B_MASK.replace("< K)", "<= K)"))],
                           "let one element past K through"),
}


def test_matmul_kernel_reference_passes(capsys):
    exercises.check_matmul_kernel(solutions.matmul_kernel)
    assert capsys.readouterr().out.startswith("✓ matmul_kernel: right")


# Loads past an edge whose values the kernel then throws away leave the results right: only the
# interpreter, which sees every address, can tell.
SEEN_ONLY_BY_THE_INTERPRETER = ("no K mask on B", "loads unmasked at the edges of M and N",
                                # compiled, tl.dot rounds float32 to tf32 (10 bits) anyway: 16-bit inputs
                                # are within its tolerance; the interpreter's float32 product is exact enough
                                "inputs rounded to float16", "inputs rounded to bfloat16",
                                "B's block rounded to float16")


def test_matmul_kernel_wrong_answers_get_their_own_messages(tmp_path):
    table = {label: (_matmul(tmp_path, f"variant_{i}", *edits), words)
             for i, (label, (edits, words)) in enumerate(MATMUL_WRONG.items())
             if course.INTERPRET or label not in SEEN_ONLY_BY_THE_INTERPRETER}
    assert_wrong_answers_named(exercises.check_matmul_kernel, table,
                               same_mistake=("store mask with N and M swapped", "columns masked with M",
                                             "K masked with K - 1", "B's K masked with K - 1",
                                             "a * b, summed", "a sum of broadcast products, no tl.dot",
                                             "loads without other=", "A's load without other="))


_TUTORIAL = '''
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < left) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
'''

_WITH_A_HELPER = '''
@triton.jit
def tile_product(a_ptr, b_ptr, rows, cols, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k = 0
    while k < K:
        ks = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc=acc)
        k += BLOCK_K
    return acc


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tile_product(a_ptr, b_ptr, rows, cols, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       BLOCK_M, BLOCK_N, BLOCK_K)
    in_c = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc, mask=in_c)
'''


_IEEE = edited_source(solutions.matmul_kernel, (_DOT, "acc += tl.dot(a, b, input_precision='ieee')"),
                      ("acc.to(c_ptr.dtype.element_ty)", "acc"))


@pytest.mark.parametrize("label, source", [("the tutorial's moving pointers, acc += tl.dot", _TUTORIAL),
                                           ("tl.dot in full float32, the accumulator stored as it is", _IEEE),
                                           ("a helper of its own, a while loop, tl.dot(acc=)", _WITH_A_HELPER),
                                           ("the solution cell", solutions.source("matmul_kernel")
                                            .replace("exercises.check", "# "))])
def test_a_correct_matmul_written_another_way_passes(tmp_path, label, source):
    kernel = _module(tmp_path, "matmul_right", source).matmul_kernel
    verdict = quiet(exercises.check_matmul_kernel, kernel)
    assert verdict.passed, verdict.line


def test_matmul_kernel_misuse_and_the_course_s_own_kernel(tmp_path):
    assert "did you forget @triton.jit" in quiet(exercises.check_matmul_kernel, solutions.axpy).message
    assert "pass the @triton.jit kernel" in quiet(exercises.check_matmul_kernel, 3).message
    assert "keep the signature" in quiet(exercises.check_matmul_kernel, solutions.axpy_kernel).message
    assert quiet(exercises.check_matmul_kernel, stub_kernel).status == "not attempted"
    assert "the course's own tiled.matmul_kernel" in quiet(exercises.check_matmul_kernel, tiled.matmul_kernel).message
    borrowed = _module(tmp_path, "borrowed", '''
from course import tiled


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tiled.matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      tl.program_id(0), tl.program_id(1), BLOCK_M, BLOCK_N, BLOCK_K)
''').matmul_kernel
    assert "calls the course's tiled.matmul_tile" in quiet(exercises.check_matmul_kernel, borrowed).message


@pytest.mark.parametrize("label, edits, words", [
    ("B's rows with stride_am, unmasked", [(_B, _B.replace("stride_bk", "stride_am")),
                                           (_B_MASK, ")")], "B's rows are read with A's stride"),
    ("A's strides swapped, unmasked", [(_A, _A.replace("stride_am + (k + ks)[None, :] * stride_ak",
                                                       "stride_ak + (k + ks)[None, :] * stride_am")),
                                       (_A_MASK, ")")], "A's strides are swapped"),
    ("no masks anywhere", [(_A_MASK, ")"), (_B_MASK, ")"),
                           (",\n             " + _C_MASK, ")")], "nothing is masked"),
    ("huge strides", [(_A, _A.replace("stride_am", "stride_am * stride_am * 4096")), (_A_MASK, ")")],
     "outside every tensor"),
    ("a store far outside C", [(_C, _C.replace("stride_cn", "stride_cn * 100000")),
                               (",\n             " + _C_MASK, ")")], "outside every tensor"),
    # the learner's review: a notebook cell timed out first (90 s); the check gives up after core.TIME_LIMIT_S
    pytest.param("a while loop that never advances", [(_LOOP, "k = 0\n    while k < K:")], "gave up",
                 marks=interpreter_only),
])
def test_a_matmul_that_strays_or_hangs_ends_with_one_line(label, edits, words):
    words = _on_this_machine(words)
    source = edited_source(solutions.matmul_kernel, *edits)
    assert_survives("check_matmul_kernel", source, "matmul_kernel", words, time_limit_s=10)


# --- both: smallest case first, stop at the first wrong one ------------------------------------------

def test_a_wrong_matmul_is_launched_once_on_the_smallest_case(tmp_path):
    kernel = _matmul(tmp_path, "once", (_A, _A.replace("stride_am + (k + ks)[None, :] * stride_ak",
                                                       "stride_ak + (k + ks)[None, :] * stride_am")))
    with exercises.launches() as seen:
        verdict = quiet(exercises.check_matmul_kernel, kernel)
    assert verdict.message.startswith("on one tile") and seen.kernels == [("matmul_kernel", 1)]


def test_a_wrong_transpose_is_launched_once_on_the_first_case(tmp_path):
    transpose = _transpose(tmp_path, "once", (_LOAD, _LOAD.replace("stride_xm + cols[None, :] * stride_xn",
                                                                   "stride_xn + cols[None, :] * stride_xm")))
    with exercises.launches() as seen:
        verdict = quiet(exercises.check_transpose, transpose)
    assert verdict.message.startswith("on whole tiles") and seen.kernels == [("transpose_kernel", 6)]


def test_answers_that_are_or_call_the_reference_are_refused(monkeypatch):
    """In a notebook (REFUSE_REFERENCE on, as there), the reference solution itself is no answer."""
    monkeypatch.setattr(exercises.core, "REFUSE_REFERENCE", True)
    verdict = quiet(exercises.check_matmul_kernel, solutions.matmul_kernel)
    assert verdict.status == "failed" and "course.solutions.matmul_kernel" in verdict.message, verdict.line
    verdict = quiet(exercises.check_transpose, lambda x, out, block_m, block_n:
                    solutions.transpose(x, out, block_m, block_n))
    assert verdict.status == "failed" and "reference solution (course.solutions" in verdict.message, verdict.line
