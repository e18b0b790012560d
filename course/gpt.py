"""A small GPT trained on the course's kernels, beside its twin in plain torch (notes/training.md).

    config = GPTConfig(layers=2, width=64, heads=4, kv_heads=2)
    ours, theirs = GPT(config, kernels="course", seed=0), GPT(config, kernels="torch", seed=0)
    losses = train(ours, steps=200, batch=16)                 # the same batches for both, from one seed

The two models are the same network built from the same seed, so they start with the same weights:
``kernels="course"`` runs every Linear layer through :class:`course.gemm.autograd.Linear`, each
block's MLP through :func:`course.mlp.gelu_mlp` (GELU fused into a GEMM's epilogue both ways) and
attention through :func:`course.attention_backward.attention`; ``kernels="torch"`` through
``nn.Linear``, ``F.gelu`` and ``scaled_dot_product_attention``. Their loss curves lie on top of each other if the
course's forward and backward passes are right.

The task, :func:`copy_batch`, needs attention and nothing else: each sequence is random tokens that
repeat with a period of half its length, and the loss counts only the tokens that can be known, which a
model can only predict by looking back half a sequence. Its loss starts at ``log(vocab)`` and falls
towards 0 once the model has learned to copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course import attention_backward, mlp, runtime
from course.gemm import autograd

__all__ = ["CURVE_CONFIG", "GPT", "GPT2_SMALL", "GPTConfig", "copy_batch", "loss_curves", "step_benchmark",
           "train", "train_step_ms"]


@dataclass(frozen=True)
class GPTConfig:
    """The network's sizes: ``vocab`` tokens, sequences of ``seq``, ``layers`` blocks of ``width``
    channels with ``heads`` query heads over ``kv_heads`` key/value heads (grouped-query attention)."""

    vocab: int = 32
    seq: int = 32
    width: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2


GPT2_SMALL = GPTConfig(vocab=50304, seq=1024, width=768, layers=12, heads=12, kv_heads=12)


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention, then a GELU MLP, each added to the input."""

    def __init__(self, config: GPTConfig, linear, attend, fused_mlp: bool = False):
        super().__init__()
        self.fused_mlp = fused_mlp
        self.heads, self.kv_heads = config.heads, config.kv_heads
        self.head_dim = config.width // config.heads
        self.attend = attend
        self.norm1, self.norm2 = nn.LayerNorm(config.width), nn.LayerNorm(config.width)
        self.qkv = linear(config.width, (config.heads + 2 * config.kv_heads) * self.head_dim)
        self.proj = linear(config.width, config.width)
        self.up, self.down = linear(config.width, 4 * config.width), linear(4 * config.width, config.width)

    def forward(self, x):
        B, T, C = x.shape
        heads = self.qkv(self.norm1(x)).view(B, T, -1, self.head_dim).transpose(1, 2)  # (B, all heads, T, d)
        q, k, v = heads.split([self.heads, self.kv_heads, self.kv_heads], dim=1)  # views: no copies
        y = self.attend(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        h = self.norm2(x)
        if self.fused_mlp:  # the same weights, GELU in the GEMMs' epilogues
            return x + mlp.gelu_mlp(h, self.up.weight, self.up.bias, self.down.weight, self.down.bias)
        return x + self.down(F.gelu(self.up(h), approximate="tanh"))


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])


def _course_attention(q, k, v):
    return attention_backward.attention(q, k, v, causal=True)


