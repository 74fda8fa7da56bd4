"""A function restricted to some of its inputs and outputs: what function transforms (JAX's
``vjp`` / ``jvp``, ``torch.func.vjp``) differentiate."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from distcheck.engines.tuples import as_tuple


class Restricted:
    """``func`` as a function of the inputs at ``positions`` (the others held), giving the outputs
    at ``selected`` (all outputs when None)."""

    def __init__(self, func: Callable, inputs: tuple, positions: Sequence[int], selected: Sequence[int] | None):
        self.func, self.inputs, self.positions, self.selected = func, inputs, list(positions), selected

    def __call__(self, *moved):
        full = list(self.inputs)
        for p, x in zip(self.positions, moved):
            full[p] = x
        outputs = as_tuple(self.func(*full))
        return outputs if self.selected is None else tuple(outputs[p] for p in self.selected)
