"""The notebooks' exercises: checks that say what is wrong without giving the answer away.

Every exercise cell starts as a stub, a signature whose body is ``...``. The check at the bottom of
the cell then prints a short note and raises nothing, so a notebook still runs top to bottom::

    ✎ saxpy_cost: not attempted yet.
      Fill in the body of saxpy_cost above: return (flops, bytes_moved), then run this cell again.
      Stuck? exercises.solution('saxpy_cost') in a new cell loads the reference solution.

Once you write something, the check runs it on fresh inputs and prints either one ``✓`` line or
one ``✗`` line that names what failed and hints at why (never the expected number or formula).
A failing check prints; it does not raise, so there is no traceback to read through. The verdict
is also kept: :func:`last` returns it (the tests read it), and :func:`yours_or_reference` hands
later cells your function once it passed, the reference solution until then.

The reference solutions live in :mod:`course.solutions`, one function per piece you write.

The checks live one module per notebook (``course.exercises.nb03`` holds notebook 03's); the
machinery they share (verdicts, the time limit, bounds-checked launches, error hints) is in
:mod:`course.exercises.core`. Every public check is exported here: ``exercises.check_<name>(...)``.
"""

import importlib

from course.exercises.core import (  # noqa: F401
    Verdict,
    last,
    launches,
    quiet,
    solution,
    yours_or_reference,
)

NOTEBOOKS = [f"nb{n:02d}" for n in range(14)]
_modules = [importlib.import_module(f"course.exercises.{name}") for name in NOTEBOOKS]
_checks = {name: getattr(module, name) for module in _modules for name in module.__all__}
globals().update(_checks)

__all__ = ["Verdict", "last", "launches", "quiet", "solution", "yours_or_reference", *_checks]
