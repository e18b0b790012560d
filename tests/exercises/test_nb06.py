"""The catalogue of notebook 06's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet, variant


# --- 06: the persistent loop --------------------------------------------------------------------------

_LOOP = "for tile_id in tl.range(pid, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):"
_MAP = "pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)"
PERSISTENT_WRONG = {  # label: (edits of course.persistent.persistent_matmul_kernel, words its message must contain)
    "no loop": ([(_LOOP, "for tile_id in tl.range(pid, pid + 1):")], "only its first tile"),
    "stops early": ([(_LOOP, "for tile_id in tl.range(pid, num_tiles - 1, NUM_PROGRAMS):")], "the loop stops early"),
    "starts late": ([(_LOOP, "for tile_id in tl.range(pid + 1, num_tiles, NUM_PROGRAMS):")],
                    "where each program's loop starts"),
    "past the grid": ([(_LOOP, "for tile_id in tl.range(pid, 2 * num_tiles, NUM_PROGRAMS):")], "past the grid"),
    "swapped sizes": ([(_MAP, "pid_m, pid_n = grouped_tile(tile_id, num_pid_n, num_pid_m, GROUP_M)")],
                      "past the grid"),
    "no matmul_tile": ([("        matmul_tile(", "        if False:\n            matmul_tile(")],
                       "C was never written"),
    "step 1": ([(_LOOP, "for tile_id in tl.range(pid, num_tiles):")], "every tile from pid on"),
    "start at 0": ([(_LOOP, "for tile_id in tl.range(0, num_tiles, NUM_PROGRAMS):")], "started at tile 0"),
    "every tile everywhere": ([(_LOOP, "for tile_id in tl.range(0, num_tiles):")], "every program computed every"),
    "row-major ids": ([(_MAP, "pid_m, pid_n = tile_id // num_pid_n, tile_id % num_pid_n")], "go row by row"),
    "mapped the program id": ([(_MAP, "pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)")],
                              "map the loop's tile id"),
    "work under LOG": ([("        matmul_tile(", "        if LOG:\n            matmul_tile(")],
                       "only the call of log_tile belongs under"),
    "no log": ([("            log_tile(log_ptr, tile_id, pid_m, pid_n, num_tiles, num_pid_n)", "            pass")],
               "no tile was logged"),
    "swapped tile": ([("pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)", "pid_n, pid_m, BLOCK_M, BLOCK_N, BLOCK_K)")],
                     "the product is wrong"),
    "wrong signature": ([("NUM_PROGRAMS: tl.constexpr,\n", "")], "keep the signature"),
}


def test_persistent_loop_reference_and_wrong_answers(tmp_path):
    from course import persistent, tiled

    pieces = (tiled.grouped_tile, tiled.matmul_tile, persistent.log_tile, persistent.persistent_matmul_kernel)
    assert quiet(exercises.check_persistent_loop, solutions.persistent_matmul_kernel).passed
    table = {label: (variant(tmp_path, f"persistent_{i}", pieces, *edits), words)
             for i, (label, (edits, words)) in enumerate(PERSISTENT_WRONG.items())}
    assert_wrong_answers_named(exercises.check_persistent_loop, table,
                                same_mistake=("past the grid", "swapped sizes"))
