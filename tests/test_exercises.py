"""The notebooks' exercise checks (course/exercises.py) and the element-wise helpers they use.

Every check passes its reference solution (course/solutions.py), says "not attempted" for a stub,
never crashes on a blank, None, a wrong type or a wrong arity, and gives each typical wrong answer
its own message, without printing the expected answer. Kernels run under the interpreter on CPU
(or compiled on a GPU) at small sizes.
"""

import pytest
import torch
import triton
import triton.language as tl

import course
from course import elementwise, exercises, solutions

quiet = exercises.quiet


# --- elementwise helpers ------------------------------------------------------------------------

def test_guarded_is_a_poisoned_view_at_the_start_of_a_longer_buffer():
    out, buf = elementwise.guarded(10, guard=5)
    assert out.shape == (10,) and buf.shape == (15,)
    assert out.data_ptr() == buf.data_ptr() and torch.isnan(buf).all()
    x, _ = elementwise.guarded(10, guard=5, fill=torch.randn)
    assert not torch.isnan(x).any()
    with pytest.raises(ValueError, match="must be >= 0"):
        elementwise.guarded(-1)
    with pytest.raises(TypeError, match="floating-point torch.dtype"):
        elementwise.guarded(4, dtype=torch.int32)


def test_runs_and_their_description():
    assert elementwise.runs(torch.tensor([False, True, True, False, True])) == [(1, 2), (4, 4)]
    assert elementwise.runs(torch.zeros(4, dtype=torch.bool)) == []
    assert elementwise.runs(torch.ones(3, dtype=torch.bool)) == [(0, 2)]
    assert elementwise.describe_runs([(1000, 1023), (5, 5)]) == "1000..1023, 5"
    assert elementwise.describe_runs([(i, i) for i in range(5)], most=2) == "0, 1, and 3 more runs"


def test_unwritten_and_overwritten_guard():
    out, buf = elementwise.guarded(8, guard=4)
    out[:5] = 1.0
    assert elementwise.unwritten(out) == [(5, 7)]
    buf[9:11] = 2.0
    assert elementwise.overwritten_guard(buf, 8) == [(9, 10)]


def test_sweep_series_and_check_fraction(capsys):
    from course.records import Record

    rows = elementwise.sweep([16, 32], lambda n: (torch.randn(n),),
                             {"copy": (lambda x: x.clone(), lambda n: 8 * n)}, desc="test")
    assert [r["n"] for r in rows] == [16, 32] and all(r["copy_ms"] > 0 and r["copy_gbps"] > 0 for r in rows)
    sizes, values = elementwise.series(rows, ["copy"])["copy"]
    assert sizes == [16, 32] and len(values) == 2
    with pytest.raises(KeyError, match="no fast_gbps"):
        elementwise.series(rows, ["fast"])
    fake = [{"n": 2**20, "k_gbps": 50.0}, {"n": 2**24, "k_gbps": 90.0}, {"n": 2**26, "k_gbps": 80.0}]
    elementwise.check_fraction(Record(fake, {}, measured_here=True), "k", 100.0, at_least=0.8, min_n=2**24)
    assert capsys.readouterr().out.startswith("✓ k reaches at least 80%")
    elementwise.check_fraction(Record(fake, {}), "k", 100.0, at_least=0.8, min_n=2**24)
    assert capsys.readouterr().out.startswith("✓ in the recorded GPU run, k reaches")
    with pytest.raises(AssertionError, match=r"n=2\^26: 80%"):
        elementwise.check_fraction(fake, "k", 100.0, at_least=0.85, min_n=2**24)
    with pytest.raises(ValueError):
        elementwise.check_fraction(fake, "k", 100.0, at_least=0.85, min_n=2**30)


# --- the machinery: stubs, verdicts, solutions -----------------------------------------------------

def _stub(n):
    """A docstring and an ellipsis: what the notebooks ship."""
    ...  # your code here


