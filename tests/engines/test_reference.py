"""The reference call as a scope: shared inside one, dropped when it closes."""

from __future__ import annotations

import threading

import numpy as np
import torch

import distcheck
from distcheck.engines import get_engine, reference_scope
from distcheck.engines.reference import forget_default, reference_call
from tests.engines.test_torch_engine import Counted

TORCH = get_engine("torch")


def _x() -> torch.Tensor:
    return torch.linspace(0.1, 0.9, 4, dtype=torch.float64).requires_grad_()


def test_a_scope_shares_the_call_and_drops_it_when_it_closes():
    x, func = _x(), Counted()
    with reference_scope():
        first = reference_call(TORCH, func, (x,))
        assert reference_call(TORCH, func, (x,)) is first and func.calls == 1
    with reference_scope():
        assert reference_call(TORCH, func, (x,)) is not first and func.calls == 2


def test_a_scope_keeps_its_first_function_s_call_beside_the_latest_other_one():
    """A check's own call outlives the calls of its complex outputs' parts, which replace each
    other: torch's auxiliary checks differentiate its first call after checking the parts."""
    x, func, imag, real = _x(), Counted(), Counted(), Counted()
    with reference_scope():
        first = reference_call(TORCH, func, (x,))
        reference_call(TORCH, imag, (x,))
        reference_call(TORCH, real, (x,))
        assert reference_call(TORCH, func, (x,)) is first and func.calls == 1
        reference_call(TORCH, imag, (x,))
        assert imag.calls == 2  # the real part's call had replaced it


def test_an_inner_scope_keeps_its_own_and_the_outer_one_survives_it():
    x, func = _x(), Counted()
    with reference_scope():
        outer = reference_call(TORCH, func, (x,))
        with reference_scope():
            assert reference_call(TORCH, func, (x,)) is not outer
        assert reference_call(TORCH, func, (x,)) is outer and func.calls == 2


def test_scopes_of_two_threads_are_apart():
    x, func = _x(), Counted()
    seen = []

    def work():
        with reference_scope():
            seen.append(reference_call(TORCH, func, (x,)))

    with reference_scope():
        mine = reference_call(TORCH, func, (x,))
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        assert seen[0] is not mine and reference_call(TORCH, func, (x,)) is mine


def test_engines_that_do_not_share_call_afresh():
    f = distcheck.numpy_function(lambda a: a * 2, vjp=lambda a, g: (2 * g,))
    a = np.ones(3)
    with reference_scope():
        assert reference_call(get_engine("numpy"), f, (a,)) is not reference_call(get_engine("numpy"), f, (a,))


def test_a_gradgradcheck_keeps_nothing_when_it_ends():
    x, func = _x(), Counted()
    assert distcheck.gradgradcheck(func, (x,))
    calls = func.calls
    reference_call(TORCH, func, (x,))  # outside any scope: the thread's default scope
    assert func.calls == calls + 1
    forget_default()
