"""The executor interface: run a plan's units, hand back their results.

An executor receives the subject (once) and the list of units, and returns a
:class:`Results` handle from which the reducer takes results by unit index, in the order it
needs them. Whether units run lazily on demand (serial) or all at once (Ray) is the
executor's business; the numbers must not depend on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from distcheck.plan.chunking import ChunkPolicy
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit, UnitResult


class Results(Protocol):
    """A check's unit results. ``blocks``: runs the block jobs of a comparison whose Jacobians
    exceed its ``budget`` bytes where the results are (see :mod:`distcheck.reduce.blockwise`);
    None: the reducer assembles every Jacobian."""

    blocks: Any | None

    def get(self, index: int) -> UnitResult:
        """The result of unit ``index`` (blocking until it is available)."""

    def close(self) -> None:
        """Give up on the units not yet collected (their results are dropped)."""


class Executor(Protocol):
    name: str
    policy: ChunkPolicy  # how the planner cuts work into units for this executor

    @property
    def workers(self) -> int:
        """How many units can run at once (the planner sizes chunks from it)."""

    def submit(self, subject: Subject, units: Sequence[Unit]) -> Results: ...
