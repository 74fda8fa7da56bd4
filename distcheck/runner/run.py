"""A run: enumerate a suite's work, dispatch it (serially or on Ray), collect a record per case
and hand them to a listener (progress, run folder, reports). Groups are listed where their cases
run; a suite without groups, a ``max_cases`` run and a resumed one are enumerated case by case
on the driver. Bad cases are held for reruns (:mod:`.reruns`); ``stop`` (or
:class:`Interrupted` raised into a case in this thread) ends the run early, incomplete.
"""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections.abc import Iterable, Iterator

from distcheck.gpus import check_gpus_per_runner, check_local
from distcheck.records.case_record import CaseRecord
from distcheck.records.listener import Listener
from distcheck.records.result import RunResult
from distcheck.runner.collector import Collector
from distcheck.runner.options import RunConfig, RunOptions
from distcheck.runner.protocols import Dispatcher, Interrupted
from distcheck.runner.reruns import rerun
from distcheck.storage.blocks import BlockStore
from distcheck.suites.base import (
    CaseInfo,
    GroupInfo,
    Selection,
    Suite,
    UsageError,
    enumerate_cases,
    expected_to_fail,
    is_grouped,
)


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


def make_dispatcher(suite: Suite, options: RunOptions) -> Dispatcher:
    """The run's dispatcher. UsageError if the suite's device is not there: a GPU this machine
    lacks (serial, at once), or the Ray cluster (when the dispatcher first counts its workers,
    before any case runs), or an unknown policy."""
    if options.serial:
        from distcheck.runner.serial import SerialDispatcher

        check_local(getattr(suite, "device", "cpu"))
        return SerialDispatcher()
    from distcheck.runner.dispatch import RayDispatcher

    check_gpus_per_runner(options.gpus_per_runner)
    return RayDispatcher(suite, options)


def run_suite(
    suite: Suite,
    selection: Selection,
    options: RunOptions | None = None,
    listener: Listener | None = None,
    *,
    recorded: Iterable[CaseRecord] = (),
    stop: threading.Event | None = None,
    blocks: BlockStore | None = None,
) -> RunResult:
    """Run the selected cases of ``suite``; a record per case, in enumeration order.
    ``recorded``: records of an interrupted run of the same cases (not run again); ``stop``:
    set it (from another thread, a signal handler) to end the run early, incomplete;
    ``blocks``: where the failure blocks of the cases go (None: dropped).

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
    dispatcher = make_dispatcher(suite, options)
    if stop is not None:
        dispatcher.stop = stop
    config = RunConfig(options, suite, selection, dispatcher.workers, blocks=blocks)
    result = RunResult(suite.name, suite.mode, dispatcher.name, config.workers)
    result.device, result.placement = config.device, dispatcher.placement
    listener.started(result)
    collector = Collector(listener, recorded, hold=options.reruns > 0, expected=expected_to_fail(suite))
    everything = itertools.chain([first], items)
    # What is alive now (the suite's database, the libraries) stays alive during the run: out of
    # the garbage collector's sight, full collections do not go over it again and again.
    gc.freeze()
    try:
        dispatcher.run(config, collector.enumerate(everything), collector)
        rerun(dispatcher, config, collector)
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
