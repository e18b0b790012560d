"""course.tiled: the first tiled matmul (notebook 03), against float64, on every edge it has."""

import pytest
import torch

import course
from course import plots, tiled
from course.check import check, poisoned

DEVICE = course.DEVICE
# bf16 only compiled: the interpreter computes it wrongly (shared/interpreter-notes.md).
DTYPES = [torch.float16, torch.float32] + ([torch.bfloat16] if not course.INTERPRET else [])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (33, 65, 17), (64, 64, 64), (100, 37, 129), (5, 200, 40)])
def test_matmul_matches_float64(M, N, K, dtype):
    a = torch.randn(M, K, device=DEVICE, dtype=dtype)
    b = torch.randn(K, N, device=DEVICE, dtype=dtype)
    check(f"{M}x{N}x{K}", tiled.matmul(a, b, out=poisoned((M, N), dtype, DEVICE)), a.double() @ b.double())


@pytest.mark.parametrize("layout", ["a transposed", "b transposed", "both sliced", "out strided"])
def test_any_strides(layout):
    M, N, K = 37, 45, 70
    a = torch.randn(M, K, device=DEVICE)
    b = torch.randn(K, N, device=DEVICE)
    out = None
    if layout == "a transposed":
        a = torch.randn(K, M, device=DEVICE).T
    elif layout == "b transposed":
        b = torch.randn(N, K, device=DEVICE).T
    elif layout == "both sliced":
        a = torch.randn(2 * M, K, device=DEVICE)[::2]
        b = torch.randn(K, 3 * N, device=DEVICE)[:, ::3]
    else:
        out = poisoned((M, 2 * N), torch.float32, DEVICE)[:, ::2]
    c = tiled.matmul(a, b, out=out)
    check(layout, c, a.double() @ b.double())


def test_block_sizes_and_empty_products():
    a, b = torch.randn(50, 70, device=DEVICE), torch.randn(70, 30, device=DEVICE)
    check("16 x 32 x 64 blocks", tiled.matmul(a, b, block_m=16, block_n=32, block_k=64), a.double() @ b.double())
    assert tiled.matmul(torch.randn(0, 5, device=DEVICE), torch.randn(5, 3, device=DEVICE)).shape == (0, 3)
    zeros = tiled.matmul(torch.randn(4, 0, device=DEVICE), torch.randn(0, 3, device=DEVICE))
    assert zeros.shape == (4, 3) and not zeros.any()


@pytest.mark.parametrize("call, message", [
    (lambda a, b: tiled.matmul(a, b.T), "a's columns must equal b's rows"),
    (lambda a, b: tiled.matmul(a[0], b), "must be a 2-D tensor"),
    (lambda a, b: tiled.matmul(a.long(), b.long()), "pass float16, bfloat16 or float32"),
    (lambda a, b: tiled.matmul(a.half(), b), "convert one with .to()"),
    (lambda a, b: tiled.matmul(a, b, block_k=8), "block_k=8 must be a power of two, at least 16"),
    (lambda a, b: tiled.matmul(a, b, out=torch.empty(3, 3, device=DEVICE)), "out has shape (3, 3)"),
    (lambda a, b: tiled.matmul(a, "b"), "b must be a 2-D tensor"),
])
def test_bad_input_is_named(call, message):
    a, b = torch.randn(8, 6, device=DEVICE), torch.randn(6, 4, device=DEVICE)
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(").replace(")", r"\)")):
        call(a, b)


# The same product by the kernels of notebooks 04 and 05: other launch orders, other configurations.
ORDERED = {
    "grouped, GROUP_M = 3": lambda a, b, out: tiled.grouped_matmul(a, b, out=out, group_m=3, block_m=16, block_n=32,
                                                                  block_k=16, num_warps=4, num_stages=2),
    "row-major, 1-D grid": lambda a, b, out: tiled.grouped_matmul(a, b, out=out, group_m=1, block_m=32, block_n=16,
                                                                 block_k=32, num_warps=4, num_stages=2),
    "autotuned": lambda a, b, out: tiled.tuned_matmul(a, b, out=out),
}


