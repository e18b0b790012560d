"""The catalogue of notebook 07's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import importlib.util

import pytest

from course import exercises, runtime, solutions

from catalogue import assert_survives, assert_wrong_answers_named, edited_source, interpreter_only, quiet

_HEADER = ("import triton\nimport triton.language as tl\n"
           "from course.stages import GemmContext, ScheduleContext, Tile, make_output_view, make_tensor_view\n"
           "from course import stages_kernels, solutions, tiled\nimport torch\n\n")


def _kernel(tmp_path, name, reference, *edits):
    """``reference`` (a kernel of course.solutions) with ``edits``, in a module of its own (as a learner's cell)."""
    path = tmp_path / f"{name}.py"
    path.write_text(_HEADER + edited_source(reference, *edits))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, reference.fn.__name__)


def _survives(tmp_path, check, reference, edits, *words):
    """``assert_survives`` on ``reference`` with ``edits``, kept in a file so that the check can read its source."""
    path = tmp_path / "learner_cell.py"
    path.write_text(_HEADER + edited_source(reference, *edits))
    name = reference.fn.__name__
    cell = f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nfrom learner_cell import {name}\n"
    return assert_survives(check, cell, name, *words, time_limit_s=15)


_STOPPED = "outside" if runtime.INTERPRET else ""  # the interpreter's bounds check says so; a GPU gives garbage


_VIEW_A = "tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)"
_VIEW_B = "tensorB = make_tensor_view(W, K, N, stride_wk, stride_wn)"
_VIEW_C = "tensorC = make_output_view(C, M, N, stride_cm, stride_cn)"
_LOOP = "for tile_id in range(start, total, stride):"
_REDUCE = "ctx.reduce_axis(tensorA, tensorB, out_tile)"
_BY_STEPS = """acc = ctx.init_accumulator()
        for k_idx in range({steps}):
            acc = ctx.reduce_tile(tensorA, tensorB, out_tile, k_idx, acc{boundary})
        tensorC.store(acc, out_tile)"""


def _first(statement):
    """An edit that puts ``statement`` at the top of the kernel's body."""
    return [("    tensorA = make_tensor_view", f"    {statement}\n    tensorA = make_tensor_view")]


_COURSE_KERNEL = ("stages_kernels.stages_persistent_kernel(A, W, C, M, N, K, stride_am, stride_ak, stride_wk, "
                  "stride_wn, stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, 8, NUM_SMS, EVEN_K)")
_SOLUTION = ("solutions.linear_kernel(A, W, C, M, N, K, stride_am, stride_ak, stride_wn, stride_wk, stride_cm, "
             "stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, EVEN_K)")


def _by_steps(steps="tl.cdiv(K, BLOCK_K)", boundary=", boundary=True"):
    return [("tensorC.store(" + _REDUCE + ", out_tile)", _BY_STEPS.format(steps=steps, boundary=boundary))]


# A float16 accumulator written by hand, each step's float32 product converted and added (issue 31, second review)
_FP16_SUM = """acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
        for k_idx in range(tl.cdiv(K, BLOCK_K)):
            acc = acc + ctx.reduce_tile(tensorA, tensorB, out_tile, k_idx, ctx.init_accumulator(),
                                        boundary=True).to(tl.float16)
        tensorC.store(acc, out_tile)"""


_STORE = "tensorC.store(" + _REDUCE + ", out_tile)"
# the first step taken before the loop, then again in it
_FIRST_STEP_TWICE = """acc = ctx.reduce_tile(tensorA, tensorB, out_tile, 0, ctx.init_accumulator(), boundary=True)
        for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
            acc = ctx.reduce_tile(tensorA, tensorB, out_tile, k_idx, acc, boundary=True)
        tensorC.store(acc, out_tile)"""


# --- 07: linear with the stages -----------------------------------------------------------------------

