"""tensorplay versions of helpers of torch's test code, where translating torch's (rebinding
``torch`` to ``tensorplay``, :mod:`~distcheck.suites.tensorplay_opinfo.translate`) would not
do: they depend on torch's RNG machinery, or on an API that tensorplay spells differently."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorplay as tp


def wrapper_set_seed(op: Callable, *args: Any, **kwargs: Any) -> Any:
    """torch's ``wrapper_set_seed``: ``op`` called with the global RNG seeded with 42, and the
    RNG's state restored afterwards (so a random op such as dropout draws the same numbers at
    every call of a gradient check)."""
    state = tp.get_rng_state()
    try:
        tp.manual_seed(42)
        return op(*args, **kwargs)
    finally:
        tp.set_rng_state(state)


def gradcheck_wrapper_hermitian_input(op: Callable, input: Any, *args: Any, **kwargs: Any) -> Any:
    """torch's: the op of ``input + input.mH`` (a Hermitian matrix, whatever finite differences
    do to ``input``). ``Tensor.mH`` is a property in torch and a method in tensorplay."""
    return op(input + input.mH(), *args, **kwargs)


# torch's helpers, by (module, qualified name)
REPLACEMENTS: dict[tuple[str, str], Callable] = {
    ("torch.testing._utils", "wrapper_set_seed"): wrapper_set_seed,
    ("torch.testing._internal.opinfo.core", "gradcheck_wrapper_hermitian_input"): gradcheck_wrapper_hermitian_input,
}
