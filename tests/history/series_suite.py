"""A small declared suite whose cases change night by night, for a real run series: the night
is the environment variable ``HISTORY_NIGHT`` (0, 1, ...), read when a case runs (run it with
``--serial``).

``steady`` always passes; ``broken`` gets a wrong backward from night :data:`BROKEN_FROM` on;
``flaky`` has a wrong backward on odd nights; ``slowed`` sleeps :data:`SLEEP` seconds from night
:data:`SLOWED_FROM` on.
"""

from __future__ import annotations

import os
import time

import torch

from distcheck.suites.declare import Op, declare_suite
from tests.catalogue.torch_functions import WrongScale

BROKEN_FROM, SLOWED_FROM, SLEEP = 3, 5, 1.2


def night() -> int:
    return int(os.environ.get("HISTORY_NIGHT", "0"))


def vectors(dtype):
    yield torch.randn(3, dtype=dtype, requires_grad=True)


def broken(x):
    return WrongScale.apply(x) if night() >= BROKEN_FROM else x.sin()


def flaky(x):
    return WrongScale.apply(x) if night() % 2 else x.sin()


def slowed(x):
    if night() >= SLOWED_FROM:
        time.sleep(SLEEP)
    return x.sin()


suite = declare_suite(
    "series",
    [
        Op(name, function, vectors, checks=("grad",), options={"check_batched_grad": False})
        for name, function in (("steady", torch.sin), ("broken", broken), ("flaky", flaky), ("slowed", slowed))
    ],
)
