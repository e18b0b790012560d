"""The catalogue of notebook 07's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet, variant


# --- 07: linear with the stages -----------------------------------------------------------------------

_VIEW_B = "tensorB = make_tensor_view(W, K, N, stride_wk, stride_wn)"
LINEAR_WRONG = {  # label: (edits of solutions.linear_kernel, words its message must contain)
    "strides swapped": ([(_VIEW_B, "tensorB = make_tensor_view(W, K, N, stride_wn, stride_wk)")],
                        "not A @ W.T"),
    "W, not W.T": ([(_VIEW_B, "tensorB = make_tensor_view(W, N, K, stride_wn, stride_wk)")], "not A @ W.T"),
    "B strides hard-coded": ([(_VIEW_B, "tensorB = make_tensor_view(W, K, N, 1, K)")], "stride arguments"),
    "A strides hard-coded": ([("tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)",
                               "tensorA = make_tensor_view(A, M, K, K, 1)")], "stride arguments"),
    "even_k left out": ([(", even_k=EVEN_K)", ")")], "even_k"),  # the interpreter's assertion, or the diagnosis
    "one tile per program": ([("for tile_id in range(start, total, stride):",
                               "for tile_id in range(start, start + 1):")], "never stored"),
    "nothing stored": ([("        tensorC.store(ctx.reduce_axis(tensorA, tensorB, out_tile), out_tile)",
                         "        ctx.reduce_axis(tensorA, tensorB, out_tile)")], "nothing was stored"),
    "wrong signature": ([("stride_wn, stride_wk, stride_cm", "stride_wk, stride_wn, stride_cm")],
                        "keep the signature"),
    "every program every tile": ([("for tile_id in range(start, total, stride):",
                                   "for tile_id in range(0, total, 1):")], "belong to other programs"),
    "output view N x M": ([("tensorC = make_output_view(C, M, N, stride_cm, stride_cn)",
                            "tensorC = make_output_view(C, N, M, stride_cm, stride_cn)")], "past the end of C"),
    "schedule N x M": ([("sched = ScheduleContext(M, N, K, ctx)", "sched = ScheduleContext(N, M, K, ctx)")],
                       "check the sizes you give"),
}


def test_linear_reference_and_wrong_answers(tmp_path):
    import course.stages as stages

    assert quiet(exercises.check_linear, solutions.linear_kernel).passed
    header = "from course.stages import GemmContext, ScheduleContext, make_output_view, make_tensor_view\n"
    table = {}
    for i, (label, (edits, words)) in enumerate(LINEAR_WRONG.items()):
        kernel = variant(tmp_path, f"linear_{i}", solutions.linear_kernel, *edits,
                          ("@triton.jit", header + "\n\n@triton.jit"))
        table[label] = (kernel, words)
    assert_wrong_answers_named(exercises.check_linear, table, same_mistake=("strides swapped", "W, not W.T",
                                                                          "B strides hard-coded",
                                                                          "A strides hard-coded"))
    assert stages.GemmContext  # the variants import the stages themselves
