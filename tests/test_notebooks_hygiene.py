"""Hygiene of the committed notebooks: what nbval and learners rely on, checked without running them."""

import re
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import get_sanitize_patterns

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SANITIZER = ROOT / "tests" / "nbval_sanitize.cfg"

# Tags nbval understands (unknown tags are silently ignored by nbval, so a typo would disable a check).
NBVAL_TAGS = {"nbval-check-output", "nbval-ignore-output", "nbval-skip", "raises-exception"}
ABSOLUTE_PATH = re.compile(r"(?<![\w.])(/home/|/root/|/work/|/tmp/|/Users/|/opt/|[A-Z]:\\\\)")


def _ids(paths):
    return [p.name for p in paths]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


def test_notebooks_are_numbered_without_gaps():
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers == list(range(len(numbers))), f"notebook numbers {numbers} should be 0..{len(numbers) - 1}"


@pytest.fixture(params=NOTEBOOKS, ids=_ids(NOTEBOOKS))
def nb(request):
    return request.param, nbformat.read(request.param, as_version=4)


def test_valid_nbformat(nb):
    nbformat.validate(nb[1])


def test_kernel_is_python3(nb):
    spec = nb[1].metadata.get("kernelspec", {})
    assert spec.get("name") == "python3", f"{nb[0].name}: kernelspec name is {spec.get('name')!r}, want 'python3'"


def test_executed_top_to_bottom(nb):
    counts = [c.get("execution_count") for c in nb[1].cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{nb[0].name}: execution counts {counts} are not 1..N: run the notebook top to bottom (on the GPU) "
        "before committing it"
    )


def test_no_stray_errors(nb):
    for i, cell in enumerate(nb[1].cells):
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if "raises-exception" in tags:
            assert errors, f"{nb[0].name} cell {i} is tagged raises-exception but its output has no error"
        else:
            assert not errors, f"{nb[0].name} cell {i} has an error output: {errors[0].get('ename')}"


def test_only_known_nbval_tags(nb):
    for i, cell in enumerate(nb[1].cells):
        for tag in cell.metadata.get("tags", []):
            looks_like_nbval = tag.startswith("nbval") or "exception" in tag or "raises" in tag
            assert not looks_like_nbval or tag in NBVAL_TAGS, f"{nb[0].name} cell {i}: unknown nbval tag {tag!r}"


def test_some_outputs_are_compared(nb):
    tagged = [c for c in nb[1].cells if "nbval-check-output" in c.metadata.get("tags", [])]
    assert tagged, f"{nb[0].name}: no cell is tagged nbval-check-output, so nbval --nbval-lax checks no output"
    for cell in tagged:
        assert cell.get("outputs"), f"{nb[0].name}: a nbval-check-output cell has no output to compare"


def test_no_absolute_paths(nb):
    text = nb[0].read_text()
    match = ABSOLUTE_PATH.search(text)
    assert not match, f"{nb[0].name}: absolute path {text[match.start():match.start() + 40]!r}"


def test_structure_has_goals_exercise_and_summary(nb):
    markdown = "\n".join(c.source for c in nb[1].cells if c.cell_type == "markdown").lower()
    for word in ("goal", "exercise", "summary"):
        assert word in markdown, f"{nb[0].name}: no markdown mentions {word!r}"


def test_sanitizer_file_loads():
    text = SANITIZER.read_text()
    pairs = get_sanitize_patterns(text)  # nbval's own reader: `regex:` then `replace:` on the next line
    assert len(pairs) == text.count("\nregex: "), "every `regex:` line needs a `replace:` line right after it"
    for regex, replacement in pairs:
        re.compile(regex)
        assert replacement.strip(), f"{regex!r} needs a non-empty replacement (nbval drops empty ones)"


def test_no_progress_bars_or_widget_state_in_committed_outputs(nb):
    """A widget saved without its live state shows a frozen "0%" bar: course.execute drops them."""
    assert "widgets" not in nb[1].metadata, f"{nb[0].name}: widget state saved in the notebook's metadata"
    for i, cell in enumerate(nb[1].cells):
        for out in cell.get("outputs", []):
            assert "application/vnd.jupyter.widget-view+json" not in out.get("data", {}), \
                f"{nb[0].name} cell {i}: a widget output (a progress bar) is committed"
            assert not re.search(r"\d+%\|", out.get("text", "")), f"{nb[0].name} cell {i}: a text progress bar"


def test_exercises_start_as_stubs(nb):
    """Every exercise cell is committed as a stub, and its check says so (the learner writes the code)."""
    cells = [c for c in nb[1].cells if c.cell_type == "code" and "exercises.check_" in c.source]
    assert cells, f"{nb[0].name}: no exercise cell (one calling exercises.check_...)"
    for cell in cells:
        assert "..." in cell.source, f"{nb[0].name}: an exercise cell is not a stub:\n{cell.source[:300]}"
        assert "nbval-check-output" in cell.metadata.get("tags", []), f"{nb[0].name}: exercise output not compared"
        text = "".join(o.get("text", "") for o in cell.get("outputs", []))
        assert "not attempted yet" in text and "exercises.solution(" in text, \
            f"{nb[0].name}: the committed stub's check did not print its 'not attempted' line: {text[:200]!r}"


def test_from_02_on_two_exercises_named_in_the_summary(nb):
    """Every notebook from 02 on has two or more exercises; its goals (first cell) promise them and its
    summary (last markdown cell) names each one (by its exercise name or a function the learner writes)."""
    from course import grade, solutions

    path, notebook = nb
    names = grade.expected_exercises(path)
    if int(path.name[:2]) >= 2:
        assert len(names) >= 2, f"{path.name}: {len(names)} exercise(s): {names}"
    markdown = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    assert "exercise" in markdown[0].lower(), f"{path.name}: the goals (first cell) do not mention the exercises"
    for name in names:
        words = (name, *solutions.EXERCISES[name][0])
        assert any(f"`{w}`" in markdown[-1] or f"`{w}(" in markdown[-1] for w in words), \
            f"{path.name}: the summary (last markdown cell) does not name the exercise {name!r} (as `{name}` or one of {words[1:]})"
