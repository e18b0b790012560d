"""The catalogue of notebook 04's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet, variant


# --- 04: the grouped launch order ---------------------------------------------------------------------

_ROW = "pid_m = first_m + (pid % tiles_per_group) % group_m"
_COLUMN = "pid_n = (pid % tiles_per_group) // group_m"
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
}


def test_grouped_tile_reference_and_wrong_answers(tmp_path):
    assert quiet(exercises.check_grouped_tile, solutions.grouped_tile).passed
    table = {label: (variant(tmp_path, f"order_{i}", solutions.grouped_tile, *edits), words)
             for i, (label, (edits, words)) in enumerate(ORDER_WRONG.items())}
    table["no @triton.jit"] = (lambda pid, num_pid_m, num_pid_n, GROUP_M: (0, 0), "did you forget @triton.jit")
    assert_wrong_answers_named(exercises.check_grouped_tile, table)
