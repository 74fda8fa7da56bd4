"""Whether a file or folder can be written, checked before any case runs, so that a bad output
path fails at once with one line, instead of after an hour of verdicts that then cannot be
written. A place in an object store (a URL) is checked by writing an object there and removing
it: a missing bucket, missing credentials or a store out of reach fail here, before Ray starts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from distcheck.storage import location
from distcheck.suites.base import UsageError


def check_writable(path: str | os.PathLike, what: str) -> None:
    """UsageError unless a file can be written at ``path`` (a local path, or a store's URL)."""
    if location.is_url(os.fspath(path)):
        location.check_folder_writable(os.fspath(path).rsplit("/", 1)[0], what, os.fspath(path))
        return
    path = Path(location.local_path(path))
    parent = path.parent
    if path.is_dir():
        raise UsageError(f"cannot write the {what} to {path}: it is a folder")
    if not parent.is_dir():
        raise UsageError(f"cannot write the {what} to {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"cannot write the {what} to {path}: permission denied")
    refused = None if path.exists() else _refusal(parent, tempfile.mkstemp)
    if refused:
        raise UsageError(f"cannot write the {what} to {path}: {parent} takes no new file ({refused})")


def check_creatable(folder: str | os.PathLike, what: str) -> None:
    """UsageError unless the folder ``folder`` exists or can be made (its first existing
    ancestor is a folder that takes new folders); in a store (a URL), unless it takes objects."""
    if location.is_url(os.fspath(folder)):
        location.check_folder_writable(os.fspath(folder).rstrip("/"), what)
        return
    folder = Path(location.local_path(folder))
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"cannot create the {what} {folder}: {existing} is not a folder")
    refused = None if existing == folder else _refusal(existing, tempfile.mkdtemp)
    if refused:
        raise UsageError(f"cannot create the {what} {folder}: {existing} takes no new folder ({refused})")


def _refusal(folder: Path, make) -> str | None:
    """Why ``make`` (``tempfile.mkstemp`` or ``mkdtemp``) cannot make an entry in ``folder``,
    or None once it made one and removed it: permissions do not tell (root may write to /proc,
    where nothing can be made)."""
    try:
        made = make(prefix=".distcheck-probe-", dir=folder)
    except OSError as e:
        return e.strerror or type(e).__name__
    if isinstance(made, tuple):  # mkstemp: an open file
        os.close(made[0])
        os.unlink(made[1])
    else:
        os.rmdir(made)
    return None
