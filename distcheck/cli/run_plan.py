"""A run ready to start: its suite, selection, options and open run folder. For a resumed run all
of it but where it runs is read back from the folder (see :mod:`distcheck.storage.run_folder`)."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from distcheck.gpus import check_local, check_ray_device
from distcheck.records.case_record import CaseRecord
from distcheck.runner.options import RunOptions
from distcheck.storage.run_folder import (
    RunWriter,
    check_new_folder,
    check_resumable,
    default_folder,
    read_run,
    run_start,
)
from distcheck.suites import Selection, get_suite
from distcheck.suites.base import Suite, UsageError

CONNECT_TIMEOUT = 10.0  # seconds to reach a cluster's head (a firewalled host never answers)


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
    options = RunOptions.recorded(recorded, serial=serial, address=address)
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


def host_port(address: str) -> tuple[str, int] | None:
    """The head's host and port in a cluster address (``host:port`` or ``ray://host:port``);
    None for addresses Ray resolves itself (``auto``, ``local``)."""
    text = address.removeprefix("ray://")
    if text in ("auto", "local"):
        return None
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise UsageError(f"bad Ray address {address!r}: expected host:port, ray://host:port or auto")
    return host.strip("[]"), int(port)


def check_reachable(address: str | None, timeout: float = CONNECT_TIMEOUT) -> None:
    """UsageError (within ``timeout`` seconds) unless something listens at the head of the
    cluster ``address`` names (None: ``$DISTCHECK_RAY_ADDRESS`` or ``$RAY_ADDRESS`` if set, see
    ``ensure_ray``). Ray itself retries for minutes, logging time-outs."""
    from distcheck.executors.ray_executor import resolve_address

    address = resolve_address(address)
    where = None if address is None else host_port(address)
    if where is None:
        return
    try:
        with socket.create_connection(where, timeout=timeout):
            pass
    except OSError as e:
        reason = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise UsageError(
            f"cannot reach the Ray cluster at {address!r} ({reason}): check that it is running "
            f"(`ray status --address {address}` on its head) and that this machine can reach that host and port"
        ) from None
