"""JUnit XML of a run, as pytest writes it (``junit_family=xunit2``), for CI dashboards
(under PyTorch's test names: :mod:`.pytorch_junit`).

One ``<testsuite>`` per check kind (counts, time, ``<properties>``: suite, mode, versions,
command), one ``<testcase classname="<suite>.<op>" name="<check>[<dtype>-sample<i>]">`` per case;
``<failure>`` (type GradcheckError) / ``<error>`` (the exception class, or Timeout) carry the
message (an error's traceback after it, as pytest's ``<error>`` holds one) and the reproducer
command, ``<skipped>`` the reason of skipped and xfail cases. The file is written as a stream
(a 45,000-case run), and validates against the JUnit schema Jenkins' xunit plugin uses
(``junit-10.xsd``).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import io
import re
import socket
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TextIO
from xml.sax.saxutils import escape, quoteattr

from distcheck.records.case_record import ERROR, FAIL, PASS, SKIPPED, TIMEOUT, XFAIL, XPASS, CaseRecord
from distcheck.records.record_list import RecordList
from distcheck.reports import repro
from distcheck.reports.compare import FLAKY
from distcheck.reports.load import LoadedRun
from distcheck.storage import location
from distcheck.suites.base import CHECK_KINDS

UNEXPECTED = "xpass-test"  # an xpass case whose test's cases all passed (see RecordList.unexpected_passes)
MESSAGE_ATTRIBUTE = 200  # characters of the first message line in the message="" attribute
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_RAISED = re.compile(r"raised ([A-Za-z_][\w.]*)(?::|$)")


def _clean(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold."""
    return _INVALID_XML.sub("?", text)


def attr(value: object) -> str:
    return quoteattr(_clean(str(value)))


def case_name(record: CaseRecord) -> str:
    """``<check>[<dtype>-sample<i>]`` (``<check>[<dtype>]`` for a case without a sample)."""
    case = record.case
    sample = "" if case.sample is None else f"-sample{case.sample}"
    return f"{case.check}[{case.dtype}{sample}]"


def error_type(record: CaseRecord) -> str:
    """The exception class a case raised, as its message names it."""
    if record.verdict == TIMEOUT:
        return "Timeout"
    found = _RAISED.search(record.message.split("\n", 1)[0])
    return found.group(1) if found else "Error"


def outcome_type(record: CaseRecord) -> str:
    """The ``type`` attribute of a case's ``<failure>``, ``<error>`` or ``<skipped>``."""
    if record.verdict in (FAIL, FLAKY):
        return "GradcheckError" if record.verdict == FAIL else "Flaky"
    if record.verdict in (SKIPPED, XFAIL):
        return "pytest.skip" if record.verdict == SKIPPED else "pytest.xfail"
    return error_type(record) if record.verdict in (ERROR, TIMEOUT) else record.verdict


def first_line(message: str) -> str:
    """The start of a message's first line, for a ``message=""`` attribute."""
    return message.strip().split("\n", 1)[0][:MESSAGE_ATTRIBUTE]


def element(tag: str, kind: str, message: str, body: str) -> str:
    """``<tag type=kind message=message>body</tag>``, escaped."""
    return f"<{tag} type={attr(kind)} message={attr(message)}>{escape(_clean(body))}</{tag}>"


def _outcome(record: CaseRecord, reproduce: str | None) -> str:
    if record.verdict == PASS:
        return ""
    first = first_line(record.message)
    if record.verdict == XPASS:  # of a test with a failing sample: as pytest's xfailed test, skipped
        return element("skipped", "pytest.xpass", first, record.message)
    if record.verdict == UNEXPECTED:  # of a test all of whose samples passed: the test fails
        body = record.message + (f"\n\nreproduce: {reproduce}" if reproduce else "")
        return element("failure", "UnexpectedSuccess", first, body)
    if record.verdict in (SKIPPED, XFAIL):
        return element("skipped", outcome_type(record), first, record.message)
    body = record.message + (f"\n\n{record.traceback}" if record.traceback else "")
    body += f"\n\nreproduce: {reproduce}" if reproduce else ""
    return element("failure" if record.verdict in (FAIL, FLAKY) else "error", outcome_type(record), first, body)


