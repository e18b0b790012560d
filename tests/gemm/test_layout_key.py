"""course.gemm.layout_key, the compiled layout key of the routes: built once (a C++ compiler and
ninja, ~15 s), it must tell apart the same calls as the Python key (it also tells a CPU tensor from a
meta tensor, which the Python key does not; no route is recorded for either). The rest of the suite runs with whichever key the machine has:
the compiled one once ``python -m course.gemm`` has built it."""

import shutil

import pytest
import torch

from course.gemm import layout_key as compiled_key
from course.gemm import plans

needs_compiler = pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")) or not shutil.which("ninja"),
                                    reason="building the extension needs a C++ compiler and ninja")
OPTIONS = ("matmul", None, "auto", None, False)


@pytest.fixture(scope="module")
def build_root(tmp_path_factory):
    return tmp_path_factory.mktemp("course_build")  # as $COURSE_BUILD_DIR


@pytest.fixture(scope="module")
def compiled(build_root):  # one build per test process (~15 s): a second one of the same name would not load
    return compiled_key.build(build_root / compiled_key.build_directory().name)


def python_key(tensors, monkeypatch):
    monkeypatch.setattr(compiled_key, "layout_key", None)
    key = plans.call_key(tensors, OPTIONS)
    monkeypatch.undo()
    return key


def _cases():
    """(name, tensors): layouts that differ from the first case's in one thing each, and one that does not."""
    base = torch.randn(64, 48)
    a, b = torch.randn(32, 64), torch.randn(64, 48)
    out = torch.empty(32, 48)
    return [
        ("base", (a, b, None, out)),
        ("fresh tensors, same layout", (torch.randn(32, 64), torch.randn(64, 48), None, torch.empty(32, 48))),
        ("another M", (torch.randn(33, 64), b, None, torch.empty(33, 48))),
        ("b transposed", (a, base.T.contiguous().T, None, out)),
        ("b float64", (a, b.double(), None, out)),
        ("b requires grad", (a, b.clone().requires_grad_(), None, out)),
        ("b a lazy negation", (a, torch._neg_view(b), None, out)),
        ("b 4 bytes off", (a, torch.randn(64 * 48 + 1)[1:].view(64, 48), None, out)),
        ("b 32 bytes off (same alignment)", (a, torch.randn(64 * 48 + 8)[8:].view(64, 48), None, out)),
        ("a bias", (a, b, torch.randn(48), out)),
        ("no out", (a, b, None, None)),
        ("a 1-D a", (torch.randn(64), b, None, out)),
    ]


@needs_compiler
def test_the_compiled_key_tells_apart_what_the_python_key_does(compiled, monkeypatch):
    cases = _cases()
    py = {name: python_key(tensors, monkeypatch) for name, tensors in cases}
    monkeypatch.setattr(compiled_key, "layout_key", compiled)
    cc = {name: plans.call_key(tensors, OPTIONS) for name, tensors in cases}
    assert all(isinstance(key[0], bytes) for key in cc.values()), "call_key did not use the compiled key"
    for first, _ in cases:
        for second, _ in cases:
            assert (cc[first] == cc[second]) == (py[first] == py[second]), (first, second)
    assert cc["base"] == cc["fresh tensors, same layout"] == cc["b 32 bytes off (same alignment)"]


@needs_compiler
def test_the_compiled_key_tells_grad_mode_apart_and_refuses_what_is_no_strided_tensor(compiled, monkeypatch):
    monkeypatch.setattr(compiled_key, "layout_key", compiled)
    a, b = torch.randn(4, 5), torch.randn(5, 3)
    with torch.no_grad():
        quiet = plans.call_key((a, b, None, None), OPTIONS)
    assert quiet is not None and plans.call_key((a, b, None, None), OPTIONS) != quiet
    for odd in ([[1.0]], 3, a.to_sparse(), torch.randn([1] * 9)):
        assert plans.call_key((odd, b, None, None), OPTIONS) is None, odd
    assert plans.call_key((a, b, None, None), ("matmul", None, "auto", {"unhashable": 1}, False)) is None


@needs_compiler
def test_a_built_key_is_found_by_a_later_import(compiled, build_root, tmp_path, monkeypatch):
    # what `python -m course.gemm` builds, a later import loads without building
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    assert compiled_key.load_built() is None  # nothing built there
    monkeypatch.setenv("COURSE_BUILD_DIR", str(build_root))
    loaded = compiled_key.load_built()
    a = torch.randn(3, 4)
    assert loaded is not None and loaded(a, None) == compiled(a, None)
