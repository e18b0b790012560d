"""How course/ hangs together: every docstring example runs, no module imports another in a circle,
and no module reaches into another's private names (a leading underscore means "this file only")."""

import ast
import doctest
import importlib
from pathlib import Path

import pytest

import course  # noqa: F401  (decides GPU or interpreter first)

COURSE = Path(__file__).resolve().parent.parent / "course"
# Modules by dotted name under course/: "gemm", "exercises.nb03" (a package counts as its __init__).
MODULES = sorted(".".join(p.relative_to(COURSE).with_suffix("").parts).removesuffix(".__init__")
                 for p in COURSE.rglob("*.py") if p.relative_to(COURSE).parts != ("__init__.py",))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(f"course.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"course.{name}: {result.failed} of {result.attempted} docstring examples failed"


def _path(name):
    path = COURSE.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _course_imports(name):
    """{imported course module: [names taken from it]} for course/<name>.py, imports inside functions too."""
    found = {}
    for node in ast.walk(ast.parse(_path(name).read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course"):
            package = node.module.removeprefix("course").removeprefix(".")
            for alias in node.names:
                child = f"{package}.{alias.name}".lstrip(".")
                if child in MODULES:  # "from course import gemm", "from course.exercises import core"
                    found.setdefault(child, [])
                elif package in MODULES:  # "from course.exercises.core import Failed"
                    found.setdefault(package, []).append(alias.name)
    return found


def test_no_import_circle():
    graph = {name: set(_course_imports(name)) - {name} for name in MODULES}

    def visit(name, path):
        for nxt in graph[name]:
            assert nxt not in path, "import circle: " + " -> ".join(path[path.index(nxt):] + [nxt])
            visit(nxt, path + [nxt])

    for name in MODULES:
        visit(name, [name])


# The GEMM library (what course.gemm runs) and the platform it may use: no lesson module (tiled, streamk, ...),
# so a kernel author can lift the library without the notebooks' helpers.
GEMM_LIBRARY = {"stages"} | {name for name in MODULES if name == "gemm" or name.startswith("gemm.")}
PLATFORM = {"runtime", "hardware", "timing"}


@pytest.mark.parametrize("name", sorted(GEMM_LIBRARY))
def test_the_gemm_library_imports_no_lesson_module(name):
    lessons = set(_course_imports(name)) - GEMM_LIBRARY - PLATFORM
    assert not lessons, f"course.{name} (GEMM library) imports lesson modules: {', '.join(sorted(lessons))}"


@pytest.mark.parametrize("name", MODULES)
def test_no_private_name_of_another_module(name):
    tree = ast.parse(_path(name).read_text())
    imported = _course_imports(name)
    private = [f"from course.{mod} import {n}" for mod, names in imported.items() for n in names if n.startswith("_")]
    private += [f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in imported and node.value.id != name and node.attr.startswith("_")
                and not node.attr.startswith("__")]
    assert not private, f"course.{name} uses private names of other modules: {', '.join(private)}"


def test_every_exercise_has_an_exported_check_and_a_solution():
    from course import exercises, solutions
    from course.exercises import core

    assert {c.__name__ for c in core.CHECKS.values()} == {n for n in exercises.__all__ if n.startswith("check_")}
    assert set(core.CHECKS) == set(solutions.EXERCISES), "every exercise needs its entry in solutions.EXERCISES"


# --- tests/ mirrors course/ ---------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
# Modules with no test file of their own, and why. The mirror rule (test_every_module_has_its_test_file)
# skips them; an entry that has a test file now, or names no module, fails test_no_test_file_list_is_true.
NO_TEST_FILE = {
    "gemm.kernel": "the Triton kernel: every test in tests/gemm/ runs it (test_matmul.py compiles it for sm_90 too)",
    "bench": "re-exports course.bench's modules",
    "bench.__main__": "the command line (python -m course.bench): argument parsing around run_gemm, run_copy, run_host",
    "gemm.__main__": "the command line (python -m course.gemm) around layout_key.build, which test_layout_key.py tests",
    "bench.copy": "times copies and a matmul on a GPU; not tested",
    "exercises": "re-exports the checks of exercises.core and exercises.nb*: tested there (tests/exercises/)",
    "solutions": "the reference solutions: tests/exercises/ runs every check on its solution",
    "elementwise": "its helpers are tested in tests/exercises/test_core.py (and by notebook 02's checks)",
    "capstone": "course_roofline and points_record in tests/bench/test_bench_report.py; layer_shapes, "
                "block_benchmark and quantization_error run only in notebook 12 (nbval)",
    "execute": "runs notebooks to commit their outputs; not tested (tests/test_notebooks_hygiene.py checks the outputs)",
}


def _has_public_function(name):
    return any(isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
               for node in ast.parse(_path(name).read_text()).body)


def _test_file(name):
    """The test file that mirrors course.<name>: tests/gemm/test_<module>.py (course.gemm's __init__:
    test_matmul.py), tests/bench/test_bench_<module>.py, tests/exercises/test_<module>.py, or
    tests/test_<module>.py for a flat module."""
    package, _, module = name.rpartition(".")
    if name == "gemm":
        return TESTS / "gemm" / "test_matmul.py"
    if package in ("gemm", "exercises"):
        return TESTS / package / f"test_{module}.py"
    if package == "bench":
        return TESTS / "bench" / f"test_bench_{module}.py"
    return TESTS / f"test_{name}.py"


MIRRORED = [name for name in MODULES if name.partition(".")[0] in ("gemm", "bench", "exercises")
            or ("." not in name and _has_public_function(name))]


@pytest.mark.parametrize("name", sorted(set(MIRRORED) - set(NO_TEST_FILE)))
def test_every_module_has_its_test_file(name):
    path = _test_file(name)
    assert path.is_file(), (f"course.{name} has no {path.relative_to(TESTS.parent)}: write it, or list the module "
                            "in NO_TEST_FILE with the reason")


def test_no_test_file_list_is_true():
    assert set(NO_TEST_FILE) <= set(MODULES), f"NO_TEST_FILE names no module: {set(NO_TEST_FILE) - set(MODULES)}"
    stale = [name for name in NO_TEST_FILE if _test_file(name).is_file()]
    assert not stale, f"these have a test file now: take them out of NO_TEST_FILE: {stale}"


def test_test_file_names_are_unique():
    # pytest imports test files by basename (no __init__.py under tests/): two of one name cannot both load
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
