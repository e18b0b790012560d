"""Set-up and fixtures for every test under tests/."""

import matplotlib
import pytest

from course.exercises import core

matplotlib.use("Agg")  # figures are drawn off screen, on any machine


@pytest.fixture(autouse=True)
def references_allowed(monkeypatch):
    """The catalogues hand course.solutions' own objects to the checks, which refuse them from a learner
    (core.reference_refused); tests of that refusal turn it back on."""
    monkeypatch.setattr(core, "REFUSE_REFERENCE", False)


@pytest.fixture(autouse=True)
def figures_closed():
    """Each test's matplotlib figures are closed after it (pyplot keeps every figure until closed)."""
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
