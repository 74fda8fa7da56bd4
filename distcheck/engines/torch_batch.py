"""Batched Jacobian blocks on torch: the function mapped over a batch of perturbed inputs with
``torch.func.vmap`` (strict: no per-item fallback), its VJP as a function transform
(``torch.func.vjp``), and why a batch failed."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

from distcheck.engines import torch_rules
from distcheck.engines.restricted import Restricted
from distcheck.engines.tuples import as_tuple
from distcheck.kinds import Fallback

_functorch = torch._C._functorch

# What torch's vmap errors say, by the reason they stand for (first match wins).
_REASONS = (
    (("vmap fallback which is currently disabled", "Batching rule not implemented"), Fallback.NO_BATCHING_RULE),
    (("random operation",), Fallback.RANDOMNESS),
    ((".item()", "data-dependent control flow"), Fallback.ITEM),
    (("dynamic shape", "boolean mask", "data-dependent output shape"), Fallback.DYNAMIC_SHAPE),
    (("autograd.Function",), Fallback.AUTOGRAD_FUNCTION),
)


def batch_evaluate(
    func: Callable, inputs: tuple, position: int, stacked: torch.Tensor, *, loops: bool = False
) -> tuple:
    """``func`` mapped over ``stacked`` at ``position`` by ``torch.func.vmap``, the per-item
    fallback for operations without a batching rule turned off (it raises) unless ``loops``
    (that operation then runs item by item, each item computed as a separate call would, its
    performance warning silenced), without recording gradients (the inputs detached). Random
    operations draw once for the whole batch (``randomness="same"``): what a function that
    reseeds the global RNG at each call (op_db's ``wrapper_set_seed``, for dropout) draws at
    each of torch's calls. A function that draws from the RNG as it is moves its state, which
    the batched units refuse (:func:`~distcheck.plan.units.batches.refusing_draws`). distcheck's
    own batching rules (:mod:`~distcheck.engines.torch_rules`) are in force."""
    args = [x.detach() if isinstance(x, torch.Tensor) else x for x in inputs]
    args[position] = stacked
    in_dims = tuple(0 if k == position else None for k in range(len(args)))
    mapped = torch.func.vmap(func, in_dims=in_dims, randomness="same")
    enabled = _functorch._is_vmap_fallback_enabled()
    _functorch._set_vmap_fallback_enabled(loops)
    try:
        with torch.no_grad(), warnings.catch_warnings(), torch_rules.inside():
            warnings.filterwarnings("ignore", message="There is a performance drop")  # the loop asked for
            return as_tuple(mapped(*args))
    finally:
        _functorch._set_vmap_fallback_enabled(enabled)


def batching_failure(error: Exception) -> Fallback:
    text = str(error)
    for needles, reason in _REASONS:
        if any(needle in text for needle in needles):
            return reason
    return Fallback.VMAP_ERROR


def transform_pullback(func: Callable, inputs: tuple, diff_positions: Sequence[int], output_positions: Sequence[int]):
    """``torch.func.vjp`` of ``func`` restricted to its differentiable inputs and selected outputs."""
    restricted = Restricted(func, inputs, diff_positions, output_positions)
    _, vjp = torch.func.vjp(restricted, *(inputs[p] for p in diff_positions))
    return lambda cotangents: list(vjp(tuple(cotangents)))
