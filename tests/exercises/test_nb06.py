"""The catalogue of notebook 06's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import importlib.util
import textwrap

import pytest

from course import exercises, runtime, solutions

from catalogue import (
    assert_survives,
    assert_wrong_answers_named,
    edited_source,
    interpreter_only,
    quiet,
    variant,
)


def _module(tmp_path, name, source):
    """The functions of ``source`` (a learner's cell: triton, tl and the course's helpers are imported)."""
    path = tmp_path / f"{name}.py"
    path.write_text("import triton\nimport triton.language as tl\n"
                    "from course.tiled import grouped_tile, matmul_tile\nfrom course.persistent import log_tile\n"
                    "from course import persistent, stages, solutions\n\n" + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- 06: the persistent loop --------------------------------------------------------------------------

_LOOP = "for tile_id in tl.range(pid, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):"
_MAP = "pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)"
_GRID_N = "num_pid_n = tl.cdiv(N, BLOCK_N)"
_GRID_M = "num_pid_m = tl.cdiv(M, BLOCK_M)"
_LOG = "log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n)"
_SIZES = "pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)"
_STRIDES = "stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,\n                    pid_m"
PERSISTENT_WRONG = {  # label: (edits of course.persistent.persistent_matmul_kernel, words its message must contain)
    "num_pid_n from BLOCK_M": ([(_GRID_N, "num_pid_n = tl.cdiv(N, BLOCK_M)")], "num_pid_n divides N by BLOCK_M"),
    "num_pid_m from BLOCK_N": ([(_GRID_M, "num_pid_m = tl.cdiv(M, BLOCK_N)")], "num_pid_m divides M by BLOCK_N"),
    "both blocks swapped": ([(_GRID_M, "num_pid_m = tl.cdiv(M, BLOCK_N)"),
                             (_GRID_N, "num_pid_n = tl.cdiv(N, BLOCK_M)")], "divide by each other's block"),
    "num_pid_n rounds down": ([(_GRID_N, "num_pid_n = N // BLOCK_N")], "num_pid_n rounds down"),
    "the grid rounds down": ([(_GRID_M, "num_pid_m = M // BLOCK_M"), (_GRID_N, "num_pid_n = N // BLOCK_N")],
                             "num_pid_m and num_pid_n round down"),
    "num_pid_m to log_tile": ([("    " + _LOG, "    log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_m)")],
                              "given num_pid_m where it takes num_pid_n"),
    "no loop": ([(_LOOP, "for tile_id in tl.range(pid, pid + 1):")], "only its first tile"),
    "stops early": ([(_LOOP, "for tile_id in tl.range(pid, num_tiles - 1, NUM_PROGRAMS):")], "the loop stops early"),
    "starts late": ([(_LOOP, "for tile_id in tl.range(pid + 1, num_tiles, NUM_PROGRAMS):")],
                    "where each program's loop starts"),
    "past the grid": ([(_LOOP, "for tile_id in tl.range(pid, 2 * num_tiles, NUM_PROGRAMS):")], "past the grid"),
    "swapped sizes": ([(_MAP, "pid_m, pid_n = grouped_tile(tile_id, num_pid_n, num_pid_m, GROUP_M)")],
                      "past the grid"),
    "no matmul_tile": ([("        matmul_tile(", "        if False:\n            matmul_tile(")],
                       "C was never written"),
    # from the third review
    "num_tiles = num_pid_m * num_pid_m": ([("num_tiles = num_pid_m * num_pid_n", "num_tiles = num_pid_m * num_pid_m")],
                                          "the loop runs over"),
    "num_tiles = num_pid_n * num_pid_n": ([("num_tiles = num_pid_m * num_pid_n", "num_tiles = num_pid_n * num_pid_n")],
                                          "(num_pid_n * num_pid_n here)"),
    "the loop bound num_pid_m + num_pid_n": ([(_LOOP, _LOOP.replace("num_tiles,", "num_pid_m + num_pid_n,"))],
                                             "(num_pid_m + num_pid_n here)"),
    "C's pointer given A's": ([("        matmul_tile(a_ptr, b_ptr, c_ptr,", "        matmul_tile(a_ptr, b_ptr, a_ptr,")],
                              "passes a_ptr where it takes c_ptr"),
    "step 1": ([(_LOOP, "for tile_id in tl.range(pid, num_tiles):")], "every tile from pid on"),
    "start at 0": ([(_LOOP, "for tile_id in tl.range(0, num_tiles, NUM_PROGRAMS):")], "started at tile 0"),
    "every tile everywhere": ([(_LOOP, "for tile_id in tl.range(0, num_tiles):")], "every program computed every"),
    "row-major ids": ([(_MAP, "pid_m, pid_n = tile_id // num_pid_n, tile_id % num_pid_n")], "go row by row"),
    "mapped the program id": ([(_MAP, "pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)")],
                              "map the loop's tile id"),
    "work under LOG": ([("        matmul_tile(", "        if LOG:\n            matmul_tile(")],
                       "only the call of log_tile belongs under"),
    "no log": ([("            " + _LOG, "            pass")], "no tile was logged"),
    "swapped tile": ([("pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)", "pid_n, pid_m, BLOCK_M, BLOCK_N, BLOCK_K)")],
                     "the product is wrong"),
    "log under other ids": ([("    " + _LOG, "    log_tile(log_ptr, pid, pid_m, pid_n, num_tiles, num_pid_n)")],
                            "log_tile got other tile ids"),
    "wrong signature": ([("NUM_PROGRAMS: tl.constexpr,\n", "")], "keep the signature"),
    # issue 31's review: misdiagnosed before
    "log_tile without if LOG": ([("        if LOG:\n            " + _LOG, "        " + _LOG)],
                                "calls log_tile outside `if LOG:`"),
    "num_tiles from the elements": ([("num_tiles = num_pid_m * num_pid_n",
                                      "num_tiles = tl.cdiv(M * N, BLOCK_M * BLOCK_N)")],
                                    "num_tiles must be num_pid_m * num_pid_n"),
    "GROUP_M hard-coded": ([(_MAP, "pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, 8)")],
                           "not given the kernel's GROUP_M"),
    # the second review: passed (BLOCK_K) / misdiagnosed (the step, the start)
    "BLOCK_K hard-coded": ([(_SIZES, _SIZES.replace("BLOCK_K)", "32)"))], "not given the kernel's BLOCK_K"),
    "BLOCK_M for BLOCK_K": ([(_SIZES, _SIZES.replace("BLOCK_K)", "BLOCK_M)"))],
                            "passes BLOCK_M where it takes BLOCK_K"),
    "step 4": ([(_LOOP, "for tile_id in tl.range(pid, num_tiles, 4):")],
               "the loop's step must be the number of programs"),
    "step NUM_PROGRAMS - 1": ([(_LOOP, "for tile_id in tl.range(pid, num_tiles, NUM_PROGRAMS - 1):")],
                              "the loop's step must be the number of programs"),
    "start at pid * NUM_PROGRAMS": ([(_LOOP, "for tile_id in tl.range(pid * NUM_PROGRAMS, num_tiles, NUM_PROGRAMS):")],
                                    "starts at tile id pid * NUM_PROGRAMS"),
}
def _pieces():
    from course import persistent, tiled

    return (tiled.grouped_tile, tiled.matmul_tile, persistent.log_tile, persistent.persistent_matmul_kernel)


def test_the_persistent_loop_passes_the_reference():
    assert quiet(exercises.check_persistent_loop, solutions.persistent_matmul_kernel).passed


def test_each_wrong_persistent_loop_gets_its_own_message(tmp_path):
    table = {label: (variant(tmp_path, f"persistent_{i}", _pieces(), *edits), words)
             for i, (label, (edits, words)) in enumerate(PERSISTENT_WRONG.items())}
    assert_wrong_answers_named(exercises.check_persistent_loop, table,
                               same_mistake=("past the grid", "swapped sizes", "step 4", "step NUM_PROGRAMS - 1"))


_KERNEL_HEAD = """
@triton.jit
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, log_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                             stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                             LOG: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
"""
_BODY = """
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)
        if LOG:
            log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n)
