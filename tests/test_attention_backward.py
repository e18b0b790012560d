"""Tests of course.attention_backward: flash attention's gradients against float64 autograd,
causal and not, grouped-query and multi-query heads, odd lengths, strided inputs and gradients, the
torch.library registration (opcheck, torch.compile without graph breaks), determinism, a second backward."""

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import attention, attention_backward, timing
from course.check import tolerance
from course.runtime import DEVICE, INTERPRET, pick

DTYPES = [torch.float16, torch.float32] + ([] if INTERPRET else [torch.bfloat16])
gpu = pytest.mark.skipif(INTERPRET, reason="needs a GPU")


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)  # a failure repeats


def _tolerance(dtype):
    # float32 runs as TF32 on a GPU, and a gradient passes through three rounded products (P, dS, dQ)
    return 2 * tolerance(dtype) if dtype == torch.float32 and not INTERPRET else tolerance(dtype)


def _rel(x, ref):
    return ((x.detach().double().cpu() - ref).norm() / ref.norm()).item()


def _inputs(B, H, H_KV, S_Q, S_K, D, dtype):
    q = torch.randn(B, H, S_Q, D, device=DEVICE).to(dtype)
    k, v = (torch.randn(B, H_KV, S_K, D, device=DEVICE).to(dtype) for _ in range(2))
    return [t.requires_grad_() for t in (q, k, v)], torch.randn(B, H, S_Q, D, device=DEVICE).to(dtype)


def _float64_grads(q, k, v, grad_out, causal, scale=None):
    exact = [t.detach().double().cpu().requires_grad_() for t in (q, k, v)]
    out = attention.reference(*exact, causal=causal, scale=scale)
    out.backward(grad_out.double().cpu())
    return out.detach(), [t.grad for t in exact]


def _assert_grads_match(q, k, v, out, grad_out, causal, tol, scale=None):
    ref_out, ref_grads = _float64_grads(q, k, v, grad_out, causal, scale)
    assert _rel(out, ref_out) <= tol, f"output: relative error {_rel(out, ref_out):.2e}"
    for name, t, ref in zip("qkv", (q, k, v), ref_grads):
        assert t.grad is not None and t.grad.shape == t.shape and t.grad.dtype == t.dtype, f"d{name}"
        assert not t.grad.isnan().any(), f"d{name} has NaN: an element the kernels did not write"
        assert _rel(t.grad, ref) <= tol, f"d{name}: relative error {_rel(t.grad, ref):.2e} > {tol:.0e}"


SHAPES = [(1, 2, 2, 40, 40, 16), (2, 4, 2, 33, 70, 32), (1, 4, 1, 50, 20, 16), (1, 3, 3, 17, 17, 16),
          pick(cpu=(1, 2, 1, 64, 64, 64), gpu=(2, 8, 2, 1000, 1000, 128)),
          pick(cpu=(1, 2, 2, 20, 33, 16), gpu=(1, 4, 4, 777, 1234, 64)),
          pick(cpu=(1, 1, 1, 16, 16, 256), gpu=(1, 2, 1, 300, 333, 256))]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("B,H,H_KV,S_Q,S_K,D", SHAPES, ids=lambda x: str(x))
def test_gradients_match_float64(B, H, H_KV, S_Q, S_K, D, causal, dtype):
    (q, k, v), grad_out = _inputs(B, H, H_KV, S_Q, S_K, D, dtype)
    out = attention_backward.attention(q, k, v, causal=causal)
    assert out.grad_fn is not None, "inputs that require gradients give an output with a grad_fn"
    out.backward(grad_out)
    _assert_grads_match(q, k, v, out, grad_out, causal, _tolerance(dtype))


def test_strided_inputs_an_expanded_gradient_and_a_scale():
    q = torch.randn(1, 40, 4, 16, device=DEVICE, dtype=torch.float16).transpose(1, 2).requires_grad_()  # strided
    kv = torch.randn(1, 2, 40, 32, device=DEVICE, dtype=torch.float16)[..., ::2]  # every other element of d
    k, v = kv.clone().requires_grad_(), kv.requires_grad_()
    for causal in (False, True):
        for t in (q, k, v):
            t.grad = None
        out = attention_backward.attention(q, k, v, causal=causal, scale=0.3)
        out.sum().backward()  # the gradient of .sum() is expanded: strides (0, 0, 0, 0)
        _assert_grads_match(q, k, v, out, torch.ones_like(out), causal, tolerance(torch.float16), scale=0.3)


def test_only_some_inputs_require_gradients():
    (q, k, v), grad_out = _inputs(1, 2, 1, 24, 24, 16, torch.float32)
    k.requires_grad_(False)
    attention_backward.attention(q, k, v, causal=True).backward(grad_out)
    assert k.grad is None and q.grad is not None and v.grad is not None


