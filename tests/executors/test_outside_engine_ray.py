"""An engine registered only in the driver (``register_engine``) checks on Ray: its workers
learn it from the check's subject, and give the serial verdicts and messages."""

from __future__ import annotations

import numpy as np
import pytest

import distcheck
from distcheck.engines import registry
from distcheck.executors.ray_executor import RayExecutor
from distcheck.executors.serial import SerialExecutor
from tests.engines import toy_engine
from tests.engines.toy_engine import GOOD, TARGET, WRONG, Vec
from tests.executors.test_ray_executor import Pieces


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(registry, "_sources", dict(registry._known()))
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    registry.register_engine("toy", TARGET, toy_engine.__name__, "Vec")


@pytest.mark.parametrize("func", [GOOD, WRONG], ids=["good", "wrong"])
@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
def test_a_registered_engine_checks_on_ray_as_serially(func, fast_mode, toy, ray_cluster):
    def outcome(executor):
        try:
            return distcheck.gradcheck(func, (Vec(np.linspace(0.1, 0.9, 6)),), fast_mode=fast_mode, executor=executor)
        except distcheck.GradcheckError as e:
            return str(e)

    serial = outcome(SerialExecutor())
    assert serial is True if func is GOOD else "Jacobian mismatch" in serial
    assert outcome(RayExecutor(policy=Pieces(2))) == serial