def _counts(records: list[CaseRecord]) -> dict[str, int]:
    verdicts = [r.verdict for r in records]
    return {
        "errors": sum(v not in (PASS, FAIL, FLAKY, SKIPPED, XFAIL, XPASS, UNEXPECTED) for v in verdicts),
        "failures": sum(v in (FAIL, FLAKY, UNEXPECTED) for v in verdicts),
        "skipped": sum(v in (SKIPPED, XFAIL, XPASS) for v in verdicts),
        "tests": len(verdicts),
    }


HEAD = '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="distcheck">\n'


def suite_start(
    name: str, counts: dict[str, int], seconds: float, stamp: str, properties: dict[str, str], **attributes: str
) -> str:
    """A ``<testsuite>``'s start tag (its ``counts``: errors, failures, skipped, tests, and any
    other ``attributes``) and its ``<properties>``."""
    values = {**counts, **attributes, "time": f"{seconds:.3f}", "timestamp": stamp, "hostname": socket.gethostname()}
    tag = " ".join(f"{key}={attr(value)}" for key, value in values.items())
    listed = "".join(f"<property name={attr(k)} value={attr(v)}/>" for k, v in properties.items())
    return f"<testsuite name={attr(name)} {tag}>\n<properties>{listed}</properties>\n"


def write(
    stream: TextIO,
    records: Iterable[CaseRecord],
    properties: dict[str, str],
    reproduce: Callable[[CaseRecord], str],
    timestamp: datetime | None = None,
) -> None:
    """The JUnit XML of ``records`` on ``stream``; ``reproduce(record)``: the reproducer
    command of a failing case."""
    by_check: dict[str, list[CaseRecord]] = {}
    records = list(records)
    unexpected = set(RecordList.of(records).unexpected_passes())
    for record in records:
        if record.verdict == XPASS and _test_of(record) in unexpected:  # written as a failure
            record = dataclasses.replace(record, verdict=UNEXPECTED)
        by_check.setdefault(record.case.check, []).append(record)
    stamp = (timestamp or datetime.now(UTC)).isoformat(timespec="seconds")
    stream.write(HEAD)
    for check in sorted(by_check, key=lambda c: (CHECK_KINDS + (c,)).index(c)):
        cases = by_check[check]
        stream.write(suite_start(check, _counts(cases), sum(r.seconds for r in cases), stamp, properties))
        for r in cases:
            bad = r.verdict not in (PASS, SKIPPED, XFAIL, XPASS)
            inner = _outcome(r, reproduce(r) if bad else None)
            stream.write(
                f"<testcase classname={attr(f'{r.case.suite}.{r.case.op}')} name={attr(case_name(r))} "
                f"time={attr(f'{r.seconds:.3f}')}" + (f">{inner}</testcase>\n" if inner else "/>\n")
            )
        stream.write("</testsuite>\n")
    stream.write("</testsuites>\n")


def _test_of(record: CaseRecord) -> str:
    return dataclasses.replace(record.case, sample=None).text


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def properties(run: LoadedRun) -> dict[str, str]:
    """The run's ``<properties>``: suite, mode, versions (the run's, else this machine's), command."""
    info = run.info
    command = info.get("command")
    found = {
        "suite": info.get("suite", ""),
        "mode": info.get("mode", ""),
        "executor": info.get("executor", ""),
        "workers": info.get("workers", ""),
    }
    for package in ("distcheck", "torch", "ray", "tensorplay"):
        found[package] = info.get(package) or _version(package)
    found["command"] = " ".join(command) if isinstance(command, list) else (command or "")
    return {name: str(value) for name, value in found.items()}


def write_file(path: str, run: LoadedRun, writer: Callable = write) -> None:
    """The run's JUnit XML at ``path``, written by ``writer`` (:func:`write`: a testcase per
    case; :func:`distcheck.reports.pytorch_junit.write`: a testcase per PyTorch test)."""
    mode = str(run.info.get("mode") or "fast")
    out = io.StringIO()
    writer(out, run.records, properties(run), lambda r: repro.command(r, mode, run.spec))
    location.write_text(path, out.getvalue())
