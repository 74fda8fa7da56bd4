"""What a suite run gives: its :class:`RunResult` (the records, in enumeration order) and the
:class:`Tally` of its verdicts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from distcheck.records.case_record import BAD, FLAKY, VERDICTS, XPASS, CaseRecord
from distcheck.records.record_list import RecordList
from distcheck.suites import CHECK_KINDS


@dataclass
class RunResult:
    suite: str
    mode: str
    executor: str
    workers: int
    seconds: float = 0.0
    records: Sequence[CaseRecord] = field(default_factory=list)  # a list, or a RecordList (a run's)
    first_dispatch: float | None = None  # seconds from the run's start to its first task (on Ray)
    complete: bool = True  # False: stopped before every case had its verdict
    interrupted: str | None = None  # what stopped it (a signal's name), if something did
    device: str = "cpu"  # where the suite's cases ran
    placement: str | None = None  # on GPUs: how many runners on how many GPUs

    def tally(self) -> Tally:
        """The cases per (check kind, verdict), counted in one pass over the records (a run's
        :class:`RecordList` counts once; a plain list each call: a caller that reads several
        counts takes one tally)."""
        return Tally(RecordList.of(self.records).tally())

    @property
    def checks(self) -> list[str]:
        return self.tally().checks

    @property
    def failed(self) -> bool:
        """A case failed, erred or timed out, or a test expected to fail passed."""
        return self.tally().failed or bool(self.unexpected_passes)

    @property
    def unexpected_passes(self) -> list[str]:
        """See :meth:`RecordList.unexpected_passes`."""
        return RecordList.of(self.records).unexpected_passes()

    @property
    def flaky(self) -> list[CaseRecord]:
        return RecordList.of(self.records).having((FLAKY,))

    def counts(self, check: str | None = None) -> dict[str, int]:
        return self.tally().counts(check)


@dataclass(frozen=True)
class Tally:
    """How many cases of each check kind had each verdict (of a run's records, at one time)."""

    by_kind: Counter  # (check kind, verdict) -> cases

    @property
    def checks(self) -> list[str]:
        """The check kinds present, in the canonical order."""
        present = {check for check, _ in self.by_kind}
        return [c for c in CHECK_KINDS if c in present]

    @property
    def failed(self) -> bool:
        return any(verdict in BAD for _, verdict in self.by_kind)

    @property
    def has_flaky(self) -> bool:
        return any(verdict == FLAKY for _, verdict in self.by_kind)

    def counts(self, check: str | None = None) -> dict[str, int]:
        """Cases per verdict (of one check kind, or all); ``xpass``, ``flaky`` only in a run that has some."""
        present = {verdict for _, verdict in self.by_kind}
        verdicts = [*VERDICTS[:5], *([XPASS] if XPASS in present else []), *VERDICTS[5:]]
        # keyed by the verdicts' strings: what a summary prints and a report writes
        counts = dict.fromkeys(map(str, [*verdicts, FLAKY] if self.has_flaky else verdicts), 0)
        for (kind, verdict), n in self.by_kind.items():
            if check is None or kind == check:
                counts[verdict] += n
        return counts
