"""Tests of course.layouts (notebook 10): ownership maps read from Triton's own linear layouts."""

import matplotlib
import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import layouts, plots

gl = pytest.importorskip("triton.experimental.gluon.language")
matplotlib.use("Agg")


def _blocked_owner(size, threads, warps, order, shape):
    """BlockedLayout's definition, written out for a 2-D row-major order: the tile of
    size * threads * warps elements repeats over the tensor, each repetition in more registers."""
    assert order == [1, 0]
    tile = [s * t * w for s, t, w in zip(size, threads, warps)]
    owner = {k: torch.empty(shape, dtype=torch.int64) for k in ("lane", "warp")}
    for i in range(shape[0]):
        for j in range(shape[1]):
            a, b = i % tile[0], j % tile[1]
            ti, tj = a // size[0] % threads[0], b // size[1] % threads[1]
            wi, wj = a // (size[0] * threads[0]), b // (size[1] * threads[1])
            owner["lane"][i, j] = ti * threads[1] + tj
            owner["warp"][i, j] = wi * warps[1] + wj
    return owner


@pytest.mark.parametrize("size, threads, warps, shape", [([1, 4], [8, 4], [4, 1], (32, 32)),
                                                         ([2, 2], [4, 8], [2, 2], (16, 64)),
                                                         ([1, 8], [4, 8], [4, 1], (64, 128)),
                                                         ([1, 1], [1, 32], [4, 1], (8, 64))])
def test_blocked_layouts_match_their_definition(size, threads, warps, shape):
    owner = layouts.ownership(gl.BlockedLayout(size, threads, warps, [1, 0]), shape)
    expected = _blocked_owner(size, threads, warps, [1, 0], shape)
    assert torch.equal(owner["lane"], expected["lane"]) and torch.equal(owner["warp"], expected["warp"])
    assert torch.equal(owner["thread"], owner["warp"] * 32 + owner["lane"])
    assert (owner["copies"] == 1).all()  # these tiles divide the tensors: no element is held twice
    per_thread = torch.bincount(owner["thread"].flatten())
    assert (per_thread == per_thread[0]).all()  # every thread holds as many elements


def test_every_element_has_one_register_slot_per_thread():
    layout = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    owner = layouts.ownership(layout, (64, 32))
    pairs = set(zip(owner["thread"].flatten().tolist(), owner["register"].flatten().tolist()))
    assert len(pairs) == 64 * 32  # (thread, register) names each element once
    assert layouts.linear(layout, (64, 32)).reg_bases[-1] == [32, 0]  # the tile repeats down the rows


def test_the_wgmma_accumulator_layout():
    # Hopper's m64nNk16 accumulator: each warp owns 16 rows; thread t of a warp holds columns 2(t % 4)
    # and 2(t % 4) + 1 of rows t // 4 and t // 4 + 8, then the same 8 columns further on.
    mma = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    owner = layouts.ownership(mma, (64, 64))
    assert owner["warp"][::16, 0].tolist() == [0, 1, 2, 3]
    for t in (0, 5, 31):
        rows, cols = (owner["lane"][:16] == t).nonzero(as_tuple=True)
        assert sorted(set(rows.tolist())) == [t // 4, t // 4 + 8]
        assert sorted(set(c % 8 for c in cols.tolist())) == [2 * (t % 4), 2 * (t % 4) + 1]
    assert int(owner["register"].max()) + 1 == 64 * 64 // 128  # 32 registers per thread


def test_slices_and_dot_operands_and_broadcasts():
    parent = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    rows = layouts.ownership(gl.SliceLayout(1, parent), (32,))
    assert rows["thread"][:9].tolist() == [0, 4, 8, 12, 16, 20, 24, 28, 32]  # first lane of each row's four
    assert (rows["copies"] == 4).all()  # the four lanes of a row of the parent all hold that row's entry
    mma = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    a_operand = layouts.ownership(gl.DotOperandLayout(0, mma, 2), (64, 16))
    assert (a_operand["copies"] == 1).all() and a_operand["warp"][::16, 0].tolist() == [0, 1, 2, 3]
    small = layouts.ownership(parent, (8, 16))  # smaller than the layout's 32 x 16 tile: broadcast
    assert (small["copies"] == 4).all() and set(small["warp"].unique().tolist()) == {0}


def test_bad_layouts_and_shapes_are_named():
    with pytest.raises(TypeError, match="SwizzledSharedLayout is not a distributed layout"):
        layouts.linear(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]), (16, 16))
    with pytest.raises(ValueError, match="powers of two"):
        layouts.linear(gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]), (30, 32))
    with pytest.raises(ValueError, match="rank 2"):
        layouts.linear(gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]), (32,))