"""
# a tile written inline instead of matmul_tile (the second review): ACC the accumulator's dtype, SUM its update
_INLINE = """
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + rows[:, None] * stride_am + (k0 + ks)[None, :] * stride_ak,
                        mask=(rows[:, None] < M) & (k0 + ks[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k0 + ks)[:, None] * stride_bk + cols[None, :] * stride_bn,
                        mask=(k0 + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
            acc = SUM
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))
        if LOG:
            log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n)
"""


def _inline(acc, total):
    return (_KERNEL_HEAD + "    for tile_id in range(pid, num_tiles, NUM_PROGRAMS):\n"
            "        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)" +
            _INLINE.replace("ACC", acc).replace("SUM", total))


PERSISTENT_RIGHT = {
    "a plain range": _KERNEL_HEAD + "    for tile_id in range(pid, num_tiles, NUM_PROGRAMS):" + _BODY,
    "a while loop": _KERNEL_HEAD + "    tile_id = pid\n    while tile_id < num_tiles:" + _BODY
    + "        tile_id += NUM_PROGRAMS\n",
    "the log first": _KERNEL_HEAD + """
    for tile_id in tl.range(pid, num_tiles, NUM_PROGRAMS):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        if LOG:
            log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n)
        matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)
""",
    "a tile of its own, acc + tl.dot": _inline("tl.float32", "acc + tl.dot(a, b)"),
    "keywords in another order": _KERNEL_HEAD + """
    for tile_id in range(pid, num_tiles, NUM_PROGRAMS):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am=stride_am, stride_ak=stride_ak, stride_bk=stride_bk,
                    stride_bn=stride_bn, stride_cn=stride_cn, stride_cm=stride_cm, pid_n=pid_n, pid_m=pid_m,
                    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        if LOG:
            log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n)
