"""course.gemm.config: the choice of tiles and schedule, as pure functions of the shape and the SM count
(no kernel runs: every test here asks about an H100 with 132 SMs on any machine)."""

from pathlib import Path

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
import triton  # noqa: E402
from course import records
from course.gemm import config as gemm_config, gluon as gluon_gemm
from course.gemm.config import Config


def test_tail_plan_cuts_whole_waves_and_one_short_one():
    W = Config(128, 256, 64, num_warps=8, num_stages=4)
    cd = triton.cdiv
    for M in (128, 512, 1000, 1536, 3072, 4224, 5000, 8192):
        for N in (256, 3072, 4224, 6144, 10240, 14336):
            plan = gemm_config.tail_plan_for(M, N, W, 132)
            if plan is None:
                continue
            block = W.block_m if plan.axis == "m" else W.block_n
            extent = M if plan.axis == "m" else N
            assert plan.cut % block == 0 and 0 < plan.cut < extent, (M, N, plan)
            assert plan.main_tiles == (plan.cut // block) * (cd(N, W.block_n) if plan.axis == "m" else cd(M, W.block_m))
            assert plan.main_tiles / (cd(plan.main_tiles, 132) * 132) >= 0.97, (M, N, plan)
            assert plan.tail_tiles <= 132, (M, N, plan)
            t = plan.tail_config
            assert (t.block_m, t.block_n) == (64, 128)
    assert gemm_config.tail_plan_for(3072, 3072, W, 132).cut == 2816  # 22 rows of 12 tiles: two waves
    assert gemm_config.tail_plan_for(1536, 1536, W, 132) is None  # 72 tiles: not even one wave to keep


def test_streamk_programs_split_every_streamk_tile_alike():
    big, small = Config(128, 128, 64), Config(64, 64, 64)
    for M, N, K, cfg in [(4224, 4224, 4224, big), (512, 10240, 8192, big), (1536, 1536, 1536, big),
                         (64, 10240, 8192, small), (3000, 3000, 64, small), (1024, 1024, 1024, big)]:
        sk = gemm_config.streamk_tiles_for(M, N, cfg, 132)
        programs = gemm_config.streamk_programs_for(M, N, K, cfg, 132)
        assert programs <= 132, (M, N, K, programs)
        if sk == 0:
            assert programs == 0
            continue
        assert programs % sk == 0, f"{M}x{N}x{K}: {programs} programs for {sk} Stream-K tiles"
        split = programs // sk
        if cfg.block_m >= 128:  # compute-bound tiles keep chunks of at least 32 K-steps
            assert split == 1 or triton.cdiv(K, cfg.block_k) // split >= 32, (M, N, K, split)
    # 4224^3 in 128 x 128 tiles: 33 Stream-K tiles, 66 K-steps each -> two programs per tile
    assert gemm_config.streamk_programs_for(4224, 4224, 4224, big, 132) == 66


def test_heuristic_and_mode_choice_are_valid():
    for M, N, K in [(16, 4096, 4096), (3072, 3072, 3072), (8192, 8192, 8192), (1, 1, 1)]:
        for dt in gemm_config.supported_dtypes():
            cfg = gemm_config.heuristic_config(M, N, K, dt)
            assert isinstance(cfg, Config)
            assert gemm_config.choose_mode(M, N, K, cfg) in ("persistent", "streamk", "tail", "gluon")


def test_one_cost_model_weighs_128_x_128_tiles_against_the_gluon_kernel(monkeypatch):
    """128 x 128 tiles that fill their waves under 90 % lose to a Gluon tile that fills them better
    (Llama-2-13B o at M = 1000: 320 tiles, 2.4 waves, against 128 of 128 x 320); where 128 x 128 waves
    are full, Stream-K on 128 x 256 tiles takes the product (Falcon-7B down at M = 4096: 576 tiles)."""
    narrow = Config(128, 128, 64, num_warps=4, num_stages=6, tma=True, tma_store=True)
    assert gemm_config.gluon_tiles_for(1000, 5120, 5120, narrow, 132)[0] == ((128, 320), False)
    assert gemm_config.gluon_tiles_for(8192, 10240, 8192, narrow, 132) == ()  # waves 99.5 % full
    monkeypatch.setattr(gemm_config.runtime, "INTERPRET", False)
    monkeypatch.setattr(gemm_config, "sm_count", lambda: 132)
    gemm_config.heuristic_config.cache_clear()
    try:
        cfg = gemm_config.heuristic_config(4096, 4544, 18176, torch.bfloat16)
        assert (cfg.block_m, cfg.block_n) == (128, 256)
        assert gemm_config.choose_mode(4096, 4544, 18176, cfg, 132, torch.bfloat16, gluon=True) == "streamk"
        cfg = gemm_config.heuristic_config(1000, 5120, 5120, torch.bfloat16)
        assert (cfg.block_m, cfg.block_n) == (128, 128)
        assert gemm_config.choose_mode(1000, 5120, 5120, cfg, 132, torch.bfloat16, gluon=True) == "gluon"
        cfg = gemm_config.heuristic_config(512, 4096, 4096, torch.bfloat16)  # 128 tiles, too few for Stream-K
        assert (cfg.block_m, cfg.block_n) == (128, 128)
    finally:
        gemm_config.heuristic_config.cache_clear()


def test_decode_takes_128_wide_tiles_for_wide_weights(monkeypatch):
    """The decode rows of heuristic_config as on an H100 (132 SMs): 128-wide TMA tiles where they
    fill at least half of one wave (N >= 8321), 64 or 32 wide below that."""
    monkeypatch.setattr(gemm_config.runtime, "INTERPRET", False)
    monkeypatch.setattr(gemm_config, "sm_count", lambda: 132)
    gemm_config.heuristic_config.cache_clear()
    try:
        tile = lambda M, N, dt=torch.bfloat16: (lambda c: (c.block_m, c.block_n, c.tma))(  # noqa: E731
            gemm_config.heuristic_config(M, N, 8192, dt))
        assert tile(16, 10240) == (16, 128, True) and tile(16, 14336) == (16, 128, True)
        assert tile(16, 8192) == (16, 64, False) and tile(16, 28672) == (16, 64, False)  # under half / over a wave
        assert tile(16, 9216) == (16, 128, True) and tile(32, 9216) == (64, 128, True)  # Phi-3-mini qkv: 72 tiles
        assert tile(64, 10240) == (64, 128, True) and tile(64, 28672) == (64, 128, True)
        assert tile(64, 8192) == (64, 64, False) and tile(64, 4096) == (64, 32, False)
        assert tile(64, 10240, torch.int8) == (64, 128, True) and tile(16, 10240, torch.int8) == (16, 64, False)
        assert tile(64, 10240, torch.float32)[:2] == (64, 64)
        # a ragged K (no multiple of the K step) goes through TMA, which zero-fills the last step
        tma = lambda M, N, K: gemm_config.heuristic_config(M, N, K, torch.bfloat16).tma  # noqa: E731
        assert tma(16, 4096, 4095) and tma(16, 4096, 4000) and tma(64, 4096, 4000) and tma(64, 8192, 4095)
        assert not tma(16, 4096, 4096) and not tma(64, 4096, 4096)
    finally:
        gemm_config.heuristic_config.cache_clear()


def test_decode_shares_k_only_in_shares_of_512_or_more(monkeypatch):
    """Decode's Stream-K (H100, 132 SMs): each program's share of a shared tile's K is at least 512,
    and a tile leaving half the SMs idle needs 24 K-steps to be worth splitting."""
    monkeypatch.setattr(gemm_config.runtime, "INTERPRET", False)
    mode = lambda M, N, K, cfg: gemm_config.choose_mode(M, N, K, cfg, 132, torch.bfloat16, gluon=False)  # noqa: E731
    wide, narrow = Config(64, 128, 128, tma=True), Config(16, 64, 256)
    # Falcon-7B up: at M = 32, 142 tiles, the 10 past one wave shared 13 ways: 4544 / 13 < 512 each;
    # 64 x 64 tiles make 284 (20 shared 6 ways) and at M = 1 16 x 64 tiles too: 757 each
    assert mode(32, 18176, 4544, wide) == "persistent"
    assert mode(32, 18176, 4544, Config(64, 64, 128)) == "streamk"
    assert mode(1, 18176, 4544, narrow) == "streamk"
    # GPT-2-XL at M = 1: 25 tiles shared 5 ways; down (K = 6400) 1280 each, o (K = 1600) 320
    assert mode(1, 1600, 6400, narrow) == "streamk"
    assert mode(1, 1600, 1600, narrow) == "persistent"
    assert mode(16, 4096, 4096, narrow) == "persistent"  # 64 tiles, 16 K-steps: under 24
    assert mode(16, 4096, 14336, narrow) == "streamk"  # 56 K-steps
    assert mode(1, 152064, 3584, narrow) == "persistent"  # 2376 tiles: 18 whole waves, nothing to share


def test_rows_off_the_sector_cost_tiles_by_the_bytes_they_load():
    """Where an operand's rows straddle 32-byte sectors the loads decide, and the tile that loads the
    fewest bytes per output wins (notes/gemm-decisions.md, "Rows off the sector"): 128 x 320 at 2056^3
    (over 128 x 144) and at 3080^3 (over Triton's 128 x 128); where it is not 5 % cheaper, Triton's
    tiles stay. Aligned rows keep the area model."""
    narrow = Config(128, 128, 64, num_warps=4, num_stages=6, tma=True, tma_store=True)
    wide = Config(128, 256, 64, num_warps=8, num_stages=4)
    assert gemm_config.gluon_tiles_for(2056, 2056, 2056, narrow, 132)[0] == ((128, 144), False)
    assert gemm_config.gluon_tiles_for(2056, 2056, 2056, narrow, 132, slow_rows=True)[0] == ((128, 320), False)
    assert gemm_config.gluon_tiles_for(3080, 3080, 3080, narrow, 132) == ()
    assert gemm_config.gluon_tiles_for(3080, 3080, 3080, narrow, 132, slow_rows=True)[0] == ((128, 320), False)
    assert gemm_config.gluon_tiles_for(4800, 5000, 4616, wide, 132, slow_rows=True) == ()
    assert gemm_config.gluon_tiles_for(4096, 4096, 4096, wide, 132, slow_rows=True) == ()


def test_gluon_is_auto_only_where_its_tiles_fill_the_waves_better():
    # H100 (132 SMs), 128 x 256 tiles: 1536^3 makes 72 of them, 128 x 144 makes 132; 3072^3 288
    # (2.2 waves: a tail split) against 384 of 192 x 128 (2.9); 512 x 6144 makes 96 against 128 with
    # the 192 rows along N (swap); 512 x 10240 makes 160 (a tail split) against 128 of 128 x 320.
    # Big, evenly tiled shapes and decode stay on Triton.
    wide = Config(128, 256, 64, num_warps=8, num_stages=4)
    picks = {(M, N): gemm_config.gluon_tiles_for(M, N, 4096, wide, 132)[:1] for M, N in
             [(1536, 1536), (3072, 3072), (512, 6144), (512, 10240), (4096, 4096), (8192, 8192), (4224, 4224),
              (2048, 2048), (4096, 6144), (512, 28672), (64, 6144)]}
    assert picks == {(1536, 1536): (((128, 144), False),), (3072, 3072): (((192, 128), False),),
                     (512, 6144): (((192, 128), True),), (512, 10240): (((128, 320), False),),
                     (4096, 4096): (), (8192, 8192): (), (4224, 4224): (), (2048, 2048): (), (4096, 6144): (),
                     (512, 28672): (), (64, 6144): ()}
    assert gemm_config.gluon_tiles_for(1536, 1536, 1536, Config(64, 128, 64), 132) == ()  # 128-row tiles only
    assert gemm_config.choose_mode(1536, 1536, 1536, wide, 132, torch.float16, gluon=True) == "gluon"
    assert gemm_config.choose_mode(1536, 1536, 1536, wide, 132, torch.float16, gluon=False) != "gluon"
    assert gemm_config.choose_mode(1536, 1536, 1536, wide, 132, torch.int8, gluon=True) != "gluon"
    for M, N in [(1536, 1536), (601, 9000), (5, 7)]:  # tile counts, both orientations
        assert gluon_gemm.tiles(M, N, False) == -(-M // 192) * -(-N // 128)
        assert gluon_gemm.tiles(M, N, True) == -(-N // 192) * -(-M // 128)
        assert gluon_gemm.tiles(M, N, True, (128, 144)) == -(-N // 128) * -(-M // 144)
        assert gluon_gemm.tiles(M, N, False, (128, 320)) == -(-M // 128) * -(-N // 320)


def test_gluon_tile_choice_takes_the_fewest_waves_of_work():
    # Each program's time ~ its waves of tiles x their area (a model fitted to H100 timings), ties to
    # fewer bytes per K-step: 1536^3 fills one wave with 132 tiles of 128 x 144 (96 of 192 x 128 are
    # one wave of a bigger tile); 3072^3 keeps 192 x 128 (3 waves x 24576 against 2 x 40960 for
    # 128 x 320); 512 x 6144 runs 192 x 128 with its rows along N (one wave); 512 x 10240 one wave
    # of 128 x 320 (two of 192 x 128).
    first = {(M, N): gluon_gemm.tile_choices(M, N, 132)[0]
             for M, N in [(1536, 1536), (3072, 3072), (512, 6144), (512, 10240)]}
    assert first == {(1536, 1536): ((128, 144), False), (3072, 3072): ((192, 128), False),
                     (512, 6144): ((192, 128), True), (512, 10240): ((128, 320), False)}
    for M, N in [(1536, 1536), (100, 7000), (1, 1)]:  # every tile and orientation, once
        assert sorted(gluon_gemm.tile_choices(M, N, 132)) == sorted(
            (tile, swap) for tile in gluon_gemm.TILES for swap in (False, True))


def _tiles_section_headings():
    notes = (Path(__file__).resolve().parents[2] / "notes" / "gemm-decisions.md").read_text()
    section = notes.split("## Tiles:", 1)[1].split("\n## ", 1)[0]
    return [line[4:].strip() for line in section.splitlines() if line.startswith("### ")]


def test_every_tile_rule_has_its_heading_in_the_notes():
    names = [rule.name for rule in gemm_config.TILE_RULES]
    assert len(set(names)) == len(names), "two tile rules share a name"
    assert _tiles_section_headings() == names, (
        "notes/gemm-decisions.md, 'Tiles': one '### <rule name>' heading per TILE_RULES entry, in the same order")


@pytest.mark.parametrize("record", ["gemm_h100-sxm", "gemm_broad_h100-sxm"])
def test_the_recorded_shapes_ran_the_tiles_their_rule_gives_now(record, monkeypatch):
    """Which rule each recorded benchmark shape takes on the H100 (printed with -s), and that the record
    was measured with that rule's tiles: a rule changed since is a record to measure again."""
    monkeypatch.setattr(gemm_config.runtime, "INTERPRET", False)
    monkeypatch.setattr(gemm_config, "sm_count", lambda: 132)
    gemm_config.heuristic_config.cache_clear()
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.int8}
    taken, stale = {}, []
    try:
        for row in records.load(record).rows:
            M, N, K, dtype = row["M"], row["N"], row["K"], dtypes[row["dtype"]]
            rule = gemm_config.tile_rule(M, N, K, dtype, num_sms=132)
            taken.setdefault(rule.name, []).append(f"{row['dtype']} {row['name']}")
            cfg = gemm_config.heuristic_config(M, N, K, dtype)
            now = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k} w{cfg.num_warps} s{cfg.num_stages}"
            if row.get("config") and row["config"] != now:
                stale.append(f"{row['dtype']} {row['name']}: recorded {row['config']}, rule '{rule.name}' gives {now}")
    finally:
        gemm_config.heuristic_config.cache_clear()
    print("\n".join(f"{name}: {len(shapes)} shapes" for name, shapes in taken.items()))
    assert not stale, "records measured with other tiles:\n" + "\n".join(stale[:10])