def test_gradients_are_the_same_bits_on_every_run():
    (q, k, v), grad_out = _inputs(1, 4, 1, 40, 40, 16, torch.float32)  # four query heads add into one dK, dV
    runs = []
    for _ in range(2):
        for t in (q, k, v):
            t.grad = None
        attention_backward.attention(q, k, v, causal=True).backward(grad_out)
        runs.append([t.grad.clone() for t in (q, k, v)])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_no_queries_give_zero_key_gradients():
    (q, k, v), grad_out = _inputs(1, 2, 2, 0, 8, 16, torch.float32)
    attention_backward.attention(q, k, v).backward(grad_out)
    assert q.grad.shape == (1, 2, 0, 16) and not k.grad.any() and not v.grad.any()


def test_one_key_gives_a_zero_query_gradient():
    # With one key softmax is the constant 1: out = v, dq = 0 exactly, and the kernels' dS = P (dP - D)
    # is a difference of two sums of the same products (dO.v and dO.out), zero up to their rounding.
    (q, k, v), grad_out = _inputs(1, 2, 1, 5, 1, 16, torch.float16)
    attention_backward.attention(q, k, v).backward(grad_out)
    bound = 1e-3 * grad_out.float().abs().max() * v.float().abs().max() * k.float().abs().max()
    assert q.grad.float().abs().max() <= bound, f"dq should be ~0, its largest element is {q.grad.abs().max()}"
    assert _rel(v.grad, grad_out.double().cpu().sum((1, 2), keepdim=True)) <= tolerance(torch.float16)


def test_forward_saves_the_base_2_log_sum_exp():
    (q, k, v), _ = _inputs(1, 4, 2, 9, 13, 16, torch.float16)  # exact products (TF32 is not)
    _, lse = attention.forward(q.detach(), k.detach(), v.detach(), causal=True, with_lse=True)
    s = q.double().cpu() @ k.double().cpu().repeat_interleave(2, dim=1).transpose(-1, -2) / 4
    s = s.masked_fill(torch.ones(9, 13, dtype=torch.bool).triu(1), float("-inf"))
    assert _rel(lse, torch.logsumexp(s, -1) / torch.log(torch.tensor(2.0, dtype=torch.float64))) <= 1e-5
    assert attention.forward(q.detach(), k.detach(), v.detach())[1] is None


def test_decoding_one_query_against_a_cache_of_fewer_heads():
    # without a mask a group's query heads are packed into one program's rows (see attention.forward)
    for length in (1, 3):
        q = torch.randn(2, 8, length, 32, device=DEVICE, dtype=torch.float16)
        k, v = (torch.randn(2, 2, 75, 32, device=DEVICE, dtype=torch.float16) for _ in range(2))
        out = attention.attention(q, k, v)
        ref = attention.reference(q, k, v)
        assert _rel(out, ref) <= tolerance(torch.float16)
        sdpa = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True)
        assert _rel(out, sdpa.cpu()) <= tolerance(torch.float16)


@pytest.mark.parametrize("S_Q,causal", [(20, True), (20, False), (1, False)], ids=["causal", "gqa_packed", "decode"])
def test_the_ops_pass_torchs_own_checks(S_Q, causal):
    (q, k, v), grad_out = _inputs(1, 4, 2, S_Q, 24, 16, torch.float32)
    torch.library.opcheck(attention_backward._attention_op, (q, k, v, causal, 0.25))
    out, lse = attention.forward(q.detach(), k.detach(), v.detach(), causal=causal, with_lse=True)
    torch.library.opcheck(attention_backward._backward_op, (q.detach(), k.detach(), v.detach(), out, lse, grad_out,
                                                             causal, 0.25))


@pytest.mark.parametrize("blocks", [(16, 32), (32, 16)], ids=["taller_keys", "taller_queries"])
def test_blocks_of_unequal_sizes_give_the_same_gradients(blocks):
    # a GPU's configs have BLOCK_M != BLOCK_N, where query_bounds and key_bounds round differently
    block_m, block_n = blocks
    config = {name: dict(BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4, num_stages=1) for name in ("dkdv", "dq")}
    for S_Q, S_K in ((37, 53), (53, 37), (5, 70)):
        (q, k, v), grad_out = _inputs(1, 2, 1, S_Q, S_K, 16, torch.float32)
        for causal in (False, True):
            out, lse = attention.forward(q.detach(), k.detach(), v.detach(), causal=causal, with_lse=True)
            grads = attention_backward.backward(q.detach(), k.detach(), v.detach(), out, lse, grad_out, causal=causal,
                                                config=config)
            _, ref = _float64_grads(q, k, v, grad_out, causal)
            for name, mine, theirs in zip("qkv", grads, ref):
                assert _rel(mine, theirs) <= _tolerance(torch.float32), f"d{name}, {S_Q}x{S_K} causal={causal}"