""",
}


@pytest.mark.parametrize("label", PERSISTENT_RIGHT)
def test_other_right_persistent_loops_pass(tmp_path, label):
    kernel = _module(tmp_path, "right_loop", PERSISTENT_RIGHT[label]).persistent_matmul_kernel
    verdict = quiet(exercises.check_persistent_loop, kernel)
    assert verdict.passed, verdict.line


def test_a_float16_accumulator_of_its_own_is_caught_on_a_long_k(tmp_path):
    kernel = _module(tmp_path, "fp16_sum", _inline("tl.float16", "(acc + tl.dot(a, b)).to(tl.float16)"))
    verdict = quiet(exercises.check_persistent_loop, kernel.persistent_matmul_kernel)
    assert verdict.status == "failed" and "times less precise than float16 allows" in verdict.message, verdict.line


def test_a_loop_that_calls_the_courses_kernel_is_refused(tmp_path):
    source = _KERNEL_HEAD + """
    persistent.persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, log_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                                        stride_bn, stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                                        NUM_PROGRAMS, LOG)
"""
    verdict = quiet(exercises.check_persistent_loop, _module(tmp_path, "borrowed", source).persistent_matmul_kernel)
    assert verdict.status == "failed" and "calls course.persistent.persistent_matmul_kernel" in verdict.message


def test_a_comment_naming_the_courses_kernel_is_no_call(tmp_path):
    source = PERSISTENT_RIGHT["a plain range"].replace(
        "    pid = tl.program_id(0)", "    pid = tl.program_id(0)  # as persistent.persistent_matmul_kernel does")
    kernel = _module(tmp_path, "commented", source).persistent_matmul_kernel
    assert quiet(exercises.check_persistent_loop, kernel).passed


def _persistent_source(*edits):
    return edited_source(_pieces(), *edits)


def _survives(tmp_path, check, source, argument, *words, time_limit_s=15):
    """``assert_survives`` on a learner's cell kept in a file, so that the check can read its source."""
    path = tmp_path / "learner_cell.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + source)
    cell = f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nfrom learner_cell import {argument}\n"
    return assert_survives(check, cell, argument, *words, time_limit_s=time_limit_s)