@pytest.mark.parametrize("kernel", ORDERED)
@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (100, 37, 129), (70, 130, 64)])
def test_grouped_and_tuned_match_float64(kernel, M, N, K):
    for dtype in DTYPES:
        a = torch.randn(K, M, device=DEVICE, dtype=dtype).T  # transposed: the strides carry it
        b = torch.randn(K, 2 * N, device=DEVICE, dtype=dtype)[:, ::2]
        out = ORDERED[kernel](a, b, poisoned((M, N), dtype, DEVICE))
        check(f"{kernel}, {M}x{N}x{K} {dtype}", out, a.double() @ b.double())


def test_tuned_matmul_keeps_one_config_per_shape():
    assert tiled.kept_config(3, 5, 7) == "not tuned"
    a, b = torch.randn(3, 7, device=DEVICE), torch.randn(7, 5, device=DEVICE)
    tiled.tuned_matmul(a, b)
    kept = tiled.kept_config(3, 5, 7)
    assert any(kept.startswith(f"{c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']}x{c.kwargs['BLOCK_K']}, "
                               f"{c.num_warps} warps, {c.num_stages} stages") for c in tiled.TUNING_CONFIGS), kept


@pytest.mark.parametrize("call, message", [
    (lambda a, b: tiled.grouped_matmul(a, b, group_m=0), "group_m=0 must be an int >= 1"),
    (lambda a, b: tiled.grouped_matmul(a, b.T), "grouped_matmul: a is (8, 6) and b is (4, 6)"),
    (lambda a, b: tiled.grouped_matmul(a, b, block_n=48), "block_n=48 must be a power of two"),
    (lambda a, b: tiled.tuned_matmul(a.double(), b), "tuned_matmul: a is torch.float64; pass float16"),
])
def test_grouped_and_tuned_bad_input_is_named(call, message):
    a, b = torch.randn(8, 6, device=DEVICE), torch.randn(6, 4, device=DEVICE)
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(").replace(")", r"\)")):
        call(a, b)


def test_time_matmuls_rows():
    rows = tiled.time_matmuls([(16, 24, 8)], {"torch": lambda a, b, c: torch.matmul(a, b, out=c)},
                              dtype=torch.float32)
    (row,) = rows
    assert (row["shape"], row["M"], row["N"], row["K"]) == ("16 x 24 x 8", 16, 24, 8)
    assert row["torch_tflops"] == pytest.approx(2 * 16 * 24 * 8 / (row["torch_ms"] * 1e-3) / 1e12)
    with pytest.raises(ValueError, match="at least one"):
        tiled.time_matmuls([(1, 1, 1)], {})
    with pytest.raises(ValueError, match="rounds=0"):
        tiled.time_matmuls([(1, 1, 1)], {"torch": lambda a, b, c: None}, rounds=0)


def test_accumulation_error_grows_with_k_only_in_float16():
    rows = tiled.accumulation_error(ks=(64, 4096))
    assert rows[1]["fp16 accumulator"] > 3 * rows[0]["fp16 accumulator"]
    assert rows[1]["fp32 accumulator"] < 2 * rows[0]["fp32 accumulator"] < 1e-3


def test_tile_map_draws_one_label_per_program():
    owner = torch.arange(6).repeat_interleave(2).reshape(3, 4)
    fig = plots.tile_map(owner)
    assert len(fig.axes[0].texts) == 6
    with pytest.raises(ValueError, match="2-D tensor"):
        plots.tile_map(torch.arange(3))


# --- notebook 04: launch orders ------------------------------------------------------------------------

@pytest.mark.parametrize("num_pid_m, num_pid_n, group_m", [(6, 9, 3), (5, 7, 2), (1, 4, 8), (9, 1, 2), (32, 32, 8)])
def test_grouped_order_is_a_permutation_and_matches_swizzle2d(num_pid_m, num_pid_n, group_m):
    pid_m, pid_n = tiled.launch_order(num_pid_m, num_pid_n, group_m)
    tiles = pid_m.long() * num_pid_n + pid_n.long()
    assert sorted(tiles.tolist()) == list(range(num_pid_m * num_pid_n))
    swizzled = tiled.launch_order(num_pid_m, num_pid_n, group_m, mapping=tiled.swizzled_tile)
    assert torch.equal(pid_m, swizzled[0]) and torch.equal(pid_n, swizzled[1])


