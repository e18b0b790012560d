"""Tests of course.persistent (notebook 06): the persistent loop, its logged schedule, chiplet remaps."""

import matplotlib
import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import persistent, plots, stages_kernels, tiled
from course.check import check, poisoned
from course.runtime import DEVICE, pick

matplotlib.use("Agg")
SMALL = pick(cpu=dict(block_m=32, block_n=32, block_k=32), gpu={})


def _flattened(a, b, **kwargs):
    return persistent.persistent_matmul(a, b, flatten=True, **kwargs)


@pytest.mark.parametrize("matmul", [persistent.persistent_matmul, _flattened, stages_kernels.stages_matmul],
                         ids=["by hand (06)", "flatten=True (06)", "with the stages (07)"])
@pytest.mark.parametrize("programs", [1, 3, None])
@pytest.mark.parametrize("M,N,K", [(100, 37, 129), (70, 130, 64), (1, 1, 1),
                                   pick(cpu=(64, 96, 32), gpu=(1000, 1000, 520))])
def test_persistent_matmuls_match_float64(M, N, K, programs, matmul):
    a = torch.randn(M, K, device=DEVICE, dtype=torch.float16)
    b = torch.randn(K, N, device=DEVICE, dtype=torch.float16)
    out = poisoned((M, N), torch.float16, DEVICE)
    matmul(a, b, out=out, num_programs=programs, **SMALL)
    check(f"{matmul.__name__} {M}x{N}x{K} on {programs} programs", out, a.double().cpu() @ b.double().cpu())


def test_any_strides_and_empty_products():
    a = torch.randn(40, 50, device=DEVICE, dtype=torch.float16).T  # (50, 40), stored transposed
    b = torch.randn(80, 40, device=DEVICE, dtype=torch.float16)[::2]  # every other row
    check("transposed a, strided b", persistent.persistent_matmul(a, b, num_programs=3, **SMALL),
          a.double().cpu() @ b.double().cpu())
    zeros = persistent.persistent_matmul(torch.ones(3, 0, device=DEVICE, dtype=torch.float16),
                                         torch.ones(0, 5, device=DEVICE, dtype=torch.float16))
    assert zeros.shape == (3, 5) and not zeros.any()
    with pytest.raises(ValueError, match="num_programs=0 must be an int >= 1"):
        persistent.persistent_matmul(torch.ones(2, 2, device=DEVICE), torch.ones(2, 2, device=DEVICE), num_programs=0)


@pytest.mark.parametrize("num_pid_m,num_pid_n,programs,group_m",
                         [(6, 9, 4, 3), (2, 3, 8, 2), (5, 7, 3, 2), (1, 1, 1, 1)])
def test_schedule_is_the_grouped_round_robin(num_pid_m, num_pid_n, programs, group_m):
    log = persistent.schedule(num_pid_m, num_pid_n, num_programs=programs, group_m=group_m)
    assert (log["count"] == 1).all(), "every tile computed exactly once"
    order = tiled.order_map(*tiled.launch_order(num_pid_m, num_pid_n, group_m), num_pid_m, num_pid_n)
    assert torch.equal(log["tile_id"].long(), order), "tile ids in grouped order"
    assert torch.equal(log["program"].long(), order % programs), "program p takes ids p, p + programs, ..."
    assert torch.equal(log["step"].long(), order // programs)
    check("the logged product", log["c"], log["ref"])


@pytest.mark.parametrize("num_sms,chunk", [(304, 0), (304, 4), (300, 0), (300, 4), (38, 16), (7, 2), (8, 0)])
def test_chiplet_tables_are_permutations(num_sms, chunk):
    table = persistent.chiplet_table(num_sms, 8, chunk=chunk)
    assert sorted(table.tolist()) == list(range(num_sms))


def test_chiplet_transform_gives_each_xcd_a_run_of_ids():
    table = persistent.chiplet_table(304, 8)
    for xcd in range(8):  # programs on XCD x (p % 8 == x) hold ids 38 x .. 38 x + 37
        assert sorted(table[xcd::8].tolist()) == list(range(38 * xcd, 38 * xcd + 38))
    dealt, remapped = persistent.xcd_map(16, 19, 8), persistent.xcd_map(16, 19, 8, table)
    assert torch.equal(dealt[:, 0], torch.arange(16) % 8), "round-robin in grouped order: one XCD per row of a group"
    assert (dealt >= 0).all() and (remapped >= 0).all() and torch.bincount(remapped.flatten()).tolist() == [38] * 8
    with pytest.raises(ValueError, match="no permutation"):
        persistent.xcd_map(2, 2, 2, torch.tensor([0, 0, 1, 2]))


def test_pictures_of_schedules_and_chiplets():
    log = persistent.schedule(3, 4, num_programs=2, group_m=2)
    fig = plots.schedules({"a": log, "b": log}, title="3 x 4")
    assert len(fig.axes[0].texts) == 12 and len(fig.axes) == 2
    twice = dict(log, count=torch.where(log["count"] > 0, 2, 0))
    assert "2x" in [t.get_text() for t in plots.schedules({"twice": twice}).axes[0].texts]
    fig = plots.category_maps({"x": persistent.xcd_map(4, 4, 8)}, categories=8, label="XCD")
    assert len(fig.legends[0].get_texts()) == 8
    with pytest.raises(ValueError):
        plots.schedules({})
