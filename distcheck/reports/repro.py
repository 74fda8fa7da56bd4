"""Reproducers: ``distcheck repro CASE_ID`` prints a standalone script for one case.

The script rebuilds the case's inputs exactly as the run did — the suite's own seeded sample
generation, with the run's string-hash seed and one intra-op thread, the same sample; it checks
that their fingerprint is the run's — and makes the case's calls with its exact options:
``torch.autograd.gradcheck`` / ``gradgradcheck`` for torch suites (the reference itself),
``distcheck.gradcheck`` / ``gradgradcheck`` for other engines (tensorplay has no
torch-semantics checker of its own). It fails exactly as the case failed, or passes where it
passed. Every report shows a failing case's reproducer command (:func:`command`).
"""

from __future__ import annotations

import shlex

from distcheck.devices import DEVICE_TYPES
from distcheck.records.case_record import CaseRecord
from distcheck.suites import DEFAULT_SUITE, CaseId, get_suite, suite_names
from distcheck.suites.base import SEPARATOR, BuiltCase, UsageError

SCRIPT_NAME = "repro.py"


def command(case: CaseId | CaseRecord, mode: str, spec: str | None = None) -> str:
    """The shell command that writes and runs a case's reproducer; ``spec``: what ``--suite``
    took to load the case's suite (its name if None), named when it is not the id's suite."""
    case = case.case if isinstance(case, CaseRecord) else case
    suite = ["--suite", spec] if spec is not None and spec != case.suite else []
    words = ["distcheck", "repro", *suite, str(case)] + (["--mode", mode] if mode != "fast" else [])
    return f"{' '.join(shlex.quote(w) for w in words)} > {SCRIPT_NAME} && python {SCRIPT_NAME}"


def case_id(text: str, suite: str | None) -> CaseId:
    """The case named by ``text``: a full id, or an id without its suite part of suite ``suite``
    (a suite's name; default torch-opinfo). Raises UsageError."""
    parts = text.split(SEPARATOR)
    # suite::op[::device]::dtype::sampleN::check has 5 or 6 parts, op[::device]::dtype::sampleN::check 4 or 5
    named = parts[0] in (*suite_names(), suite) or len(parts) == 6 or (len(parts) == 5 and parts[1] not in DEVICE_TYPES)
    full = text if named else f"{suite or DEFAULT_SUITE}{SEPARATOR}{text}"
    try:
        case = CaseId.parse(full)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if suite is not None and case.suite != suite:
        raise UsageError(f"case {text!r} is of suite {case.suite!r}, not --suite {suite!r}")
    if suite is None and case.suite not in suite_names():
        raise UsageError(
            f"case {text!r} is of suite {case.suite!r}, which is neither built in nor installed: name it with "
            "--suite MODULE:NAME (the module and attribute that hold it)"
        )
    if case.sample is None:
        raise UsageError(f"{case} is not a runnable case (no sample): it was skipped or expected to fail as a whole")
    return case


def _call(checker: str, kwargs: dict) -> list[str]:
    if checker == "call":  # the function itself, not a check (a case that expects it to raise)
        return ["case.func(*case.inputs)"]
    options = [f"    {key}={value!r}," for key, value in kwargs.items()]
    return [f"{checker}(", "    case.func,", "    case.inputs,", *options, ")"]


def _calls(built: BuiltCase) -> list[str]:
    lines = []
    for k, call in enumerate(built.calls):
        lines += [
            "",
            f"# call {k + 1} of {len(built.calls)}",
            "case.before_call()  # reseeds the global RNGs from the case id, as the run did before each call",
        ]
        if built.expected_error is None:
            lines += _call(call.function, call.kwargs)
            continue
        error = built.expected_error
        lines += [
            "try:",
            *(f"    {line}" for line in _call(call.function, call.kwargs)),
            f"except {error.type.__name__} as e:  # the case expects this error: it passes if raised",
            f"    assert re.search({error.pattern!r}, str(e)), e",
            '    print("raised the expected error")',
            "else:",
            f"    raise AssertionError({f'expected {error}, but the checks passed'!r})",
        ]
    return lines


def script(case: CaseId, mode: str, built: BuiltCase, engine: str, spec: str | None = None) -> str:
    """The reproducer of ``built`` (case ``case`` of a suite in ``mode`` on ``engine``, loaded by
    ``spec``: its name if None)."""
    if engine == "torch":
        checker, imports = "torch.autograd.gradcheck", ["from torch.autograd.gradcheck import gradcheck, gradgradcheck"]
    else:
        checker, imports = "distcheck.gradcheck", ["from distcheck import gradcheck, gradgradcheck"]
    if built.expected_error is not None:
        imports.insert(0, "import re\n")  # the expected error's pattern
    head = f'''#!/usr/bin/env python3
"""Reproduces distcheck case {case}
({mode} mode); printed by `distcheck repro`.

Rebuilds the case's inputs as the run did (the suite's seeded sample list, sample {case.sample},
the run's string-hash seed, one intra-op thread) and calls {checker} / gradgradcheck with the
case's exact options. Run it with the Python that distcheck is installed in: it raises as the case
failed, or prints "passed".
"""

import os
import sys
import warnings

# op_db's sample functions iterate over sets of strings: rebuild with the run's string-hash seed
if os.environ.get("PYTHONHASHSEED") != "0":
    if not os.path.isfile(sys.argv[0]):
        sys.exit("save this script to a file and run it (it restarts itself with PYTHONHASHSEED=0)")
    os.execve(sys.executable, [sys.executable, *sys.argv], {{**os.environ, "PYTHONHASHSEED": "0"}})

{chr(10).join(imports)}
from distcheck.engines import get_engine
from distcheck.suites import CaseId, get_suite

warnings.simplefilter("ignore")  # as in the run: warnings never fail a check

case = get_suite({spec or case.suite!r}, {mode!r}).build(CaseId.parse({str(case)!r}))
assert case.fingerprint == {built.fingerprint!r}, "the rebuilt inputs differ from the run's"
print("checking", case.func, "on inputs of shapes", [tuple(x.shape) for x in case.inputs])

with get_engine({engine!r}).threads(1):  # as on the run's workers'''
    body = "\n".join(f"    {line}" if line else "" for line in _calls(built))
    return f'{head}\n{body}\n\nprint("passed")\n'


def reproducer(text: str, spec: str | None, mode: str) -> str:
    """``distcheck repro``: the script of the case named ``text`` of the suite ``spec`` loads
    (``--suite``: a name or ``MODULE:NAME``; None: the suite the id names). Raises UsageError."""
    chosen = None if spec is None else get_suite(spec, mode)
    case = case_id(text, None if chosen is None else chosen.name)
    if chosen is None:
        chosen = get_suite(case.suite, mode)
    chosen.prepare()
    try:
        built = chosen.build(case)
    except (LookupError, UsageError) as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # the case's own sample construction fails: say so in one line
        raise UsageError(f"rebuilding {case} failed: {type(e).__name__}: {e}") from None
    return script(case, mode, built, chosen.engine, spec)
