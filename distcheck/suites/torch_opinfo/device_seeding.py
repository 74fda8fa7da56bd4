"""Cheaper ``torch.manual_seed`` on machines without CUDA, XPU or MTIA devices.

``torch.manual_seed`` also seeds every accelerator backend. A backend that is not initialized
queues the seed for its lazy initialization, together with ``traceback.format_stack()`` of the
call (to report where the seed came from if that initialization ever fails). Formatting the
stack reads every frame's source line (an ``os.stat`` per frame), so its cost grows with the
depth of the call stack: in a Ray worker, checking an op whose OpInfo reseeds on every call
(dropout, fractional max pooling, scaled dot-product attention...) spent most of its time
there, and every case pays it once more when its RNGs are seeded before the check.

On a backend that is not available, that initialization can never happen. For those backends
only, the queued seed keeps a one-line note instead of the formatted stack; the seed itself is
queued exactly as before, and CPU seeding is untouched, so no number changes. Backends that are
available are left alone.
"""

from __future__ import annotations

import importlib
import threading
import traceback

NOTE = "  (call stack not recorded: distcheck skips it for accelerator backends this machine does not have)\n"
_BACKENDS = ("torch.cuda", "torch.xpu", "torch.mtia")
_lock = threading.Lock()
_done = False


class _StacklessTraceback:
    """Stands in for the ``traceback`` module inside an unavailable backend's module:
    ``format_stack`` returns the note; everything else is the real module's."""

    @staticmethod
    def format_stack(*args, **kwargs) -> list[str]:
        return [NOTE]

    def __getattr__(self, name: str):
        return getattr(traceback, name)


def skip_stacks_of_unavailable_backends() -> list[str]:
    """Apply the above once per process; the backends it applied to."""
    global _done
    applied = []
    with _lock:
        if _done:
            return applied
        _done = True
        for name in _BACKENDS:
            try:
                module = importlib.import_module(name)
                if module.is_available() or getattr(module, "traceback", None) is not traceback:
                    continue
            except Exception:  # a torch without this backend, or whose layout differs: leave it
                continue
            module.traceback = _StacklessTraceback()
            applied.append(name)
    return applied
