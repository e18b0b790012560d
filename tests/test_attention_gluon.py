"""Tests of course.attention_gluon, the warp-specialized Hopper attention forward: a compile for sm_90
without a GPU (``attention_gluon.build``), its register budget, and on an
sm_90 GPU its output and log-sum-exp against float64 (odd lengths, causal edges, grouped heads,
strided layouts), NaN-poisoned before it writes them."""

import math

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import attention, attention_gluon
from course.check import check, poisoned
from course.runtime import DEVICE, INTERPRET

has_gluon = pytest.mark.skipif(attention_gluon.gluon is None, reason="this Triton has no Gluon")


@has_gluon
@pytest.mark.parametrize("head_dim", sorted(attention_gluon.SHAPES))
@pytest.mark.parametrize("causal, dtype, with_lse, options", [
    (False, torch.bfloat16, False, dict(overlap=False)),
    (True, torch.float16, True, dict(overlap=True, pingpong=True)),
])
def test_the_kernel_compiles_for_hopper_without_a_gpu(head_dim, causal, dtype, with_lse, options):
    built = attention_gluon.build(head_dim, causal, dtype=dtype, with_lse=with_lse, **options)
    assert built.asm["shared"] <= 227 * 1024  # Q, the K and V rings and the barriers fit an SM's shared memory
    assert built.count("ptx", r"wgmma\.mma_async") and built.count("ptx", r"cp\.async\.bulk\.tensor")
    assert (built.count("ptx", r"wgmma\.wait_group\.sync\.aligned 1;") > 0) == options["overlap"]
    assert len(built.asm["cubin"]) > 0


def test_the_warpgroups_registers_fit_the_register_file():
    for wgs in (1, 2, 3):
        per_thread = attention_gluon.consumer_registers(wgs)
        assert per_thread % 8 == 0 and per_thread <= 240
        assert 128 * (wgs * per_thread + 24) <= 65536  # consumers + the producer's warpgroup at 24


def test_it_says_why_it_cannot_run():
    q = torch.zeros(1, 1, 8, 64, dtype=torch.float16, device=DEVICE)
    why = attention_gluon.unsupported(q, q, q)
    if INTERPRET or attention_gluon.gluon is None:
        assert why is not None and ("GPU" in why or "Gluon" in why)
    elif why is None:  # an sm_90 GPU: what it refuses, each with the fix
        assert "head dims" in attention_gluon.unsupported(q[..., :32], q[..., :32], q[..., :32])
        assert "float16 or bfloat16" in attention_gluon.unsupported(q.float(), q.float(), q.float())
        strided = torch.zeros(1, 1, 8, 128, dtype=torch.float16, device=DEVICE)[..., ::2]
        assert "k.contiguous()" in attention_gluon.unsupported(q, strided, q)


needs_hopper = pytest.mark.skipif(
    INTERPRET or attention_gluon.gluon is None or not torch.cuda.is_available()
    or torch.cuda.get_device_capability() != (9, 0), reason="the Gluon attention needs an sm_90 GPU")


def _inputs(B, H, H_KV, S_Q, S_K, D, dtype, layout):
    def make(heads, seq):
        if layout == "bshd":  # (batch, seq, heads, dim) storage, as a model's projections give it
            return torch.randn(B, seq, heads, D, device=DEVICE, dtype=dtype).transpose(1, 2)
        return torch.randn(B, heads, seq, D, device=DEVICE, dtype=dtype)
    return make(H, S_Q), make(H_KV, S_K), make(H_KV, S_K)


def _lse_reference(q, k, causal):
    """log2 of each row's softmax denominator, in float64."""
    k = k.double().cpu().repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    s = q.double().cpu() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.logsumexp(s, -1) / math.log(2)