def test_ownership_picture():
    blocked = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    fig = plots.ownership({"blocked": layouts.ownership(blocked, (32, 16)),
                           "rows": layouts.ownership(gl.SliceLayout(1, blocked), (32,))}, number="register")
    assert len(fig.axes) == 2 and fig.axes[0].texts  # numbers written in: 32 x 16 cells


def test_swizzle_permutes_each_row_and_padding_leaves_gaps():
    swizzled = layouts.shared_offsets((32, 64), vec=8, per_phase=1, max_phase=8)
    for row in range(32):
        assert sorted(swizzled[row].tolist()) == list(range(64 * row, 64 * row + 64))
    assert torch.equal(layouts.shared_offsets((4, 16)), torch.arange(64).view(4, 16))  # no swizzle: row-major
    padded = layouts.shared_offsets((4, 16), padding=(16, 2))
    assert padded[1, 0] == 18 and padded[3, 15] == 3 * 18 + 15


def test_bank_conflicts_with_and_without_swizzle_or_padding():
    plain = layouts.shared_offsets((32, 64))
    swizzled = layouts.shared_offsets((32, 64), vec=8, max_phase=8)
    padded = layouts.shared_offsets((32, 64), padding=(64, 8))
    # a warp reading one column, 2 bytes a lane: 128-byte rows put the whole column in one bank
    assert [layouts.wavefronts(t[:, 5], 2) for t in (plain, swizzled, padded)] == [32, 4, 4]
    # 16 bytes a lane (8 float16), lanes down the rows: 8 lanes a pass, 4 passes at best
    assert [layouts.wavefronts(t[:, 0], 2, vector=8) for t in (plain, swizzled, padded)] == [32, 4, 4]
    assert layouts.wavefronts(plain[0, :32], 2) == 1  # along a row: 64 bytes, no conflict
    assert layouts.wavefronts(torch.zeros(32, dtype=torch.int64), 4) == 1  # one word, broadcast
    assert set(layouts.banks(plain[:, 5], 2).tolist()) == {2}


def test_bad_shared_arguments_are_named():
    with pytest.raises(ValueError, match="not both"):
        layouts.shared_offsets((8, 64), vec=8, max_phase=8, padding=(64, 8))
    with pytest.raises(ValueError, match="max_phase groups"):
        layouts.shared_offsets((8, 16), vec=8, max_phase=8)
    with pytest.raises(ValueError, match="one offset per lane"):
        layouts.wavefronts(torch.arange(31), 2)
    with pytest.raises(ValueError, match="bytes per lane"):
        layouts.wavefronts(torch.arange(32), 2, vector=3)


def test_ownership_picture_by_register_and_bad_colour():
    mma = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 32, 16])
    fig = plots.ownership({"acc": layouts.ownership(mma, (64, 32))}, number="lane", colour="register")
    assert len(fig.axes) == 1
    with pytest.raises(ValueError, match="'warp' or 'register'"):
        plots.ownership({"acc": layouts.ownership(mma, (64, 32))}, colour="thread")


def test_banks_picture_counts_the_passes_of_the_outlined_column():
    tiles = {"row-major": layouts.shared_offsets((32, 64)),
             "swizzled": layouts.shared_offsets((32, 64), vec=8, max_phase=8)}
    fig = plots.banks(tiles, element_bytes=2, column=5)
    titles = [ax.get_title() for ax in fig.axes[:2]]
    assert "32 passes" in titles[0] and "4 passes" in titles[1]
    with pytest.raises(ValueError, match="at least one"):
        plots.banks({}, element_bytes=2, column=0)


def test_layout_pictures_fit_a_notebook_width():
    """JupyterLab shows a figure about 960 pixels wide (at 100 dpi): wider ones shrink, and their labels with them."""
    mma = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 32, 16])
    acc = {k: v[:16] for k, v in layouts.ownership(mma, (64, 32)).items()}
    a_op = {k: v[:16] for k, v in layouts.ownership(gl.DotOperandLayout(0, mma, 2), (64, 16)).items()}
    stacked = plots.ownership({"acc": acc, "A": a_op}, number="lane", colour="register")
    tiles = {name: layouts.shared_offsets((32, 64)) for name in "abcd"}
    for fig in (stacked, plots.banks(tiles, element_bytes=2, column=5)):
        assert fig.get_size_inches()[0] * 100 <= 960
    assert len(stacked.axes) == 2 and stacked.axes[0].get_position().y0 > stacked.axes[1].get_position().y0
    assert min(t.get_fontsize() for t in stacked.axes[0].texts) >= 8  # 11 px at 100 dpi
