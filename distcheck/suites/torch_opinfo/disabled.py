"""PyTorch's disabled tests (``--disabled-tests FILE``): the cases of a disabled PyTorch test
are ``skipped``, with the issue that disables it, as PyTorch's test runner skips the test.

The file is the JSON PyTorch's CI downloads (``.pytorch-disabled-tests.json``, made by
``tools/stats/import_test_stats.py``): ``{"<test> (<module>.<class>)": [issue URL, [platforms]]}``;
the condensed form it is made from, ``[issue number, issue URL, [platforms]]``, is read too.
A key matches as ``check_if_enable`` (``common_utils.py``) matches it: its class is a prefix of
the test's class (``TestBwdGradients`` disables ``TestBwdGradientsCPU``) and its test is the
test's name or that name without its device and dtype (``test_fn_grad_sinh`` disables every
dtype). An entry applies on this machine if its platform list is empty or names one of its
platforms; names PyTorch does not know are dropped first (so a list of only such names applies
everywhere, as in PyTorch). distcheck checks in eager mode: the dynamo and inductor platforms
never apply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from distcheck.devices import id_device
from distcheck.suites.base import (
    SKIPPED,
    CaseId,
    CaseInfo,
    GroupInfo,
    Selection,
    UsageError,
    enumerate_cases,
    read_json,
)
from distcheck.suites.torch_opinfo.pytorch_names import DEVICE, PyTorchTest, pytorch_test

# the start of a disabled case's message (PyTorch's words): how reports tell them apart
DISABLED = "Test is disabled because an issue exists disabling it: "
_EAGER_ONLY = ("dynamo", "dynamo_wrapped", "inductor")


def platforms() -> dict[str, bool]:
    """Each platform name PyTorch's disabled tests may give, and whether this run is on it."""
    from torch.testing._internal import common_utils as cu

    on = {
        "mac": cu.IS_MACOS,
        "macos": cu.IS_MACOS,
        "win": cu.IS_WINDOWS,
        "windows": cu.IS_WINDOWS,
        "linux": cu.IS_LINUX,
        "rocm": cu.TEST_WITH_ROCM,
        "xpu": cu.TEST_XPU,
        "asan": cu.TEST_WITH_ASAN,
        "slow": cu.TEST_WITH_SLOW,
    }
    return {**on, **dict.fromkeys(_EAGER_ONLY, False)}


@dataclass(frozen=True)
class DisabledTest:
    """One entry of the file: the test and class it names, its issue and platforms."""

    key: str
    test: str
    classname: str
    issue: str
    platforms: tuple[str, ...]

    def message(self, source: str) -> str:
        where = "all platforms" if not self.platforms else f"platform(s) {', '.join(self.platforms)}"
        return f"{DISABLED}{self.issue} for {where} ({self.key!r} in {source})"


def _entry(key: str, value: Any, path: str) -> DisabledTest | None:
    """The entry of ``key`` (None: a key PyTorch ignores, with fewer than two words)."""
    if isinstance(value, list) and len(value) == 3:
        value = value[1:]
    shaped = isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
    if not (shaped and isinstance(value[1], list) and all(isinstance(p, str) for p in value[1])):
        raise UsageError(
            f"--disabled-tests: {path}: the value of {key!r} is not [issue URL, [platforms]] "
            f"(nor [issue number, issue URL, [platforms]]): {str(value)[:80]}"
        )
    words = key.split()
    if len(words) < 2:
        return None
    return DisabledTest(key, words[0], words[1][1:-1].split(".")[-1], value[0], tuple(value[1]))


class DisabledTests:
    """The entries of a disabled-tests file, indexed by the test they name."""

    def __init__(self, entries: list[DisabledTest], source: str, on: dict[str, bool] | None = None, data=None):
        self.source = source
        self.data = data  # the file's JSON object, as read (what a run folder records)
        self.on = platforms() if on is None else on
        self._by_test: dict[str, list[tuple[int, DisabledTest]]] = {}
        for order, entry in enumerate(entries):
            self._by_test.setdefault(entry.test, []).append((order, entry))

    @classmethod
    def read(cls, path: str, on: dict[str, bool] | None = None) -> DisabledTests:
        """The file at ``path`` (``on``: the platforms, default this machine's);
        :class:`UsageError` (one line) if it is not JSON of that shape."""
        return cls.of(read_json(path, "--disabled-tests: "), path, on)

    @classmethod
    def of(cls, data: Any, source: str, on: dict[str, bool] | None = None) -> DisabledTests:
        """The entries of ``data``, the JSON object of the file ``source``."""
        if not isinstance(data, dict):
            got = type(data).__name__
            raise UsageError(f"--disabled-tests: {source}: expected a JSON object of tests, got a {got}")
        entries = [_entry(key, value, source) for key, value in data.items()]
        return cls([e for e in entries if e is not None], source, on, data)

    def __len__(self) -> int:
        return sum(map(len, self._by_test.values()))

    def applies(self, entry: DisabledTest) -> bool:
        known = [p for p in entry.platforms if p in self.on]
        return not known or any(self.on[p] for p in known)

    def disabling(self, test: PyTorchTest) -> DisabledTest | None:
        """The first entry (in the file's order) that disables ``test`` here, if any."""
        short = test.name.rpartition("_")[0].removesuffix(f"_{DEVICE}")  # without _cpu_float64
        found = sorted([*self._by_test.get(test.name, ()), *self._by_test.get(short, ())], key=lambda e: e[0])
        for _, entry in found:
            if test.classname.startswith(entry.classname) and self.applies(entry):
                return entry
        return None

    def reason(self, case: CaseId) -> str | None:
        """The skip message of ``case`` if its PyTorch test is disabled here."""
        entry = self.disabling(pytorch_test(case.check, case.op, case.dtype))
        return None if entry is None else entry.message(self.source)


