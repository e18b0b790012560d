"""The catalogue of notebook 04's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import functools
import importlib.util
import textwrap

import numpy as np
import pytest
import torch

from course import exercises, runtime, solutions, tiled

from catalogue import assert_survives, assert_wrong_answers_named, edited_source, quiet, variant


def _module(tmp_path, name, source, function):
    """``function`` from ``source`` (a learner's cell: triton, tl and the course's modules imported) written
    to a module of its own, so that the check can read its source."""
    path = tmp_path / f"{name}.py"
    path.write_text("import triton\nimport triton.language as tl\nfrom course import solutions, tiled\n\n"
                    + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)


# --- 04 · exercise 1: the blocks each wave reads -------------------------------------------------------

def _per_wave(count, *, step=None, stop=None, start=None):
    """A wave_blocks whose waves are ``rows[start(s) : stop(s)]`` for s in range(0, n, step(sms)), each
    pair counted by ``count(rows, cols)``: one step of the reference changed at a time."""
    def wave_blocks(pid_m, pid_n, sms):
        rows, cols = pid_m.tolist(), pid_n.tolist()
        starts = range(0, len(rows), step(sms) if step else sms)
        return [count(rows[start(s) if start else s:stop(s, sms) if stop else s + sms],
                      cols[start(s) if start else s:stop(s, sms) if stop else s + sms]) for s in starts]
    return wave_blocks


def _distinct(rows, cols):
    return len(set(rows)), len(set(cols))


def first_wave_only(pid_m, pid_n, sms):
    return [(len(set(pid_m[:sms].tolist())), len(set(pid_n[:sms].tolist())))]


def no_partial_wave(pid_m, pid_n, sms):
    rows, cols = pid_m.tolist(), pid_n.tolist()
    return [(len(set(rows[s:s + sms])), len(set(cols[s:s + sms]))) for s in range(0, len(rows) - sms + 1, sms)]


def sliding_windows(pid_m, pid_n, sms):
    rows, cols = pid_m.tolist(), pid_n.tolist()
    return [(len(set(rows[s:s + sms])), len(set(cols[s:s + sms]))) for s in range(len(rows) - sms + 1)]


def set_of_tensor_elements(pid_m, pid_n, sms):
    return [(len(set(pid_m[s:s + sms])), len(set(pid_n[s:s + sms]))) for s in range(0, len(pid_m), sms)]


def distinct_tiles(pid_m, pid_n, sms):
    tiles = list(zip(pid_m.tolist(), pid_n.tolist()))
    return [(len(set(tiles[s:s + sms])),) * 2 for s in range(0, len(tiles), sms)]


def sorted_first(pid_m, pid_n, sms):
    rows, cols = sorted(pid_m.tolist()), sorted(pid_n.tolist())
    return [(len(set(rows[s:s + sms])), len(set(cols[s:s + sms]))) for s in range(0, len(rows), sms)]


def one_number_per_wave(pid_m, pid_n, sms):
    rows, cols = pid_m.tolist(), pid_n.tolist()
    return [len(set(rows[s:s + sms])) + len(set(cols[s:s + sms])) for s in range(0, len(rows), sms)]


def the_first_wave_as_a_pair(pid_m, pid_n, sms):
    return len(set(pid_m[:sms].tolist())), len(set(pid_n[:sms].tolist()))


def calls_wave_footprint(pid_m, pid_n, sms):
    out = []
    for s in range(0, len(pid_m), sms):
        f = tiled.wave_footprint(pid_m[s:], pid_n[s:], sms)
        out.append((f["A row blocks"], f["B column blocks"]))
    return out


def calls_waves_footprint(pid_m, pid_n, sms):
    f = tiled.waves_footprint(pid_m, pid_n, sms)
    return [(f["A row blocks"], f["B column blocks"])] * f["waves"]


def calls_the_solution(pid_m, pid_n, sms):
    return solutions.wave_blocks(pid_m, pid_n, sms)


def numpy_size_as_len(pid_m, pid_n, sms):
    return [(len(set(pid_m[s:s + sms].tolist())), len(set(pid_n[s:s + sms].tolist())))
            for s in range(0, pid_m.size, sms)]  # torch's size is a method: range() refuses it


def average_counts(pid_m, pid_n, sms):
    rows, cols = pid_m.tolist(), pid_n.tolist()
    pairs = [(len(set(rows[s:s + sms])), len(set(cols[s:s + sms]))) for s in range(0, len(rows), sms)]
    return [(sum(a for a, _ in pairs) / len(pairs), sum(b for _, b in pairs) / len(pairs))] * len(pairs)


def float_counts(pid_m, pid_n, sms):  # floats that are whole: cell 12 would then fail on :2d
    rows, cols = pid_m.tolist(), pid_n.tolist()
    return [(len(set(rows[s:s + sms])) / 1, len(set(cols[s:s + sms])) / 1) for s in range(0, len(rows), sms)]


def the_whole_launch(pid_m, pid_n, sms):
    return [(len(set(pid_m.tolist())), len(set(pid_n.tolist())))]


def one_wave_short_on_one_sm(pid_m, pid_n, sms):
    rows, cols = pid_m.tolist(), pid_n.tolist()
    return [(len(set(rows[s:s + sms])), len(set(cols[s:s + sms]))) for s in range(0, len(rows) - 1, sms)]


def forgets_return(pid_m, pid_n, sms):
    rows, cols = pid_m.tolist(), pid_n.tolist()
    [(len(set(rows[s:s + sms])), len(set(cols[s:s + sms]))) for s in range(0, len(rows), sms)]


WAVE_BLOCKS_WRONG = {  # label: (wave_blocks, words its message must contain)
    "the first wave only": (first_wave_only, "one pair for the first wave only"),
    "the first wave as a bare pair": (the_first_wave_as_a_pair, "each wave's entry must be two counts"),
    "no partial last wave": (no_partial_wave, "but it is a wave too"),
    "sliding windows": (sliding_windows, "waves do not overlap"),
    "a set of tensor elements": (set_of_tensor_elements, "set() of a tensor's elements"),
    "distinct tiles for both": (distinct_tiles, "count the distinct rows and columns, not the programs"),
    "every program counted": (_per_wave(lambda r, c: (len(r), len(c))), "not the programs"),
    "swapped": (_per_wave(lambda r, c: (len(set(c)), len(set(r)))), "swapped"),
    "cumulative": (_per_wave(_distinct, start=lambda s: 0), "count each wave's programs on their own"),
    "the span of rows": (_per_wave(lambda r, c: (max(r) - min(r) + 1, max(c) - min(c) + 1)), "lowest row"),
    "sorted first": (sorted_first, "keep the order you were given"),
    "one SM too many": (_per_wave(_distinct, step=lambda sms: sms + 1, stop=lambda s, sms: s + sms + 1),
                        "a wave is exactly sms programs"),
    "one number per wave": (one_number_per_wave, "each wave's entry must be two counts"),
    "B off by one": (_per_wave(lambda r, c: (len(set(r)), len(set(c)) - 1)), "B column blocks is not"),
    "A off by one": (_per_wave(lambda r, c: (len(set(r)) + 1, len(set(c)))), "A row blocks is not"),
    "averages": (average_counts, "whole numbers"),
    "whole floats": (float_counts, "the counts must be ints, not floats"),
    "pid_m for A and B": (_per_wave(lambda r, c: (len(set(r)), len(set(r)))), "B's counts are A's"),
    "pid_n for A and B": (_per_wave(lambda r, c: (len(set(c)), len(set(c)))), "A's counts are B's"),
    "the whole launch as one pair": (the_whole_launch, "one pair for the whole launch"),
    "one wave short on one SM": (one_wave_short_on_one_sm, "on 1 SM: one pair per wave"),
    "calls tiled.wave_footprint": (calls_wave_footprint, "calls tiled.wave_footprint"),
    "calls tiled.waves_footprint": (calls_waves_footprint, "calls tiled.waves_footprint"),
    "calls the solution": (calls_the_solution, "calls the solution"),
    "raises": (numpy_size_as_len, "raised TypeError"),
    "no return": (forgets_return, "returned None"),
    # the third review: a generator is read once
    "a generator": (lambda pid_m, pid_n, sms: iter(solutions.wave_blocks(pid_m, pid_n, sms)), "read only once"),
    "wrong signature": (lambda pid_m, sms: [], "must take 3 arguments"),
    # the second review: the course's helpers given under the exercise's name
    "is tiled.wave_footprint": (tiled.wave_footprint, "wave_blocks is the course's own tiled.wave_footprint"),
    "is tiled.waves_footprint": (tiled.waves_footprint, "wave_blocks is the course's own tiled.waves_footprint"),
    "a partial of tiled.wave_footprint": (functools.partial(tiled.wave_footprint),
                                          "wave_blocks is the course's own tiled.wave_footprint"),
}


def test_wave_blocks_reference_passes_and_the_stub_is_not_attempted():
    assert quiet(exercises.check_wave_blocks, solutions.wave_blocks).passed
    from catalogue import stub
    assert quiet(exercises.check_wave_blocks, stub).status == "not attempted"


def test_wave_blocks_each_wrong_answer_gets_its_own_message():
    assert_wrong_answers_named(exercises.check_wave_blocks, WAVE_BLOCKS_WRONG,
                               same_mistake=("a set of tensor elements", "distinct tiles for both",
                                             "every program counted", "is tiled.wave_footprint",
                                             "a partial of tiled.wave_footprint"))


def test_wave_blocks_blames_a_set_of_tensors_only_where_no_tolist_was_used():
    for made_ints in (distinct_tiles, _per_wave(lambda r, c: (len(r), len(c)))):
        verdict = quiet(exercises.check_wave_blocks, made_ints)
        assert "not the programs" in verdict.message and "set()" not in verdict.message, verdict.line


def test_wave_blocks_no_message_speaks_of_sorting_where_nothing_was_sorted():
    for label in ("pid_m for A and B", "pid_n for A and B"):
        assert "sort" not in quiet(exercises.check_wave_blocks, WAVE_BLOCKS_WRONG[label][0]).message, label


def test_wave_blocks_no_message_says_1_sms():
    for answer, _ in WAVE_BLOCKS_WRONG.values():
        assert "1 SMs" not in quiet(exercises.check_wave_blocks, answer).message


def with_torch_unique(pid_m, pid_n, sms):
    return [(torch.unique(pid_m[s:s + sms]).numel(), torch.unique(pid_n[s:s + sms]).numel())
            for s in range(0, len(pid_m), sms)]


def with_numpy(pid_m, pid_n, sms):
    rows, cols = pid_m.numpy(), pid_n.numpy()
    waves = -(-len(rows) // sms)
    return np.array([[len(np.unique(rows[w * sms:(w + 1) * sms])), len(np.unique(cols[w * sms:(w + 1) * sms]))]
                     for w in range(waves)])


def with_a_loop(pid_m, pid_n, sms):
    out, rows, cols = [], set(), set()
    for p, (m, n) in enumerate(zip(pid_m.tolist(), pid_n.tolist())):
        rows.add(m)
        cols.add(n)
        if (p + 1) % sms == 0 or p == len(pid_m) - 1:
            out.append([len(rows), len(cols)])
            rows, cols = set(), set()
    return out


def as_a_tensor(pid_m, pid_n, sms):
    return torch.tensor([[len(set(pid_m[s:s + sms].tolist())), len(set(pid_n[s:s + sms].tolist()))]
                         for s in range(0, len(pid_m), sms)])


def test_wave_blocks_correct_alternatives_pass():
    for answer in (with_torch_unique, with_numpy, with_a_loop, as_a_tensor):
        assert quiet(exercises.check_wave_blocks, answer).passed, answer.__name__


def test_wave_blocks_counts_match_the_course_helper_on_the_notebook_case():
    pid_m, pid_n = tiled.launch_order(6, 9, 3)
    first = tiled.wave_footprint(pid_m, pid_n, 12)
    assert solutions.wave_blocks(pid_m, pid_n, 12)[0] == (first["A row blocks"], first["B column blocks"])


# --- 04 · exercise 2: the grouped launch order ---------------------------------------------------------

_ROW = "pid_m = first_m + (pid % tiles_per_group) % group_m"
_COLUMN = "pid_n = (pid % tiles_per_group) // group_m"
_FIRST = "tiles_per_group = GROUP_M * num_pid_n"
ORDER_WRONG = {  # label: (edits of course.tiled.grouped_tile, words its message must contain)
    "row-major": ([(_ROW, "pid_m = pid // num_pid_n"), (_COLUMN, "pid_n = pid % num_pid_n")],
                  "row-major order: GROUP_M is not used"),
    "column-major": ([(_ROW, "pid_m = pid % num_pid_m"), (_COLUMN, "pid_n = pid // num_pid_m")],
                     "column-major order over the whole grid"),
    "collisions": ([(_ROW, "pid_m = pid % num_pid_m"), (_COLUMN, "pid_n = pid % num_pid_n")],
                   "taken by several programs"),
    "no short last group": ([("group_m = tl.minimum(num_pid_m - first_m, GROUP_M)", "group_m = GROUP_M")],
                            "the last group has fewer rows"),
    "no first row": ([(_ROW, "pid_m = (pid % tiles_per_group) % group_m")], "stays in the first GROUP_M rows"),
    "swapped": ([("return pid_m, pid_n", "return pid_n, pid_m")], "pid_m and pid_n are swapped"),
    "one value": ([("return pid_m, pid_n", "return pid_m")], "return both"),
    "true division": ([("group = pid // tiles_per_group", "group = pid / tiles_per_group")],
                      "integer division, //"),
    "wrong signature": ([("pid, num_pid_m, num_pid_n, GROUP_M", "pid, num_pid_m, GROUP_M")], "keep the signature"),
    "tl.swizzle2d": ([(_FIRST, "return tl.swizzle2d(pid // num_pid_n, pid % num_pid_n, num_pid_m, num_pid_n, "
                               "GROUP_M)\n    " + _FIRST)], "calls tl.swizzle2d"),
    "grouped along N": ([(_FIRST, "tiles_per_group = GROUP_M * num_pid_m"),
                         ("group_m = tl.minimum(num_pid_m - first_m, GROUP_M)",
                          "group_m = tl.minimum(num_pid_n - first_m, GROUP_M)"),
                         (_ROW, "pid_n = first_m + (pid % tiles_per_group) % group_m"),
                         (_COLUMN, "pid_m = (pid % tiles_per_group) // group_m")],
                        "consecutive programs go down the GROUP_M rows"),
    "one-based tiles": ([("return pid_m, pid_n", "return pid_m + 1, pid_n")], "tiles are numbered from 0"),
    "the last group's columns": ([(_COLUMN, "pid_n = (pid % tiles_per_group) // GROUP_M")],
                                 "check how pid_m and pid_n follow from the position"),
    "the group of the row": ([("group = pid // tiles_per_group", "group = pid // num_pid_n")],
                             "pid's row in row-major order, not its group"),
    # the old Triton tutorial's form: right but in a short last group that starts at an id no multiple of its
    # height (5 x 3 and 5 x 7 with GROUP_M = 3)
    "pid % h in the last group": ([(_ROW, "pid_m = first_m + pid % group_m")],
                                  "(pid % the programs per group) % height, in the last group too"),
    "the group as pid // GROUP_M": ([("group = pid // tiles_per_group", "group = pid // GROUP_M")],
                                    "pid // GROUP_M is not the group of pid"),
    "groups of GROUP_M x num_pid_m": ([(_FIRST, "tiles_per_group = GROUP_M * num_pid_m")],
                                      "not GROUP_M × num_pid_m"),
    "the column from pid": ([(_COLUMN, "pid_n = pid // group_m")], "pid_n counts from program 0"),
    "tl.program_id inside": ([(_FIRST, "pid = tl.program_id(0)\n    " + _FIRST)], "calls tl.program_id"),
    "tl.num_programs inside": ([(_FIRST, "tiles_per_group = tl.num_programs(0) // num_pid_m * GROUP_M")],
                               "calls tl.num_programs"),
    "a wrong bound, no division": ([("group_m = tl.minimum(num_pid_m - first_m, GROUP_M)",
                                     "group_m = tl.minimum(num_pid_m - first_m, GROUP_M) + 1")],
                                   "what each division and remainder of yours divides by"),
}


def test_grouped_tile_reference_passes():
    assert quiet(exercises.check_grouped_tile, solutions.grouped_tile).passed


def test_grouped_tile_each_wrong_answer_gets_its_own_message(tmp_path):
    table = {label: (variant(tmp_path, f"order_{i}", solutions.grouped_tile, *edits), words)
             for i, (label, (edits, words)) in enumerate(ORDER_WRONG.items())}
    table["no @triton.jit"] = (lambda pid, num_pid_m, num_pid_n, GROUP_M: (0, 0), "did you forget @triton.jit")
    table["swizzle2d imported by name"] = (_module(tmp_path, "by_name", """
        from triton.language import swizzle2d


        @triton.jit
        def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            return swizzle2d(pid // num_pid_n, pid % num_pid_n, num_pid_m, num_pid_n, GROUP_M)
        """, "grouped_tile"), "calls tl.swizzle2d")
    table["swizzle2d in a helper"] = (_module(tmp_path, "in_a_helper", """
        @triton.jit
        def row_major_to_grouped(i, j, m, n, g: tl.constexpr):
            return tl.swizzle2d(i, j, m, n, g)


        @triton.jit
        def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            return row_major_to_grouped(pid // num_pid_n, pid % num_pid_n, num_pid_m, num_pid_n, GROUP_M)
        """, "grouped_tile"), "calls tl.swizzle2d")
    table["tiled.grouped_tile"] = (_module(tmp_path, "course_own", """
        @triton.jit
        def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            return tiled.grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
        """, "grouped_tile"), "calls the course's tiled.grouped_tile")
    table["tiled.swizzled_tile"] = (_module(tmp_path, "course_swizzled", """
        @triton.jit
        def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            return tiled.swizzled_tile(pid, num_pid_m, num_pid_n, GROUP_M)
        """, "grouped_tile"), "calls the course's tiled.swizzled_tile")
    # tl.program_id read in a helper of another module: ast does not see it, the loop of tile ids does
    (tmp_path / "elsewhere.py").write_text(textwrap.dedent("""
        import triton
        import triton.language as tl


        @triton.jit
        def which_program(pid):
            return tl.program_id(0)
        """))
    table["the program id from a helper elsewhere"] = (_module(tmp_path, "from_elsewhere", """
        import sys
        sys.path.insert(0, %r)
        from elsewhere import which_program


        @triton.jit
        def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            pid = which_program(pid)
            tiles_per_group = GROUP_M * num_pid_n
            first_m = pid // tiles_per_group * GROUP_M
            group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
            return first_m + (pid %% tiles_per_group) %% group_m, (pid %% tiles_per_group) // group_m
        """ % str(tmp_path), "grouped_tile"), "called with tile ids from a loop")
    table["solutions.grouped_tile"] = (_module(tmp_path, "the_solution", """
        @triton.jit
        def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            return solutions.grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
        """, "grouped_tile"), "which is the answer")
    # the second review: the course's own mapping given under the exercise's name (grouped_tile = tiled.grouped_tile)
    table["is tiled.grouped_tile"] = (tiled.grouped_tile, "grouped_tile is the course's own tiled.grouped_tile")
    table["is tiled.swizzled_tile"] = (tiled.swizzled_tile, "grouped_tile is the course's own tiled.swizzled_tile")
    assert_wrong_answers_named(exercises.check_grouped_tile, table,
                               same_mistake=("tl.swizzle2d", "swizzle2d imported by name", "swizzle2d in a helper",
                                             "tiled.grouped_tile", "solutions.grouped_tile"))


def test_answers_that_are_the_reference_are_refused(monkeypatch):
    """In a notebook (REFUSE_REFERENCE on, as there), the reference solution itself is no answer."""
    monkeypatch.setattr(exercises.core, "REFUSE_REFERENCE", True)
    for check, answer in ((exercises.check_grouped_tile, solutions.grouped_tile),
                          (exercises.check_wave_blocks, solutions.wave_blocks),
                          (exercises.check_wave_blocks, lambda pid_m, pid_n, sms: solutions.wave_blocks(pid_m, pid_n,
                                                                                                         sms))):
        verdict = quiet(check, answer)
        assert verdict.status == "failed" and ("reference solution (course.solutions" in verdict.message or
                                               "calls the solution" in verdict.message), verdict.line


def test_grouped_tile_hints_at_integer_division_only_where_a_true_division_was_written(tmp_path):
    for i, label in enumerate(("the group as pid // GROUP_M", "groups of GROUP_M x num_pid_m", "the column from pid",
                               "a wrong bound, no division")):
        wrong = variant(tmp_path, f"no_div_{i}", solutions.grouped_tile, *ORDER_WRONG[label][0])
        assert "integer division" not in quiet(exercises.check_grouped_tile, wrong).message, label


def test_grouped_tile_correct_alternatives_pass(tmp_path):
    alternatives = {
        "tl.where for the last group": [("group_m = tl.minimum(num_pid_m - first_m, GROUP_M)",
                                         "group_m = tl.where(num_pid_m - first_m < GROUP_M, num_pid_m - first_m, "
                                         "GROUP_M)")],
        "subtraction instead of modulo": [(_ROW, "within = pid - group * tiles_per_group\n"
                                                 "    pid_m = first_m + within % group_m"),
                                          (_COLUMN, "pid_n = within // group_m")],
    }
    for i, (label, edits) in enumerate(alternatives.items()):
        assert quiet(exercises.check_grouped_tile, variant(tmp_path, f"alt_{i}", solutions.grouped_tile,
                                                           *edits)).passed, label
    own_helper = _module(tmp_path, "own_helper", """
        @triton.jit
        def group_height(num_pid_m, first_m, GROUP_M: tl.constexpr):
            return tl.minimum(num_pid_m - first_m, GROUP_M)


        @triton.jit
        def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            tiles_per_group = GROUP_M * num_pid_n
            first_m = pid // tiles_per_group * GROUP_M
            group_m = group_height(num_pid_m, first_m, GROUP_M)
            return first_m + (pid % tiles_per_group) % group_m, (pid % tiles_per_group) // group_m
        """, "grouped_tile")
    assert quiet(exercises.check_grouped_tile, own_helper).passed, "a helper of one's own"


@pytest.mark.skipif(not runtime.INTERPRET, reason="the checks' time limit works under the interpreter only")
def test_grouped_tile_with_an_endless_loop_ends_with_one_line():
    source = edited_source(solutions.grouped_tile, ("return pid_m, pid_n",
                                                    "while pid_m >= 0:\n        pid_m = pid_m + 0\n"
                                                    "    return pid_m, pid_n"))
    assert_survives("check_grouped_tile", "@triton.jit\n" + source.split("@triton.jit\n", 1)[1], "grouped_tile",
                    "gave up after", time_limit_s=5)


@pytest.mark.skipif(not runtime.INTERPRET, reason="the checks' time limit works under the interpreter only")
def test_wave_blocks_with_an_endless_loop_ends_with_one_line():
    source = "def wave_blocks(pid_m, pid_n, sms):\n    w = 0\n    while w < len(pid_m):\n        pass\n    return []\n"
    assert_survives("check_wave_blocks", source, "wave_blocks", "gave up after", time_limit_s=3)