@pytest.mark.parametrize("label, edits, words", [
    ("B's strides swapped", [(_STRIDES, "stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,\n"
                                        "                    pid_m")], "passes stride_bn where it takes stride_bk"),
    ("A's row stride for B's", [(_STRIDES, "stride_am, stride_ak, stride_am, stride_bn, stride_cm, stride_cn,\n"
                                           "                    pid_m")], "passes stride_am where it takes stride_bk"),
    ("A's strides swapped", [(_STRIDES, "stride_ak, stride_am, stride_bk, stride_bn, stride_cm, stride_cn,\n"
                                        "                    pid_m")], "passes stride_ak where it takes stride_am"),
    ("C's strides swapped", [(_STRIDES, "stride_am, stride_ak, stride_bk, stride_bn, stride_cn, stride_cm,\n"
                                        "                    pid_m")], "passes stride_cn where it takes stride_cm"),
    ("C's row stride twice", [(_STRIDES, "stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cm,\n"
                                         "                    pid_m")], "passes stride_cm where it takes stride_cn"),
    ("no masks at all", [("mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0", ""),
                         ("mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0", ""),
                         ("c,\n             mask=(rows[:, None] < M) & (cols[None, :] < N)", "c")], "outside C"),
    ("tiles counted in elements", [("num_tiles = num_pid_m * num_pid_n", "num_tiles = M * N")], "log"),
    pytest.param("an endless while loop", [(_LOOP, "tile_id = pid\n    while tile_id < num_tiles:")], "gave up",
                 marks=interpreter_only),
])
def test_crash_prone_persistent_loops_end_in_one_line(tmp_path, label, edits, words):
    _survives(tmp_path, "check_persistent_loop", _persistent_source(*edits), "persistent_matmul_kernel", words)


# --- 06: the chiplet remap ----------------------------------------------------------------------------

_REMAP = """
@triton.jit
def chiplet_remap(pid, num_sms, num_xcds):
{body}
"""


def _remap(tmp_path, name, body, head=_REMAP):
    body = "\n".join(textwrap.dedent(part) for part in body.split("\n\n"))  # _PARTS, then the rest
    return _module(tmp_path, name, head.format(body=textwrap.indent(body, "    "))).chiplet_remap


_PARTS = """
xcd = pid % num_xcds
local = pid // num_xcds
per_xcd = num_sms // num_xcds
extra = num_sms % num_xcds

"""
REMAP_WRONG = {  # label: (body of chiplet_remap, words its message must contain)
    "calls chiplet_transform": ("return stages.chiplet_transform(pid, num_sms, num_xcds)",
                                "calls course.stages.chiplet_transform"),
    "calls the chunked remap": ("return stages.chiplet_transform_chunked(pid, num_sms, num_xcds, 1)",
                                "calls course.stages.chiplet_transform_chunked"),
    "calls the solution": ("return solutions.chiplet_remap(pid, num_sms, num_xcds)",
                           "calls course.solutions.chiplet_remap"),
    "no remap": ("return pid", "gave every program its own id back"),
    "no remainder": (_PARTS + "return xcd * per_xcd + local", "went to two programs or more"),
    "rounded up": (_PARTS + "return xcd * tl.cdiv(num_sms, num_xcds) + local", "outside 0"),
    "maximum for minimum": (_PARTS + "return xcd * per_xcd + tl.maximum(xcd, extra) + local", "outside 0"),
    "one short": (_PARTS + "return xcd * per_xcd + tl.minimum(xcd, extra - 1) + local", "got id -1"),
    "backwards": ("""
        per_xcd = num_sms // num_xcds
        return (pid % per_xcd) * num_xcds + pid // per_xcd
        """, "backwards"),
    "eight XCDs always": ("""
        xcd = pid % 8
        per_xcd = num_sms // 8
        return xcd * per_xcd + tl.minimum(xcd, num_sms % 8) + pid // 8
        """, "those of 8 XCDs"),
    "true division": (_PARTS + "return xcd * (num_sms / num_xcds) + local", "returned a float"),
    "runs in reverse": (_PARTS + """
        first = xcd * per_xcd + tl.minimum(xcd, extra)
        count = per_xcd + (xcd < extra).to(tl.int32)
        return first + count - 1 - local
        """, "its programs take them in another order"),
    "XCDs in reverse": (_PARTS + """
        count = per_xcd + (xcd < extra).to(tl.int32)
        return num_sms - (xcd * per_xcd + tl.minimum(xcd, extra)) - count + local
        """, "not in the XCDs' order"),
    "returns nothing": (_PARTS + "xcd * per_xcd + tl.minimum(xcd, extra) + local", "returns nothing"),
    # issue 31's review: misdiagnosed before
    "imports the course's remap inside": ("from course.stages import chiplet_transform\n"
                                          "return chiplet_transform(pid, num_sms, num_xcds)",
                                          "imports chiplet_transform inside its body"),
    "returns two values": (_PARTS + "new = xcd * per_xcd + tl.minimum(xcd, extra) + local\nreturn new, xcd",
                           "return one value"),
    # the third review: right only while pid is the program's id
    "tl.program_id(0) for pid": ("""
        p = tl.program_id(0)
        xcd = p % num_xcds
        return xcd * (num_sms // num_xcds) + tl.minimum(xcd, num_sms % num_xcds) + p // num_xcds
        """, "must compute from its argument pid alone, not from tl.program_id"),
}


