"""The default :class:`~distcheck.runner.policy.WorkPolicy` (``--policy default``): the longest
work first, small pieces at the end. In this order: (1) work resubmitted after a timeout or a
lost worker (started long ago); (2) **costly cases**, one per item, heaviest first (a case to
split is found early); (3) **groups** to list (longest first with durations): their lister runs
the **head** — every runnable case that is not costly if they make at most ``GROUP_HEAD``
batches, else the first batch — and puts the rest back; (4) **listed cases** in batches of one
group's consecutive cases (``FAST_BATCH`` / ``SLOW_BATCH``, or ``batch_size``).

With a previous run's durations (``--durations``) a case is costly by its recorded seconds, and
a batch (or head) holds 1/(``GUIDE`` × workers) of the recorded work not handed out, between
``MIN_BATCH_SECONDS`` and ``GUIDE`` × the batch size: guided self-scheduling, so that the
workers finish together. Without them a slow-mode case is costly by its cost hint (``COSTLY``).
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from distcheck.runner.policy import Item
from distcheck.storage.durations import Durations
from distcheck.suites.base import RUN, CaseInfo, GroupInfo

if TYPE_CHECKING:
    from distcheck.runner.options import RunConfig

FAST_BATCH, SLOW_BATCH = 32, 16  # cases per batch of listed cases
GROUP_HEAD = 2  # a runner runs the whole group it listed if it has at most this many batches' worth
COSTLY = 1000  # a cost hint (slow mode: input elements) from which a case goes alone
COSTLY_SECONDS = 1.0  # a recorded duration from which a case goes alone
SECONDS_PER_COST = 1e-3  # a cost hint's rough weight in seconds, to order it among recorded cases
GUIDE = 4  # with durations, a batch holds 1/(GUIDE × workers) of the recorded work not handed out yet
MIN_BATCH_SECONDS = 0.25  # ... but at least this much (a message per batch at most every so often)


@dataclass(frozen=True)
class CostlyRule:
    """``weight(case)``: the expected seconds of a case that goes alone, None for the others.
    ``min_cost`` None: cost hints make no case costly (fast mode). ``batch_seconds``: with
    durations, how much recorded work a batch holds (None: batches are counted in cases)."""

    min_cost: int | None = COSTLY
    min_seconds: float = COSTLY_SECONDS
    durations: Mapping[str, float] = field(default_factory=dict)
    batch_seconds: float | None = None

    def seconds(self, case: CaseInfo) -> float | None:
        """The recorded seconds of ``case``, if known."""
        return self.durations.get(case.key)

    def batch(self, cases: Sequence[CaseInfo], size: int) -> int:
        """How many of ``cases`` (consecutive, not costly) make a batch: ``size`` of them, or with
        ``batch_seconds`` as many as hold that much recorded work (at least one, at most
        ``GUIDE × size``; a case without a record counts as none)."""
        if self.batch_seconds is None:
            return min(size, len(cases))
        total = 0.0
        for k, case in enumerate(cases[: GUIDE * size]):
            total += self.seconds(case) or 0.0
            if total >= self.batch_seconds:
                return k + 1
        return min(len(cases), GUIDE * size)

    def weight(self, case: CaseInfo) -> float | None:
        recorded = self.durations.get(case.key)
        if recorded is not None:
            return recorded if recorded >= self.min_seconds else None
        if self.min_cost is not None and case.cost >= self.min_cost:
            return case.cost * SECONDS_PER_COST
        return None

    def with_durations(
        self, durations: Durations, group: GroupInfo | None = None, batch_seconds: float | None = None
    ) -> CostlyRule:
        """This rule with the recorded seconds of ``group`` (of every group if None)."""
        return CostlyRule(self.min_cost, self.min_seconds, durations.seconds_of(group), batch_seconds)


@dataclass(frozen=True)
class GroupHead:
    """Which listed cases the runner that listed a group runs (on the worker): the group's
    runnable cases that are not costly — with durations, a batch's worth of recorded work; else
    all of them if they are few, or the first ``size``."""

    rule: CostlyRule
    size: int

    def __call__(self, listing: Sequence[CaseInfo]) -> list[int]:
        rule, size = self.rule, self.size
        runnable = [k for k, case in enumerate(listing) if case.status == RUN and rule.weight(case) is None]
        if rule.batch_seconds is not None:
            return runnable[: rule.batch([listing[k] for k in runnable], size)]
        return runnable if len(runnable) <= GROUP_HEAD * size else runnable[:size]


class DefaultPolicy:
    """See the module's doc."""

    def __init__(self, config: RunConfig):
        slow = config.mode == "slow"
        self._size = config.batch_size or (SLOW_BATCH if slow else FAST_BATCH)
        self._costly_rule = CostlyRule(min_cost=COSTLY if slow else None)
        self._durations, self._workers = config.durations, config.workers
        durations = self._durations
        self._rule = self._costly_rule.with_durations(durations) if durations else self._costly_rule
        self._remaining = durations.total if durations else 0.0  # recorded work not handed out yet
        self._counted: set[tuple[str, str]] = set()  # groups whose work was counted out whole
        self._front: collections.deque[Item] = collections.deque()
        self._costly: list[tuple[float, int, CaseInfo]] = []  # a heap
        self._groups: collections.deque[GroupInfo] = collections.deque()
        self._listed: collections.deque[CaseInfo] = collections.deque()
        self._order = itertools.count()  # ties among costly cases: in the order they came
        self.group_weight = durations.group_seconds if durations else None

    def put(self, work: Sequence[GroupInfo | CaseInfo]) -> None:
        for entry in work:
            if isinstance(entry, GroupInfo):
                self._groups.append(entry)
                continue
            weight = self._rule.weight(entry)
            if weight is None:
                self._listed.append(entry)
            else:
                heapq.heappush(self._costly, (-weight, next(self._order), entry))

    def resubmit(self, batches: Sequence[tuple[Sequence[CaseInfo], bool]]) -> None:
        for cases, careful in reversed(batches):
            self._front.appendleft(Item(cases=tuple(cases), careful=careful))

    def take(self) -> Item | None:
        if self._front:
            return self._front.popleft()
        if self._costly:
            return self._next_costly()
        if self._groups:
            return self._next_group()
        if self._listed:
            return self._next_batch()
        return None

    def pending(self) -> bool:
        return bool(self._front or self._costly or self._groups or self._listed)

    def _next_group(self) -> Item:
        group = self._groups.popleft()
        if self._durations is None:
            return Item(group=group, head=GroupHead(self._costly_rule, self._size))
        rule = self._costly_rule.with_durations(self._durations, group, self._batch_seconds())
        if group.key not in self._counted:
            self._counted.add(group.key)
            self._remaining -= self._durations.group_seconds(group)
        return Item(group=group, head=GroupHead(rule, self._size))

    def _next_batch(self) -> Item:
        first = self._listed[0]
        ahead = itertools.islice(self._listed, 0, GUIDE * self._size)
        run = list(itertools.takewhile(lambda case: case.group == first.group, ahead))
        rule = self._rule
        if self._durations is not None:
            rule = dataclasses.replace(rule, batch_seconds=self._batch_seconds())
        batch = [self._listed.popleft() for _ in range(rule.batch(run, self._size))]
        if self._durations is not None and first.group not in self._counted:
            self._remaining -= sum(rule.seconds(case) or 0.0 for case in batch)
        return Item(cases=tuple(batch))

    def _next_costly(self) -> Item:
        case = heapq.heappop(self._costly)[2]
        if self._durations is not None and case.group not in self._counted:
            self._remaining -= self._rule.seconds(case) or 0.0
        return Item(cases=(case,))

    def _batch_seconds(self) -> float:
        return max(MIN_BATCH_SECONDS, self._remaining / (GUIDE * self._workers))