@triton.jit
def _stub_kernel(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    ...


def test_stubs_are_recognised():
    assert exercises._is_stub(_stub) and exercises._is_stub(lambda n: None) and exercises._is_stub(_stub_kernel)
    assert not exercises._is_stub(solutions.saxpy_cost) and not exercises._is_stub(solutions.axpy_kernel)
    assert not exercises._is_stub(print) and not exercises._is_stub(None)


@pytest.mark.parametrize("name", sorted(solutions.EXERCISES))
def test_every_reference_solution_passes_its_check(name):
    pieces, check_line = solutions.EXERCISES[name]
    check = getattr(exercises, check_line.split("(")[0].split(".")[1])
    args = [getattr(solutions, a.strip()) for a in check_line.split("(")[1].rstrip(")").split(",")]
    verdict = quiet(check, *args)
    assert verdict.passed, verdict.line


@pytest.mark.parametrize("name", sorted(solutions.EXERCISES))
def test_solution_source_is_a_runnable_cell(name):
    """What exercises.solution() loads into a cell defines every piece and ends with the check."""
    source = solutions.source(name)
    pieces, check_line = solutions.EXERCISES[name]
    assert source.rstrip().endswith(check_line)
    for piece in pieces:
        assert f"def {piece}(" in source


def test_solution_prints_outside_jupyter_and_names_the_exercises_for_an_unknown_one(capsys):
    exercises.solution("axpy")
    out = capsys.readouterr().out
    assert "@triton.jit" in out and "def axpy(" in out
    exercises.solution("saxpy")
    assert capsys.readouterr().out.startswith("✗ solution('saxpy'): no exercise of that name; the exercises are")


def test_stubs_print_one_not_attempted_line_and_raise_nothing(capsys):
    exercises.check_saxpy_cost(_stub)
    out = capsys.readouterr().out
    assert out.startswith("✎ saxpy_cost: not attempted yet") and 'exercises.solution(\'saxpy_cost\')' in out
    assert exercises.last().status == "not attempted"


def test_yours_or_reference(capsys):
    quiet(exercises.check_saxpy_cost, _stub)
    assert exercises.yours_or_reference("saxpy_cost", _stub) is solutions.saxpy_cost
    assert "using the reference" in capsys.readouterr().out
    mine = lambda n: (2 * n, 12 * n)  # noqa: E731
    quiet(exercises.check_saxpy_cost, mine)
    assert exercises.yours_or_reference("saxpy_cost", mine) is mine


def test_launches_counts_programs():
    x = torch.zeros(100, device=course.DEVICE)
    with exercises.launches() as seen:
        solutions.axpy(1.0, x, x.clone(), torch.empty_like(x), block_size=32)
    assert seen.programs == 4 and seen.kernels[0][0] == "axpy_kernel"


# --- bad arguments never crash a check -----------------------------------------------------------

BAD_ARGUMENTS = [(None, "got None instead of your function"), (5, "got an int instead of a function"),
                 ("axpy", "got a str"), (lambda: 0, "must take"),
                 (solutions.axpy_kernel, "got a Triton kernel")]


@pytest.mark.parametrize("check, arity", [(exercises.check_saxpy_cost, 1), (exercises.check_axpy, 1),
                                          (exercises.check_residual_relu, 1),
                                          (exercises.check_residual_relu_bytes, 2)])
@pytest.mark.parametrize("bad, message", BAD_ARGUMENTS)
def test_bad_arguments_get_one_clear_line(check, arity, bad, message):
    verdict = quiet(check, *([bad] * arity))
    assert verdict.status == "failed" and message in verdict.message, verdict.line
    assert "\n" not in verdict.message


def _assert_wrong_answers_named(check, table, same_mistake=()):
    """Each wrong answer in ``table`` ({label: (argument or tuple of arguments, words)}) fails with a
    message holding its words, and no two get the same message (but those in ``same_mistake``)."""
    verdicts = {}
    for label, (args, words) in table.items():
        verdicts[label] = verdict = quiet(check, *(args if isinstance(args, tuple) else (args,)))
        assert verdict.status == "failed" and words in verdict.message, f"{label}: {verdict.line}"
    messages = [v.message for label, v in verdicts.items() if label not in same_mistake]
    assert len(set(messages)) == len(messages), "two wrong answers got the same message"


# --- 00: saxpy cost ----------------------------------------------------------------------------------

SAXPY_WRONG = {  # a typical wrong answer -> words its message must contain
    "forgot the write of y": (lambda n: (2 * n, 8 * n), "also written back"),
    "one op per element": (lambda n: (n, 12 * n), "a multiply and an add"),
    "elements, not bytes": (lambda n: (2 * n, 3 * n), "counts elements"),
    "the scalar a as 4 bytes": (lambda n: (2 * n, 12 * n + 4), "does not grow with n"),
    "y read twice": (lambda n: (2 * n, 16 * n), "read once and written once"),
    "float64 sizes": (lambda n: (2 * n, 24 * n), "4 bytes, not 8"),
    "the pair swapped": (lambda n: (12 * n, 2 * n), "(flops, bytes_moved), in that order"),
    "a float answer": (lambda n: (2.0 * n, 8.0 * n), "also written back"),
    "not linear": (lambda n: (2 * n, n * n), "in proportion to n"),
    "one number": (lambda n: 12 * n, "return a pair"),
    "a string": (lambda n: (2 * n, "lots"), "return a number"),
    "raises": (lambda n: 1 / 0, "raised ZeroDivisionError"),
    "gigabytes": (lambda n: (2 * n, 12 * n / 1e9), "not GB, MB or thousands"),
}


def test_saxpy_cost_wrong_answers_get_their_own_messages():
    _assert_wrong_answers_named(exercises.check_saxpy_cost, SAXPY_WRONG, same_mistake={"a float answer"})


def test_messages_never_give_the_answer_away():
    for fn, _ in SAXPY_WRONG.values():
        message = quiet(exercises.check_saxpy_cost, fn).message
        assert "12n" not in message and "expected" not in message


# --- 01: axpy (kernels written as a learner might) ----------------------------------------------------

@triton.jit
def _axpy_kernel(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if MODE == 6:  # forgot to multiply the program id by the block size
        offs = pid + tl.arange(0, BLOCK)
    mask = offs < n
    if MODE == 7:  # an off-by-one mask
        mask = offs < n - 1
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    result = alpha * x + y
    if MODE == 1:
        result = x + y
    if MODE == 2:
        result = x + alpha * y
    if MODE == 3:
        result = alpha * x + x
    if MODE == 4:
        result = alpha * (x + y)
    if MODE == 5:  # no mask on the store
        tl.store(out_ptr + offs, result)
    elif MODE == 8:  # stores into an input
        tl.store(y_ptr + offs, result, mask=mask)
    else:
        tl.store(out_ptr + offs, result, mask=mask)


@triton.jit
def _axpy_unmasked_loads(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs) + tl.load(y_ptr + offs), mask=offs < n)


@triton.jit
def _axpy_constexpr_alpha(alpha: tl.constexpr, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _axpy_fixed_stride(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * 1024 + tl.arange(0, BLOCK)  # the stride written as a number
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def _launch(kernel, block=256, programs=None):
    def axpy(alpha, x, y, out):
        n = x.numel()
        kernel[(programs or triton.cdiv(n, block),)](alpha, x, y, out, n, BLOCK=block)
    return axpy


def _axpy(mode=0, floor_grid=False, block=256):
    def axpy(alpha, x, y, out):
        n = x.numel()
        programs = n // block if floor_grid else triton.cdiv(n, block)
        _axpy_kernel[(programs,)](alpha, x, y, out, n, BLOCK=block, MODE=mode)
        return out
    return axpy


AXPY_WRONG = {
    "no mask": (_axpy(5), "past the end of out"),
    "grid rounds down": (_axpy(floor_grid=True), "round up"),
    "offsets without the block": (_axpy(6), "programs overlapped"),
    "mask off by one": (_axpy(7), "last, partial block"),
    "alpha forgotten": (_axpy(1), "alpha was not applied"),
    "alpha on y": (_axpy(2), "should multiply x"),
    "x loaded twice": (_axpy(3), "load y from y_ptr"),
    "alpha on the sum": (_axpy(4), "multiply x alone"),
    "pure torch": (lambda a, x, y, out: out.copy_(a * x + y), "write it as a Triton kernel"),
    "a new tensor": (lambda a, x, y, out: _axpy()(a, x, y, out.clone()), "returned a new tensor"),
    "changes an input": (lambda a, x, y, out: (_axpy()(a, x, y, out), x.zero_()), "x was modified"),
    "a compile error": (lambda a, x, y, out: _axpy(block=100)(a, x, y, out), "power of 2"),
    "stores into y": (_axpy(8), "Does a tl.store go to y's pointer"),
    "one program only": (lambda a, x, y, out: _axpy_kernel[(1,)](a, x, y, out, x.numel(), BLOCK=1024, MODE=0),
                         "too few programs"),
    "a fixed stride": (_launch(_axpy_fixed_stride, 512), "with the BLOCK_SIZE the grid was computed with"),
    "unmasked loads": (_launch(_axpy_unmasked_loads), "tl.load without a mask"),
    "alpha as a constexpr": (_launch(_axpy_constexpr_alpha), "alpha is a tl.constexpr"),
    "one program per element": (lambda a, x, y, out: solutions.axpy_kernel[(x.numel(),)](
        a, x, y, out, x.numel(), BLOCK_SIZE=64), "one per element or more"),
    "grid as an int": (lambda a, x, y, out: _axpy_kernel[triton.cdiv(x.numel(), 256)](a, x, y, out, x.numel(),
                                                                                      BLOCK=256, MODE=0),
                       "the launch grid is a tuple"),
}


def test_axpy_passes_the_reference_and_says_so(capsys):
    exercises.check_axpy(solutions.axpy)
    assert capsys.readouterr().out.startswith("✓ axpy: right")


def test_axpy_wrong_answers_get_their_own_messages():
    _assert_wrong_answers_named(exercises.check_axpy, AXPY_WRONG)


def test_a_stub_kernel_behind_a_written_wrapper_is_not_attempted():
    def axpy(alpha, x, y, out):
        _stub_kernel[(1,)](x, x.numel(), BLOCK_SIZE=64)
    assert quiet(exercises.check_axpy, axpy).status == "not attempted"


def test_half_written_byte_counts_check_the_written_one():
    verdict = quiet(exercises.check_residual_relu_bytes, solutions.unfused_bytes, _stub)
    assert verdict.status == "not attempted" and "unfused_bytes is right" in verdict.message
    verdict = quiet(exercises.check_residual_relu_bytes, _stub, lambda n: 8 * n)
    assert verdict.status == "failed" and "fused_bytes grows by 8" in verdict.message


def test_failures_draw_the_output():
    import matplotlib.pyplot as plt

    run = exercises._run_once(lambda x, y, out: _axpy(5)(2.0, x, y, out), lambda x, y: 2.0 * x + y, 2, (1000,),
                              torch.float32)
    fig = exercises._element_picture(run, "no mask")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "written past the end" in labels and "right" in labels
    plt.close(fig)


# --- 02: residual + relu ---------------------------------------------------------------------------

RELU_BYTES_WRONG = {
    "the fused count": ((lambda n: 12 * n, solutions.fused_bytes), "written to memory and read back"),
    "relu's write forgotten": ((lambda n: 16 * n, solutions.fused_bytes), "relu writes its output"),
    "elements, not bytes": ((lambda n: 5 * n, solutions.fused_bytes), "counts elements"),
    "one kernel only": ((lambda n: 8 * n, solutions.fused_bytes), "count both kernels"),
    "fused, no write": ((solutions.unfused_bytes, lambda n: 8 * n), "writes one"),
    "fused as unfused": ((solutions.unfused_bytes, solutions.unfused_bytes), "never leaves registers"),
    "a constant term": ((lambda n: 20 * n + 8, solutions.fused_bytes), "does not grow with n"),
}


def test_residual_relu_bytes_wrong_answers_get_their_own_messages():
    _assert_wrong_answers_named(exercises.check_residual_relu_bytes, RELU_BYTES_WRONG)


@triton.jit
def _relu_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.load(r_ptr + offs, mask=mask)
    s = tl.maximum(x + r, 0.0)
    if MODE == 1:
        s = x + r
    if MODE == 2:
        s = tl.maximum(x, 0.0) + r
    if MODE == 3:
        s = tl.minimum(x + r, 0.0)
    if MODE == 4:
        s = tl.maximum(x + x, 0.0)
    if MODE == 5:
        tl.store(out_ptr + offs, s)
    else:
        tl.store(out_ptr + offs, s, mask=mask)


def _relu(mode=0):
    def fused(x, r, out):
        n = x.numel()
        _relu_kernel[(triton.cdiv(n, 512),)](x, r, out, n, BLOCK=512, MODE=mode)
    return fused


RELU_WRONG = {
    "no relu": (_relu(1), "ReLU is missing"),
    "relu before the add": (_relu(2), "after the add"),
    "minimum": (_relu(3), "not minimum"),
    "x twice": (_relu(4), "load residual"),
    "no mask": (_relu(5), "past the end"),
    "n from the first dimension": (lambda x, r, out: _relu_kernel[(triton.cdiv(x.shape[0], 512),)](
        x, r, out, x.shape[0], BLOCK=512, MODE=0), "x.numel() elements, not x.shape[0]"),
    "stores into x": (lambda x, r, out: _relu_kernel[(triton.cdiv(x.numel(), 512),)](
        x, r, x, x.numel(), BLOCK=512, MODE=0), "Does a tl.store go to x's pointer"),
    "torch": (lambda x, r, out: out.copy_(torch.relu(x + r)), "write it as a Triton kernel"),
}


def test_residual_relu_wrong_answers_get_their_own_messages():
    _assert_wrong_answers_named(exercises.check_residual_relu, RELU_WRONG)


def test_device_is_the_courses():
    out, _ = elementwise.guarded(3)
    assert out.device.type == torch.device(course.DEVICE).type


# --- 03: the tiled matmul kernel ---------------------------------------------------------------------

def _matmul_variant(tmp_path, name, *edits):
    """The course's matmul_kernel (with its helper matmul_tile) with ``edits`` ((old, new) pairs)
    applied: a learner's mistake."""
    from course import tiled

    return _variant(tmp_path, name, (tiled.matmul_tile, tiled.matmul_kernel), *edits)


def _variant(tmp_path, name, kernels, *edits):
    """``kernels`` (@triton.jit functions of the course; the last is returned) rewritten by ``edits``
    in a module of their own."""
    import importlib.util
    import inspect

    kernels = kernels if isinstance(kernels, tuple) else (kernels,)
    kernel = kernels[-1]
    source = "\n\n".join(inspect.getsource(k.fn) for k in kernels)
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, kernel.fn.__name__)


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
    _assert_wrong_answers_named(exercises.check_matmul_kernel, table)


def test_matmul_kernel_misuse():
    assert "did you forget @triton.jit" in quiet(exercises.check_matmul_kernel, solutions.axpy).message
    assert "pass the @triton.jit kernel" in quiet(exercises.check_matmul_kernel, 3).message
    assert "keep the signature" in quiet(exercises.check_matmul_kernel, solutions.axpy_kernel).message


def test_a_kernel_that_never_ends_is_stopped(monkeypatch, tmp_path):
    if not course.INTERPRET:
        pytest.skip("a compiled kernel that hangs cannot be stopped from Python")
    monkeypatch.setattr(exercises, "_TIME_LIMIT_S", 2)
    kernel = _matmul_variant(tmp_path, "endless", ("for k in range(0, K, BLOCK_K):", "k = 0\n    while k < K:"))
    verdict = quiet(exercises.check_matmul_kernel, kernel)
    assert verdict.status == "failed" and "gave up after 2 s" in verdict.message


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
    table = {label: (_variant(tmp_path, f"order_{i}", solutions.grouped_tile, *edits), words)
             for i, (label, (edits, words)) in enumerate(ORDER_WRONG.items())}
    table["no @triton.jit"] = (lambda pid, num_pid_m, num_pid_n, GROUP_M: (0, 0), "did you forget @triton.jit")
    _assert_wrong_answers_named(exercises.check_grouped_tile, table)


# --- 05: waves ----------------------------------------------------------------------------------------

def _waves(tiles=None, waves=None, idle=None):
    """A wave_count that gets one step wrong (the others as the reference does them)."""
    def wave_count(M, N, bm, bn, sms):
        t = tiles(M, N, bm, bn) if tiles else -(-M // bm) * -(-N // bn)
        w = waves(t, sms) if waves else -(-t // sms)
        return t, w, idle(t, sms) if idle else (sms - t % sms) % sms
    return wave_count


WAVES_WRONG = {
    "tiles rounded down": (_waves(tiles=lambda M, N, bm, bn: (M // bm) * (N // bn)), "round up"),
    "tiles as a fraction": (_waves(tiles=lambda M, N, bm, bn: M * N / (bm * bn)), "whole numbers"),
    "waves rounded down": (_waves(waves=lambda t, sms: t // sms), "takes a whole wave's time"),
    "idle when full": (_waves(idle=lambda t, sms: sms - t % sms), "no SM is idle"),
    "busy instead of idle": (_waves(idle=lambda t, sms: t % sms), "the rest of the SMs wait"),
    "two numbers": (lambda M, N, bm, bn, sms: (1, 2), "return three numbers"),
    "the area rounded up": (_waves(tiles=lambda M, N, bm, bn: -(-(M * N) // (bm * bn))), "whole area is not enough"),
    "one wave too many": (_waves(waves=lambda t, sms: t // sms + 1), "no extra wave"),
}


def test_wave_count_reference_and_wrong_answers():
    assert quiet(exercises.check_wave_count, solutions.wave_count).passed
    _assert_wrong_answers_named(exercises.check_wave_count, WAVES_WRONG)


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
    table = {label: (_variant(tmp_path, f"persistent_{i}", pieces, *edits), words)
             for i, (label, (edits, words)) in enumerate(PERSISTENT_WRONG.items())}
    _assert_wrong_answers_named(exercises.check_persistent_loop, table,
                                same_mistake=("past the grid", "swapped sizes"))


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
        kernel = _variant(tmp_path, f"linear_{i}", solutions.linear_kernel, *edits,
                          ("@triton.jit", header + "\n\n@triton.jit"))
        table[label] = (kernel, words)
    _assert_wrong_answers_named(exercises.check_linear, table, same_mistake=("strides swapped", "W, not W.T",
                                                                          "B strides hard-coded",
                                                                          "A strides hard-coded"))
    assert stages.GemmContext  # the variants import the stages themselves


# --- 08: gelu -----------------------------------------------------------------------------------------

_GELU = "return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"
GELU_WRONG = {  # label: (edits of epilogues.gelu, words its message must contain)
    "identity": ([(_GELU, "return x")], "unchanged"),
    "no 0.5": ([(_GELU, _GELU.replace("0.5 * x", "x"))], "factor 0.5"),
    "exact erf": ([(_GELU, "return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))")], "exact GELU"),
    "no cubic term": ([(_GELU, "return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * x))")], "cubic term"),
    "overflowing tanh": ([(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n    e = tl.exp(2.0 * u)\n"
                                  "    return 0.5 * x * (1.0 + (e - 1.0) / (e + 1.0))")], "overflowed"),
    "a sign": ([(_GELU, _GELU.replace("1.0 + stable", "1.0 - stable"))], "tanh approximation gives"),
    "float16": ([(_GELU, "return (" + _GELU[len("return "):] + ").to(tl.float16)")], "rounded to 16 bits"),
    "a constant": ([(_GELU, _GELU.replace("0.044715", "0.05"))], "check the constants"),
    "overflow past 12": ([(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n"
                                  "    e, f = tl.exp(u), tl.exp(-u)\n    return 0.5 * x * (1.0 + (e - f) / (e + f))")],
                         "overflowed"),
    "math.tanh": ([(_GELU, "return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"),
                   ("@triton.jit\ndef stable_tanh", "import math\n\n\n@triton.jit\ndef stable_tanh")],
                  "tl functions"),
    "sign lost": ([("@triton.jit\ndef gelu", "@triton.jit\ndef _tanh_abs(u):\n    return stable_tanh(tl.abs(u))\n\n\n"
                    "@triton.jit\ndef gelu"), (_GELU, _GELU.replace("stable_tanh(", "_tanh_abs("))], "lost its sign"),
    "x ** 3": ([(_GELU, _GELU.replace("x * x * x", "x ** 3"))], "write x * x * x"),
    "float16 maths": ([(_GELU, "x = x.to(tl.float16)\n    " + _GELU)], "keep the tile in float32"),
    "wrong signature": ([("def gelu(x):", "def gelu(x, y):")], "keep the signature"),
}


def test_gelu_reference_and_wrong_answers(tmp_path):
    from course import epilogues

    assert quiet(exercises.check_gelu, solutions.gelu).passed
    table = {label: (_variant(tmp_path, f"gelu_{i}", (epilogues.stable_tanh, epilogues.gelu), *edits), words)
             for i, (label, (edits, words)) in enumerate(GELU_WRONG.items())}
    table["no @triton.jit"] = (lambda x: x, "did you forget @triton.jit")
    _assert_wrong_answers_named(exercises.check_gelu, table, same_mistake=("overflowing tanh", "overflow past 12"))


# --- 09: a program's Stream-K span -------------------------------------------------------------------

_START = "start = pid * base + tl.minimum(pid, extra)"
_END = "end = start + base + (pid < extra).to(tl.int32)"
SPAN_WRONG = {  # label: (edits of solutions.span, words its message must contain)
    "no remainder": ([(_START, "start = pid * base"), (_END, "end = start + base")], "left over"),
    "one more for all": ([(_END, "end = start + base + 1")], "one iteration too long"),
    "past the end": ([(_END, "end = start + base + (pid < extra).to(tl.int32) + 2 * pid")], "outside the iterations"),
    "ceil division": ([("base = total // sharers", "base = (total + sharers - 1) // sharers"),
                       (_START, "start = tl.minimum(pid * base, total)"),
                       (_END, "end = tl.minimum(start + base, total)")], "as evenly as possible"),
    "reversed": ([(_START, "start = (sharers - 1 - pid) * base + tl.minimum(sharers - 1 - pid, extra)"),
                  (_END, "end = start + base + (sharers - 1 - pid < extra).to(tl.int32)")], "program order"),
    "overlap": ([(_START, "start = pid * base")], "overlap"),
    "float division": ([("base = total // sharers", "base = total / sharers")], "returns floats"),
    "empty ranges": ([(_END, "end = tl.where(pid == 1, start, start + base + (pid < extra).to(tl.int32))")],
                     "empty or cut short"),
    "end inclusive, short": ([(_END, "end = start + base + (pid < extra).to(tl.int32) - 1")], "one iteration short"),
    "end one past": ([(_END, "end = start + base + (pid < extra).to(tl.int32) + 1")], "one iteration too long"),
    "wrong signature": ([("def span(pid, total, sharers):", "def span(pid, total):")], "keep the signature"),
}


def test_streamk_span_reference_and_wrong_answers(tmp_path):
    assert quiet(exercises.check_streamk_span, solutions.span).passed
    table = {label: (_variant(tmp_path, f"span_{i}", solutions.span, *edits), words)
             for i, (label, (edits, words)) in enumerate(SPAN_WRONG.items())}
    _assert_wrong_answers_named(exercises.check_streamk_span, table, same_mistake=("one more for all", "end one past"))


_REFUSED = '''
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from course import exercises


@triton.jit
def tile(x_ptr):
    acc = 0.0  # a scalar accumulator: its type changes in the loop
    for k in range(0, 4):
        acc += tl.load(x_ptr + tl.arange(0, 16))
    tl.store(x_ptr + tl.arange(0, 16), acc)


@triton.jit
def scalar_accumulator(x_ptr):
    tile(x_ptr)


@triton.jit
def one(pid):
    return pid


@triton.jit
def one_value_returned(x_ptr):
    a, b = one(tl.program_id(0))
    tl.store(x_ptr + a, b)


for kernel in (scalar_accumulator, one_value_returned):
    try:
        triton.compile(ASTSource(kernel, {"x_ptr": "*fp32"}, {}), target=GPUTarget("cuda", 90, 32))
    except Exception as err:
        print(exercises._user_error("your kernel", err))
        print("--")
'''


def test_compile_refusals_name_the_reason_and_the_line(tmp_path):
    # What a learner sees on a GPU, where Triton refuses the kernel at launch; built here for an H100
    # without one (the front end refuses before any GPU is needed). A helper's error is found inside.
    import os
    import subprocess
    import sys

    script = tmp_path / "refused.py"
    script.write_text(_REFUSED)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "COURSE_DEVICE")}
    env["_COURSE_COMPILE_ONLY"] = "1"
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    scalar, one_value = proc.stdout.split("--")[:2]
    assert "your kernel was refused: Triton cannot compile it for a GPU" in scalar
    assert "Loop-carried variable acc" in scalar and "at: for k in range(0, 4):" in scalar
    assert "start the accumulator as a block" in scalar
    assert "at: a, b = one(tl.program_id(0))" in one_value and "return both" in one_value


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
    _assert_wrong_answers_named(exercises.check_vector_layout, table)


# --- 11: the online-softmax update -------------------------------------------------------------------

@triton.jit
def _softmax_no_max(m_i, l_i, acc, s, v):
    p = tl.exp2(s)
    return m_i, l_i + tl.sum(p, 1), acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_acc_kept(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * tl.exp2(m_i - m_new) + tl.sum(p, 1), acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_sum_kept(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i + tl.sum(p, 1), acc * tl.exp2(m_i - m_new)[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_natural(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_old_max(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_i[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_swapped(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return l_i * alpha + tl.sum(p, 1), m_new, acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_masked_to_zero(m_i, l_i, acc, s, v):  # replaces -inf by 0: wrong only under the mask
    s = tl.where(s == float("-inf"), 0.0, s)
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


def _softmax_plain(m_i, l_i, acc, s, v):
    return m_i, l_i, acc


@triton.jit
def _softmax_builtin_max(m_i, l_i, acc, s, v):
    m_new = max(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_wrong_axis(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 0))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _softmax_acc_first(m_i, l_i, acc, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return acc * alpha[:, None] + tl.dot(p.to(v.dtype), v), m_new, l_i * alpha + tl.sum(p, 1)


SOFTMAX_WRONG = {
    "no maximum subtracted": (_softmax_no_max, "not shifted by its row's running maximum"),
    "acc not rescaled": (_softmax_acc_kept, "acc is not rescaled"),
    "l not rescaled": (_softmax_sum_kept, "l_i is not rescaled"),
    "exp for exp2": (_softmax_natural, "this is exp, not exp2"),
    "old maximum": (_softmax_old_max, "m_i is -inf before the first block"),
    "m and l swapped": (_softmax_swapped, "(m, l, acc) in that order"),
    "mask replaced": (_softmax_masked_to_zero, "wrong with the causal mask"),
    "no @triton.jit": (_softmax_plain, "forget @triton.jit"),
    "Python's max": (_softmax_builtin_max, "tl.maximum(a, b)"),
    "reduced along the wrong axis": (_softmax_wrong_axis, "reduce s along axis 1"),
    "acc returned first": (_softmax_acc_first, "return (m, l, acc) in that order"),
}


def test_softmax_step_reference_and_wrong_answers():
    assert quiet(exercises.check_softmax_step, solutions.softmax_step).passed
    _assert_wrong_answers_named(exercises.check_softmax_step, SOFTMAX_WRONG)


# --- 12: which mode for which shape, against the records ------------------------------------------------

MODE_WRONG = {
    "always persistent": (lambda M, N, K, tile: "persistent", "mostly empty"),
    "always Gluon": (lambda M, N, K, tile: "gluon", "where the waves are full"),
    "Gluon on small squares": (lambda M, N, K, tile: "gluon" if M < 2000 else "persistent", "square 1024"),
    "one shape by heart": (lambda M, N, K, tile: "gluon" if M == 1536 else "tail", "8B qkv M=512"),
    "always tail": (lambda M, N, K, tile: "tail" if M > 0 else "persistent", "thin last one"),
    "not a mode": (lambda M, N, K, tile: "fast", "return one of"),
    "raises": (lambda M, N, K, tile: 1 / 0, "raised ZeroDivisionError"),
    "wrong arguments": (lambda M, N, K: "persistent", "must take"),
}


def test_mode_choice_reference_and_wrong_answers():
    verdict = quiet(exercises.check_mode_choice, solutions.choose_mode)
    assert verdict.passed and "recorded on" in verdict.message
    _assert_wrong_answers_named(exercises.check_mode_choice, MODE_WRONG)
