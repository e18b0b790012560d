"""What the exercise tests share: a quiet check, wrong answers made by editing a reference, the
table assertion that every wrong answer gets its own message, and a check run in a child process
(so a check that kills Python fails a test instead of the test run)."""

import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import triton
import triton.language as tl

from course import exercises, runtime, solutions

quiet = exercises.quiet
ROOT = Path(__file__).resolve().parents[2]

# Under the interpreter a check stops a kernel that never ends; a compiled one cannot be stopped from Python.
interpreter_only = pytest.mark.skipif(not runtime.INTERPRET, reason="a compiled kernel that never ends hangs the GPU")

BAD_ARGUMENTS = [(None, "got None instead of your function"), (5, "got an int instead of a function"),
                 ("axpy", "got a str"), (lambda: 0, "must take"),
                 (solutions.axpy_kernel, "got a Triton kernel")]




def assert_wrong_answers_named(check, table, same_mistake=()):
    """Each wrong answer in ``table`` ({label: (argument or tuple of arguments, words)}) fails with a
    message holding its words, and no two get the same message (but those in ``same_mistake``)."""
    verdicts = {}
    for label, (args, words) in table.items():
        verdicts[label] = verdict = quiet(check, *(args if isinstance(args, tuple) else (args,)))
        assert verdict.status == "failed" and words in verdict.message, f"{label}: {verdict.line}"
    seen = {}
    for label, v in verdicts.items():
        if label not in same_mistake:
            assert v.message not in seen, f"{seen.get(v.message)!r} and {label!r} got the same message: {v.line}"
            seen[v.message] = label


def variant(tmp_path, name, kernels, *edits):
    """``kernels`` (@triton.jit functions of the course; the last is returned) rewritten by ``edits``
    in a module of their own."""
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


def module_from_file(path: Path, source: str):
    """``source`` written to ``path`` and imported as a module of its own (compiled Triton, and the checks'
    reading of a learner's code, need a function's source on disk)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def edited_source(functions, *edits) -> str:
    """The source of ``functions`` (Python or @triton.jit functions), one after another, with
    ``edits`` ((old, new) pairs, each of which must apply) made."""
    functions = functions if isinstance(functions, tuple) else (functions,)
    source = "\n\n".join(textwrap.dedent(inspect.getsource(getattr(f, "fn", f))) for f in functions)
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    return source


def check_in_child(check: str, source: str, argument: str, *, time_limit_s: int = 20, timeout_s: int = 120):
    """Run ``exercises.<check>(<argument>)`` in a fresh Python, after ``source`` (a learner's cell:
    imports of triton and tl are given) defined ``argument``. Returns ``(verdict or None, output,
    return code)``: the verdict as a dict, None when the child died before printing one."""
    script = textwrap.dedent(f"""
        import json, sys
        import triton
        import triton.language as tl
        import torch
        from course import exercises
        from course.exercises import core
        core.TIME_LIMIT_S = {time_limit_s}
    """) + source + textwrap.dedent(f"""

        exercises.{check}({argument})
        v = exercises.last()
        print("@@VERDICT@@" + json.dumps(dict(status=v.status, message=v.message)))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as folder:  # a file, not -c: compiled Triton reads a kernel's source
        path = Path(folder) / "learner_cell.py"
        path.write_text(script)
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout_s,
                              cwd=ROOT, env=env)
    out = proc.stdout + proc.stderr
    verdict = next((json.loads(line.split("@@VERDICT@@", 1)[1]) for line in proc.stdout.splitlines()
                    if "@@VERDICT@@" in line), None)
    return verdict, out, proc.returncode


def assert_survives(check: str, source: str, argument: str, *words: str, time_limit_s: int = 20):
    """The check of ``argument`` (defined by ``source``) ends in a child process with a ✗ line holding
    ``words``, prints at most a few lines besides, and the child exits normally."""
    verdict, out, code = check_in_child(check, source, argument, time_limit_s=time_limit_s)
    assert code == 0 and verdict is not None, f"the check died (exit {code}):\n{out[-3000:]}"
    assert verdict["status"] == "failed", f"accepted: {verdict}"
    for w in words:
        assert w in verdict["message"], f"{w!r} not in: {verdict['message']}"
    printed = [line for line in out.splitlines() if line.strip() and "@@VERDICT@@" not in line]
    assert len(printed) <= 16, "too much output:\n" + "\n".join(printed)
    assert "Traceback" not in out, out[-3000:]
    return verdict


def stub(n):
    """A docstring and an ellipsis: what the notebooks ship."""
    ...  # your code here


@triton.jit
def stub_kernel(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    ...