LINEAR_WRONG = {  # label: (edits of solutions.linear_kernel, words its message must contain)
    "reduce_tile without boundary": (_by_steps(boundary=""), "boundary=True"),
    "reduce_tile, K rounded down": (_by_steps(steps="K // BLOCK_K"), "your K loop stops before it"),
    "strides swapped": ([(_VIEW_B, "tensorB = make_tensor_view(W, K, N, stride_wn, stride_wk)")],
                        "the strides the wrong way round"),
    "W, not W.T": ([(_VIEW_B, "tensorB = make_tensor_view(W, N, K, stride_wn, stride_wk)")],
                   # the interpreter stops the kernel at the stages' own check; compiled, the result tells
                   "build both views with the same K" if runtime.INTERPRET else "B's view is W as stored"),
    "B strides hard-coded": ([(_VIEW_B, "tensorB = make_tensor_view(W, K, N, 1, K)")], "stride arguments"),
    "A strides hard-coded": ([(_VIEW_A, "tensorA = make_tensor_view(A, M, K, K, 1)")], "stride arguments"),
    "even_k left out": ([(", even_k=EVEN_K)", ")")], "even_k"),  # the interpreter's assertion, or the diagnosis
    "one tile per program": ([(_LOOP, "for tile_id in range(start, start + 1):")], "never stored"),
    "nothing stored": ([("        tensorC.store(" + _REDUCE + ", out_tile)", "        " + _REDUCE)],
                       "nothing was stored"),
    "wrong signature": ([("stride_wn, stride_wk, stride_cm", "stride_wk, stride_wn, stride_cm")],
                        "keep the signature"),
    "every program every tile": ([(_LOOP, "for tile_id in range(0, total, 1):")], "belong to other programs"),
    "schedule N x M": ([("sched = ScheduleContext(M, N, K, ctx)", "sched = ScheduleContext(N, M, K, ctx)")],
                       "check the sizes you give"),
    "calls the course's kernel": (_first(_COURSE_KERNEL), "calls course.stages_kernels.stages_persistent_kernel"),
    "calls the solution": (_first(_SOLUTION), "calls course.solutions.linear_kernel"),
    "calls torch": ([("        out_tile = sched", "        torch.matmul(A, W)\n        out_tile = sched")],
                    "calls torch.matmul"),
    # issue 31's review: passed (fp16 accumulation stays within the tolerance on a short K) / misdiagnosed
    "accumulates in float16": ([(", even_k=EVEN_K)", ", even_k=EVEN_K, acc_dtype=tl.float16)")],
                               "accumulate in float32"),
    "schedule step stride + 1": ([(_LOOP, "for tile_id in range(start, total, stride + 1):")],
                                 "another step than persistent_tile_range's stride"),
    # the second review: passed (a float16 sum of its own, on a K of 40 at most) / misdiagnosed
    "a float16 accumulator of its own": (
        [(", even_k=EVEN_K)", ", even_k=False)"), ("tensorC.store(" + _REDUCE + ", out_tile)", _FP16_SUM)],
        "times less precise than float16 allows"),
    "reduce_k_range to K // BLOCK_K": (
        [(", even_k=EVEN_K)", ", even_k=False)"),
         (_REDUCE, "ctx.reduce_k_range(tensorA, tensorB, out_tile, 0, K // BLOCK_K)")],
        "the range of steps you give reduce_k_range ends before it"),
    # the third review: values off, their places right (all were told to check the views' sizes and strides)
    "C rounded to bfloat16 before the store": ([(_STORE, "tensorC.store(" + _REDUCE + ".to(tl.bfloat16), out_tile)")],
                                               "rounded to bfloat16 on their way to the store"),
    "the accumulator passed through bfloat16": (
        [(_STORE, "tensorC.store(" + _REDUCE + ".to(tl.bfloat16).to(tl.float32), out_tile)")],
        "rounded to bfloat16 on their way to the store"),
    "reduce_k_range from step 1": ([(_REDUCE, "ctx.reduce_k_range(tensorA, tensorB, out_tile, 1, "
                                              "tl.cdiv(K, BLOCK_K))")],
                                   "the first step of K (k from 0 to 16) is missing from the sum (2 steps of BLOCK_K "
                                   "here): the range of steps you give reduce_k_range"),
    "reduce_tile from step 1": (_by_steps(steps="1, tl.cdiv(K, BLOCK_K)"),
                                "the first step of K (k from 0 to 16) is missing from the sum (2 steps of BLOCK_K "
                                "here): your K loop must visit every k_idx"),
    "reduce_k_range one step short": ([(_REDUCE, "ctx.reduce_k_range(tensorA, tensorB, out_tile, 0, "
                                                 "tl.cdiv(K, BLOCK_K) - 1)")],
                                      "the last step of K (k from 16 to 32) is missing from the sum"),
    "the first step counted twice": ([(_STORE, _FIRST_STEP_TWICE)], "the first step of K (k from 0 to 16) is added "
                                                                    "twice"),
    "the accumulator times 1.01": ([(_STORE, "tensorC.store(" + _REDUCE + " * 1.01, out_tile)")],
                                   "all scaled by the same factor, about 1.01"),
    "the accumulator times 1.001 (within float16's tolerance)": (
        [(_STORE, "tensorC.store(" + _REDUCE + " * 1.001, out_tile)")], "all scaled by the same factor, about 1.001"),
    "a constant added to the accumulator": ([(_STORE, "tensorC.store(" + _REDUCE + " + 0.5, out_tile)")],
                                            "all shifted by the same amount"),
}

