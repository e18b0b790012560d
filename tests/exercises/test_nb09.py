"""The catalogue of notebook 09's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet, variant


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
    table = {label: (variant(tmp_path, f"span_{i}", solutions.span, *edits), words)
             for i, (label, (edits, words)) in enumerate(SPAN_WRONG.items())}
    assert_wrong_answers_named(exercises.check_streamk_span, table, same_mistake=("one more for all", "end one past"))


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
        print(exercises.core.user_error("your kernel", err))
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
