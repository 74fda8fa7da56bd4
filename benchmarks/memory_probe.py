"""How much memory one piece of a run takes in the process that runs it: the runner's probe
hook (:mod:`distcheck.case.probe`) for ``benchmarks/bench_split.py --whole-suite``, which sets
``$DISTCHECK_PROBE`` to :data:`SPEC` and ``$DISTCHECK_MEMORY_PROBE`` to a folder.

Each piece — a case a runner checks whole (from its rebuild to its verdict or its
split request), a split case on its coordinator (from its rebuild to its verdict: everything
but the chunks and block jobs), a chunk or a block job a runner runs — appends a JSON line to
``<folder>/<pid>.jsonl``: its kind, what it was, the bytes of the case's inputs, and two
measures of the process's memory, before the piece and at its peak while it ran:

- ``private_before`` / ``private_peak``: private memory (``RssAnon``: what the process itself
  allocated), sampled every :data:`SAMPLE_EVERY` seconds by a thread of the probe, and at the
  piece's end;
- ``before`` / ``peak``: resident memory (``VmRSS``, and the kernel's exact peak mark
  ``VmHWM``), which also counts every page of the object store the piece read (Ray's shared
  memory: the cluster's, mapped into the process; a page read stays counted until the object is
  deleted) and code run for the first time.

Each line also gives ``cpu``: the CPU seconds of the piece's own thread while it ran.

Before a piece, the heap's free memory goes back to the system (``malloc_trim``) and the peak
marks are reset, so that a piece's peak is its own: memory the allocator kept from an earlier
piece cannot hide it. In a process running several pieces at once (the coordinator's threads)
the marks are reset only when no other piece runs, so a piece's peak may include another's,
never less than its own. Unset, a piece costs one environment lookup.

The sampler costs its process CPU: each sample takes the GIL from the piece's thread. It reads
``/proc/self/statm`` through a descriptor kept open (resident minus shared pages: ``RssAnon``,
without parsing ``status``), and it sleeps while every running piece is :func:`waiting` (a
coordinator waiting for its chunks' results: most of a split case's time), taking one sample
as the wait ends, so that what the process held then still counts.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

ENV = "DISTCHECK_MEMORY_PROBE"  # the folder the pieces' lines go to
SPEC = "benchmarks.memory_probe:PROBE"  # $DISTCHECK_PROBE
SAMPLE_EVERY = 0.001  # seconds: touching 64 MB of new pages takes ~10 ms, so no such peak is missed

_lock = threading.Lock()
_running = 0  # pieces running in this process
_waiting = 0  # of those, the ones in a wait (see waiting)
_private_peak = 0
_samples = 0  # taken by the sampler thread, for the tests
_wake = threading.Event()
_here = threading.local()  # pieces: the pieces running in this thread


@dataclass
class Piece:
    """What a probed piece says of itself while it runs: its case's inputs, once known."""

    enabled: bool = False  # the probe is on
    inputs: int = 0

    def inputs_of(self, value) -> None:
        """Count the arrays in ``value`` as the case's inputs, when the probe is on (the count
        walks them)."""
        if self.enabled:
            self.inputs = size_of(value)


def _status() -> dict[str, int]:
    """``VmRSS``, ``VmHWM`` and ``RssAnon`` of this process, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) * 1024
    return out


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE")
_statm: tuple[int, int] | None = None  # (pid, descriptor): a forked child opens its own


def _private() -> int:
    """``RssAnon`` in bytes, cheaply: resident minus shared pages of ``/proc/self/statm``."""
    global _statm
    pid = os.getpid()
    if _statm is None or _statm[0] != pid:
        _statm = (pid, os.open("/proc/self/statm", os.O_RDONLY))
    fields = os.pread(_statm[1], 256, 0).split()
    return (int(fields[1]) - int(fields[2])) * _PAGE


def _trim() -> None:
    trim = _libc()
    if trim is not None:  # elsewhere a piece's growth may be hidden by memory freed before it
        trim(0)


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _sample() -> None:
    """The sampler thread's loop: the private peak, while a piece runs and does not wait."""
    global _private_peak, _samples
    while True:
        _wake.wait()
        with _lock:
            if _running > _waiting:
                _private_peak = max(_private_peak, _private())
                _samples += 1
            else:
                _wake.clear()  # under the lock: a piece that starts, or ends its wait, sets it again
        time.sleep(SAMPLE_EVERY)


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """The ``with`` body, in a running piece, only waits (for another process's results): it
    allocates nothing worth sampling, so while every running piece waits the sampler sleeps.
    Memory the process holds as the wait ends is sampled then. Off, or outside a piece of this
    thread: nothing."""
    global _waiting, _private_peak
    if not getattr(_here, "pieces", 0):
        yield
        return
    with _lock:
        _waiting += 1
    try:
        yield
    finally:
        with _lock:
            _waiting -= 1
            _private_peak = max(_private_peak, _private())
            _wake.set()


@functools.cache
def _sampler() -> threading.Thread:
    thread = threading.Thread(target=_sample, name="distcheck-memory-probe", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def probe(kind: str, what: str) -> Iterator[Piece]:
    """Measure the ``with`` body as one piece (see the module); yields its :class:`Piece`."""
    folder = os.environ.get(ENV)
    piece = Piece(enabled=bool(folder))
    if not folder:
        yield piece
        return
    global _running, _private_peak
    _sampler()
    with _lock:
        _trim()
        status = _status()
        if _running == 0:
            _reset_peak()
            _private_peak = status["RssAnon"]
        _running += 1
        before, private_before = status["VmRSS"], status["RssAnon"]
        _wake.set()
    cpu_before = time.thread_time()
    _here.pieces = getattr(_here, "pieces", 0) + 1
    try:
        yield piece
    finally:
        _here.pieces -= 1
        cpu = time.thread_time() - cpu_before
        with _lock:
            status = _status()
            _private_peak = max(_private_peak, status["RssAnon"])
            line = {
                "kind": kind,
                "what": what,
                "inputs": piece.inputs,
                "before": before,
                "peak": status["VmHWM"],
                "private_before": private_before,
                "private_peak": _private_peak,
                "cpu": round(cpu, 6),
            }
            _running -= 1
        with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")


def size_of(value, seen: set[int] | None = None) -> int:
    """Bytes of the arrays and tensors in ``value`` (nested in tuples, lists and dicts), each
    object counted once."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, (tuple, list)):
        return sum(size_of(v, seen) for v in value)
    if isinstance(value, dict):
        return sum(size_of(v, seen) for v in value.values())
    nbytes = getattr(value, "nbytes", None)  # numpy, torch, JAX arrays
    return nbytes if isinstance(nbytes, int) else 0


def read(folder: str) -> list[dict]:
    """Every piece's line written under ``folder``, with its ``pid``."""
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".jsonl"):
            with open(os.path.join(folder, name)) as f:
                out.extend({**json.loads(line), "pid": int(name[:-6])} for line in f if line.strip())
    return out


class MemoryProbe:
    """The runner's probe (:class:`distcheck.case.probe.Probe`): :func:`probe` and :func:`waiting`."""

    piece = staticmethod(probe)
    waiting = staticmethod(waiting)


PROBE = MemoryProbe()
