"""A declared suite whose ops raise inside the user's function (importable in Ray workers).

``kaboom``: ``explode`` raises ValueError("kaboom"); ``deep``: ``ping`` and ``pong`` call each
other until Python's recursion limit (a traceback of thousands of lines); ``late``: 1,500
elements, ``explode_late`` raises ValueError("kaboom") only where a finite difference moves its
middle element (in slow mode on Ray, a split case: in a chunk on another worker).
"""

from __future__ import annotations

import torch

from distcheck.suites.declare import Op, declare_suite

MIDDLE = 750


def vector(dtype):
    yield torch.linspace(0.1, 0.9, 4, dtype=dtype).requires_grad_()


def big(dtype):
    yield torch.linspace(0.1, 0.9, 2 * MIDDLE, dtype=dtype).requires_grad_()


def explode(x):
    raise ValueError("kaboom")


def ping(x, depth=0):
    return pong(x, depth + 1)


def pong(x, depth):
    return ping(x, depth + 1)


def explode_late(x):
    if float(x.detach()[MIDDLE]) != float(torch.linspace(0.1, 0.9, 2 * MIDDLE, dtype=x.dtype)[MIDDLE]):
        raise ValueError("kaboom")
    return x.sin()


suite = declare_suite(
    "raising",
    [
        Op("kaboom", explode, vector, checks=("grad",), dtypes=("float64",)),
        Op("deep", ping, vector, checks=("grad",), dtypes=("float64",)),
        Op("late", explode_late, big, checks=("grad",), dtypes=("float64",)),
    ],
)