def test_the_chiplet_remap_passes_the_reference():
    assert quiet(exercises.check_chiplet_remap, solutions.chiplet_remap).passed


def test_the_reference_remap_is_the_courses(tmp_path):
    from course import persistent
    from course.exercises import nb06

    for num_sms, num_xcds, _ in nb06._remap_cases():
        assert persistent.chiplet_table(num_sms, num_xcds).tolist() == nb06._reference_remap(num_sms, num_xcds)


def test_each_wrong_chiplet_remap_gets_its_own_message(tmp_path):
    table = {label: (_remap(tmp_path, f"remap_{i}", body), words)
             for i, (label, (body, words)) in enumerate(REMAP_WRONG.items())}
    table["a plain Python function"] = (lambda pid, num_sms, num_xcds: pid, "did you forget @triton.jit")
    table["other arguments"] = (_remap(tmp_path, "remap_args", "return pid",
                                       head="@triton.jit\ndef chiplet_remap(pid, n, xcds):\n{body}\n"),
                                "keep the signature")
    assert_wrong_answers_named(exercises.check_chiplet_remap, table)


REMAP_RIGHT = {
    "if and else": _PARTS + """
        if xcd < extra:
            first = xcd * (per_xcd + 1)
        else:
            first = extra * (per_xcd + 1) + (xcd - extra) * per_xcd
        return first + local
        """,
    "tl.where": _PARTS + "return tl.where(xcd < extra, xcd * (per_xcd + 1), xcd * per_xcd + extra) + local",
    "a loop over the XCDs before": """
        xcd = pid % num_xcds
        first = 0
        for x in range(0, xcd):
            first += (num_sms - x + num_xcds - 1) // num_xcds  # the programs of XCD x
        return first + pid // num_xcds
        """,
    "Python's min": _PARTS + "return xcd * per_xcd + min(xcd, extra) + local",
}


@pytest.mark.parametrize("label", REMAP_RIGHT)
def test_other_right_chiplet_remaps_pass(tmp_path, label):
    verdict = quiet(exercises.check_chiplet_remap, _remap(tmp_path, "right_remap", REMAP_RIGHT[label]))
    assert verdict.passed, verdict.line


@pytest.mark.skipif(not runtime.INTERPRET, reason="compiled, a loop counter is a tensor and its comparison has .to()")
def test_a_comparison_of_constexprs_with_to_gets_its_own_hint(tmp_path):
    """The second review: with the sizes as constexprs, (x < r).to(tl.int32) is a Python bool's .to."""
    body = """
        xcd = pid % num_xcds
        start = pid * 0
        for x in range(0, num_xcds):
            start += tl.where(x < xcd, num_sms // num_xcds + (x < num_sms % num_xcds).to(tl.int32), 0)
        return start + pid // num_xcds
        """
    verdict = quiet(exercises.check_chiplet_remap, _remap(tmp_path, "bool_to", body))
    assert verdict.status == "failed" and "a Python bool, which has no .to()" in verdict.message, verdict.line
    assert "misspelt" not in verdict.message, verdict.line


@interpreter_only
def test_a_chiplet_remap_that_never_ends_is_stopped():
    source = _REMAP.format(body="    i = pid\n    while i >= 0:\n        i = i * 1\n    return i")
    assert_survives("check_chiplet_remap", source, "chiplet_remap", "gave up", time_limit_s=10)


def test_a_failing_remap_draws_the_xcds_of_the_ids(tmp_path):
    import matplotlib.pyplot as plt

    from course.exercises import nb06

    fig = nb06._remap_picture("16 programs on 4 XCDs", list(range(16)), nb06._reference_remap(16, 4), 4)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["yours", "stages.chiplet_transform"]
    plt.close(fig)
