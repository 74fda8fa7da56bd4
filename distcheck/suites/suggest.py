"""Suggestions for a name a suite does not know: what the user may have meant.

Op names are dotted (``nn.functional.conv2d``, ``div.no_rounding_mode``): a user types the part
they know (``conv2d``, ``div``), which spelling alone (difflib) does not find."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

SHOWN = 5


def similar(name: str, known: Iterable[str], most: int = SHOWN) -> list[str]:
    """Known names a user who typed ``name`` may mean, best first, at most ``most``: those of
    which ``name`` is whole dotted parts (``div`` → ``div.no_rounding_mode``, ``relu`` →
    ``nn.functional.relu``), then those with a dotted part that starts with it (``conv`` →
    ``nn.functional.conv1d``), then close spellings (difflib) of last parts and of whole names."""
    if not name:
        return []
    known = list(known)
    whole = [k for k in known if f".{name}." in f".{k}."]
    started = [k for k in known if any(part.startswith(name) for part in k.split("."))]
    by_last: dict[str, list[str]] = {}
    for k in known:
        by_last.setdefault(k.rsplit(".", 1)[-1], []).append(k)
    spelled = difflib.get_close_matches(name, known, n=most)
    spelled_last = [k for last in difflib.get_close_matches(name, by_last, n=most) for k in by_last[last]]
    return list(dict.fromkeys([*whole, *started, *spelled_last, *spelled]))[:most]


def hint(name: str, known: Iterable[str]) -> str:
    """`` (did you mean a, b?)``, or nothing when no known name is near."""
    found = similar(name, known)
    return f" (did you mean {', '.join(found)}?)" if found else ""
