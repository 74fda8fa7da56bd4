"""A run ready to start: its suite, selection, options and open run folder. For a resumed run all
of it but where it runs is read back from the folder (see ``runner.store``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from distcheck.runner.gpus import check_local, check_ray_device
from distcheck.runner.options import RunOptions
from distcheck.runner.preflight import check_reachable
from distcheck.runner.records import CaseRecord
from distcheck.runner.store import RunWriter, check_new_folder, check_resumable, default_folder, read_run, run_start
from distcheck.suites import Selection, get_suite
from distcheck.suites.base import Suite


@dataclasses.dataclass
class RunPlan:
    """A run, ready to start: everything checked, its folder open for writing."""

    suite: Suite
    selection: Selection
    options: RunOptions
    folder: str | Path  # a local path, or a store's URL
    writer: RunWriter
    recorded: list[CaseRecord]  # the cases already recorded (a resumed run does not run them again)
    command: list[str]  # the command that started the run
    start: dict[str, Any]  # the run's RunStart line (a resumed run's as recorded)


def plan_new(
    suite: Suite,
    spec: str,
    mode: str,
    selection: Selection,
    options: RunOptions,
    out: str | None,
    command: list[str],
    suite_options: Mapping[str, Any] | None = None,
) -> RunPlan:
    """A new run of ``suite`` (loaded from ``spec`` in ``mode``, made with ``suite_options``
    besides: recorded for a resume), its run folder ``out`` (default: a new one under ``runs/``)
    created with the run's start written (not if the suite's device is missing: a serial run
    checks this machine, a Ray run what it can before joining)."""
    device = getattr(suite, "device", "cpu")
    _check_where(device, options)
    folder = check_new_folder(out or default_folder(spec, mode))
    start = run_start(spec, mode, selection, options, command, (suite.engine,), device, suite_options)
    return RunPlan(suite, selection, options, folder, RunWriter(folder, start), [], command, start)


def plan_resume(
    folder: str | os.PathLike,
    serial: bool,
    address: str | None,
    adapt: Callable[[Suite, Mapping[str, Any]], Suite] | None = None,
) -> RunPlan:
    """The interrupted run in ``folder`` (a path or URL), to be finished: its suite, selection and options as
    recorded; it runs in this process (``serial``), on the cluster at ``address``, or, given
    neither, where it ran. ``adapt`` makes the suite to run of the one found by name and the
    run's recorded ``suite_options`` (``{}`` if none), or refuses it (raising), before anything
    else is checked."""
    log = read_run(folder)
    suite = get_suite(log.start["suite"], log.start["mode"], log.start.get("device", "cpu"))
    if adapt is not None:
        suite = adapt(suite, log.start.get("suite_options", {}))
    check_resumable(log, suite.name)
    recorded = log.start["options"]
    serial = serial or (address is None and bool(recorded.get("serial")))
    address = address if address is not None or serial else recorded.get("address")
    options = log.options(serial=serial, address=address)
    _check_where(getattr(suite, "device", "cpu"), options)
    writer = RunWriter(log.folder, None, {r.id for r in log.records})
    return RunPlan(suite, log.selection, options, log.folder, writer, log.records, log.start["command"], log.start)


def _check_where(device: str, options: RunOptions) -> None:
    """UsageError if the run cannot start where it is to run: this machine lacks the device
    (serial), or the cluster cannot be reached (Ray: whether it has GPUs is known once joined)."""
    if options.serial:
        check_local(device)  # no Ray import: a serial run works where Ray is not installed
        return
    check_ray_device(device)
    check_reachable(options.address)