_BY_HAND = """
@triton.jit
def linear_kernel(A, W, C, M, N, K, stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr,
                  EVEN_K: tl.constexpr):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile_id in range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * num_pid_n, NUM_SMS):
        rows = (tile_id // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = (tile_id % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            ks = k + tl.arange(0, BLOCK_K)
            a = tl.load(A + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                        mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
            b = tl.load(W + cols[None, :] * stride_wn + ks[:, None] * stride_wk,
                        mask=(cols[None, :] < N) & (ks[:, None] < K), other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(C + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(tl.float16),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))
"""


def _from_source(tmp_path, name, source, attribute):
    path = tmp_path / f"{name}.py"
    path.write_text(_HEADER + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, attribute)


def test_linear_passes_the_reference():
    assert quiet(exercises.check_linear, solutions.linear_kernel).passed


def test_each_wrong_linear_gets_its_own_message(tmp_path):
    table = {label: (_kernel(tmp_path, f"linear_{i}", solutions.linear_kernel, *edits), words)
             for i, (label, (edits, words)) in enumerate(LINEAR_WRONG.items())}
    table["without the stages"] = (_from_source(tmp_path, "by_hand", _BY_HAND, "linear_kernel"),
                                   "does not use the stages")
    assert_wrong_answers_named(exercises.check_linear, table,
                               same_mistake=("B strides hard-coded", "A strides hard-coded",
                                             "C rounded to bfloat16 before the store",
                                             "the accumulator passed through bfloat16"))


LINEAR_RIGHT = {
    "reduce_tile, every step masked": _by_steps(),
    "reduce_tile, the last step masked": _by_steps(boundary=", boundary=not EVEN_K"),
    "reduce_k_range": [(_REDUCE, "ctx.reduce_k_range(tensorA, tensorB, out_tile, 0, tl.cdiv(K, BLOCK_K))")],
    "the accumulator named": [("tensorC.store(" + _REDUCE + ", out_tile)",
                               "acc = " + _REDUCE + "\n        tensorC.store(acc, out_tile)")],
    "float32 accumulator named": [(", even_k=EVEN_K)", ", even_k=EVEN_K, acc_dtype=tl.float32)")],
    "the tile by coordinates": [("out_tile = sched.get_tile_from_idx(tile_id)",
                                 "t = sched.get_tile_from_idx(tile_id)\n"
                                 "        out_tile = sched.get_tile_from_coord(t.pid_m, t.pid_n)")],
}


@pytest.mark.parametrize("label", LINEAR_RIGHT)
def test_other_right_linears_pass(tmp_path, label):
    verdict = quiet(exercises.check_linear, _kernel(tmp_path, "right_linear", solutions.linear_kernel,
                                                    *LINEAR_RIGHT[label]))
    assert verdict.passed, verdict.line


@pytest.mark.parametrize("label, edits, words", [
    ("C's strides swapped", [(_VIEW_C, "tensorC = make_output_view(C, M, N, stride_cn, stride_cm)")], "C"),
    ("B's row stride for both", [(_VIEW_B, "tensorB = make_tensor_view(W, K, N, stride_wn, stride_wn)")],
     "check each view's sizes and strides"),
    ("A's strides far too big", [(_VIEW_A, "tensorA = make_tensor_view(A, M, K, stride_am * 1000, stride_ak)")],
     _STOPPED),
    ("C as N x M", [(_VIEW_C, "tensorC = make_output_view(C, N, M, stride_cm, stride_cn)")], "C"),
    pytest.param("a loop that never ends", [(_LOOP, "tile_id = start\n    while tile_id < total:")], "gave up",
                 marks=interpreter_only),
])
def test_crash_prone_linears_end_in_one_line(tmp_path, label, edits, words):
    _survives(tmp_path, "check_linear", solutions.linear_kernel, edits, words)


