"""How a run runs: :class:`RunOptions`, what the command line (or a caller) asks for, and
:class:`RunConfig`, the run as its parts read it, frozen once it knows its suite and workers:
the dispatcher, the runners on the workers, the split cases' coordinators and the work policy
all read the one object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from distcheck.case.budget import Budget, default_max_jacobian_mb
from distcheck.gpus import is_cuda
from distcheck.storage.blocks import BlockStore
from distcheck.storage.durations import Durations
from distcheck.suites.base import Selection, Suite, UsageError

DEFAULT = "default"  # the default policy's name (see :mod:`.policy`)
REPORT_EVERY = 4.0  # seconds of work a runner gathers before it reports (the run folder is flushed as often)
# options a resume takes from the run folder; where to run (serial, address) may change
RECORDED = ("timeout", "max_jacobian_mb", "max_cases", "split_seconds", "split_max_mb", "policy", "batch_size")
RECORDED += ("reruns", "gpus_per_runner", "vectorize")


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``serial`` in this process, else on Ray (``address``: see ``ensure_ray``);
    ``timeout`` per case in seconds (None: none); ``max_jacobian_mb``: a slow-mode case's memory
    budget (None: a quarter of the RAM); ``max_cases``: the first N cases only; on Ray, a case
    estimated above ``split_seconds`` of work runs in Jacobian chunks over every worker if its
    Jacobians take at most ``split_max_mb``; ``policy``: on Ray, the work's order (a name or
    ``MODULE:CLASS``, :mod:`.policy`); ``batch_size``: cases per batch (None: the policy's);
    ``durations``: a previous run's seconds per case, longest first; ``reruns``: runs of a bad
    case after the first (:mod:`.reruns`); ``gpus_per_runner``: on a GPU suite, each runner's
    and chunk's GPUs (:mod:`distcheck.gpus`); ``block_mb``: the most Jacobian megabytes a process
    holds for a comparison (None: ``$DISTCHECK_BLOCK_MB`` where the case runs, else 64);
    ``vectorize``: the checks' ``vectorize=`` (False: element by element, as torch)."""

    serial: bool = False
    address: str | None = None
    timeout: float | None = 600.0
    max_jacobian_mb: float | None = None
    max_cases: int | None = None
    split_seconds: float = 4.0
    split_max_mb: float = 256.0
    policy: str = DEFAULT
    batch_size: int | None = None
    durations: Durations | None = None
    reruns: int = 0
    gpus_per_runner: float = 1.0
    block_mb: float | None = None
    vectorize: bool = True

    def __post_init__(self) -> None:
        for name in ("timeout", "max_jacobian_mb", "max_cases", "batch_size", "reruns", "block_mb"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"RunOptions.{name} must not be negative, got {value!r}")
        if self.serial and self.address is not None:
            raise UsageError(f"RunOptions: serial=True runs in this process, address={self.address!r} names a cluster")

    @classmethod
    def recorded(cls, options: Mapping[str, Any], **where: Any) -> RunOptions:
        """The options a run folder recorded (its RunStart line's), with where to run
        (``serial``, ``address``) as given."""
        return cls(**{k: v for k, v in options.items() if k in RECORDED}, **where)

    def budget(self, split: bool, device: str = "cpu") -> Budget:
        """The cases' budget; on a GPU without ``max_jacobian_mb``, the device's memory decides
        where the case runs (see :meth:`Budget.on_device`)."""
        max_mb = default_max_jacobian_mb() if self.max_jacobian_mb is None else self.max_jacobian_mb
        block = None if self.block_mb is None else self.block_mb * 2**20
        on_device = self.max_jacobian_mb is None and device != "cpu"
        if not split:
            return Budget(max_mb * 2**20, device_memory=on_device, block_bytes=block)
        return Budget(max_mb * 2**20, self.split_seconds, self.split_max_mb * 2**20, on_device, block_bytes=block)


@dataclass(frozen=True)
class RunConfig:
    """A run as its parts read it: its ``options``, ``suite``, ``selection``, the ``workers``
    that run it, the ``attempt`` it dispatches (0: the first; a rerun's in fresh worker
    processes) and where the failure blocks of its cases go (``blocks``; None: dropped). A work
    policy is made of it (its ``mode``, ``workers``, ``durations``, ``batch_size``)."""

    options: RunOptions
    suite: Suite
    selection: Selection
    workers: int = 1
    attempt: int = 0
    blocks: BlockStore | None = None

    @property
    def mode(self) -> str:
        return self.suite.mode

    @property
    def device(self) -> str:
        return getattr(self.suite, "device", "cpu")

    @property
    def durations(self) -> Durations | None:
        return self.options.durations

    @property
    def batch_size(self) -> int | None:
        return self.options.batch_size

    @property
    def timeout(self) -> float | None:
        return self.options.timeout

    @property
    def vectorize(self) -> bool:
        return self.options.vectorize

    @cached_property
    def budget(self) -> Budget:
        """A case's budget where it lands (on Ray, long cases split)."""
        return self.options.budget(split=not self.options.serial, device=self.device)

    @property
    def split_budget(self) -> Budget:
        """A split case's budget on its coordinator: the memory budget alone (never split again)."""
        return Budget(self.budget.max_bytes, block_bytes=self.budget.block_bytes)

    @property
    def splits(self) -> bool:
        """Whether cases may split: a slow-mode run on Ray (fast-mode cases hold no Jacobian)."""
        return self.mode == "slow" and self.budget.split_seconds is not None

    @property
    def report_every(self) -> float:
        """Seconds between a runner's reports: a timed-out case is found within a quarter of
        the timeout of its last report."""
        timeout = self.options.timeout
        return min(REPORT_EVERY, timeout / 4) if timeout else REPORT_EVERY

    @property
    def keeps_blocks(self) -> bool:
        return self.blocks is not None

    def store(self, blocks: dict[str, bytes]) -> None:
        """Failure blocks the records name (file name: its bytes), into the run's block store."""
        if self.blocks is not None:
            for name, data in blocks.items():
                self.blocks.write(name, data)

    @property
    def gpus_per_runner(self) -> float | None:
        """The GPUs a runner asks Ray for (None: the suite runs on CPUs)."""
        return self.options.gpus_per_runner if is_cuda(self.device) else None
