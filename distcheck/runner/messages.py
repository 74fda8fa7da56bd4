"""What the parts of a Ray dispatch tell each other, one frozen dataclass per thing that
happened. A runner yields reports (lists of messages) to the driver; a coordinator yields its
split case's messages; the work queue answers a runner's ``take`` with an
:class:`~distcheck.runner.policy.Item`, a split case's
:class:`~distcheck.runner.split.Chunk`, :class:`Wait`, :class:`Soon` or None (no work will
come). The driver handles each message in a method of its own (:mod:`.dispatch`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcheck.case.run import SplitRequest
    from distcheck.records.case_record import CaseRecord, RecordBatch
    from distcheck.runner.policy import Item
    from distcheck.suites.case_list import CaseList


@dataclass(frozen=True)
class Ready:
    """The runner has loaded the suite; it takes its first item next."""


@dataclass(frozen=True)
class Started:
    """The runner started ``item``."""

    item: Item


@dataclass(frozen=True)
class Listed:
    """The runner listed the group of item ``item``: its cases, and the ``head`` it runs
    (indices into ``listing``; the group's other runnable cases went back to the queue)."""

    item: int
    listing: CaseList
    head: list[int]


@dataclass(frozen=True)
class Unlisted:
    """Listing the group of item ``item`` raised: ``message`` says what."""

    item: int
    message: str


@dataclass(frozen=True)
class Finished:
    """The item's cases before its ``upto``-th, since the last report: their ``records``, made
    where they ran; the failure ``blocks`` those records name (file name: the file's bytes,
    encoded where they ran), for the driver to store; and the cases to split (their index in
    the item, their request)."""

    item: int
    upto: int
    records: RecordBatch
    blocks: dict[str, bytes] = field(default_factory=dict)
    splits: tuple[tuple[int, SplitRequest], ...] = ()


@dataclass(frozen=True)
class Idle:
    """The runner found no work (it asks the queue again soon)."""


@dataclass(frozen=True)
class ChunkStarted:
    """The runner started chunk ``key`` of a split case (its next report says it is done)."""

    key: tuple[int, int]


@dataclass(frozen=True)
class ChunkDone:
    """The runner ran chunk ``key``: its result is the generator's next object, whose reference
    the driver forwards to the chunk's coordinator without fetching it."""

    key: tuple[int, int]


@dataclass(frozen=True)
class Begun:
    """The coordinator has begun its split case (the case's timeout runs from now)."""


@dataclass(frozen=True)
class Decided:
    """The split case's record, made on its coordinator, and the failure blocks it names (file
    name: bytes)."""

    record: CaseRecord
    blocks: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Wait:
    """The queue has nothing now: other runners may still add work."""


@dataclass(frozen=True)
class Soon:
    """The queue has nothing now, and split cases run: their chunks may come any moment."""
