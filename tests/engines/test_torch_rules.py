"""distcheck's batching rule for ctc_loss gives, copy for copy, bit for bit what torch's loop
over the copies gives; it holds only inside distcheck's batched evaluations, and a batch that
records gradients or that it does not cover loops as torch's fallback does."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from distcheck.engines import torch_batch, torch_rules
from distcheck.kinds import Fallback
from distcheck.plan import batch_choice
from tests.plan.test_vectorize import _side_by_side

T, N, C, S = 12, 4, 5, 4


def _problem(reduction="mean", zero_infinity=False, tensor_lengths=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, N, C, dtype=torch.float64, generator=g)
    targets = torch.randint(1, C, (N, S), generator=g)
    input_lengths = [T, T - 1, T - 3, T]
    target_lengths = [S, 2, 3, 1]
    if zero_infinity:  # a sequence too short for its target: an infinite loss
        input_lengths[1], target_lengths[1] = 2, S
    if tensor_lengths:
        input_lengths, target_lengths = torch.tensor(input_lengths), torch.tensor(target_lengths)

    def func(a):
        return F.ctc_loss(
            a.log_softmax(2), targets, input_lengths, target_lengths, reduction=reduction, zero_infinity=zero_infinity
        )

    return func, x


def _copies(x, count, eps=1e-6, first=0):
    """``count`` copies of ``x``, copy b perturbed at one element (a numerical Jacobian block)."""
    flat = x.expand(count, *x.shape).clone().reshape(count, -1)
    for b in range(count):
        flat[b, (first + 7 * b) % flat.shape[1]] += eps if b % 2 else -eps
    return flat.reshape(count, *x.shape)


def _loop(func, stacked):
    with torch.no_grad():
        return torch.stack([func(item) for item in stacked])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("tensor_lengths", [False, True])
def test_a_block_of_perturbed_copies_is_torchs_loop_bit_for_bit(reduction, zero_infinity, tensor_lengths):
    func, x = _problem(reduction, zero_infinity, tensor_lengths)
    stacked = _copies(x, 24)
    (batched,) = torch_batch.batch_evaluate(func, (x,), 0, stacked)
    assert torch.equal(batched, _loop(func, stacked))
    if zero_infinity:
        assert (batched == 0).any() if reduction == "none" else torch.isfinite(batched).all()


def test_a_first_copy_that_differs_from_most_in_a_sequence_is_not_its_reference():
    """Copy 0 perturbed in sequence 0 and every other copy not: still torch's loop."""
    func, x = _problem("none")
    stacked = x.expand(6, *x.shape).clone()
    stacked[0, 3, 0, 2] += 1e-3
    stacked[1:, :, 0, :] += 0.0  # the others equal x there
    (batched,) = torch_batch.batch_evaluate(func, (x,), 0, stacked)
    assert torch.equal(batched, _loop(func, stacked))
    assert batched[0, 0] != batched[1, 0] and torch.equal(batched[1:], batched[1:2].expand(5, N))


def test_copies_with_every_slice_different_are_each_computed():
    func, x = _problem("sum")
    stacked = x + 0.1 * torch.randn(5, *x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (batched,) = torch_batch.batch_evaluate(func, (x,), 0, stacked)
    assert torch.equal(batched, _loop(func, stacked))


def test_a_batch_recording_gradients_loops_and_gets_torchs_gradients():
    """A gathered loss would send its gradient to the copy it was gathered from: with gradients
    recorded, every copy is computed alone (torch's own way)."""
    func, x = _problem("mean")
    stacked = _copies(x, 6).requires_grad_()
    with torch_rules.inside():
        (grads,) = torch.autograd.grad(torch.func.vmap(func)(stacked).sum(), stacked)
    expected = torch.stack(
        [torch.autograd.grad(func(item), item)[0] for item in stacked.detach().requires_grad_().unbind()]
    )
    assert torch.equal(grads, expected)


def test_shapes_the_rule_does_not_cover_are_torchs():
    """Unbatched log_probs (time, classes) with a 1-D target, and targets batched with the input."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(T, C, dtype=torch.float64, generator=g)
    target = torch.randint(1, C, (S,), generator=g)

    def unbatched(a):
        return F.ctc_loss(a.log_softmax(1), target, [T], [S], reduction="sum")

    stacked = _copies(x, 5)
    with torch_rules.inside():
        assert torch.equal(torch.func.vmap(unbatched)(stacked), _loop(unbatched, stacked))
    func, x = _problem("none")
    targets = torch.randint(1, C, (5, N, S), generator=g)
    both = lambda a, t: F.ctc_loss(a.log_softmax(2), t, [T] * N, [S] * N, reduction="none")  # noqa: E731
    stacked = _copies(x, 5)
    with torch_rules.inside():
        mapped = torch.func.vmap(both)(stacked, targets)
    assert torch.equal(mapped, torch.stack([both(a, t) for a, t in zip(stacked, targets)]))


def test_outside_distchecks_evaluations_vmap_behaves_as_torch_without_a_rule():
    func, x = _problem("mean")
    stacked = _copies(x, 4)
    torch_batch.batch_evaluate(func, (x,), 0, stacked)  # the rule is registered
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal(torch.func.vmap(func)(stacked), _loop(func, stacked))
    assert any("performance drop" in str(w.message) for w in caught)
    functorch = torch._C._functorch
    enabled = functorch._is_vmap_fallback_enabled()
    functorch._set_vmap_fallback_enabled(False)
    try:
        with pytest.raises(RuntimeError, match="aten::_ctc_loss hit the vmap fallback which is currently disabled"):
            torch.func.vmap(func)(stacked)
    finally:
        functorch._set_vmap_fallback_enabled(enabled)


@pytest.mark.parametrize("wrong", [False, True])
def test_a_ctc_loss_check_is_decided_batched_with_torchs_verdict(wrong):
    """Its numerical columns batched through the rule (no fallback for want of one); a wrong
    backward (the input's gradient halved) fails with the element-by-element path's message,
    as torch's check does."""
    batch_choice.forget()
    func, x = _problem("mean")
    checked = (lambda a: func(a + (a.detach() - a) * 0.5)) if wrong else func
    try:
        verdict, counts = _side_by_side(checked, (x.clone().requires_grad_(),))
    finally:
        batch_choice.forget()
    assert Fallback.NO_BATCHING_RULE not in counts.fallbacks
    if wrong:
        assert verdict == "GradcheckError" and counts.fallbacks == {Fallback.FAILURE: 1}
    else:
        assert verdict == "pass" and counts.batched >= 1 and counts.exact == 0