@needs_hopper
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", sorted(attention_gluon.SHAPES))
@pytest.mark.parametrize("B,H,H_KV,S_Q,S_K,layout", [
    (2, 4, 4, 257, 257, "bhsd"),   # a partial last block of queries and of keys
    (1, 2, 2, 1000, 1000, "bshd"),  # strided heads
    (1, 4, 2, 300, 700, "bhsd"),   # more keys than queries, grouped heads
    (1, 2, 2, 700, 300, "bhsd"),   # fewer keys than queries: causal rows past the keys see them all
    (1, 2, 1, 1, 513, "bhsd"),     # one query row (decoding), multi-query
    (1, 2, 2, 129, 1, "bhsd"),     # one key
    (1, 3, 3, 2048, 2048, "bhsd"),  # many blocks: every slot of the rings reused
    (3, 40, 40, 384, 384, "bhsd"),  # more tiles than SMs: a persistent grid deals them in rounds
])
def test_matches_float64(B, H, H_KV, S_Q, S_K, layout, D, causal, dtype):
    q, k, v = _inputs(B, H, H_KV, S_Q, S_K, D, dtype, layout)
    assert attention_gluon.unsupported(q, k, v) is None
    ref, lse_ref = attention.reference(q, k, v, causal=causal), _lse_reference(q, k, causal)
    # every way the kernel runs: its defaults (plan's), each technique, persistent or not
    variants = [{}, *attention_gluon.TECHNIQUES.values(), dict(persistent=True),
                dict(persistent=not causal, overlap=False)]
    for options in variants:
        out = attention.empty_output(q, H_KV, causal)
        out.copy_(poisoned(out.shape, dtype, DEVICE))
        lse = poisoned((B, H, S_Q), torch.float32, DEVICE)
        attention_gluon.forward(q, k, v, out, lse, causal, 1 / math.sqrt(D), **options)
        name = f"{B}x{H}/{H_KV}x{S_Q}x{S_K}x{D} {layout} causal={causal} {options}"
        check(name, out, ref)
        check(f"{name} lse", lse, lse_ref, tol=1e-4)


def test_a_scale_of_zero_or_below_goes_to_the_triton_kernel():
    q = torch.randn(1, 2, 40, 64, device=DEVICE, dtype=torch.float16)
    for scale in (0.0, -0.5):  # the Gluon kernel takes its running maximum before scaling
        check(f"scale={scale}", attention.attention(q, q, q, scale=scale), attention.reference(q, q, q, scale=scale))
        with pytest.raises(ValueError, match="kernel='gluon' cannot run here"):
            attention.attention(q, q, q, scale=scale, kernel="gluon")


def test_attention_says_which_kernels_it_takes():
    q = torch.randn(1, 2, 40, 64, device=DEVICE, dtype=torch.float16)
    with pytest.raises(ValueError, match="pass 'auto', 'triton' or 'gluon'"):
        attention.attention(q, q, q, kernel="cuda")
    with pytest.raises(ValueError, match="step= and config= are the Triton kernel's"):
        attention.attention(q, q, q, kernel="gluon", config=dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1))
    if INTERPRET:
        with pytest.raises(ValueError, match="kernel='gluon' cannot run here: Gluon kernels need a GPU"):
            attention.attention(q, q, q, kernel="gluon")
    check("kernel='triton'", attention.attention(q, q, q, kernel="triton"), attention.reference(q, q, q))


def test_the_plan_leaves_short_head_dim_64_decoding_and_packed_groups_to_triton():
    assert attention_gluon.plan(64, False, 1024, 1024) is None
    assert attention_gluon.plan(64, True, 2048, 2048) == {}  # forward's defaults
    assert attention_gluon.plan(128, True, 1024, 1024) == {}
    assert attention_gluon.plan(128, False, 1, 4096) is None  # decoding: a 128-row tile would hold one row
    assert attention_gluon.plan(128, False, 4096, 4096, grouped=True) is None  # Triton packs a group's heads
    assert attention_gluon.plan(128, True, 4096, 4096, grouped=True) is not None
    for options in attention_gluon.TECHNIQUES.values():  # each is forward's keyword arguments
        assert set(options) <= {"persistent", "overlap", "pingpong"}


def test_the_snake_deal_balances_causal_tiles_unless_a_round_nearly_matches_a_head():
    balance = attention_gluon.deal_balance
    assert balance(8, 256, 1024, 128, 132) < attention_gluon.BALANCED  # 1k tokens, 16 heads x batch 16
    assert balance(128, 16, 16384, 128, 132) > 1.5  # 16k: 128 tiles a head against 132 programs
    assert balance(8, 256, 1024, 128, 132, snake=False) > 1.3  # round-robin: the first programs get the long tiles
    assert balance(4, 33, 512, 128, 132) == 4 / 2.5  # one tile each: the longest (4 blocks) over the mean
    assert balance(64, 2, 8192, 128, 64) == 1.0  # a round and its reverse: pairs whose lengths sum alike
    assert balance(4, 1, 300, 128, 4) == 3 / 2.25  # the last query blocks read at most the 3 blocks of keys


