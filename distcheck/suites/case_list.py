"""Cases as they travel between the driver and the runners of a Ray run: the driver hears of
every case, so it must not make (or unpickle) an object per case where it only counts, names
or orders them; records travel as :class:`~distcheck.records.case_record.RecordBatch` columns
for the same reason.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Sequence

from distcheck.suites.base import RUN, CaseInfo


class CaseList(Sequence[CaseInfo]):
    """Cases in order (see the module's doc). ``keys``: their id texts; ``decided``: those not
    to run (skipped, xfail, error: a listing's), as objects. Indexing unpickles the cases, once."""

    __slots__ = ("keys", "decided", "_infos", "_blob", "_source")

    def __init__(self, infos: Iterable[CaseInfo] = ()):
        self._infos: tuple[CaseInfo, ...] | None = tuple(infos)
        self._blob: bytes | None = None
        self._source: tuple[CaseList, tuple[int, ...]] | None = None
        self.keys: tuple[str, ...] = tuple(info.key for info in self._infos)
        self.decided: tuple[CaseInfo, ...] = tuple(info for info in self._infos if info.status != RUN)

    @classmethod
    def of(cls, cases: Sequence[CaseInfo]) -> CaseList:
        return cases if isinstance(cases, CaseList) else cls(cases)

    @classmethod
    def _load(cls, keys: tuple[str, ...], decided: tuple[CaseInfo, ...], blob: bytes) -> CaseList:
        cases = object.__new__(cls)
        cases.keys, cases.decided, cases._blob, cases._infos, cases._source = keys, decided, blob, None, None
        return cases

    def __reduce__(self):
        if self._blob is None:
            self._blob = pickle.dumps(self.infos, protocol=pickle.HIGHEST_PROTOCOL)
        return CaseList._load, (self.keys, self.decided, self._blob)

    def take(self, indices: Sequence[int]) -> CaseList:
        """The cases at ``indices``, in that order (unpickled from this list when first read)."""
        cases = object.__new__(CaseList)
        cases.keys = tuple(self.keys[k] for k in indices)
        chosen = set(cases.keys) if self.decided else ()
        cases.decided = tuple(info for info in self.decided if info.key in chosen)
        cases._blob, cases._infos, cases._source = None, None, (self, tuple(indices))
        return cases

    @property
    def infos(self) -> tuple[CaseInfo, ...]:
        if self._infos is None:
            if self._source is not None:
                parent, indices = self._source
                every = parent.infos
                self._infos = tuple(every[k] for k in indices)
            else:
                self._infos = pickle.loads(self._blob)
        return self._infos

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index):
        return self.infos[index]

    def __iter__(self):
        return iter(self.infos)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # a sequence that compares by its contents

    def __repr__(self) -> str:
        return f"CaseList({list(self.keys)!r})"
