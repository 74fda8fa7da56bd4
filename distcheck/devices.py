"""Device names: where a suite's samples are made and its checks run (``cpu``, ``cuda``,
``cuda:N``).

A case id names the device *type* (``cuda``, never ``cuda:1``): the same case on another GPU is
the same case, so runs on different GPUs compare. A CPU case's id names no device at all (the
ids of every run before devices existed stay valid). Nothing here imports an engine.
"""

from __future__ import annotations

import re

CPU = "cpu"
CUDA = "cuda"
DEVICE_TYPES = (CPU, CUDA)
_DEVICE = re.compile(r"(cpu|cuda)(?::(\d+))?")


class DeviceError(ValueError):
    """A device name that is not ``cpu``, ``cuda`` or ``cuda:N``."""


def parse_device(text: str) -> str:
    """``text`` as a device name (``cpu``, ``cuda``, ``cuda:N``); DeviceError otherwise."""
    found = _DEVICE.fullmatch(text.strip())
    if found is None or (found.group(1) == CPU and found.group(2) is not None):
        raise DeviceError(f"unknown device {text!r} (choose from cpu, cuda, cuda:N)")
    return text.strip()


def device_type(device: str) -> str:
    """``cuda`` for ``cuda:1``; ``cpu`` for ``cpu``."""
    return device.partition(":")[0]


def device_index(device: str) -> int | None:
    """The index of ``cuda:N``; None for ``cuda`` (the current device) and ``cpu``."""
    _, _, index = device.partition(":")
    return int(index) if index else None


def id_device(device: str) -> str | None:
    """What a case id says of ``device``: None for the CPU, its type otherwise."""
    kind = device_type(device)
    return None if kind == CPU else kind
