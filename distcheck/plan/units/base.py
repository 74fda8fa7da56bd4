"""Running a unit: results, captured errors, timing."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any

from distcheck.engines import get_engine
from distcheck.plan.subject import Subject


@dataclass
class UnitResult:
    """A unit's value, or the exception it raised (with the traceback as text)."""

    value: Any = None
    error: BaseException | None = None
    traceback: str = ""
    seconds: float = 0.0
    worker: str = ""  # where it ran (process id / node), for tests and reports

    def unwrap(self) -> Any:
        """The value, or raise the unit's exception (with the worker's traceback attached when
        it crossed a process boundary and lost its own)."""
        if self.error is not None:
            if self.error.__traceback__ is None and self.traceback:
                self.error.add_note(f"(raised in distcheck worker {self.worker}:)\n{self.traceback}")
            raise self.error
        return self.value


def execute(unit: Any, subject: Subject, threads: int = 1, worker: str = "") -> UnitResult:
    """Run one unit with ``threads`` intra-op threads; never raises (errors are captured)."""
    engine = get_engine(subject.engine)
    start = time.perf_counter()
    try:
        with engine.threads(threads):
            value = unit.run(engine, subject)
        return UnitResult(value=value, seconds=time.perf_counter() - start, worker=worker)
    except Exception as e:  # the reducer re-raises it in the reference's order
        return UnitResult(error=e, traceback=traceback.format_exc(), seconds=time.perf_counter() - start, worker=worker)
