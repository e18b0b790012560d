"""The catalogue of notebook 12's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import importlib.util
import textwrap

import pytest

from course import exercises, records, runtime, solutions
from course.exercises import nb12

from catalogue import assert_survives, assert_wrong_answers_named, edited_source, quiet

_HEADER = textwrap.dedent("""\
    import math
    import torch
    import triton
    import triton.language as tl
    from course import epilogues, gemm, mlp, records, solutions
    from course.gemm import gluon as gluon_gemm
    from course.stages import GemmContext, ScheduleContext, make_bias_view, make_output_view, make_tensor_view
""")


# Under the interpreter a check stops a stray address and a loop that never ends; compiled, neither can be stopped.
interpreter_only = pytest.mark.skipif(not runtime.INTERPRET, reason="a compiled kernel's stray address faults the GPU, "
                                      "and the time limit works only under the interpreter")


def learner(tmp_path, name, source, *wanted):
    """The functions ``wanted`` of a learner's cell ``source`` (the notebook's imports given), from a file so that
    the checks can read their source."""
    path = tmp_path / f"{name}.py"
    path.write_text(_HEADER + "\n\n" + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = tuple(getattr(module, w) for w in wanted)
    return found if len(found) > 1 else found[0]


def _edit(source, *pairs):
    """``source`` with each (old, new) of ``pairs`` (flattened: old, new, old, new, ...) replaced; each must apply."""
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert old in source, old
        source = source.replace(old, new)
    return source


# --- 12 · mode_choice: which mode for which shape, against the records ---------------------------------

_RULE = edited_source(solutions.choose_mode)  # the reference rule, to edit
_GLUON_IF = "    if triton_tiles <= 3 * 132 and last_wave(triton_tiles) < 0.75 and last_wave(gluon_tiles) >= 0.85:\n"
_OFF_THE_RECORD = "does not follow the waves off the record"

MODE_WRONG = {  # label: (a learner's choose_mode, or the source of one, words its message must contain)
    "always persistent": (lambda M, N, K, tile: "persistent", "mostly empty"),
    "always Gluon": (lambda M, N, K, tile: "gluon", "where the waves are full"),
    "always tail": (lambda M, N, K, tile: "tail" if M > 0 else "persistent", "thin last one"),
    "always Stream-K": (lambda M, N, K, tile: "streamk", "gains little on an H100"),
    "Gluon on small squares": (lambda M, N, K, tile: "gluon" if M < 2000 else "persistent", "square 1024"),
    "Stream-K for every partial last wave": (
        _edit(_RULE, '    return "persistent"', '    return "streamk" if triton_tiles % 132 else "persistent"'),
        "70B down M=4096"),
    "not a mode": (lambda M, N, K, tile: "fast", "return one of"),
    "auto": (lambda M, N, K, tile: "auto", "choosing is the exercise"),
    "a number, not a mode": (lambda M, N, K, tile: -(-M // tile[0]) * -(-N // tile[1]), "returned int"),
    "raises": (lambda M, N, K, tile: 1 / 0, "raised ZeroDivisionError"),
    "wrong arguments": (lambda M, N, K: "persistent", "must take"),
    "course.gemm's own choice": ("""
        def choose_mode(M, N, K, tile):
            return gemm.choose_mode(M, N, K, gemm.Config(*tile, 64), 132, torch.bfloat16, gluon=True)
    """, "course.gemm's own choice"),
    "course.gemm's Gluon test": ("""
        def choose_mode(M, N, K, tile):
            from course.gemm.config import gluon_tiles_for
            if gluon_tiles_for(M, N, K, gemm.Config(*tile, 64), 132):
                return "gluon"
            return "persistent"
    """, "where the Gluon tiles win"),
    "the reference, called": (lambda M, N, K, tile: solutions.choose_mode(M, N, K, tile), "the solution is there"),
    "reads the record": ("""
        def choose_mode(M, N, K, tile):
            rows = [r for r in records.load("gemm_h100-sxm").rows if (r["M"], r["N"], r["K"]) == (M, N, K)]
            best = max(("persistent", "tail", "gluon"), key=lambda m: rows[0].get(m + "_ratio") or 0)
            return best
    """, "reads the record it is scored against"),
    "reads a record in a global": ("""
        gemm_record = records.load("gemm_h100-sxm")

        def choose_mode(M, N, K, tile):
            for r in gemm_record.rows:
                if r["dtype"] == "bf16" and r["M"] == M and r["N"] == N and r["K"] == K:
                    return max(("persistent", "tail", "gluon"), key=lambda m: r.get(m + "_ratio") or 0)
            return "persistent"
    """, "reads gemm_record"),
    "opens the record's file": ("""
        import json
        from pathlib import Path

        def choose_mode(M, N, K, tile):
            rows = json.loads(Path(records.__file__).with_name("data").joinpath("gemm_h100-sxm.json").read_text())
            return "persistent"
    """, "reads a file"),
    "one shape by heart": (_edit(_RULE, "    triton_tiles =", "    if M == 1536:\n        return 'gluon'\n"
                                                              "    triton_tiles ="), "picks by exact sizes (M == 1536"),
    "a table of shapes": ("""
        BEST = {(512, 6144, 4096): "gluon", (1536, 1536, 1536): "gluon"}

        def choose_mode(M, N, K, tile):
            return BEST.get((M, N, K), "persistent")
    """, "picks by exact sizes (BEST.get"),
    "sizes in a global set": ("""
        GLUON_SHAPES = {1536, 3072, 4224}

        def choose_mode(M, N, K, tile):
            return "gluon" if M in GLUON_SHAPES else "persistent"
    """, "picks by exact sizes (M in GLUON_SHAPES"),
    "sizes in a list": (_edit(_RULE, "    triton_tiles =", "    if N in (1536, 3072, 4224):\n        return 'gluon'\n"
                                                             "    triton_tiles ="), "picks by exact sizes (N in"),
    "fails beyond the record": (_edit(_RULE, "    triton_tiles =", "    assert M > 8, 'no decode'\n    triton_tiles ="),
                                "a shape beyond the record"),
    # rules that copy the record's Gluon shapes without naming them exactly pass the record: the shapes near it
    # (1473 cubed first: one wave of Triton tiles, 55 % full) show that they do not follow the waves
    "the record's Gluon shapes by narrow ranges": (_edit(_RULE, _GLUON_IF, (
        "    if 1500 < M < 1600 or 3000 < M < 3100 or (500 < M < 520 and (6000 < N < 6200 or 10000 < N < 10300)):\n")),
        _OFF_THE_RECORD),
    "the record's Gluon shapes by remainders": (_edit(_RULE, _GLUON_IF, (
        "    if not M % 1536 and M < 4000 or not M % 512 and M < 1024 and not N % 2048 and N % 4096 and N < 12000:\n")),
        _OFF_THE_RECORD),
    "the record's Gluon shapes as strings in a table": (
        "GLUON = {'1536x1536x1536', '3072x3072x3072', '512x6144x4096', '512x10240x8192'}\n\n\n"
        + _edit(_RULE, _GLUON_IF, '    if f"{M}x{N}x{K}" in GLUON:\n'), _OFF_THE_RECORD),
    "Gluon for every square between 1100 and 2000": (
        _edit(_RULE, _GLUON_IF, _GLUON_IF[:-2] + " or M == N == K and 1100 < M < 2000:\n"),
        "where the Gluon kernel is the slower one"),
    # the review's: course.gemm's choice called with the tile as it is (it wants a Config): the call is the mistake
    "course.gemm's own choice, with the tile as given": (lambda M, N, K, tile: gemm_choose(M, N, K, tile),
                                                        "course.gemm's own choice"),
    # the review's: a table of the record's tile counts, not its shapes
    "the record's Gluon tile counts in a table": ("""
        def choose_mode(M, N, K, tile):
            t = -(-M // tile[0]) * -(-N // tile[1])
            if t in (72, 96, 160, 288):
                return "gluon"
            if t == 561:
                return "tail"
            return "persistent"
    """, _OFF_THE_RECORD + ": there 153 Triton tiles"),
    # the review's: a threshold on the idle share of all the waves, lax enough to keep 1000 x 10240 persistent
    "a lax threshold on the idle share of all waves": ("""
        def choose_mode(M, N, K, tile):
            def idle(n):
                full = -(-n // 132) * 132
                return (full - n) / full
            t = -(-M // tile[0]) * -(-N // tile[1])
            if idle(t) <= 0.2:
                return "persistent"
            (gt, swap), *_ = gluon_gemm.tile_choices(M, N, 132)
            if idle(gluon_gemm.tiles(M, N, swap, gt)) < 0.1:
                return "gluon"
            return "streamk" if t > 132 else "gluon"
    """, _OFF_THE_RECORD + ": there 320 Triton tiles"),
    # the review's: the reference with the tile's axes swapped
    "the tile's axes swapped": (_edit(_RULE, "triton_tiles = -(-M // tile[0]) * -(-N // tile[1])",
                                      "triton_tiles = -(-M // tile[1]) * -(-N // tile[0])"), _OFF_THE_RECORD),
    "an attribute the tile does not have": (lambda M, N, K, tile: "gluon" if tile.block_m > 64 else "persistent",
                                            "tile is a tuple, (block_m, block_n)"),
}


def gemm_choose(M, N, K, tile):
    from course import gemm

    return gemm.choose_mode(M, N, K, tile)


_NAMES_SHAPES = "A rule that names the record's shapes"


def test_mode_choice_the_tail_on_rules_that_name_shapes_is_said_only_to_them(tmp_path):
    # said to a rule that copies the record's shapes by ranges or by a table of tile counts; not to one whose
    # threshold is wrong, nor to one that swaps the tile's axes
    for label, names in (("the record's Gluon shapes by narrow ranges", True),
                         ("the record's Gluon shapes by remainders", True),
                         ("the record's Gluon tile counts in a table", True),
                         ("a lax threshold on the idle share of all waves", False),
                         ("the tile's axes swapped", False)):
        verdict = quiet(exercises.check_mode_choice, _rule(tmp_path, label, MODE_WRONG[label][0]))
        assert verdict.status == "failed" and _OFF_THE_RECORD in verdict.message, verdict.line
        assert (_NAMES_SHAPES in verdict.message) == names, (label, verdict.line)


def test_mode_choice_an_error_in_the_rule_shows_its_line_and_no_kernel_hint(tmp_path):
    rule = _rule(tmp_path, "attribute", """
        def choose_mode(M, N, K, tile):
            return "gluon" if tile.block_m > 64 else "persistent"
    """)
    verdict = quiet(exercises.check_mode_choice, rule)
    assert verdict.status == "failed" and "raised AttributeError" in verdict.message, verdict.line
    assert 'at: return "gluon" if tile.block_m > 64 else "persistent"' in verdict.message, verdict.line
    assert "in a kernel" not in verdict.message, verdict.line


def test_mode_choice_a_rule_a_little_off_in_many_places_is_told_its_average(tmp_path, monkeypatch):
    # Stream-K where the reference runs the persistent kernel on K under 8192: at 0.995 of the best on average and
    # over 0.93 everywhere; the bar raised above that average to reach the message
    monkeypatch.setattr(nb12, "_PASS_GEOMEAN", 0.996)
    source = _edit(_RULE, '    return "persistent"', '    return "streamk" if K < 8192 else "persistent"')
    verdict = quiet(exercises.check_mode_choice, learner(tmp_path, "average", source, "choose_mode"))
    assert verdict.status == "failed" and "on average" in verdict.message and "biggest losses" in verdict.message


def _rule(tmp_path, label, answer):
    if isinstance(answer, str):
        return learner(tmp_path, f"rule_{abs(hash(label))}", answer, "choose_mode")
    return answer


def test_mode_choice_the_reference_passes():
    verdict = quiet(exercises.check_mode_choice, solutions.choose_mode)
    assert verdict.passed and "recorded on" in verdict.message


def test_mode_choice_every_typical_wrong_answer_gets_its_own_message(tmp_path):
    table = {label: (_rule(tmp_path, label, answer), words) for label, (answer, words) in MODE_WRONG.items()}
    assert_wrong_answers_named(exercises.check_mode_choice, table, same_mistake=(
        "the record's Gluon shapes by narrow ranges", "the record's Gluon shapes by remainders",
        "the record's Gluon shapes as strings in a table", "course.gemm's own choice",
        "course.gemm's own choice, with the tile as given", "a lax threshold on the idle share of all waves",
        "the tile's axes swapped"))


def test_mode_choice_the_shapes_near_the_record_are_decided_by_the_waves():
    # each shape the check asks about off the record has a verdict from the waves, the reference's mode among the
    # modes it allows, and the mode a memorizing rule gives what it does not know ruled out where the waves are idle
    for what, M, N, K in nb12._NEAR_THE_RECORD:
        sensible = nb12._sensible_modes(M, N)
        assert sensible, what
        assert solutions.choose_mode(M, N, K, nb12._NEAR_TILE) in sensible, what
        assert ("persistent" in sensible) != ("gluon" in sensible), what
        assert (M, N, K) not in {(r["M"], r["N"], r["K"]) for r in records.load("gemm_h100-sxm").rows}, what


def test_mode_choice_stub_is_not_attempted():
    def choose_mode(M, N, K, tile):
        ...

    assert quiet(exercises.check_mode_choice, choose_mode).status == "not attempted"


def test_mode_choice_bad_arguments_fail_cleanly():
    for bad, words in ((None, "got None"), (5, "got an int"), ("choose_mode", "got a str")):
        verdict = quiet(exercises.check_mode_choice, bad)
        assert verdict.status == "failed" and words in verdict.message, verdict.line


MODE_RIGHT = {  # label: edits of the reference rule
    "tiles counted with math.ceil": [("triton_tiles = -(-M // tile[0]) * -(-N // tile[1])",
                                      "triton_tiles = math.ceil(M / tile[0]) * math.ceil(N / tile[1])")],
    "the last wave's fill counted from the idle SMs": [
        ("        return ((tiles - 1) % 132 + 1) / 132",
         "        idle = -(-tiles // 132) * 132 - tiles\n        return 1 - idle / 132")],
    "thresholds a little apart": [("last_wave(triton_tiles) < 0.6", "last_wave(triton_tiles) < 0.55"),
                                  ("triton_tiles <= 3 * 132", "triton_tiles < 3 * 132 + 1")],
}


MODE_RIGHT_RULES = {  # label: a rule of one's own
    "the waves' times compared, tile areas and the Gluon kernel's speed counted": """
        def choose_mode(M, N, K, tile):
            sms = 132
            tiles = math.ceil(M / tile[0]) * math.ceil(N / tile[1])
            waves = math.ceil(tiles / sms)
            triton_time = waves * tile[0] * tile[1]  # a wave takes as long as one tile
            (gluon_tile, swap), *_ = gluon_gemm.tile_choices(M, N, sms)
            gluon_waves = math.ceil(gluon_gemm.tiles(M, N, swap, gluon_tile) / sms)
            gluon_time = gluon_waves * gluon_tile[0] * gluon_tile[1] / 0.95  # its tiles run ~5 % slower
            if tile[0] >= 128 and gluon_time < 0.9 * triton_time:
                return "gluon"
            if waves > 1 and tiles % sms and tiles % sms < 0.6 * sms:
                return "tail"
            return "persistent"
    """,
    "Stream-K for a long K where the last of several waves is partly idle": _edit(
        _RULE, "    if triton_tiles <= 3 * 132",
        "    if K >= 8192 and triton_tiles > 132 and last_wave(triton_tiles) < 0.6:\n"
        "        return 'streamk'\n    if triton_tiles <= 3 * 132"),
    "a tail split before the Gluon kernel past one wave": _edit(
        _RULE, _GLUON_IF + '        return "gluon"\n', "",
        '        return "tail"  # the whole waves with big tiles, the thin last strip with small ones\n',
        '        return "tail"\n' + _GLUON_IF + '        return "gluon"\n'),
}


@pytest.mark.parametrize("label", [*MODE_RIGHT, *MODE_RIGHT_RULES])
def test_mode_choice_correct_alternatives_pass(tmp_path, label):
    source = MODE_RIGHT_RULES.get(label) or edited_source(solutions.choose_mode, *MODE_RIGHT[label])
    rule = learner(tmp_path, f"right_{abs(hash(label))}", source, "choose_mode")
    verdict = quiet(exercises.check_mode_choice, rule)
    assert verdict.passed, verdict.line


def test_mode_choice_a_comment_a_string_or_a_divisibility_test_is_no_lookup(tmp_path):
    source = _edit(_RULE, "    triton_tiles =", "    # M == 1536 is where Gluon shines; M % 128 == 0 is aligned\n"
                                                 "    aligned = M % 128 == 0 and K != 0 and (M == N or 'M == 1536')\n"
                                                 "    triton_tiles =")
    verdict = quiet(exercises.check_mode_choice, learner(tmp_path, "commented", source, "choose_mode"))
    assert verdict.passed, verdict.line


@interpreter_only
def test_mode_choice_a_rule_that_never_returns_is_stopped():
    assert_survives("check_mode_choice", "def choose_mode(M, N, K, tile):\n    while True:\n        pass\n",
                    "choose_mode", "gave up", time_limit_s=3)


# --- 12 · feed_forward: the MLP with bias and GELU in the first GEMM's epilogue ---------------------------

_KERNEL = edited_source(solutions.ffn_up_kernel)
_HOST = edited_source(solutions.feed_forward)
_STORE = "        tensorH.store(epilogues.gelu(bias.apply(acc, tile)), tile)"

_TANH_GELU = """
@triton.jit
def my_gelu(v):
    u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    e = tl.exp(-2.0 * tl.abs(u))
    t = (1.0 - e) / (1.0 + e)
    return 0.5 * v * (1.0 + tl.where(u < 0, -t, t))


"""


def _own_gelu(*edits):
    """The reference kernel with a GELU of its own (``my_gelu``), edited."""
    source = _TANH_GELU + _edit(_KERNEL, "epilogues.gelu(", "my_gelu(")
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    return source


_PLAIN_KERNEL = """
@triton.jit
def ffn_up_kernel(X, W, B, H, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_b, stride_hm, stride_hn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr,
                  EVEN_K: tl.constexpr):
    tiles_n = tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * tiles_n, NUM_SMS):
        rm = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            rk = k + tl.arange(0, BLOCK_K)
            x = tl.load(X + rm[:, None] * stride_xm + rk[None, :] * stride_xk,
                        mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            w = tl.load(W + rk[:, None] * stride_wk + rn[None, :] * stride_wn,
                        mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(x, w)
        acc += tl.load(B + rn * stride_b, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        tl.store(H + rm[:, None] * stride_hm + rn[None, :] * stride_hn, epilogues.gelu(acc),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))
"""
_PLAIN_STORE = """        tl.store(H + rm[:, None] * stride_hm + rn[None, :] * stride_hn, epilogues.gelu(acc),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))"""


KERNEL_WRONG = {  # label: (kernel source, words its message must contain)
    "no GELU": (_edit(_KERNEL, _STORE, "        tensorH.store(bias.apply(acc, tile), tile)"), "GELU is missing"),
    "no bias": (_edit(_KERNEL, _STORE, "        tensorH.store(epilogues.gelu(acc), tile)"), "bias is missing"),
    "bias after the GELU": (_edit(_KERNEL, _STORE, "        tensorH.store(epilogues.gelu(acc), tile, bias=bias)"),
                            "added after the GELU"),
    "a ReLU": (_edit(_KERNEL, "epilogues.gelu(", "epilogues.relu("), "that is a ReLU"),
    "a SiLU": (_edit(_KERNEL, "epilogues.gelu(", "epilogues.silu("), "that is SiLU"),
    "GELU's erf form": (_own_gelu(("    u = 0.7978845608028654 * (v + 0.044715 * v * v * v)\n", ""),
                                  ("    e = tl.exp(-2.0 * tl.abs(u))\n    t = (1.0 - e) / (1.0 + e)\n"
                                   "    return 0.5 * v * (1.0 + tl.where(u < 0, -t, t))",
                                   "    return 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))")), "erf form"),
    "0.0447 for 0.044715": (_own_gelu(("0.044715", "0.0447")), "short of digits"),
    "sqrt(2 / pi) as 0.7979": (_own_gelu(("0.7978845608028654", "0.7979")), "short of digits"),
    "sqrt(2 / pi) as 0.79788": (_own_gelu(("0.7978845608028654", "0.79788")), "short of digits"),  # 15-19 units off
    "tanh from exp(2u)": (_own_gelu(("    e = tl.exp(-2.0 * tl.abs(u))\n    t = (1.0 - e) / (1.0 + e)\n"
                                     "    return 0.5 * v * (1.0 + tl.where(u < 0, -t, t))",
                                     "    e = tl.exp(2.0 * u)\n    return 0.5 * v * (1.0 + (e - 1.0) / (e + 1.0))")),
                          "your tanh overflows"),
    "GELU of a float16 tile": (_edit(_KERNEL, "bias.apply(acc, tile)", "bias.apply(acc, tile).to(tl.float16)"),
                               "keep the tile in float32"),
    "pre-activation rounded to float16": (_edit(_KERNEL, "bias.apply(acc, tile)",
                                                          "bias.apply(acc, tile).to(tl.float16).to(tl.float32)"),
                                          "rounded to 16 bits before the GELU"),
    "H rounded to float16": (_edit(_KERNEL, "epilogues.gelu(bias.apply(acc, tile))",
                                             "epilogues.gelu(bias.apply(acc, tile)).to(tl.float16)"),
                             "H is rounded to 16 bits"),
    "W's strides swapped": (_edit(_KERNEL, "make_tensor_view(W, K, N, stride_wk, stride_wn)",
                                            "make_tensor_view(W, K, N, stride_wn, stride_wk)"), "the wrong way round"),
    "bias down the rows": (_edit(_KERNEL, _STORE, "        rm, rn = tile.indices()\n"
                                                   "        pre = acc + tl.load(B + rm * stride_b, mask=rm < N, "
                                                   "other=0.0).to(tl.float32)[:, None]\n"
                                                   "        tensorH.store(epilogues.gelu(pre), tile)"),
                           "bias goes down the rows"),
    "bias read with stride 1": (_edit(_KERNEL, "make_bias_view(B, N, stride_b)", "make_bias_view(B, N)"),
                                "read with stride 1"),
    "H's view with X's strides": (_edit(_KERNEL, "make_output_view(H, M, N, stride_hm, stride_hn)",
                                                  "make_output_view(H, M, N, stride_xm, stride_xk)"),
                                   "not H's: build H's output view (or the store's addresses) from H's own strides"),
    "a plain store without its mask": (_edit(_PLAIN_KERNEL, _PLAIN_STORE, _PLAIN_STORE.split(",\n")[0] + ")"),
                                       "mask the store to rows < M and columns < N"),
    "a plain store masked a row and a column too far": (
        _edit(_PLAIN_KERNEL, "(rm[:, None] < M) & (rn[None, :] < N))\n", "(rm[:, None] <= M) & (rn[None, :] <= N))\n"),
        "mask the store to rows < M and columns < N"),
    "H's strides from its sizes": (_edit(_KERNEL, "make_output_view(H, M, N, stride_hm, stride_hn)",
                                                   "make_output_view(H, M, N, N, 1)"), "where the contiguous"),
    "one tile per program": (_edit(_KERNEL, "for tile_id in range(start, total, stride):",
                                             "for tile_id in range(start, start + 1):"), "loops over all its tiles"),
    "every program every tile": (_edit(_KERNEL, "for tile_id in range(start, total, stride):",
                                                 "for tile_id in range(0, total, 1):"), "belong to other programs"),
    "nothing stored": (_edit(_KERNEL, _STORE, "        epilogues.gelu(bias.apply(acc, tile))"), "nothing was stored"),
    "output view N x M": (_edit(_KERNEL, "make_output_view(H, M, N, stride_hm, stride_hn)",
                                          "make_output_view(H, N, M, stride_hm, stride_hn)"), "whole rows or columns"),
    "even_k left out": (_edit(_KERNEL, ", even_k=EVEN_K)", ")"), "even_k"),
    "the course's fused kernel inside": (_edit(_KERNEL, 
        "    tensorX = make_tensor_view(X, M, K, stride_xm, stride_xk)",
        "    epilogues.fused_linear_kernel(X, W, H, B, B, B, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, "
        "stride_hm, stride_hn, stride_b, BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, EVEN_K, True, False, epilogues.gelu)\n"
        "    tensorX = make_tensor_view(X, M, K, stride_xm, stride_xk)"), "calls the course's fused_linear_kernel"),
    "wrong signature": (_edit(_KERNEL, "stride_b, stride_hm, stride_hn,", "stride_hm, stride_hn, stride_b,"),
                        "keep the signature"),
    # the review's: x σ(1.702 x), GELU's sigmoid approximation (once put down to the views)
    "GELU's sigmoid approximation": (_own_gelu(("    u = 0.7978845608028654 * (v + 0.044715 * v * v * v)\n", ""),
                                               ("    e = tl.exp(-2.0 * tl.abs(u))\n    t = (1.0 - e) / (1.0 + e)\n"
                                                "    return 0.5 * v * (1.0 + tl.where(u < 0, -t, t))",
                                                "    return v * tl.sigmoid(1.702 * v)")),
                                     "not GELU's tanh form but its sigmoid approximation"),
    "a tanh GELU with a wrong constant": (_own_gelu(("0.7978845608028654", "0.75")), "but not GELU's tanh form"),
    # the review's, in a kernel without the stages: messages that do not send it to GemmContext or ScheduleContext
    "own loop: the K loop stops at the last whole step": (
        _edit(_PLAIN_KERNEL, "for k in range(0, K, BLOCK_K):", "for k in range(0, K // BLOCK_K * BLOCK_K, BLOCK_K):"),
        "the loop over K must reach K"),
    "own loop: tile ids divided by the count of row tiles": (
        _edit(_PLAIN_KERNEL, "(tile // tiles_n)", "(tile // tl.cdiv(M, BLOCK_M))",
              "(tile % tiles_n)", "(tile % tl.cdiv(M, BLOCK_M))"),
        "every tile id must become its own (row, column) of tiles"),
}


def test_feed_forward_the_reference_passes():
    verdict = quiet(exercises.check_feed_forward, solutions.ffn_up_kernel, solutions.feed_forward)
    assert verdict.passed, verdict.line
    assert "float32-exact" in verdict.message and "two kernels" in verdict.message


def test_feed_forward_every_typical_wrong_kernel_gets_its_own_message(tmp_path):
    table = {}
    for i, (label, (source, words)) in enumerate(KERNEL_WRONG.items()):
        kernel, host = learner(tmp_path, f"kernel_{i}", source + "\n\n" + _HOST, "ffn_up_kernel", "feed_forward")
        table[label] = ((kernel, host), words)
    assert_wrong_answers_named(exercises.check_feed_forward, table,
                               same_mistake=("0.0447 for 0.044715", "sqrt(2 / pi) as 0.7979", "sqrt(2 / pi) as 0.79788",
                                             "a plain store without its mask",
                                             "a plain store masked a row and a column too far")
                               # compiled, no assertion of the stages stops even_k left out: the result shows the
                               # same missing last step of K as a loop that stops short, and one message names both
                               + (() if runtime.INTERPRET else ("even_k left out",
                                                                "own loop: the K loop stops at the last whole step")))


_LAUNCH = "ffn_up_kernel passed on its own: check feed_forward's launch: "

HOST_WRONG = {  # label: (feed_forward's source, with the reference kernel; words its message must contain)
    "all in torch": ("""
        def feed_forward(x, w1, b1, w2, b2):
            h = torch.nn.functional.gelu(x @ w1.T + b1, approximate="tanh")
            return h @ w2.T + b2
    """, "multiplies with torch (torch's matmul)"),
    "the course's MLP": ("""
        def feed_forward(x, w1, b1, w2, b2):
            return mlp.mlp(x, w1, b1, w2, b2, block_m=16, block_n=32, block_k=16, num_programs=2)
    """, "the course's fused_linear_kernel"),
    "GELU as a torch pass": ("""
        def feed_forward(x, w1, b1, w2, b2):
            h = torch.nn.functional.gelu(gemm.matmul(x, w1.T, bias=b1), approximate="tanh")
            return gemm.matmul(h, w2.T, bias=b2)
    """, "computes with torch (torch's gelu)"),
    "GELU as the course's elementwise kernel": ("""
        def feed_forward(x, w1, b1, w2, b2):
            h = epilogues.apply(epilogues.gelu, gemm.matmul(x, w1.T, bias=b1)).half()
            return gemm.matmul(h, w2.T, bias=b2)
    """, "the course's elementwise kernel"),
    "GELU as a kernel of one's own": ("""
        @triton.jit
        def gelu_kernel(h_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            v = tl.load(h_ptr + offs, mask=offs < n).to(tl.float32)
            tl.store(h_ptr + offs, epilogues.gelu(v), mask=offs < n)

        def feed_forward(x, w1, b1, w2, b2):
            h = gemm.matmul(x, w1.T, bias=b1)
            gelu_kernel[(triton.cdiv(h.numel(), 256),)](h, h.numel(), BLOCK=256)
            return gemm.matmul(h, w2.T, bias=b2)
    """, "3 kernels ran (matmul_kernel, gelu_kernel, matmul_kernel)"),
    "b2 added by torch": (_edit(_HOST, "gemm.matmul(h, w2.T, bias=b2)", "gemm.matmul(h, w2.T) + b2"),
                          "computes with torch (torch's add)"),
    "b2 forgotten": (_edit(_HOST, "gemm.matmul(h, w2.T, bias=b2)", "gemm.matmul(h, w2.T)"), "misses the second bias"),
    "w2 copied": (_edit(_HOST, "gemm.matmul(h, w2.T, bias=b2)", "gemm.matmul(h, w2.T.contiguous(), bias=b2)"),
                  "copies or converts a tensor with torch (torch's contiguous)"),
    "h returned": (_edit(_HOST, "    return gemm.matmul(h, w2.T, bias=b2)", "    return h"), "only ffn_up_kernel ran"),
    "no return": (_edit(_HOST, "    return gemm.matmul(h, w2.T, bias=b2)", "    gemm.matmul(h, w2.T, bias=b2)"),
                  "returned NoneType"),
    "GELU on y too": (_edit(_HOST, 
        "    return gemm.matmul(h, w2.T, bias=b2)",
        "    y = torch.empty((M, d), device=x.device, dtype=x.dtype)\n"
        "    ffn_up_kernel[(4,)](h, w2, b2, y, M, d, hidden, *h.stride(), *w2.stride(), b2.stride(0), *y.stride(),\n"
        "                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NUM_SMS=4, EVEN_K=hidden % 32 == 0)\n"
        "    return y"), "GELU was applied to y too"),
    "w1's strides swapped at the launch": (_edit(_HOST, "*w1.stride()", "*w1.T.stride()"),
                                           _LAUNCH + "stride_wn, stride_wk are (1, 24), the wrong way round"),
    "h's strides swapped at the launch": (_edit(_HOST, "*h.stride()", "*h.stride()[::-1]"),
                                          _LAUNCH + "stride_hm, stride_hn are (1, 48), the wrong way round"),
    "M, K, N in the wrong order": (_edit(_HOST, "M, hidden, d,", "M, d, hidden,"),
                                   _LAUNCH + "its M, N, K are 1, 24, 48"),
    "x and w1 swapped at the launch": (_edit(_HOST, "ffn_up_kernel[(programs,)](x, w1,",
                                             "ffn_up_kernel[(programs,)](w1, x,"),
                                       _LAUNCH + "its X is not x"),
    "h in float32": (_edit(_HOST, "dtype=x.dtype)  # written", "dtype=torch.float32)  # written"),
                     _LAUNCH + "h is float32: allocate h in x's dtype"),
    "h zeroed with torch.zeros": (_edit(_HOST, "torch.empty(", "torch.zeros("), "torch.empty is the allocation"),
    "4 programs on NUM_SMS = 1": (_edit(_HOST, "ffn_up_kernel[(programs,)]", "ffn_up_kernel[(4,)]",
                                        "NUM_SMS=programs", "NUM_SMS=1"), "Each program its own tiles"),
    "one program on NUM_SMS = programs": (_edit(_HOST, "ffn_up_kernel[(programs,)]", "ffn_up_kernel[(1,)]"),
                                          "the tiles of the programs never launched are never computed"),
    "EVEN_K always True": (_edit(_HOST, "EVEN_K=d % 32 == 0", "EVEN_K=True"), "EVEN_K is True, but d = 24"),
    # the third review's: right wherever hidden and d are both multiples of 32 or both not, so a shape whose hidden
    # size is in whole tiles and whose width d is not is among the cases
    "EVEN_K from the hidden size": (_edit(_HOST, "EVEN_K=d % 32 == 0", "EVEN_K=hidden % 32 == 0"),
                                    "on a hidden size in whole tiles, a ragged width (M = 8, d = 40, hidden = 128): "
                                    "ffn_up_kernel passed on its own: check feed_forward's launch: EVEN_K is True, "
                                    "but d = 40 is no multiple of BLOCK_K = 32"),
    # the review's: both right wherever a shape has no more tiles than SMs, so a shape with more is among the cases
    "one program per tile, NUM_SMS the SMs": (_edit(_HOST, "ffn_up_kernel[(programs,)]",
                                                    "ffn_up_kernel[(triton.cdiv(M, 32) * triton.cdiv(hidden, 32),)]",
                                                    "NUM_SMS=programs", "NUM_SMS=gemm.sm_count()"),
                                              "on more tiles than SMs (M = 80, d = 16"),
    "two programs, NUM_SMS the SMs": (_edit(_HOST, "ffn_up_kernel[(programs,)]", "ffn_up_kernel[(2,)]",
                                            "NUM_SMS=programs", "NUM_SMS=gemm.sm_count()"),
                                      "the tiles of the programs never launched are never computed"),
    "y in float32": (_edit(_HOST, "bias=b2)", "bias=b2, out_dtype=torch.float32)"), "return it in x's dtype"),
    "the reference solution, called": ("""
        def feed_forward(x, w1, b1, w2, b2):
            return solutions.feed_forward(x, w1, b1, w2, b2)
    """, "the reference solution's ffn_up_kernel"),
    "an input changed": (_edit(_HOST, "    M, d = x.shape", "    b1.mul_(1.0)\n    M, d = x.shape"),
                         "changes a tensor in place with torch (torch's mul_)"),
    "raises": ("""
        def feed_forward(x, w1, b1, w2, b2):
            raise RuntimeError("not yet")
    """, "raised RuntimeError"),
    "wrong arguments": ("""
        def feed_forward(x, w1, b1, w2):
            return x
    """, "must take"),
}


def test_feed_forward_every_typical_wrong_host_function_gets_its_own_message(tmp_path, monkeypatch):
    # with the reference kernel, whose cases the tests above run: only feed_forward's own cases here
    monkeypatch.setattr(nb12, "_kernel_cases", lambda: [])
    monkeypatch.setattr(nb12, "_each_program_its_own_tiles", lambda kernel: None)
    monkeypatch.setattr(nb12, "compiles_for_a_gpu", lambda *args, **kwargs: None)  # a wrong answer never gets there
    table = {}
    for i, (label, (source, words)) in enumerate(HOST_WRONG.items()):
        kernel, host = learner(tmp_path, f"host_{i}", _KERNEL + "\n\n" + textwrap.dedent(source),
                               "ffn_up_kernel", "feed_forward")
        table[label] = ((kernel, host), words)
    assert_wrong_answers_named(exercises.check_feed_forward, table)


def test_feed_forward_stubs_are_not_attempted_and_say_what_is_next(tmp_path):
    kernel_stub, host_stub = learner(tmp_path, "stubs", """
        @triton.jit
        def ffn_up_kernel(X, W, B, H, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_b, stride_hm,
                          stride_hn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          NUM_SMS: tl.constexpr, EVEN_K: tl.constexpr):
            ...

        def feed_forward(x, w1, b1, w2, b2):
            ...
    """, "ffn_up_kernel", "feed_forward")
    assert quiet(exercises.check_feed_forward, kernel_stub, host_stub).status == "not attempted"
    verdict = quiet(exercises.check_feed_forward, kernel_stub, solutions.feed_forward)
    assert verdict.status == "not attempted" and "ffn_up_kernel's body" in verdict.message
    verdict = quiet(exercises.check_feed_forward, solutions.ffn_up_kernel, host_stub)
    assert verdict.status == "not attempted" and "Now write feed_forward" in verdict.message


def test_feed_forward_bad_arguments_fail_cleanly():
    for args, words in (((None, solutions.feed_forward), "got NoneType"),
                        ((solutions.feed_forward, solutions.feed_forward), "plain Python function"),
                        ((solutions.ffn_up_kernel, solutions.ffn_up_kernel), "got a Triton kernel"),
                        ((solutions.ffn_up_kernel, None), "got None")):
        verdict = quiet(exercises.check_feed_forward, *args)
        assert verdict.status == "failed" and words in verdict.message, verdict.line

FEED_FORWARD_RIGHT = {  # label: the learner's cell
    "a kernel without the stages (plain loads, acc += tl.dot)": _PLAIN_KERNEL + "\n\n" + _HOST,
    "a GELU of one's own, sigmoid form": (
        "@triton.jit\ndef my_gelu(v):\n"
        "    return v * tl.sigmoid(1.5957691216057308 * (v + 0.044715 * v * v * v))\n\n\n"
        + _edit(_KERNEL, "epilogues.gelu(", "my_gelu(") + "\n\n" + _HOST),
    "the K loop by reduce_tile, the bias loaded by hand": _edit(
        _KERNEL, "        acc = ctx.reduce_axis(tensorX, tensorW, tile)\n", "        acc = ctx.init_accumulator()\n"
        "        for k_idx in range(tl.cdiv(K, BLOCK_K)):\n"
        "            acc = ctx.reduce_tile(tensorX, tensorW, tile, k_idx, acc, boundary=True)\n"
        "        rm, rn = tile.indices()\n"
        "        acc += tl.load(B + rn * stride_b, mask=rn < N, other=0.0).to(tl.float32)[None, :]\n",
        _STORE, "        tensorH.store(epilogues.gelu(acc), tile)") + "\n\n" + _HOST,
    "the second GEMM into out=, one program per tile": _KERNEL + "\n\n" + _edit(
        _HOST, "    return gemm.matmul(h, w2.T, bias=b2)",
        "    y = torch.empty((M, w2.shape[0]), device=x.device, dtype=x.dtype)\n"
        "    gemm.matmul(h, w2.T, bias=b2, out=y)\n    return y",
        "programs = min(triton.cdiv(M, 32) * triton.cdiv(hidden, 32), 132)",
        "programs = triton.cdiv(M, 32) * triton.cdiv(hidden, 32)"),
    "a tanh GELU of one's own from exp(-2|u|), h from x.new_empty, a callable grid": _own_gelu() + "\n\n" + _edit(
        _HOST, "torch.empty((M, hidden), device=x.device, dtype=x.dtype)", "x.new_empty((M, hidden))",
        "ffn_up_kernel[(programs,)]", "ffn_up_kernel[lambda meta: (meta['NUM_SMS'],)]"),
    "the second GEMM with epilogues.linear": _KERNEL + "\n\n" + _edit(
        _HOST, "gemm.matmul(h, w2.T, bias=b2)",
        "epilogues.linear(h, w2, b2, block_m=16, block_n=32, block_k=16, num_programs=2)"),
    "one kernel for both GEMMs, GELU a constexpr": _edit(
        _KERNEL, "EVEN_K: tl.constexpr):", "EVEN_K: tl.constexpr, GELU: tl.constexpr = True):",
        _STORE, "        pre = bias.apply(acc, tile)\n        if GELU:\n            pre = epilogues.gelu(pre)\n"
                "        tensorH.store(pre, tile)") + "\n\n" + _edit(
        _HOST, "    return gemm.matmul(h, w2.T, bias=b2)",
        "    y = torch.empty((M, d), device=x.device, dtype=x.dtype)\n"
        "    ffn_up_kernel[(4,)](h, w2, b2, y, M, d, hidden, *h.stride(), *w2.stride(), b2.stride(0), *y.stride(),\n"
        "                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NUM_SMS=4, EVEN_K=hidden % 32 == 0, GELU=False)\n"
        "    return y"),
}


@pytest.mark.parametrize("label", FEED_FORWARD_RIGHT)
def test_feed_forward_correct_alternatives_pass(tmp_path, monkeypatch, label):
    monkeypatch.setattr(nb12, "compiles_for_a_gpu", lambda *args, **kwargs: None)  # the reference test builds it
    kernel, host = learner(tmp_path, f"right_{abs(hash(label))}", FEED_FORWARD_RIGHT[label], "ffn_up_kernel",
                           "feed_forward")
    verdict = quiet(exercises.check_feed_forward, kernel, host)
    assert verdict.passed, verdict.line


_IMPORTS = ("from course import epilogues, gemm\n"
            "from course.stages import GemmContext, ScheduleContext, make_bias_view, make_output_view, "
            "make_tensor_view\n")


@pytest.mark.parametrize("label, edits, words", [
    ("X's strides from its sizes, reading past X",
     [("make_tensor_view(X, M, K, stride_xm, stride_xk)", "make_tensor_view(X, M, K, K * 4, 1)")], "outside"),
    ("H's strides swapped, writing past H",
     [("make_output_view(H, M, N, stride_hm, stride_hn)", "make_output_view(H, M, N, stride_hn, stride_hm * 3)")],
     "writes outside"),
    ("a K loop that never ends",
     [("        acc = ctx.reduce_axis(tensorX, tensorW, tile)",
       "        k = 0\n        while k < K:\n            k = k * 1\n"
       "        acc = ctx.reduce_axis(tensorX, tensorW, tile)")],
     "gave up"),
])
@interpreter_only
def test_feed_forward_crash_prone_kernels_end_with_one_line(label, edits, words):
    source = _IMPORTS + edited_source(solutions.ffn_up_kernel, *edits) + "\n\n" + _HOST
    assert_survives("check_feed_forward", source, "ffn_up_kernel, feed_forward", words, time_limit_s=10)


_BOTH_GEMMS_WRONG_Y = _KERNEL + "\n\n" + _edit(
    _HOST, "    return gemm.matmul(h, w2.T, bias=b2)",
    "    y = torch.empty((M, d), device=x.device, dtype=x.dtype)\n"
    "    ffn_up_kernel[(4,)](h, w2, b2, y, M, d, hidden, *h.stride(), *w2.stride(), b2.stride(0), *y.stride()[::-1],\n"
    "                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NUM_SMS=4, EVEN_K=hidden % 32 == 0)\n"
    "    return y")


@interpreter_only
def test_feed_forward_a_later_launch_astray_is_put_down_to_feed_forward():
    # the first launch is right; the second (ffn_up_kernel again, for h @ w2.T) writes y with its strides reversed,
    # past y: the bounds check stops it, and the message is about feed_forward's launches, not the kernel
    assert_survives("check_feed_forward", _IMPORTS + "import math\n" + _BOTH_GEMMS_WRONG_Y,
                    "ffn_up_kernel, feed_forward", "ffn_up_kernel passed on its own: check feed_forward's launches",
                    "reached outside the tensors", time_limit_s=60)
