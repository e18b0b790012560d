"""course.bench.shapes: the broad set of shapes nobody tuned for, and the layout its inputs take from their names."""

import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import bench


def test_broad_set_spans_what_nobody_tuned_for():
    cases = bench.broad_set()
    names = [name for name, *_ in cases]
    assert len(cases) >= 40 and len(set(names)) == len(names)
    groups = {bench.broad_group(name) for name in names}
    assert groups == {"decode", "prefill", "vocab", "B row-major", "weight gradient", "near-square", "random"}
    near = [(M, N, K) for name, M, N, K in cases if bench.broad_group(name) == "near-square"]
    assert any(0 < n % 128 <= 8 for shape in near for n in shape), "sizes a few elements past a multiple of 128"
    assert any(n % 2 for shape in near for n in shape), "odd sizes (rows no multiple of 16 bytes)"
    assert all(1000 <= n <= 5000 for shape in near for n in shape)
    tuned = {(M, N, K) for _, M, N, K in bench.shape_set(quick=False)}
    assert not tuned & {(M, N, K) for _, M, N, K in cases}, "the broad set must hold no benchmark shape"
    assert bench.broad_set() == cases, "seeded: the same shapes every run"
    assert len(bench.broad_set(quick=True)) < len(cases)


def test_broad_inputs_take_the_layout_in_the_name():
    a, b, _ = bench.shapes.inputs(torch.float32, 5, 6, 7, device="cpu", name="Qwen2.5-7B qkv M=5")
    assert a.stride() == (7, 1) and b.stride() == (1, 7)  # B K-major, as nn.Linear keeps its weight
    a, b, _ = bench.shapes.inputs(torch.float32, 5, 6, 7, device="cpu", name=f"x o M=5{bench.ROW_MAJOR_B}")
    assert b.stride() == (6, 1)
    a, b, extra = bench.shapes.inputs(torch.int8, 5, 6, 7, device="cpu", name=f"{bench.WEIGHT_GRAD}x qkv tokens=7")
    assert a.shape == (5, 7) and a.stride() == (1, 5) and set(extra) == {"a_scale", "b_scale", "bias"}
