"""The compiled layout key of ``course.gemm``'s routes: a production detail a reader may skip.

A repeated ``matmul`` call is recognized by its tensors' layout (``plans.call_key``). Read in Python,
that layout costs about 2.5 us per call for three tensors; :file:`layout_key.cpp` reads it from the
tensors' C++ objects in about 0.1 us. It is a C++ extension built with torch's compiler tools (a C++
compiler and ninja, about 15 s, once per torch and Python version), so it is never built by an import:

    python -m course.gemm                 # build it (``course.bench host`` does too)

Later processes find it built and use it; where it is not built, or cannot be, the Python key does
the same job a little slower. :func:`layout_key` is the compiled function, or None.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
import tempfile
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("layout_key.cpp")


@functools.lru_cache(maxsize=1)
def _name() -> str:
    """The module's name: the source's hash with what its binary depends on (torch's build, Python, the CPU)."""
    built_for = f"{torch.__version__} {torch.version.git_version} {sys.version} {platform.machine()}"
    tag = hashlib.sha256(SOURCE.read_bytes() + built_for.encode()).hexdigest()[:12]
    return f"course_layout_key_{tag}"


def build_directory() -> Path:
    """Where the extension is built: ``$COURSE_BUILD_DIR`` or ``~/.cache/course``, one folder per build."""
    root = os.environ.get("COURSE_BUILD_DIR")
    if not root:
        try:
            root = Path.home() / ".cache" / "course"
        except RuntimeError:  # no home directory (a container's user without one)
            root = Path(tempfile.gettempdir()) / "course-build"
    return Path(root) / _name()


def _import(directory: Path):
    name = _name()
    path = directory / f"{name}.so"
    if not path.is_file():
        return None
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.layout_key


def build(directory: Path | None = None):
    """Compile the extension (if not built yet) into ``directory`` (default :func:`build_directory`)
    and return its ``layout_key``; raises where it cannot be built (no C++ compiler or ninja)."""
    from torch.utils.cpp_extension import load

    directory = Path(directory) if directory else build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    module = load(name=_name(), sources=[str(SOURCE)], build_directory=str(directory), extra_cflags=["-O2"],
                  verbose=False)
    return module.layout_key


def use_built(directory: Path | None = None):
    """Build the extension if need be and use it for this process's keys (``course.bench host`` calls
    this); returns the function, or raises where it cannot be built."""
    global layout_key
    layout_key = build(directory)
    return layout_key


def load_built():
    """The built extension's ``layout_key``, or None where it is not built (or fails to load)."""
    try:
        return _import(build_directory())
    except Exception:  # built for another torch or Python, a broken file, no home: the Python key
        return None


layout_key = load_built()

