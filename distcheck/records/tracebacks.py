"""What a record keeps of an error's traceback: a bounded text that still shows where the
user's code raised (:func:`traceback_of`)."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import traceback

TRACEBACK_LINES, TRACEBACK_CHARS = 40, 8000  # what a record keeps of a traceback
USERS_FRAMES = 2  # of the user's frames kept before the end of a traceback that has none of them
LIBRARIES = ("torch", "numpy", "jax", "jaxlib", "tensorplay", "ray")  # their frames are not the user's
_FRAME = re.compile(r'^\s*File "([^"]*)", line \d+')


def traceback_of(error: BaseException) -> str:
    """The traceback of ``error`` as Python prints it (its chained errors, and the traceback of
    a worker where it was raised: a note), bounded to :data:`TRACEBACK_LINES` lines and
    :data:`TRACEBACK_CHARS` characters: its end — the innermost frames and the error itself —
    after a line that says how many were cut; and, where the end holds none of the user's
    frames (a deep stack in a library the user's function called), the user's innermost
    :data:`USERS_FRAMES` frames before it. distcheck's frames on the way to the user's call
    are what is cut first."""
    text = "".join(traceback.format_exception(error)).rstrip("\n")
    lines = text.split("\n")
    if len(lines) <= TRACEBACK_LINES and len(text) <= TRACEBACK_CHARS:
        return text
    start = _end(lines, TRACEBACK_LINES, TRACEBACK_CHARS)
    is_users = _Users()
    users = [] if any(map(is_users, lines[start:])) else is_users.frames(lines[:start])
    if users:
        start = max(start, _end(lines, TRACEBACK_LINES - len(users) - 1, TRACEBACK_CHARS - len("\n".join(users))))
        users.append("  …")
    end = lines[start:]
    if len(end[0]) > TRACEBACK_CHARS:  # one line longer than the bound (a tensor in the message): its end
        end[0] = "…" + end[0][len(end[0]) - TRACEBACK_CHARS + 1 :]
    kept = len(users) + len(end)
    return "\n".join([f"… ({len(lines) - kept} of {len(lines)} lines cut: {kept} kept)", *users, *end])


def _end(lines: list[str], most: int, chars: int) -> int:
    """Where the longest end of ``lines`` of at most ``most`` lines and ``chars`` characters
    starts (the last line at least)."""
    start, size = len(lines) - 1, len(lines[-1])
    while start > max(0, len(lines) - most) and size + len(lines[start - 1]) + 1 <= chars:
        start -= 1
        size += len(lines[start]) + 1
    return start


class _Users:
    """Tells the frames of the user's code: not distcheck's, not Python's own (its standard
    library, frozen or generated code), not one of :data:`LIBRARIES` (those imported)."""

    def __init__(self):
        folders = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # distcheck
        folders += [os.path.dirname(sys.modules[name].__file__) for name in LIBRARIES if _imported(name)]
        self.libraries = tuple(os.path.join(folder, "") for folder in folders)
        self.python = os.path.join(sysconfig.get_paths()["stdlib"], "")

    def __call__(self, line: str) -> bool:
        """Whether ``line`` starts a frame of the user's code."""
        found = _FRAME.match(line)
        if found is None:
            return False
        path = found.group(1)
        python = path.startswith(self.python) and "site-packages" not in path
        return not (python or path.startswith("<") or path.startswith(self.libraries))

    def frames(self, lines: list[str]) -> list[str]:
        """The lines of the user's innermost :data:`USERS_FRAMES` frames in ``lines`` (each its
        ``File`` line and its source line)."""
        starts = [k for k, line in enumerate(lines) if _FRAME.match(line)]
        frames = [lines[a:b] for a, b in zip(starts, [*starts[1:], len(lines)])]
        kept = [frame[: 1 + (len(frame) > 1 and frame[1].startswith("    "))] for frame in frames if self(frame[0])]
        return [line for frame in kept[-USERS_FRAMES:] for line in frame]


def _imported(name: str) -> bool:
    return getattr(sys.modules.get(name), "__file__", None) is not None
