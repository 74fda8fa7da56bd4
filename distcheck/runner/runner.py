"""The suite runner: enumerate a suite's work, dispatch it (serially or on Ray), collect a
record per case as it finishes, and hand the records to a listener (progress, reports).

The driver enumerates *groups* (an op in a dtype) from the suite's metadata; the dispatcher has
each group listed where its cases run (a worker) and reports the listing back (the
:class:`Sink`). Cases the suite does not run (skipped, xfail) are recorded as they are
enumerated or listed. A suite without groups (or a run limited to its first N cases) is
enumerated case by case on the driver. Dispatch starts with the first group while later ones
are still being enumerated.

- **Resume.** Cases already recorded (by an interrupted run, read back from its run folder) are
  not dispatched again; their records join the new ones, so that the result has every case once
  (a resumed run is enumerated case by case on the driver, to leave the recorded ones out).
- **Reruns** (``reruns`` N): a case that fails, errors or times out is held back, and after the
  dispatch runs again, up to N times, with the same seeds (cases rebuild deterministically from
  their ids) and in fresh worker processes on Ray (a new worker environment makes Ray start new
  ones); serial reruns run in this process. Passing on a rerun makes it ``flaky``, with every
  attempt in its record.
- **Stop.** Setting the ``stop`` event ends the run early (dispatchers cancel what runs); a
  signal handler may also raise :class:`Interrupted` into a case running in this thread. The
  result is then marked incomplete.
"""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from distcheck.runner.budget import Budget, default_max_jacobian_mb
from distcheck.runner.collector import Collector
from distcheck.runner.durations import Durations
from distcheck.runner.gpus import check_local, check_share, is_cuda
from distcheck.runner.policy import DEFAULT, load_policy
from distcheck.runner.protocols import Dispatcher, Interrupted, Listener
from distcheck.runner.records import CaseRecord
from distcheck.runner.reruns import rerun
from distcheck.runner.result import RunResult
from distcheck.suites.base import CaseInfo, GroupInfo, Selection, Suite, UsageError, enumerate_cases, is_grouped


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``serial`` in this process, else on Ray (``address``: see ``ensure_ray``);
    ``timeout`` per case in seconds (None: none); ``max_jacobian_mb``: memory budget of a
    slow-mode case (None: a quarter of this machine's RAM); ``max_cases``: the first N cases
    only; ``split_seconds``: on Ray, a case estimated above this much work runs in Jacobian
    chunks over every worker, if its Jacobians take at most ``split_max_mb`` (larger ones cost
    mostly whole-Jacobian work that one process does anyway); ``policy``: on Ray, the order of
    the work (a name or ``MODULE:CLASS``, see :mod:`.policy`; a serial run goes in enumeration
    order); ``batch_size``: cases per batch of listed cases (None: the policy's, by mode);
    ``durations``: recorded seconds per case (a previous run's), to dispatch the longest work
    first; ``reruns``: runs of a failing, erroring or timed-out case after the first (see the
    module's docstring); ``gpus_per_runner``: on Ray, the GPUs each runner (and each chunk task
    of a split case) asks for when the suite's device is a GPU (0.25: four runners share a GPU;
    see :mod:`.gpus`)."""

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

    def __post_init__(self) -> None:
        for name in ("timeout", "max_jacobian_mb", "max_cases", "batch_size", "reruns"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"RunOptions.{name} must not be negative, got {value!r}")
        if self.serial and self.address is not None:
            raise UsageError(f"RunOptions: serial=True runs in this process, address={self.address!r} names a cluster")

    def budget(self, split: bool, device: str = "cpu") -> Budget:
        """The cases' budget; on a GPU without ``max_jacobian_mb``, the device's memory decides
        where the case runs (see :meth:`Budget.on_device`)."""
        max_mb = default_max_jacobian_mb() if self.max_jacobian_mb is None else self.max_jacobian_mb
        on_device = self.max_jacobian_mb is None and device != "cpu"
        if not split:
            return Budget(max_mb * 2**20, device_memory=on_device)
        return Budget(max_mb * 2**20, self.split_seconds, self.split_max_mb * 2**20, on_device)


def select(suite: Suite, selection: Selection, max_cases: int | None = None) -> Iterator[CaseInfo]:
    """The suite's selected cases (all listed in this process), the first ``max_cases`` of them
    if given."""
    cases = enumerate_cases(suite, selection) if is_grouped(suite) else suite.cases(selection)
    return cases if max_cases is None else itertools.islice(cases, max_cases)


def work(
    suite: Suite, selection: Selection, max_cases: int | None = None, resumed: bool = False
) -> Iterator[GroupInfo | CaseInfo]:
    """What a run enumerates on the driver: the suite's groups and the cases decided without
    running — or every case, for a suite without groups, the first ``max_cases`` cases, or a
    resumed run."""
    if max_cases is None and not resumed and is_grouped(suite):
        return suite.groups(selection)
    return select(suite, selection, max_cases)


def make_dispatcher(suite: Suite, options: RunOptions, selection: Selection) -> Dispatcher:
    """The run's dispatcher. UsageError if the suite's device is not there: a GPU this machine
    lacks (serial, at once), or the Ray cluster (when the dispatcher first counts its workers,
    before any case runs), or an unknown policy."""
    device = getattr(suite, "device", "cpu")
    if options.serial:
        from distcheck.runner.serial import SerialDispatcher

        check_local(device)
        return SerialDispatcher(suite, options.budget(split=False, device=device), options.timeout, selection)
    from distcheck.runner.ray_dispatch import RayDispatcher, RayDispatchOptions

    check_share(options.gpus_per_runner)
    ray_options = RayDispatchOptions(
        budget=options.budget(split=True, device=device),
        timeout=options.timeout,
        address=options.address,
        policy=load_policy(options.policy),
        batch_size=options.batch_size,
        durations=options.durations,
        gpus_per_runner=options.gpus_per_runner if is_cuda(device) else None,
    )
    return RayDispatcher(suite, selection, ray_options)


def run_suite(
    suite: Suite,
    selection: Selection,
    options: RunOptions | None = None,
    listener: Listener | None = None,
    *,
    recorded: Iterable[CaseRecord] = (),
    stop: threading.Event | None = None,
) -> RunResult:
    """Run the selected cases of ``suite``; a record per case, in enumeration order.
    ``recorded``: records of an interrupted run of the same cases (not run again); ``stop``:
    set it (from another thread, a signal handler) to end the run early, incomplete.

    Raises :class:`~distcheck.suites.base.UsageError` (before running anything) for names
    the suite does not know, or a selection of no case."""
    options = options or RunOptions()
    listener = listener or Listener()
    recorded = list(recorded)
    start = time.perf_counter()
    items = work(suite, selection, options.max_cases, resumed=bool(recorded))
    first = next(items, None)  # unknown names raise here, in this thread
    if first is None:
        raise UsageError("no case matches the selection")
    dispatcher = make_dispatcher(suite, options, selection)
    if stop is not None:
        dispatcher.stop = stop
    result = RunResult(suite.name, suite.mode, dispatcher.name, dispatcher.workers)
    result.device, result.placement = getattr(suite, "device", "cpu"), dispatcher.placement
    listener.started(result)
    collector = Collector(listener, recorded, hold=options.reruns > 0)
    everything = itertools.chain([first], items)
    # What is alive now (the suite's database, the libraries) stays alive during the run: out of
    # the garbage collector's sight, full collections do not go over it again and again.
    gc.freeze()
    try:
        dispatcher.run(collector.enumerate(everything), collector)
        rerun(dispatcher, collector, options.reruns)
    except Interrupted:
        dispatcher.stop.set()
    finally:
        gc.unfreeze()
    result.records = collector.result()
    result.complete = collector.complete
    result.seconds = time.perf_counter() - start
    first_dispatch = dispatcher.first_dispatch
    result.first_dispatch = None if first_dispatch is None else first_dispatch - start
    listener.finished(result)
    return result
