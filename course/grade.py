"""Grade learners' notebooks: run each top to bottom on the CPU and print one row per exercise.

    python -m course.grade submissions/*/03_naive_matmul.ipynb
    python -m course.grade --require-all --json grades.json alice/*.ipynb

Each notebook runs in a fresh kernel under Triton's interpreter (``COURSE_DEVICE=cpu``: the same
answer gets the same grade on any machine), with errors allowed, so a cell that raises does not hide
the exercises after it. A row is ``✓`` (the check passed), ``✗`` with the check's message (or the error
the exercise's cell raised), or ``✎`` not attempted. The exit status is 0 only when every attempted
exercise passed; with ``--require-all``, only when every exercise of every notebook passed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from course import runtime

MARKS = {"passed": "✓", "failed": "✗", "not attempted": "✎"}
# The last cell run in the learner's kernel: the verdicts the checks kept, as one JSON line.
_REPORT = ("import json as _json\nfrom course.exercises import core as _core\n"
           "print('@@VERDICTS@@' + _json.dumps({n: [v.status, v.message] for n, v in _core.verdicts().items()}))")


@dataclass
class Row:
    """The grade of one exercise of one notebook."""

    notebook: str
    exercise: str
    status: str  # "passed", "failed" or "not attempted"
    message: str

    @property
    def line(self) -> str:
        first = self.message.splitlines()[0] if self.message else ""
        return f"{self.notebook:<28} {MARKS[self.status]} {self.exercise:<20} {first}".rstrip()


def exercises_in(nb) -> list[tuple[int, str]]:
    """``(cell index, exercise name)`` for each check called in the notebook's code cells, in order."""
    from course.exercises import core  # importing the package registers every check in core.CHECKS

    by_check = {check.__name__: name for name, check in core.CHECKS.items()}
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(_without_magics(cell.source))
        except SyntaxError:
            tree = None
        calls = ([n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
                 if tree else re.findall(r"exercises\.(check_\w+)\(", cell.source))
        found += [(index, by_check[c]) for c in calls if c in by_check and by_check[c] not in {e for _, e in found}]
    return found


def expected_exercises(path: Path) -> list[str]:
    """The exercises of the course notebook numbered as ``path`` (``03_…`` -> notebook 03's), [] if none."""
    from course.exercises import core  # importing the package registers every check in core.CHECKS

    number = re.match(r"(\d\d)_", path.name)
    if not number:
        return []
    return [name for name, check in core.CHECKS.items() if check.__module__.endswith(f".nb{number.group(1)}")]


def _without_magics(source: str) -> str:
    """The cell as Python: shell lines and cell magics dropped, a line magic's statement kept
    (``%time check(f)`` -> ``check(f)``)."""
    def python(line: str) -> str:
        stripped = line.lstrip()
        if stripped.startswith(("!", "%%")):
            return ""
        if stripped.startswith("%"):
            return re.sub(r"^\s*%\w+\s*", "", line)
        return line
    return "\n".join(python(line) for line in source.splitlines())


def _cell_error(cell) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename', 'Error')}: {out.get('evalue', '')}".strip()
    return None


def grade(path: Path, timeout_s: int = 600) -> tuple[list[Row], list[str]]:
    """Run the notebook at ``path`` and grade it: (one row per exercise, notes on other cells that raised)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    found = exercises_in(nb)
    names = list(dict.fromkeys([e for _, e in found] + expected_exercises(path)))
    nb.cells.append(nbformat.v4.new_code_cell(_REPORT))
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    stopped = None
    try:
        client.execute()
    except (CellTimeoutError, DeadKernelError) as err:
        stopped = f"the notebook stopped: {type(err).__name__}: {str(err).strip().splitlines()[0]}"
    report = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []))
    kept = next((json.loads(line.split("@@VERDICTS@@", 1)[1]) for line in report.splitlines()
                 if line.startswith("@@VERDICTS@@")), {})
    cell_of = {name: index for index, name in found}
    rows, notes = [], []
    for name in names:
        if name in kept:
            status, message = kept[name]
        elif name not in cell_of:
            status, message = "failed", "its exercise cell is missing (the check exercises.check_… is never called)"
        elif _cell_error(nb.cells[cell_of[name]]):
            status, message = "failed", f"its cell raised {_cell_error(nb.cells[cell_of[name]])}"
        else:
            status, message = "failed", stopped or "its check never ran"
        rows.append(Row(path.name, name, status, message))
    for index, cell in enumerate(nb.cells[:-1]):
        error = _cell_error(cell) if cell.cell_type == "code" else None
        if error and index not in cell_of.values():
            notes.append(f"cell {index} raised {error}")
    if stopped:
        notes.append(stopped)
    return rows, notes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.grade", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--require-all", action="store_true",
                        help="fail unless every exercise passed (not only those attempted)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    problem = runtime.interpreter_numpy_problem()
    if problem:  # every kernel check would fail with the interpreter's TypeError: say why instead
        print(f"course.grade runs the checks under Triton's interpreter, and {problem}", file=sys.stderr)
        return 2
    saved = {name: os.environ.get(name) for name in ("COURSE_DEVICE", "TRITON_INTERPRET")}
    os.environ["COURSE_DEVICE"] = "cpu"  # the kernels started below inherit it; put back after
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        rows, ok = _grade_all(args)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    passed = sum(r.status == "passed" for r in rows)
    failed = sum(r.status == "failed" for r in rows)
    pending = sum(r.status == "not attempted" for r in rows)
    print(f"{passed} passed, {failed} failed, {pending} not attempted")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1, ensure_ascii=False))
    ok = ok and failed == 0 and not (args.require_all and pending)
    return 0 if ok else 1


def _grade_all(args) -> tuple[list[Row], bool]:
    rows, ok = [], True
    for path in args.notebooks:
        if not path.exists():
            print(f"{path}: no such notebook", file=sys.stderr)
            ok = False
            continue
        start = time.perf_counter()
        graded, notes = grade(path, args.timeout)
        for row in graded:
            print(row.line)
        for note in notes:
            print(f"{path.name:<28}   note: {note}")
        print(f"{path.name:<28}   ({time.perf_counter() - start:.0f} s)")
        rows += graded
    return rows, ok


if __name__ == "__main__":
    sys.exit(main())
