"""A policy from outside the package, for the tests of the scheduling seam: last in, first out.

Every group and case goes on one stack and the last put is handed out first; a group's lister
runs the whole group (no share). Groups are weighed alike,
so the driver puts them all at once, in enumeration order: the first handed out is the last
group. What it hands out is kept in ``handed`` (in this process) and, if ``$LIFO_POLICY_LOG``
names a file when the policy is made (on the driver), what it is given and hands out is written
there as it goes (``put NAME`` / ``take NAME`` lines, by the queue's actor on Ray).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from distcheck.runner.options import RunConfig
from distcheck.runner.policy import Item
from distcheck.suites.base import CaseInfo, GroupInfo

LOG = "LIFO_POLICY_LOG"


def same_weight(group: GroupInfo) -> float:
    return 0.0


def name(item: Item) -> str:
    """A group's ``suite::op::dtype``, or the id of a batch's first case."""
    return str(item.group) if item.group is not None else item.cases.keys[0]


class LifoPolicy:
    group_weight = staticmethod(same_weight)

    def __init__(self, config: RunConfig):
        self.config = config
        self.log = os.environ.get(LOG)
        self.stack: list[Item] = []
        self.handed: list[str] = []

    def put(self, work: Sequence[GroupInfo | CaseInfo]) -> None:
        for entry in work:
            self._push(Item(group=entry) if isinstance(entry, GroupInfo) else Item(cases=(entry,)))

    def resubmit(self, batches: Sequence[tuple[Sequence[CaseInfo], bool]]) -> None:
        for cases, careful in batches:
            self._push(Item(cases=tuple(cases), careful=careful))

    def take(self) -> Item | None:
        if not self.stack:
            return None
        item = self.stack.pop()
        self.handed.append(name(item))
        self._write("take", item)
        return item

    def _push(self, item: Item) -> None:
        self.stack.append(item)
        self._write("put", item)

    def _write(self, what: str, item: Item) -> None:
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{what} {name(item)}\n")

    def pending(self) -> bool:
        return bool(self.stack)