# --- 07: linear with a residual -----------------------------------------------------------------------

_VIEW_R = "tensorR = make_output_view(R, M, N, stride_rm, stride_rn)"
_ADD = "tensorC.store(acc + residual.to(tl.float32), out_tile)"
_LOAD_R = "residual = tensorR.load(out_tile, boundary=True)"
_R_IF = "if {}:\n            acc = acc + residual.to(tl.float32)\n        tensorC.store(acc, out_tile)"
RESIDUAL_WRONG = {  # label: (edits of solutions.linear_residual_kernel, words its message must contain)
    "calls the course's kernel": (_first(_COURSE_KERNEL), "calls course.stages_kernels.stages_persistent_kernel"),
    "calls the linear solution": (_first(_SOLUTION), "calls course.solutions.linear_kernel"),
    "calls torch": (_first("torch.addmm(R, A, W.T)"), "calls torch.addmm"),
    "no R": ([(_ADD, "tensorC.store(acc, out_tile)")], "without R"),
    "only R": ([(_ADD, "tensorC.store(residual.to(tl.float32), out_tile)")], "holds R alone"),
    "R twice": ([(_ADD, "tensorC.store(acc + 2 * residual.to(tl.float32), out_tile)")], "added twice"),
    "R subtracted": ([(_ADD, "tensorC.store(acc - residual.to(tl.float32), out_tile)")], "subtracted"),
    "R with its strides swapped": ([(_VIEW_R, "tensorR = make_output_view(R, M, N, stride_rn, stride_rm)")],
                                   "the wrong way round"),
    "R with C's strides": ([(_VIEW_R, "tensorR = make_output_view(R, M, N, stride_cm, stride_cn)")],
                           "read with C's strides"),
    "C read for R": ([(_LOAD_R, "residual = tensorC.load(out_tile, boundary=True)")], "C's old contents"),
    "R read after the store": ([(_LOAD_R, "tensorC.store(acc, out_tile)\n        " + _LOAD_R)],
                               "read R's tile before storing"),
    "R's view N x M": ([(_VIEW_R, "tensorR = make_output_view(R, N, M, stride_rm, stride_rn)")],
                       "R's tile is read wrong"),
    "W, not W.T": ([(_VIEW_B, "tensorB = make_tensor_view(W, K, N, stride_wn, stride_wk)")],
                   "the strides the wrong way round (with R = 0)"),
    "even_k left out": ([(", even_k=EVEN_K)", ")")], "even_k"),
    "one tile per program": ([(_LOOP, "for tile_id in range(start, start + 1):")], "never stored"),
    "wrong signature": ([("stride_rm, stride_rn,\n", "stride_rn, stride_rm,\n")], "keep the signature"),
    # issue 31's review: passed / misdiagnosed
    "accumulates in float16": ([(", even_k=EVEN_K)", ", even_k=EVEN_K, acc_dtype=tl.float16)")],
                               "accumulate in float32"),
    "R multiplied": ([(_ADD, "tensorC.store(acc * residual.to(tl.float32), out_tile)")], "not multiplied"),
    # the second review: passed (a float16 sum of its own, on a K of 40 at most)
    "a float16 accumulator of its own": (
        [(", even_k=EVEN_K)", ", even_k=False)"),
         ("        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)\n",
          "        " + _FP16_SUM.split("\n        tensorC.store")[0] + "\n")],
        "times less precise than float16 allows"),
    # the third review: R added under a condition (was "R's tile is read wrong"), and cousins
    "R added on tile 0 only": ([(_ADD, _R_IF.format("tile_id == 0"))],
                               "R was added on 1 of 8 tiles only: tile id 0 (of program 0) got it"),
    "R added by program 0 only": ([(_ADD, _R_IF.format("tl.program_id(0) == 0"))],
                                  "tiles only, all those of program 0 and no other's"),
    "R added on each program's first tile only": ([(_ADD, _R_IF.format("tile_id == start"))],
                                                  "tiles only, each program's first"),
    "R added on the first row of tiles only": ([(_ADD, _R_IF.format("out_tile.pid_m == 0"))],
                                               "R was added on 4 of 8 tiles only"),
    # the third review: passed (R small next to the product, its rounding within float16's tolerance)
    "R rounded through bfloat16": (
        [(_ADD, "acc += tensorR.load(out_tile).to(tl.bfloat16).to(tl.float32)\n        tensorC.store(acc, out_tile)")],
        "R's values lose bits on their way into the accumulator (your kernel converts to tl.bfloat16"),
}


