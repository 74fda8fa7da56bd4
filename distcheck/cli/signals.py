"""SIGINT and SIGTERM during a run: the first stops it, a second exits at once, leaving none of
the processes this one started behind (found through /proc)."""

from __future__ import annotations

import os
import signal
import sys
import threading

from distcheck.records.listener import Listener


class StopOnSignal(Listener):
    """SIGINT and SIGTERM stop the run (``stop`` is set; a serial run's case is interrupted,
    and only a case: the signal may come while the report is written); a second one exits at
    once (the streamed records are intact: each line is flushed whole). A listener of the run:
    when it starts, the handlers are set again (``ray.init`` replaces the SIGTERM handler).

    The signals are acted on in a thread of their own, woken by Python's wakeup file
    descriptor the moment one arrives, not when the main thread next runs Python: a Ray
    dispatch waits in Ray's ``wait``, which lets Python handle SIGINT at once but SIGTERM only
    when it returns. The main thread's handler only interrupts a serial run's case."""

    def __init__(self, serial: bool):
        self.serial = serial
        self.stop = threading.Event()
        self.signum: int | None = None
        self._previous: dict[int, object] = {}
        self._started: list[int] = []
        self._wakeup: tuple[int, int] | None = None  # the pipe the watcher reads
        self._previous_wakeup = -1

    @property
    def name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
            read, write = os.pipe()
            os.set_blocking(write, False)
            self._wakeup = read, write
            self._previous_wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
            threading.Thread(target=self._watch, args=(read,), name="distcheck-signals", daemon=True).start()
        return self

    def started(self, result) -> None:
        if self._previous and threading.current_thread() is threading.main_thread():
            for signum in self._previous:
                signal.signal(signum, self._handle)
            signal.set_wakeup_fd(self._wakeup[1], warn_on_full_buffer=False)

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            os.close(self._wakeup[1])  # the watcher reads the end of the pipe and ends

    def _watch(self, read: int) -> None:
        """Act on each SIGINT and SIGTERM as its byte arrives (other signals' are ignored)."""
        try:
            while data := os.read(read, 64):
                for signum in data:
                    if signum in self._previous:
                        self._act(signum)
        finally:
            os.close(read)

    def _act(self, signum: int) -> None:
        """The first signal stops the run; a second exits at once (only the watcher calls this)."""
        if self.signum is not None:
            kill(self._started)
            os._exit(128 + signum)
        self._started = descendants(os.getpid())  # now, before Ray's shutdown orphans some of them
        self.signum = signum
        self.stop.set()
        print(
            f"\ndistcheck: {self.name}: stopping (cancelling the running cases, writing the partial report); "
            "press Ctrl-C again to exit at once",
            file=sys.stderr,
            flush=True,
        )

    def _handle(self, signum: int, frame) -> None:
        from distcheck.runner.protocols import Interrupted

        if self.serial and _in_serial_dispatch(frame):
            self.stop.wait(1.0)  # the watcher's record of it (what the run's result says stopped it)
            raise Interrupted


def _in_serial_dispatch(frame) -> bool:
    """Whether ``frame`` (where a signal interrupted this thread) is inside the serial dispatcher."""
    from distcheck.runner.serial import SerialDispatcher

    while frame is not None:
        if frame.f_code is SerialDispatcher.run.__code__:
            return True
        frame = frame.f_back
    return False


def kill(pids: list[int]) -> None:
    """SIGKILL ``pids``: the processes this one started, and theirs, when the first signal came
    (a local Ray: GCS, raylet, its agents and workers; a joined cluster's are not ours), so that
    exiting at once leaves none behind. A forked child kills them while this process exits:
    Ray's core worker ends its process with status 1 the moment its raylet dies."""
    if pids and os.fork() == 0:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)


def descendants(root: int) -> list[int]:
    """The processes ``root`` started, and theirs (found through /proc: Linux; else none)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
