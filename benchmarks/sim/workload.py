"""What a run has to do, from a recorded run (a JSON report): its groups (op × dtype) in suite
order, each with its runnable cases' seconds; split cases (``tasks`` > 1) with their work, input
elements and Jacobian bytes."""

from __future__ import annotations

from dataclasses import dataclass

from distcheck.suites.replay import Recording, split_shape


@dataclass(frozen=True)
class Case:
    """One runnable case: ``seconds`` it takes whole, or for a split case its work (seconds of
    one worker); ``columns``: input elements (the slow suite's cost hint); ``bytes``: its
    Jacobians (a split case's coordinator assembles and compares them)."""

    seconds: float
    split: bool = False
    columns: int = 0
    bytes: int = 0

    @property
    def evaluation(self) -> float:
        """Seconds of one evaluation: central differences take two per input element."""
        return self.seconds / (2 * max(self.columns, 1))


@dataclass(frozen=True)
class Group:
    name: str
    cases: tuple[Case, ...]

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.cases)


@dataclass(frozen=True)
class Workload:
    """``workers`` and ``seconds``: the recorded run's, when known (0 otherwise)."""

    mode: str
    groups: tuple[Group, ...]
    decided: int = 0  # cases decided without running (skipped, xfail)
    workers: int = 0
    seconds: float = 0.0

    @property
    def cases(self) -> int:
        return sum(len(g.cases) for g in self.groups)

    @property
    def total(self) -> float:
        """Seconds of case work."""
        return sum(g.seconds for g in self.groups)

    @property
    def longest(self) -> float:
        """The longest case that cannot be split."""
        return max((c.seconds for g in self.groups for c in g.cases if not c.split), default=0.0)

    @property
    def split_cases(self) -> int:
        return sum(c.split for g in self.groups for c in g.cases)


def from_recording(recording: Recording, replay: bool = False, scale: float = 1.0) -> Workload:
    """The workload of a recorded run; ``replay``: of its replay (split cases have the replay's
    columns and tiny Jacobians), every time multiplied by ``scale``."""
    groups = []
    for (op, dtype), recorded in recording.by_group.items():
        cases = []
        for r in (r for r in recorded if r.ran):
            seconds = (r.work if r.split else r.seconds) * scale
            if replay:
                columns = split_shape(seconds)[0] if r.split else 0
                cases.append(Case(seconds, r.split, columns, 0))
            else:
                cases.append(Case(seconds, r.split, r.columns, r.bytes))
        if cases:
            groups.append(Group(f"{op}::{dtype}", tuple(cases)))
    decided = sum(not r.ran for r in recording.cases)
    return Workload(recording.mode, tuple(groups), decided, recording.workers, recording.seconds * scale)