@pytest.mark.parametrize("kind", ["in order", "overlap", "ping-pong"])
def test_the_schedule_model_never_runs_two_products_at_once(kind):
    lanes = attention_gluon.schedule(kind, blocks=5, matmul=1.0, softmax=0.75)
    for lane, spans in lanes.items():
        spans = sorted(spans)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:])), f"{kind}: {lane} overlaps itself"
    names = [span[2] for span in lanes["tensor cores"]]
    warpgroups = len(lanes) - 1
    assert len(names) == 2 * 5 * warpgroups and names.count("S0") == warpgroups  # every S and every PV, once each
    for wg in range(warpgroups):  # a block's softmax starts after its S, and its PV after its softmax
        ends = {span[2]: span[1] for span in lanes["tensor cores"] if span[3] == wg}
        exps = {span[2]: span for span in lanes[f"warpgroup {wg}"]}
        starts = {span[2]: span[0] for span in lanes["tensor cores"] if span[3] == wg}
        for j in range(5):
            assert exps[f"exp {j}"][0] >= ends[f"S{j}"] - 1e-9 and starts[f"PV{j}"] >= exps[f"exp {j}"][1] - 1e-9


def test_overlap_and_ping_pong_shorten_the_modelled_loop():
    end = {kind: max(s[1] for spans in attention_gluon.schedule(kind, 8).values() for s in spans)
           for kind in ("in order", "overlap", "ping-pong")}
    assert end["overlap"] < end["in order"]
    assert end["ping-pong"] < 2 * end["in order"]  # two warpgroups' work in less than twice one's time
    with pytest.raises(ValueError, match="pass 'in order', 'overlap' or 'ping-pong'"):
        attention_gluon.schedule("stream-k")


@needs_hopper
@pytest.mark.gpu
@pytest.mark.parametrize("D,S", [(128, 1000), (64, 8200)])
def test_attention_runs_the_gluon_kernel_where_the_plan_takes_it(D, S, monkeypatch):
    calls = []
    real = attention_gluon.forward
    monkeypatch.setattr(attention_gluon, "forward", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    q, k, v = _inputs(1, 2, 2, S, S, D, torch.bfloat16, "bhsd")
    for causal in (False, True):
        check(f"auto d={D} causal={causal}", attention.attention(q, k, v, causal=causal),
              attention.reference(q, k, v, causal=causal))
    assert calls == [attention_gluon.plan(D, False, S, S), attention_gluon.plan(D, True, S, S)]


@has_gluon
def test_the_compilers_view_shows_the_overlap_the_triton_kernel_lacks():
    # notebook 11's reading: the Triton kernel waits for every product (wait 0 only), the Gluon kernel
    # issues S_j with P_{j-1} V_{j-1} and waits for the first alone (wait 1)
    plain = attention.build(head_dim=128).outline("ptx", attention_gluon.LOOP_EVENTS)
    hopper = attention_gluon.build(head_dim=128).outline("ptx", attention_gluon.LOOP_EVENTS)
    assert "wait 0 → exp2" in plain and "wait 1" not in plain, plain
    assert "wgmma ×16 → wait 1" in hopper, hopper
    in_order = attention_gluon.build(head_dim=128, overlap=False).outline("ptx", attention_gluon.LOOP_EVENTS)
    assert "wait 1" not in in_order, in_order


def test_the_schedule_figure_draws_every_span():
    from course import plots

    panels = {kind: attention_gluon.schedule(kind, blocks=3) for kind in ("in order", "ping-pong")}
    fig = plots.lanes(panels, unit="time")
    bars = [patch for ax in fig.axes for patch in ax.patches]
    assert len(bars) == sum(len(spans) for lanes in panels.values() for spans in lanes.values())
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["in order: the loop ends at 9",
                                                             "ping-pong: the loop ends at 12"]
