"""A place for a run folder or a report: a local path, or the URL of an object store.

A plain path or a ``file://`` URL is a local file, read and written with Python's own file
functions (nothing else needed). Any other URL (``s3://bucket/runs/x``, ``gs://...``,
``memory://...``) goes through fsspec (``pip install 'distcheck[cloud]'`` brings it and S3's
``s3fs``; another store needs its fsspec package, e.g. ``gcsfs``).

Credentials are the store's own business: s3fs reads ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_ENDPOINT_URL``, ``~/.aws`` or an instance role, gcsfs Google's
application credentials. distcheck never handles them, and refuses a URL that carries them
(``s3://key:secret@bucket``): the URL of a run folder is written into its records and reports.

Every failure of a store (no such bucket, no credentials, access denied, the network) is a
:class:`StoreError`: one line that names the URL, not a traceback from inside a library.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterator
from urllib.parse import urlsplit

from distcheck.suites.base import UsageError

FILE_SCHEME = "file://"
WRITE_PROBE = ".distcheck-write-check"  # written and removed to learn that a folder of a store is writable


class StoreError(UsageError):
    """A store could not be read or written: one line, naming the URL and the store's reason."""


def is_url(target: str) -> bool:
    """``target`` is the URL of a store that is not this machine's disk (``file://`` is)."""
    scheme, sep, _ = str(target).partition("://")
    return bool(sep) and scheme.isidentifier() and scheme != "file"


def local_path(target: str | os.PathLike) -> str:
    """The path of a local target (a path, or a ``file://`` URL)."""
    text = os.fspath(target)
    return text[len(FILE_SCHEME) :] if text.startswith(FILE_SCHEME) else text


def join(base: str | os.PathLike, *names: str) -> str:
    """``base`` with ``names`` under it: a path joined as paths are, a URL with ``/``."""
    text = os.fspath(base)
    if is_url(text):
        return posixpath.join(text.rstrip("/"), *names)
    return os.path.join(text, *names)


def _shown(target: str) -> str:
    """``target`` as a message names it: without the credentials a URL may carry."""
    parts = urlsplit(target)
    if parts.username is None and parts.password is None:
        return target
    return target.replace(parts.netloc, f"...@{parts.hostname}", 1)


def _filesystem(url: str):
    """fsspec's filesystem of ``url`` and the path in it."""
    if _shown(url) != url:
        raise StoreError(
            f"{_shown(url)}: a URL with credentials would be written into the run's records and reports; "
            "give them to the store as usual (environment, its config files) instead"
        )
    try:
        import fsspec
    except ImportError:
        raise StoreError(f"{url}: object stores need fsspec: pip install 'distcheck[cloud]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:  # fsspec names the package a scheme needs
        raise StoreError(f"{url}: {e}") from None


@contextlib.contextmanager
def _reasons(target: str, doing: str) -> Iterator[None]:
    """A store's failure while ``doing`` something with ``target``, as one line."""
    try:
        yield
    except StoreError:
        raise
    except Exception as e:  # a store's library raises its own types (botocore's, aiohttp's) besides OSError
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        if isinstance(e, FileNotFoundError) and target.endswith(reason):  # s3fs's says the path alone
            reason = "no such file or object"
        raise StoreError(f"cannot {doing} {target}: {reason}") from None


def read_bytes(target: str | os.PathLike) -> bytes:
    text = os.fspath(target)
    with _reasons(text, "read"):
        if not is_url(text):
            with open(local_path(text), "rb") as f:
                return f.read()
        fs, path = _filesystem(text)
        return fs.cat_file(path)


def read_text(target: str | os.PathLike) -> str:
    data = read_bytes(target)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StoreError(f"cannot read {os.fspath(target)}: not UTF-8 text ({e.reason})") from None


def write_bytes(target: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` at ``target`` whole: a reader (or a writer killed meanwhile) never sees
    part of it. Locally through a temporary file renamed over the target; an object store's
    put is whole by itself. Folders are made as needed, locally too (a store has none to make)."""
    text = os.fspath(target)
    with _reasons(text, "write"):
        if not is_url(text):
            path = local_path(text)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(f"{path}.tmp", "wb") as f:
                f.write(data)
            os.replace(f"{path}.tmp", path)
            return
        fs, path = _filesystem(text)
        fs.pipe_file(path, data)


def write_text(target: str | os.PathLike, text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def exists(target: str | os.PathLike) -> bool:
    text = os.fspath(target)
    if not is_url(text):
        return os.path.exists(local_path(text))
    with _reasons(text, "look for"):
        fs, path = _filesystem(text)
        fs.invalidate_cache(path)  # another process (a driver) may have written it since
        return fs.exists(path)


def is_folder(target: str | os.PathLike) -> bool:
    """``target`` is a folder (in an object store: a prefix that objects are under)."""
    text = os.fspath(target)
    if not is_url(text):
        return os.path.isdir(local_path(text))
    with _reasons(text, "look for"):
        fs, path = _filesystem(text)
        fs.invalidate_cache(path)
        return fs.isdir(path)


def names(folder: str | os.PathLike) -> list[str]:
    """The names of the files directly in ``folder`` (none if it does not exist)."""
    text = os.fspath(folder)
    if not is_url(text):
        path = local_path(text)
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    with _reasons(text, "list"):
        fs, path = _filesystem(text)
        fs.invalidate_cache(path)
        if not fs.isdir(path):
            return []
        return sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False))


def remove(target: str | os.PathLike) -> None:
    text = os.fspath(target)
    with _reasons(text, "remove"):
        if not is_url(text):
            os.remove(local_path(text))
            return
        fs, path = _filesystem(text)
        fs.rm_file(path)


def check_folder_writable(folder: str, what: str, target: str | None = None) -> None:
    """StoreError unless files can be written in the store's ``folder`` (an object written
    and removed: object stores create folders as objects come, and tell their permissions only
    when asked to write); the message names ``target`` (default: ``folder``), the file to be
    written there. Only for URLs: local folders are checked by the run's preflight."""
    probe = join(folder, WRITE_PROBE)
    try:
        write_bytes(probe, b"")
        remove(probe)
    except StoreError as e:
        reason = str(e).split(": ", 1)[-1]
        raise StoreError(f"cannot write the {what} to {_shown(target or folder)}: {reason}") from None