def test_backward_names_a_wrong_saved_tensor():
    (q, k, v), grad_out = _inputs(1, 2, 1, 20, 24, 16, torch.float32)
    q, k, v = q.detach(), k.detach(), v.detach()
    out, lse = attention.forward(q, k, v, causal=True, with_lse=True)
    with pytest.raises(ValueError, match=r"grad_out must have q's shape \(1, 2, 20, 16\)"):
        attention_backward.backward(q, k, v, out, lse, grad_out[:, :, :10])
    with pytest.raises(ValueError, match="grad_out must have q's shape .* dtype torch.float32"):
        attention_backward.backward(q, k, v, out, lse, grad_out.half())
    with pytest.raises(ValueError, match="lse must be the contiguous float32"):
        attention_backward.backward(q, k, v, out, None, grad_out)
    with pytest.raises(ValueError, match="out must have q's shape"):
        attention_backward.backward(q, k, v, out[..., :8], lse, grad_out)


class _Block(torch.nn.Module):
    """A small attention block with grouped-query heads: projections, attention, output projection."""

    def __init__(self, width=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q = torch.nn.Linear(width, width, device=DEVICE)
        self.kv = torch.nn.Linear(width, 2 * kv_heads * self.head_dim, device=DEVICE)
        self.o = torch.nn.Linear(width, width, device=DEVICE)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(B, T, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = attention_backward.attention(q, k, v, causal=True)
        return self.o(y.transpose(1, 2).reshape(B, T, -1))


def test_compiled_model_has_no_graph_break_and_the_same_gradients():
    torch.manual_seed(0)
    model = _Block(width=64, heads=4, kv_heads=2)  # head_dim 16
    x = torch.randn(2, 24, 64, device=DEVICE)
    model(x).pow(2).sum().backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    # aot_eager traces forward and backward through the ops' fake implementations without compiling
    # them (no C++ compiler needed); fullgraph=True fails on any graph break
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    compiled(x).pow(2).sum().backward()
    for mine, theirs in zip((p.grad for p in model.parameters()), eager):
        assert _rel(mine, theirs.double().cpu()) <= tolerance(torch.float32)


def test_a_second_backward_is_refused_clearly():
    (q, k, v), grad_out = _inputs(1, 2, 2, 16, 16, 16, torch.float32)
    (dq,) = torch.autograd.grad((attention_backward.attention(q, k, v) * grad_out).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="a second backward .* is not implemented"):
        dq.sum().backward()


def test_bad_input_with_gradients_gets_a_clear_error():
    (q, k, v), _ = _inputs(1, 4, 2, 8, 8, 16, torch.float16)
    three = k.detach()[:, :1].repeat(1, 3, 1, 1).requires_grad_()
    with pytest.raises(ValueError, match="q has heads=4 and k, v have heads=3: the key/value heads must divide"):
        attention_backward.attention(q, three, three)
    with pytest.raises(RuntimeError, match="for gradients call course.attention_backward.attention"):
        attention.attention(q, k, v)  # the forward-only kernel
    with torch.no_grad():
        assert attention.attention(q, k, v).shape == q.shape


@gpu
def test_bfloat16_gradients_match_torch_and_replay_in_a_cuda_graph():
    (q, k, v), grad_out = _inputs(2, 16, 4, 2048, 2048, 128, torch.bfloat16)
    outs = []
    for fn in (lambda: attention_backward.attention(q, k, v, causal=True),
               lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)):
        for t in (q, k, v):
            t.grad = None
        out = fn()
        out.backward(grad_out)
        outs.append([out.detach()] + [t.grad.clone() for t in (q, k, v)])
    for name, mine, theirs in zip(("out", "dq", "dk", "dv"), *outs):
        assert _rel(mine, theirs.double().cpu()) <= 2 * tolerance(torch.bfloat16), name
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))  # leaves whose .grad nothing accumulated

    def step():  # a forward and backward, as a training step captures them
        out = attention_backward.attention(q, k, v, causal=True)
        return torch.autograd.grad(out, (q, k, v), grad_out)

    replay, grads = timing.cuda_graph(step)
    for t in grads:
        t.fill_(float("nan"))
    replay()
    torch.cuda.synchronize()
    for name, mine, theirs in zip(("dq", "dk", "dv"), grads, outs[1][1:]):
        assert _rel(mine, theirs.double().cpu()) <= 2 * tolerance(torch.bfloat16), f"{name} after a graph replay"
