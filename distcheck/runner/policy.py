"""The scheduling seam: a :class:`WorkPolicy` decides the order and pieces of a Ray dispatch's
work; who holds what, what a lost runner took and when all is done are the queue's
(:class:`~distcheck.runner.work_queue.WorkQueue`). A policy is found by name (``--policy``): a
built-in one (``default``: :mod:`.default_policy`), an entry point of group
``distcheck.policies``, or ``MODULE:NAME``; made of the run's
:class:`~distcheck.runner.options.RunConfig` on the driver, it travels to the queue's actor (it
must pickle). One that fails to load is a :class:`PolicyLoadError`, before anything runs.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from distcheck.runner.options import DEFAULT, RunConfig
from distcheck.suites.base import RUN, CaseInfo, GroupInfo, UsageError
from distcheck.suites.case_list import CaseList

ENTRY_POINT_GROUP = "distcheck.policies"
BUILT_IN = {DEFAULT: "distcheck.runner.default_policy:DefaultPolicy"}


@dataclass(frozen=True)
class Item:
    """One piece of work for a runner: a group to list, or a batch of listed cases (a
    :class:`~distcheck.suites.case_list.CaseList`: the driver, to which a runner tells the item it
    starts, does not unpickle them). ``head``: of a group, which listed cases its lister runs
    (see :meth:`divide`); ``careful``: a careful item reports after every case, and its lister
    runs all of the group. A policy makes items without an ``id``: the queue gives each one as
    it hands it out."""

    id: int = 0
    group: GroupInfo | None = None
    head: Callable[[Sequence[CaseInfo]], list[int]] | None = None
    cases: Sequence[CaseInfo] = ()
    careful: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "cases", CaseList.of(self.cases))

    def divide(self, listing: Sequence[CaseInfo]) -> tuple[list[int], list[CaseInfo]]:
        """The indices of the listed cases the lister runs (``head``, on the worker; without
        one, or careful, every runnable case), and the group's other runnable cases (for the
        queue: the policy gets them back through :meth:`WorkPolicy.put`)."""
        if self.head is None or self.careful:
            head = [k for k, case in enumerate(listing) if case.status == RUN]
        else:
            head = self.head(listing)
        mine = set(head)
        return head, [case for k, case in enumerate(listing) if k not in mine and case.status == RUN]


class WorkPolicy(Protocol):
    """The order of a dispatch's work. The queue calls it from one thread (an actor's), and
    hands every :class:`Item` it returns to a runner, with an id of its own. A group's item may
    carry a ``head`` (see :meth:`Item.divide`): which of the listed cases the runner that
    lists the group runs itself, on the worker — the rest of the group's runnable cases come
    back through :meth:`put`."""

    group_weight: Callable[[GroupInfo], float] | None
    """If set, the driver enumerates every group before dispatching and puts them in the
    queue heaviest first (enumeration is metadata only); None: as they are enumerated."""

    def put(self, work: Sequence[GroupInfo | CaseInfo]) -> None:
        """Groups to list, and listed runnable cases (those of a group its lister did not run)."""

    def resubmit(self, batches: Sequence[tuple[Sequence[CaseInfo], bool]]) -> None:
        """Cases given back ``(cases, careful)`` after a lost runner or a timeout (``careful``:
        report after every case); they were started long ago."""

    def take(self) -> Item | None:
        """The next item, or None if there is none now (more may be put)."""

    def pending(self) -> bool:
        """Whether work is left to hand out."""


class PolicyLoadError(UsageError):
    """A policy name that names nothing, or a policy that fails to load (one line)."""


def installed() -> dict[str, str]:
    """The policies installed packages register (``name: module:Class``), from their metadata."""
    return {entry.name: entry.value for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def load_policy(spec: str) -> Callable[[RunConfig], WorkPolicy]:
    """What makes the policy ``spec`` names (a class, or a factory taking a run's
    :class:`~distcheck.runner.options.RunConfig`). :class:`PolicyLoadError` for a name that names nothing, a module
    or attribute that cannot be loaded, or an object that cannot be called."""
    known = {**installed(), **BUILT_IN}  # a built-in name is never taken over
    target = known.get(spec)
    if target is None:
        module, colon, attribute = spec.partition(":")
        if not (colon and module and attribute):
            names = ", ".join(sorted(known))
            raise PolicyLoadError(f"unknown policy {spec!r} (known: {names}; or MODULE:CLASS)")
        target = spec
    try:
        module, _, attribute = target.partition(":")
        found: Any = importlib.import_module(module.strip())
        for part in attribute.strip().split("."):
            found = getattr(found, part)
    except Exception as e:
        reason = " ".join(f"{type(e).__name__}: {e}".split())
        raise PolicyLoadError(f"policy {spec!r} ({target}) failed to load: {reason}") from e
    if not callable(found):
        raise PolicyLoadError(f"policy {spec!r} ({target}) is a {type(found).__name__}, not a class or factory")
    return found
