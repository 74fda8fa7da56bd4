"""One local Ray for a group of processes, started when the first of them needs it.

A serving process (the pytest plugin's xdist controller) makes a folder and serves it with
:class:`SessionRay`; the processes it starts (the xdist workers) are given the folder in
``$DISTCHECK_RAY_SESSION``. A process that then sends a check to Ray without an address
(:func:`request_address`, called where the Ray executor would start a local Ray) asks for the
session's Ray: it leaves a request in the folder and waits for the address. The server's
thread starts the local Ray at the first request and answers every one with its address, so
all the processes join one Ray, and a session whose checks all run in-process starts none
(starting one costs seconds of CPU on the cores the tests run on).

The Ray is started in the serving thread, which lives until :meth:`SessionRay.stop`: Ray's
processes end with the thread that started them. Nothing here imports Ray; the server is
given the function that starts it.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable

SESSION_VARIABLE = "DISTCHECK_RAY_SESSION"
START_TIMEOUT = 300.0  # seconds a process waits for the session's Ray to start
_POLL = 0.05  # seconds between looks at the folder (a stat: nothing on the cores)
_REQUEST, _ADDRESS, _ERROR = "request", "address", "error"


def _write(path: str, text: str) -> None:
    """Write ``text`` so that a reader sees all of it or no file (rename is atomic)."""
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)


class _NotMainThread(logging.Filter):
    """Ray warns that a Ray started outside the main thread sets no SIGTERM handler: the
    serving process keeps its own, which is what it wants."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "not the main thread" not in record.getMessage()


class SessionRay:
    """Serves a folder: the first request starts a local Ray with ``start`` (a function that
    starts it in the calling thread and returns its address); every request gets that address,
    or the error that stopped the start. :meth:`stop` shuts it down with ``shutdown``."""

    def __init__(self, start: Callable[[], str], shutdown: Callable[[], None]):
        self.folder = tempfile.mkdtemp(prefix="distcheck-ray-")
        self._start, self._shutdown = start, shutdown
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="distcheck-session-ray", daemon=True)
        self.address: str | None = None
        self._thread.start()

    def _serve(self) -> None:
        request = os.path.join(self.folder, _REQUEST)
        while not os.path.exists(request):
            if self._stopping.wait(_POLL):
                return
        ray_logger = logging.getLogger("ray._private.worker")
        quiet = _NotMainThread()
        ray_logger.addFilter(quiet)
        try:
            self.address = self._start()
        except Exception as e:  # the requests get the reason, not a wait for nothing
            _write(os.path.join(self.folder, _ERROR), f"{type(e).__name__}: {e}")
            return
        finally:
            ray_logger.removeFilter(quiet)
        _write(os.path.join(self.folder, _ADDRESS), self.address)
        self._stopping.wait()  # Ray's processes live as long as this thread

    @property
    def started(self) -> bool:
        return self.address is not None

    def stop(self) -> None:
        """Shut the session's Ray down (if a request started it) and remove the folder."""
        if self.started:
            self._shutdown()
        self._stopping.set()
        self._thread.join(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def session_folder() -> str | None:
    """The folder of the session's Ray this process may ask for (``$DISTCHECK_RAY_SESSION``)."""
    return os.environ.get(SESSION_VARIABLE, "").strip() or None


def request_address(folder: str, timeout: float = START_TIMEOUT) -> str:
    """The address of the session's Ray served at ``folder``, started for this request if no
    other process asked first. Raises RuntimeError if it could not start, TimeoutError if no
    answer came within ``timeout`` seconds (the serving process is gone)."""
    if not os.path.isdir(folder):
        raise RuntimeError(f"the session's Ray is not served any more (${SESSION_VARIABLE}={folder} is gone)")
    open(os.path.join(folder, _REQUEST), "a").close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in (_ADDRESS, _ERROR):
            try:
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            if name == _ADDRESS:
                return text
            raise RuntimeError(f"the session's local Ray could not start: {text}")
        time.sleep(_POLL)
    raise TimeoutError(f"no answer from the session's Ray at {folder} within {timeout:.0f} s")
