"""`python -m course.grade`: a row per exercise, ✓ / ✗ / not attempted, and an exit status an
instructor's CI can use. Notebooks are made here from the committed ones and the answer key."""

import json

import nbformat
import pytest

from course import grade, runtime, solutions

# grade runs every check under Triton's interpreter, which some pairs of Triton and numpy break (a GPU
# image's Triton 3.6 with numpy 2.4): there it refuses, as the last test shows
pytestmark = pytest.mark.skipif(runtime.interpreter_numpy_problem() is not None,
                                reason="Triton's interpreter cannot run with this numpy")
NOTEBOOKS = grade.Path(__file__).resolve().parent.parent / "notebooks"
SETUP = "import course\nfrom course import exercises"


def _notebook(tmp_path, name, *cells, setup=True):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in ((SETUP,) if setup else ()) + cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def _imports_only(cell) -> bool:
    import ast

    if cell.cell_type != "code":
        return False
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return False
    return bool(body) and all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)


def _run(capsys, *argv):
    code = grade.main([str(a) for a in argv])
    return code, capsys.readouterr().out


def test_the_committed_notebook_is_all_not_attempted(capsys):
    import os

    before = {name: os.environ.get(name) for name in ("COURSE_DEVICE", "TRITON_INTERPRET")}
    code, out = _run(capsys, NOTEBOOKS / "00_how_the_course_runs.ipynb")
    assert {name: os.environ.get(name) for name in before} == before, "grading changed this process's environment"
    assert code == 0 and "✎ saxpy_cost" in out and "0 passed, 0 failed, 1 not attempted" in out
    code, out = _run(capsys, "--require-all", NOTEBOOKS / "00_how_the_course_runs.ipynb")
    assert code == 1


def test_every_solution_loaded_passes(tmp_path, capsys):
    # Each course notebook as a learner who loaded every solution would run it: its import cells, then
    # each exercise's solution cell.
    paths = []
    for original in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        imports = [c.source for c in nbformat.read(original, as_version=4).cells if _imports_only(c)]
        names = grade.expected_exercises(original)
        paths.append(_notebook(tmp_path, original.name, *imports, *(solutions.source(n) for n in names), setup=False))
    report = tmp_path / "grades.json"
    code, out = _run(capsys, "--require-all", "--json", report, *paths)
    rows = json.loads(report.read_text())
    assert sorted(r["exercise"] for r in rows) == sorted(solutions.EXERCISES), out
    assert all(r["status"] == "passed" for r in rows), out
    assert code == 0 and f"{len(rows)} passed, 0 failed, 0 not attempted" in out


def test_wrong_raising_and_missing_exercises_fail(tmp_path, capsys):
    wrong_bytes = "def unfused_bytes(n):\n    return 4 * n\n\n\ndef fused_bytes(n):\n    return 12 * n\n\n\n" \
                  "exercises.check_residual_relu_bytes(unfused_bytes, fused_bytes)"
    raising = "1 / 0"
    path = _notebook(tmp_path, "02_learner.ipynb", raising, wrong_bytes)
    code, out = _run(capsys, path)
    assert code == 1
    assert "✗ residual_relu_bytes" in out
    assert "✗ residual_relu" in out and "its exercise cell is missing" in out  # 02 has two exercises
    assert "note: cell 1 raised ZeroDivisionError" in out


def test_an_exercise_cell_that_raises_is_failed_with_its_error(tmp_path, capsys):
    cell = "def saxpy_cost(n):\n    return 2 * n, 12 * n\n\nundefined_name\nexercises.check_saxpy_cost(saxpy_cost)"
    code, out = _run(capsys, _notebook(tmp_path, "00_learner.ipynb", cell))
    assert code == 1 and "✗ saxpy_cost" in out and "its cell raised NameError" in out


@pytest.mark.parametrize("source, status", [("exercises.check_saxpy_cost(solutions.saxpy_cost)", "passed")])
def test_exercises_are_found_in_the_cells_that_call_their_checks(source, status):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("exercises.check_axpy(axpy) in prose"),
                nbformat.v4.new_code_cell("%time " + source + "  # exercises.check_gelu(gelu) in a comment")]
    assert grade.exercises_in(nb) == [(1, "saxpy_cost")]


def test_grade_refuses_where_the_interpreter_cannot_run(monkeypatch, capsys):
    monkeypatch.setattr(runtime, "interpreter_numpy_problem", lambda: "numpy 9.9 breaks Triton 3.6's interpreter")
    assert grade.main([str(NOTEBOOKS / "00_how_the_course_runs.ipynb")]) == 2
    assert "numpy 9.9 breaks" in capsys.readouterr().err
