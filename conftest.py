"""pytest set-up shared by tests/ and the nbval run over notebooks/."""

import pytest

import course  # decides GPU or interpreter before any kernel is defined

# nbval waits 5 s for a cell's output stream by default; a cold interpreter cell can take longer.
NBVAL_OUTPUT_TIMEOUT_S = 60


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a GPU: runs compiled only (this run uses Triton's interpreter)")
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT_S
        if course.INTERPRET and "gpu" in item.keywords:
            item.add_marker(skip_gpu)