def test_group_of_one_row_is_row_major():
    pid_m, pid_n = tiled.launch_order(4, 6, 1)
    pids = torch.arange(24)
    assert torch.equal(pid_m.long(), pids // 6) and torch.equal(pid_n.long(), pids % 6)


def test_order_map_and_wave_footprint():
    order = tiled.order_map(*tiled.launch_order(6, 9, 3), 6, 9)
    assert order[0, :4].tolist() == [0, 3, 6, 9] and order[:3, 0].tolist() == [0, 1, 2]
    assert tiled.wave_footprint(*tiled.launch_order(6, 9, 1), 12)["blocks in all"] == 11
    assert tiled.wave_footprint(*tiled.launch_order(6, 9, 3), 12)["blocks in all"] == 7
    with pytest.raises(ValueError, match="all must be >= 1"):
        tiled.launch_order(0, 3, 1)
    average = tiled.waves_footprint(*tiled.launch_order(32, 32, 8), 132)
    assert average["waves"] == 7 and 25 < average["blocks in all"] < 37


def test_launch_orders_plot_tints_the_first_wave():
    fig = plots.launch_orders({"row-major": tiled.order_map(*tiled.launch_order(3, 4, 1), 3, 4)}, wave=5)
    assert len(fig.axes[0].images) == 2 and len(fig.axes[0].texts) == 12
    with pytest.raises(ValueError, match="at least one"):
        plots.launch_orders({})


# --- notebook 05: costs of a configuration -----------------------------------------------------------

def test_shared_bytes_is_what_the_compiler_allocates_for_an_h100():
    from course.compile import build

    a = torch.empty(1024, 1024, dtype=torch.float16)
    args = (a, a, a, 1024, 1024, 1024, *a.stride(), *a.stride(), *a.stride())
    h100 = build(tiled.matmul_kernel, *args, BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=4)
    assert h100.asm["shared"] == tiled.shared_bytes(128, 64, 32, 4) == 4 * (128 * 32 + 32 * 64) * 2


@pytest.mark.parametrize("M, N, tiles, waves, idle", [(3072, 3072, 576, 5, 84), (1536, 1408, 132, 1, 0),
                                                      (1000, 1000, 64, 1, 68), (129, 1, 2, 1, 130)])
def test_waves(M, N, tiles, waves, idle):
    w = tiled.waves(M, N, 128, 128, 132)
    assert (w["tiles"], w["waves"], w["idle in the last wave"]) == (tiles, waves, idle)
    assert w["efficiency"] == pytest.approx(tiles / (waves * 132))


def test_bars_draw_one_labelled_bar_per_value():
    fig = plots.bars(["1 x 2 x 3", "4 x 5 x 6"], {"tuned": [10.0, 20.0], "torch": [15.0, 25.0]}, ylabel="TFLOP/s")
    assert len(fig.axes[0].patches) == 4 and len(fig.axes[0].texts) == 4
    with pytest.raises(ValueError, match="2 values for 3 categories"):
        plots.bars("abc", {"tuned": [1, 2]}, ylabel="x")
    with pytest.raises(ValueError, match="at least one"):
        plots.bars("ab", {}, ylabel="x")


def test_wave_fill_draws_a_bar_per_shape():
    fig = plots.wave_fill({"3072": tiled.waves(3072, 3072, 128, 128, 132),
                           "full": tiled.waves(1536, 1408, 128, 128, 132)}, sms=132)
    assert len(fig.axes[0].patches) == 3 + 1  # full, busy and idle parts; one full bar
    assert len(fig.axes[1].patches) == 2 * 2  # the last wave alone: busy and idle SMs of each
    with pytest.raises(ValueError, match="at least one"):
        plots.wave_fill({}, sms=132)
