"""Tests of course.gpt: the course's GPT and its torch twin start from the same weights and
follow the same loss curve; the copy task's batches; bad arguments."""

import math

import pytest
import torch

import course
from course import gpt
from course.check import tolerance
from course.gemm import autograd
from course.runtime import INTERPRET

TINY = gpt.GPTConfig(vocab=16, seq=16, width=32, layers=1, heads=2, kv_heads=1)  # head_dim 16, 2 heads over 1


def test_both_kinds_start_from_the_same_weights_and_use_their_kernels():
    ours, theirs = gpt.GPT(TINY, kernels="course", seed=3), gpt.GPT(TINY, kernels="torch", seed=3)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (name, mine), theirs_value in zip(ours.state_dict().items(), theirs.state_dict().values()):
        assert torch.equal(mine, theirs_value), name
    assert isinstance(ours.head, autograd.Linear) and not isinstance(theirs.head, autograd.Linear)
    other = gpt.GPT(TINY, kernels="torch", seed=4)
    assert not torch.equal(other.head.weight, theirs.head.weight), "another seed, other weights"


def test_one_backward_gives_every_parameter_torchs_gradient():
    # (a loss curve alone would not show it: AdamW's first steps move by about lr * sign(gradient))
    generator = torch.Generator().manual_seed(1)
    inputs, targets = gpt.copy_batch(2, TINY, generator)
    grads = []
    for kind in ("course", "torch"):
        model = gpt.GPT(TINY, kernels=kind)
        torch.nn.functional.cross_entropy(model(inputs).flatten(0, 1), targets.flatten()).backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    tol = 1e-4 if INTERPRET else 10 * tolerance(torch.float32)  # a GPU: TF32 against torch's float32
    for name, theirs in grads[1].items():
        mine = grads[0][name]
        error = ((mine.double() - theirs.double()).norm() / theirs.double().norm()).item()
        assert error <= tol, f"{name}.grad: relative error {error:.1e} against torch's"


def test_the_course_model_follows_the_torch_models_loss_curve():
    config = TINY if INTERPRET else gpt.GPTConfig(vocab=64, seq=128, width=128, layers=2, heads=4, kv_heads=2)
    steps = 2 if INTERPRET else 30
    curves = [gpt.train(gpt.GPT(config, kernels=kind), steps, batch=4) for kind in ("course", "torch")]
    for step, (mine, theirs) in enumerate(zip(*curves)):
        # float32: the interpreter's sums match torch's to rounding; a GPU's TF32 drifts over the steps
        assert abs(mine - theirs) <= (1e-4 if INTERPRET else 2e-2) * theirs, f"step {step}: {mine} vs {theirs}"
    assert all(math.isfinite(loss) for loss in curves[0])


def test_the_copy_tasks_batches():
    generator = torch.Generator().manual_seed(0)
    config = gpt.GPTConfig(seq=10, vocab=7)
    inputs, targets = gpt.copy_batch(3, config, generator, device="cpu")
    assert inputs.shape == targets.shape == (3, 10) and inputs.max() < 7
    assert torch.equal(inputs[:, :5], inputs[:, 5:]), "the second half repeats the first"
    assert (targets[:, :4] == -100).all(), "no target where the next token is random"
    assert torch.equal(targets[:, 4:9], inputs[:, 5:10]) and torch.equal(targets[:, 9], inputs[:, 0])
    again = gpt.copy_batch(3, config, torch.Generator().manual_seed(0), device="cpu")
    assert torch.equal(again[0], inputs), "one seed, one stream of batches"
    odd = gpt.GPTConfig(seq=9, vocab=7)
    inputs, targets = gpt.copy_batch(2, odd, generator, device="cpu")
    assert inputs.shape == targets.shape == (2, 9) and torch.equal(inputs[:, 4:8], inputs[:, :4])
    assert torch.equal(targets[:, 3:], inputs[:, [(t + 1) % 4 for t in range(3, 9)]]), "period 4: the next token"


def test_bad_arguments_get_clear_errors():
    with pytest.raises(ValueError, match="pass 'course' or 'torch'"):
        gpt.GPT(TINY, kernels="triton")
    with pytest.raises(ValueError, match="kv_heads 3 must divide them"):
        gpt.GPT(gpt.GPTConfig(heads=4, kv_heads=3))
    with pytest.raises(ValueError, match="width / heads = 8; the course's attention takes head dims"):
        gpt.GPT(gpt.GPTConfig(width=64, heads=8, kv_heads=2))
    with pytest.raises(ValueError, match="sequences of 2 tokens or more"):
        gpt.copy_batch(1, gpt.GPTConfig(seq=1), torch.Generator())
    with pytest.raises(ValueError, match="longer than config.seq = 16"):
        gpt.GPT(TINY, kernels="torch")(torch.zeros(1, 17, dtype=torch.long, device=course.DEVICE))
