"""The model's constants: a JSON file of ``{"constants": {name: {"value", "source"}}, "replay":
{...overrides...}}`` (``benchmarks/calibration.json`` by default), so that every figure the
simulator uses says where it was measured."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields, replace

from distcheck.executors.ray_settings import DEFAULT_BLOCK_BYTES
from distcheck.runner.options import REPORT_EVERY, RunOptions
from distcheck.runner.worker import IDLE_WAIT, SPLIT_WAIT

DEFAULT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "calibration.json")


@dataclass(frozen=True)
class Calibration:
    """Seconds unless said; see ``calibration.json`` for each one's source. What the policy
    decides (batch sizes, shares, which cases go alone) is the policy's: the model runs it.
    The dispatcher's own settings (``report_every``, ``idle_poll``, ``idle_poll_max``,
    ``split_poll_max``, ``split_seconds``, ``block_bytes``) default to the code's values, not copies of them."""

    task_overhead: float = 0.0008
    case_overhead: float = 0.0
    driver_submit: float = 0.0001
    driver_per_case: float = 0.0000021
    driver_per_message: float = 0.00022
    driver_per_group: float = 0.00005
    listing_per_group: float = 0.0103
    listing_per_case: float = 0.0000224
    coordinator_start: float = 0.05
    assembly_per_byte: float = 1e-9
    block_bytes: float = float(DEFAULT_BLOCK_BYTES)
    worker_memory: float = 4 * 2**30
    estimate_evaluations: float = 4
    planning_evaluations: float = 2
    worker_start: float = 0.0
    report_every: float = REPORT_EVERY
    idle_poll: float = IDLE_WAIT[0]
    idle_poll_max: float = IDLE_WAIT[1]
    split_poll_max: float = SPLIT_WAIT
    split_seconds: float = RunOptions().split_seconds
    chunk_min: float = 0.1
    chunk_rounds: int = 2

    def with_values(self, values: dict[str, float]) -> Calibration:
        known = {f.name: f.type for f in fields(self)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown calibration constant {unknown[0]!r} (known: {', '.join(known)})")
        return replace(self, **{k: type(getattr(self, k))(v) for k, v in values.items()})


def _values(section: dict) -> dict[str, float]:
    return {name: entry["value"] if isinstance(entry, dict) else entry for name, entry in section.items()}


def load(path: str = DEFAULT, replay: bool = False) -> Calibration:
    """The constants in ``path``; with the ``replay`` overrides for a replayed run."""
    with open(path) as f:
        data = json.load(f)
    calibration = Calibration().with_values(_values(data.get("constants", {})))
    return calibration.with_values(_values(data.get("replay", {}))) if replay else calibration