def test_linear_residual_passes_the_reference():
    assert quiet(exercises.check_linear_residual, solutions.linear_residual_kernel).passed


def test_each_wrong_linear_residual_gets_its_own_message(tmp_path):
    table = {label: (_kernel(tmp_path, f"residual_{i}", solutions.linear_residual_kernel, *edits), words)
             for i, (label, (edits, words)) in enumerate(RESIDUAL_WRONG.items())}
    by_hand = _BY_HAND.replace("linear_kernel(A, W, C,", "linear_residual_kernel(A, W, R, C,").replace(
        "stride_wk, stride_cm", "stride_wk, stride_rm, stride_rn, stride_cm").replace(
        "acc.to(tl.float16)", "(acc + tl.load(R + rows[:, None] * stride_rm + cols[None, :] * stride_rn, "
        "mask=(rows[:, None] < M) & (cols[None, :] < N))).to(tl.float16)")
    table["without the stages"] = (_from_source(tmp_path, "by_hand", by_hand, "linear_residual_kernel"),
                                   "does not use the stages")
    assert_wrong_answers_named(exercises.check_linear_residual, table)


RESIDUAL_RIGHT = {
    "R unmasked (wrapped, the store masks)": [(_LOAD_R, "residual = tensorR.load(out_tile)")],
    "R through an input view": [(_VIEW_R, "tensorR = make_tensor_view(R, M, N, stride_rm, stride_rn)")],
    "R added in float16": [(_ADD, "tensorC.store((acc.to(tl.float16) + residual).to(tl.float32), out_tile)")],
    "R added to the float16 product (issue 31's review)": [
        (_ADD, "acc = acc.to(tl.float16) + tensorR.load(out_tile)\n        tensorC.store(acc, out_tile)")],
    "R loaded first": [("        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)\n        " + _LOAD_R,
                        "        " + _LOAD_R + "\n        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)")],
    "reduce_tile steps": [("        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)\n",
                           "        acc = ctx.init_accumulator()\n"
                           "        for k_idx in range(tl.cdiv(K, BLOCK_K)):\n"
                           "            acc = ctx.reduce_tile(tensorA, tensorB, out_tile, k_idx, acc,\n"
                           "                                  boundary=True)\n")],
}


@pytest.mark.parametrize("label", RESIDUAL_RIGHT)
def test_other_right_linear_residuals_pass(tmp_path, label):
    verdict = quiet(exercises.check_linear_residual, _kernel(tmp_path, "right_residual",
                                                             solutions.linear_residual_kernel, *RESIDUAL_RIGHT[label]))
    assert verdict.passed, verdict.line


@pytest.mark.parametrize("label, edits, words", [
    ("R's strides far too big", [(_VIEW_R, "tensorR = make_output_view(R, M, N, stride_rm * 1000, stride_rn)")],
     _STOPPED),
    ("R's row stride for both", [(_VIEW_R, "tensorR = make_output_view(R, M, N, stride_rm, stride_rm)")],
     "R's tile is read wrong"),
    ("C's strides swapped", [(_VIEW_C, "tensorC = make_output_view(C, M, N, stride_cn, stride_cm)")], "C"),
    pytest.param("a loop that never ends", [(_LOOP, "tile_id = start\n    while tile_id < total:")], "gave up",
                 marks=interpreter_only),
])
def test_crash_prone_linear_residuals_end_in_one_line(tmp_path, label, edits, words):
    _survives(tmp_path, "check_linear_residual", solutions.linear_residual_kernel, edits, words)
