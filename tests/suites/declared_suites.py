"""Declared suites the tests load by ``MODULE:NAME`` (importable in Ray workers as well).

``suite``: a correct op, a wrong backward (fails), an op that sleeps ``SLEEP`` seconds on its
second sample (for timeouts), a skipped and an expected-to-fail op. ``large``: a case worth
splitting in slow mode, and a wrong one. ``broken_samples``: an op whose sample generator
raises. Also a Suite class and a factory, for the loader's tests.
"""

from __future__ import annotations

import time

import torch

from distcheck.suites.declare import Op, declare_suite
from tests.catalogue.torch_functions import WrongScale

SLEEP = 30.0


def vectors(dtype):
    yield torch.randn(4, dtype=dtype, requires_grad=True)
    yield torch.randn(2, 3, dtype=dtype, requires_grad=True)


def big(dtype):
    yield torch.linspace(0.1, 0.9, 1500, dtype=dtype).requires_grad_()


def slow_sin(x):
    if x.dim() == 2:
        time.sleep(SLEEP)
    return x.sin()


def broken(dtype):
    raise RuntimeError("no samples today")


suite = declare_suite(
    "declared",
    [
        Op("sin", torch.sin, vectors, dtypes=("float64", "complex128")),
        Op("wrong", WrongScale.apply, vectors, checks=("grad",)),
        Op("sleepy", slow_sin, vectors, checks=("grad",)),
        Op("skipped", torch.cos, vectors, skip={"*": "not today"}),
        Op("expected", WrongScale.apply, vectors, checks=("grad",), xfail={"grad": "wrong on purpose"}),
    ],
)
large = declare_suite(  # for split cases (slow mode)
    "large",
    [Op("big", torch.sin, big, checks=("grad",)), Op("wrong", WrongScale.apply, big, checks=("grad",))],
)
broken_samples = declare_suite("broken-samples", [Op("broken", torch.sin, broken)])


class SinSuite:
    """A Suite class: one op of ``suite``, in the mode it is built with."""

    name = "sin-class"
    engine = "torch"

    def __init__(self, mode: str = "fast"):
        self.mode = mode
        self.inner = declare_suite(self.name, [Op("sin", torch.sin, vectors)], mode)

    def prepare(self) -> None:
        pass

    def cases(self, selection):
        return self.inner.cases(selection)

    def build(self, case):
        return self.inner.build(case)


def factory(mode: str):
    return declare_suite("from-factory", [Op("sin", torch.sin, vectors)], mode)


def failing_factory(mode: str):
    raise KeyError("no configuration")


fixed = SinSuite("slow")  # a suite object without with_mode
not_a_suite = 42