class GPT(nn.Module):
    """Token and position embeddings, ``config.layers`` :class:`Block` s, a final norm and a head that
    gives each position's logits over the vocabulary. ``kernels``: ``"course"`` or ``"torch"`` (see
    the module's docstring); ``seed``: the weights' (the same seed gives both kinds the same weights);
    ``fused_mlp=False`` runs the course's MLP as two Linear layers and torch's GELU between them.

        >>> GPT(GPTConfig(layers=1), kernels="torch", device="cpu")(torch.zeros(2, 5, dtype=torch.long)).shape
        torch.Size([2, 5, 32])
    """

    def __init__(self, config: GPTConfig = GPTConfig(), *, kernels: str = "course", seed: int = 0,
                 device=None, dtype=torch.float32, fused_mlp: bool = True):
        super().__init__()
        if kernels not in ("course", "torch"):
            raise ValueError(f"GPT(kernels={kernels!r}): pass 'course' or 'torch'")
        if config.width % config.heads or config.heads % config.kv_heads:
            raise ValueError(f"GPT: width {config.width} must split into {config.heads} heads, and kv_heads "
                             f"{config.kv_heads} must divide them")
        head_dim = config.width // config.heads
        if kernels == "course" and (head_dim < 16 or head_dim > 256 or head_dim & (head_dim - 1)):
            raise ValueError(f"GPT: width / heads = {head_dim}; the course's attention takes head dims that are "
                             "powers of two from 16 to 256 (change width or heads)")
        self.config, self.kernels = config, kernels
        linear = autograd.Linear if kernels == "course" else nn.Linear
        attend = _course_attention if kernels == "course" else _sdpa
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.tokens = nn.Embedding(config.vocab, config.width)
            self.positions = nn.Embedding(config.seq, config.width)
            fused = fused_mlp and kernels == "course"
            self.blocks = nn.ModuleList(Block(config, linear, attend, fused) for _ in range(config.layers))
            self.norm = nn.LayerNorm(config.width)
            self.head = linear(config.width, config.vocab, bias=False)
        self.to(device=device if device is not None else runtime.DEVICE, dtype=dtype)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.shape[-1] > self.config.seq:
            raise ValueError(f"GPT: sequences of {tokens.shape[-1]} tokens, longer than config.seq = {self.config.seq}")
        x = self.tokens(tokens) + self.positions(torch.arange(tokens.shape[-1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def copy_batch(batch: int, config: GPTConfig, generator: torch.Generator, device=None):
    """``(inputs, targets)`` for the copy task: ``batch`` sequences of ``config.seq`` tokens that
    repeat with a period of ``config.seq // 2`` (the second half repeats the first). ``targets`` (the
    next token at each position) is -100, which ``cross_entropy`` ignores, where the next token is
    still random: at every position before the last of the first period.

        >>> x, y = copy_batch(1, GPTConfig(seq=8, vocab=10), torch.Generator().manual_seed(0), device="cpu")
        >>> bool((x[0, :4] == x[0, 4:]).all()), y[0].tolist()[:3]
        (True, [-100, -100, -100])
    """
    if config.seq < 2:
        raise ValueError(f"copy_batch: config.seq = {config.seq}; the copy task needs sequences of 2 tokens or more")
    period = config.seq // 2
    first = torch.randint(0, config.vocab, (batch, period), generator=generator)
    tokens = first.repeat(1, config.seq // period + 1)[:, :config.seq + 1]  # one more token: the last target
    inputs, targets = tokens[:, :-1].clone(), tokens[:, 1:].clone()
    targets[:, :period - 1] = -100
    device = device if device is not None else runtime.DEVICE
    return inputs.to(device), targets.to(device)


def _step(forward, optimizer, inputs, targets) -> torch.Tensor:
    """One training step: the loss, its backward, an optimizer step; returns the loss."""
    loss = F.cross_entropy(forward(inputs).float().flatten(0, 1), targets.flatten())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def train(model: GPT, steps: int, *, batch: int = 16, lr: float = 3e-3, seed: int = 0) -> list[float]:
    """Train ``model`` on :func:`copy_batch` for ``steps`` steps of AdamW; the loss of each step. The
    batches come from ``seed``: two models trained with one seed see the same data."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    batches = (copy_batch(batch, model.config, generator, device=model.head.weight.device) for _ in range(steps))
    return [_step(model, optimizer, inputs, targets).item() for inputs, targets in batches]


def train_step_ms(model: GPT, batch: int, *, compiled: bool = False) -> float:
    """GPU milliseconds of one training step (forward, backward, AdamW) on random tokens, by
    :func:`course.timing.bench`; ``compiled``: through ``torch.compile`` first."""
    from course import timing

    inputs, targets = copy_batch(batch, model.config, torch.Generator().manual_seed(0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=not runtime.INTERPRET)
    forward = torch.compile(model) if compiled else model
    return timing.bench(lambda: _step(forward, optimizer, inputs, targets))


CURVE_CONFIG = GPTConfig(vocab=64, seq=256, width=256, layers=4, heads=8, kv_heads=2)


def loss_curves(config: GPTConfig = CURVE_CONFIG, steps: int = 300, batch: int = 32,
                dtype=torch.bfloat16) -> list[dict]:
    """Train the course's model and its torch twin from one seed on one stream of batches: one row per
    step, ``{"step", "course", "torch"}`` (the two losses)."""
    curves = [train(GPT(config, kernels=kind, dtype=dtype), steps, batch=batch) for kind in ("course", "torch")]
    return [dict(step=i, course=mine, torch=theirs) for i, (mine, theirs) in enumerate(zip(*curves))]


def step_benchmark(config: GPTConfig = GPT2_SMALL, batch: int = 8, dtype=torch.bfloat16) -> list[dict]:
    """One training step of ``config`` (default GPT-2 small's sizes) with torch's kernels eager and
    compiled, and with the course's eager and compiled (``torch.compile`` fuses the rest around the
    course's ops), and the course's eager with its MLP unfused: one row each, ``{"label", "ms",
    "tokens_per_s"}``."""
    rows = []
    for label, kernels, compiled, fused in (("torch eager", "torch", False, False),
                                            ("torch.compile", "torch", True, False),
                                            ("course", "course", False, True),
                                            ("course, MLP unfused", "course", False, False),
                                            ("course + torch.compile", "course", True, True)):
        model = GPT(config, kernels=kernels, dtype=dtype, fused_mlp=fused)
        ms = train_step_ms(model, batch, compiled=compiled)
        rows.append(dict(label=label, ms=ms, tokens_per_s=batch * config.seq / ms * 1e3))
        del model
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return rows