class WithDisabledTests:
    """A torch-opinfo suite whose disabled PyTorch tests' cases are ``skipped`` (each test is
    one case without a sample: it does not run, as PyTorch's test does not); the rest is the
    suite's own."""

    def __init__(self, suite, disabled: DisabledTests):
        self.suite, self.disabled = suite, disabled
        self.name, self.mode, self.engine = suite.name, suite.mode, suite.engine
        self.device, self.devices = getattr(suite, "device", "cpu"), getattr(suite, "devices", ("cpu",))

    def prepare(self) -> None:
        self.suite.prepare()

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        return enumerate_cases(self, selection)

    def groups(self, selection: Selection) -> Iterator[GroupInfo | CaseInfo]:
        for item in self.suite.groups(selection):
            if isinstance(item, CaseInfo):
                reason = self.disabled.reason(item.id)
                yield item if reason is None else CaseInfo(item.id, SKIPPED, reason)
                continue
            kept = []
            for check in item.checks:
                case = CaseId(item.suite, item.op, item.dtype, check, device=id_device(self.device))
                reason = self.disabled.reason(case)
                if reason is None:
                    kept.append(check)
                elif selection.wants(case):
                    yield CaseInfo(case, SKIPPED, reason)
            if kept:
                yield dataclasses.replace(item, checks=tuple(kept))

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        return self.suite.list_group(group, selection)

    def build(self, case: CaseId):
        return self.suite.build(case)

    def __repr__(self) -> str:
        return f"{self.suite!r} with {len(self.disabled)} disabled test(s) from {self.disabled.source}"


def disabled_count(records) -> int:
    """How many of a run's records (a :class:`RecordList`) are cases of disabled tests."""
    return sum(r.message.startswith(DISABLED) for r in records.having((SKIPPED,)))


# a run folder records a run's disabled tests (its RunStart's suite options) under this key
RECORDED = "disabled_tests"


def suite_options(suite) -> dict[str, Any]:
    """What a run of ``suite`` records so that a resume skips the same disabled tests: the
    file's name and JSON object as read (the file may change or go before the resume)."""
    if not isinstance(suite, WithDisabledTests):
        return {}
    return {RECORDED: {"source": suite.disabled.source, "tests": suite.disabled.data}}


def resumed(suite, recorded: dict[str, Any], path: str | None):
    """The suite a resumed run runs: ``suite`` with the disabled tests its run folder recorded
    (``recorded``: the RunStart's suite options). ``path``, the ``--disabled-tests`` given to
    the resume, must hold the same tests (:class:`UsageError`, one line, if not)."""
    then = recorded.get(RECORDED)
    if path is not None:
        given = DisabledTests.read(path)
        if then is None or given.data != then["tests"]:
            ran = "without --disabled-tests" if then is None else f"with the disabled tests of {then['source']}"
            raise UsageError(
                f"--disabled-tests: {path} is not the file the run was started with (it ran {ran}): "
                "drop --disabled-tests, the resume applies the run's own"
            )
    if then is None:
        return suite
    return WithDisabledTests(suite, DisabledTests.of(then["tests"], then["source"]))


def with_disabled_tests(suite, path: str) -> WithDisabledTests:
    """``suite`` with the disabled tests of the file at ``path`` skipped (:class:`UsageError`
    for a suite other than torch-opinfo, or a malformed file)."""
    if suite.name != "torch-opinfo":
        raise UsageError(f"--disabled-tests disables tests of torch-opinfo, not of suite {suite.name!r}")
    return WithDisabledTests(suite, DisabledTests.read(path))
