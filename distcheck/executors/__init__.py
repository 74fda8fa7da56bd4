"""Executors run a plan's units: serially in-process, or as Ray tasks.

``resolve(executor)`` turns gradcheck's ``executor=`` argument into an executor object:
None means the ``DISTCHECK_EXECUTOR`` environment variable if set, else serial.
"""

from __future__ import annotations

import os
from typing import Any

from distcheck.executors.base import Executor, Results
from distcheck.executors.serial import SerialExecutor

__all__ = ["Executor", "Results", "SerialExecutor", "resolve"]

_NAMES = ("serial", "ray")


def resolve(executor: Any = None) -> Executor:
    """The executor object for gradcheck's ``executor`` argument."""
    if executor is None:
        executor = os.environ.get("DISTCHECK_EXECUTOR", "").strip() or "serial"
    if isinstance(executor, str):
        name = executor.lower()
        if name == "serial":
            return SerialExecutor()
        if name == "ray":
            from distcheck.executors.ray_front import default_ray_executor

            return default_ray_executor()
        raise ValueError(f"unknown executor {executor!r}: use one of {', '.join(_NAMES)} or an executor object")
    if callable(getattr(executor, "submit", None)):
        return executor
    raise TypeError(f"executor must be None, 'serial', 'ray' or an executor object, got {type(executor).__name__}")
