"""What distcheck finds in tensorplay: the figures of docs/tensorplay.md, derived from
the JSON report of a ``tensorplay-opinfo`` run (and optionally a ``torch-opinfo`` run of the same
cases, to show that distcheck passes torch on them).

    .venv/bin/python -m distcheck run --suite tensorplay-opinfo --checks grad,gradgrad --json tp.json
    .venv/bin/python -m distcheck run --suite torch-opinfo --checks grad,gradgrad --json torch.json
    .venv/bin/python benchmarks/tensorplay_findings.py tp.json --torch torch.json

Prints Markdown: cases per verdict and check kind, ops per outcome, why cases were skipped, and
the kinds of failures (each ``fail`` / ``error`` case is put in the first kind whose pattern its
message matches, in the order of :data:`KINDS`) with their counts and the ops with most cases.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

VERDICTS = ("pass", "fail", "error", "skipped", "xfail", "timeout")
DTYPES = ("float64", "complex128")
EXAMPLES = 6  # ops named per kind


@dataclass(frozen=True)
class Kind:
    """A kind of failure: cases with ``verdict`` whose message matches ``pattern`` (and whose
    check kind and dtype are ``check`` and ``dtype``, if given). ``detail``: a regex group naming
    a sub-kind (the vmap kernel missing, ...)."""

    label: str
    verdict: str
    pattern: str
    check: str | None = None
    dtype: str | None = None
    detail: int | None = None

    def matches(self, record: dict) -> re.Match | None:
        if record["verdict"] != self.verdict or (self.check and record["check"] != self.check):
            return None
        if self.dtype and record["dtype"] != self.dtype:
            return None
        return re.search(self.pattern, record["message"])


KINDS = (
    Kind(
        "batched gradients: tensorplay's vmap has no batching rule for an op of the backward pass",
        "fail",
        r"no batching rule for ([\w.]+)",
        detail=1,
    ),
    Kind("batched gradients: vmap raised another error", "fail", r"While computing batched gradients, got:"),
    Kind("batched gradients differ from separate backward calls", "fail", r"testing batched gradient computation"),
    Kind(
        "no double backward: the gradients do not depend on the inputs (gradgrad)",
        "fail",
        r"Numerical gradient for function expected to be zero",
        check="gradgrad",
    ),
    Kind(
        "gradient missing: an output does not require grad, or an input gets no gradient",
        "fail",
        r"Numerical gradient for function expected to be zero",
    ),
    Kind(
        "backward fails on undefined (None) output grads",
        "fail",
        r"Expected backward function to handle undefined output grads|Expected all input grads to be undefined",
    ),
    Kind("wrong gradient values (Jacobian mismatch), complex128", "fail", r"Jacobian mismatch", dtype="complex128"),
    Kind("wrong gradient values (Jacobian mismatch), float64", "fail", r"Jacobian mismatch"),
    Kind("gradient has the wrong dtype", "fail", r"dtype mismatch|incorrect type"),
    Kind("gradient has the wrong size", "fail", r"incorrect size"),
    Kind("backward not multiplied by grad_output", "fail", r"not multiplied by grad_output"),
    Kind("backward not reentrant", "fail", r"not reentrant"),
    Kind("other failures", "fail", r""),
    Kind(
        "distcheck's tensorplay engine: empty random grad-outputs get zero strides (not tensorplay's fault)",
        "error",
        r"has a dimension with stride 0",
    ),
    Kind(
        "dtype not supported by the op (mostly complex128)",
        "error",
        r"(?i)unsupported dtype|only supports float|only floating-point|only float\d+ and float\d+|complex input not "
        r"supported|not implemented for 'Complex|complex Scalar|expects a complex input",
    ),
    Kind(
        "argument torch accepts, tensorplay rejects (signature / API differences)",
        "error",
        r"raised TypeError|^TypeError",
    ),
    Kind(
        "input shape torch accepts, tensorplay rejects (0-d, unbatched, empty, negative dims)",
        "error",
        r"[Dd]imension .*out of range|Expected \d+D|square matrices|at least \d+ dimensions|non-zero size|"
        r"is invalid for input of size|must match the size|reduction dimension|must be \d+D|shape|Index must have",
    ),
    Kind(
        "LAPACK reports a failure (no convergence, illegal argument) on inputs torch handles",
        "error",
        r"failed to converge|illegal value",
    ),
    Kind("other errors", "error", r"(\w+(?:Error|Exception))", detail=1),
)


def classify(record: dict) -> tuple[Kind, str | None]:
    for kind in KINDS:
        found = kind.matches(record)
        if found is not None:
            return kind, found.group(kind.detail) if kind.detail else None
    raise AssertionError(f"no kind for {record['id']}")


def skip_reason(message: str) -> str:
    """The kind of reason a case was skipped for."""
    if message.startswith("tensorplay has no ") or "cannot run on tensorplay" in message:
        return "the op (or a torch API its OpInfo code calls) is missing in tensorplay"
    if "crashes the process" in message:
        return f"tensorplay crashes the process on some samples ({message.split('(', 1)[1].rstrip(')')})"
    if "does not convert to tensorplay" in message:
        return "the sample holds a torch object with no tensorplay counterpart"
    if "has no forward-mode AD" in message:
        return "forward-mode check: tensorplay has no forward-mode AD"
    if "memory budget" in message:
        return "over the memory budget"
    return "skipped by PyTorch's own OpInfo decorators"


def _table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _examples(counter: collections.Counter, limit: int = EXAMPLES) -> str:
    names = [f"`{op}`" for op, _ in counter.most_common(limit)]
    more = len(counter) - limit
    return ", ".join(names) + (f" (+{more} more)" if more > 0 else "")


def verdict_table(cases: list[dict], checks: list[str]) -> str:
    counts = {check: collections.Counter(r["verdict"] for r in cases if r["check"] == check) for check in checks}
    total = collections.Counter(r["verdict"] for r in cases)
    rows = [[check, *(counts[check][v] for v in VERDICTS), sum(counts[check].values())] for check in checks]
    rows.append(["total", *(total[v] for v in VERDICTS), len(cases)])
    return _table(["check", *VERDICTS, "cases"], rows)


def op_table(cases: list[dict], checks: list[str]) -> str:
    """Per check kind: ops whose run cases all pass, ops with a fail or error, ops not run at all."""
    rows = []
    for check in checks:
        verdicts: dict[str, set[str]] = collections.defaultdict(set)
        for r in cases:
            if r["check"] == check:
                verdicts[r["op"]].add(r["verdict"])
        ran = {op for op, vs in verdicts.items() if vs & {"pass", "fail", "error", "timeout"}}
        bad = {op for op in ran if verdicts[op] & {"fail", "error", "timeout"}}
        rows.append([check, len(verdicts), len(ran - bad), len(bad), len(verdicts) - len(ran)])
    return _table(["check", "ops", "all samples pass", "some sample fails or errs", "not run (skipped / xfail)"], rows)


def skip_table(cases: list[dict]) -> str:
    by_reason: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in cases:
        if r["verdict"] == "skipped":
            by_reason[skip_reason(r["message"])][r["op"]] += 1
    rows = sorted(
        ([reason, sum(ops.values()), len(ops), _examples(ops, 4)] for reason, ops in by_reason.items()),
        key=lambda row: -row[1],
    )
    return _table(["why", "cases", "ops", "e.g."], rows)


def kind_table(cases: list[dict], checks: list[str]) -> tuple[str, dict[str, collections.Counter]]:
    per_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_dtype: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    ops: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    details: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in cases:
        if r["verdict"] not in ("fail", "error"):
            continue
        kind, detail = classify(r)
        per_kind[kind.label][r["check"]] += 1
        per_dtype[kind.label][r["dtype"]] += 1
        ops[kind.label][r["op"]] += 1
        if detail:
            details[kind.label][detail] += 1
    order = [k.label for k in KINDS if k.label in per_kind]
    rows = [
        [
            f"{label} ({next(k.verdict for k in KINDS if k.label == label)})",
            *(per_kind[label][c] for c in checks),
            *(per_dtype[label][d] for d in DTYPES),
            sum(per_kind[label].values()),
            len(ops[label]),
            _examples(ops[label]),
        ]
        for label in sorted(order, key=lambda label: -sum(per_kind[label].values()))
    ]
    return _table(["kind", *checks, *DTYPES, "cases", "ops", "ops with most cases"], rows), details


def detail_lines(details: dict[str, collections.Counter]) -> list[str]:
    lines = []
    for label, counter in details.items():
        shown = ", ".join(f"`{name}` {count}" for name, count in counter.most_common(12))
        lines.append(f"- {label}: {len(counter)} distinct; most cases: {shown}")
    return lines


def torch_comparison(cases: list[dict], torch_report: dict) -> str:
    reference = {r["id"].split("::", 1)[1]: r["verdict"] for r in torch_report["cases"]}
    bad = [r for r in cases if r["verdict"] in ("fail", "error")]
    compared = [r for r in bad if r["id"].split("::", 1)[1] in reference]
    torch_verdicts = collections.Counter(reference[r["id"].split("::", 1)[1]] for r in compared)
    ran = [r for r in cases if r["verdict"] in ("pass", "fail", "error", "timeout")]
    torch_ran = collections.Counter(reference.get(r["id"].split("::", 1)[1], "absent") for r in ran)
    return (
        f"Of the {len(bad):,} tensorplay cases that fail or err, {len(compared):,} have a torch-opinfo case of the "
        f"same id; distcheck's verdicts on those torch cases: "
        + ", ".join(f"{v} {n:,}" for v, n in torch_verdicts.most_common())
        + f". Over all {len(ran):,} tensorplay cases that ran, the torch verdicts are: "
        + ", ".join(f"{v} {n:,}" for v, n in torch_ran.most_common())
        + f" (torch-opinfo run: {torch_report['summary']['seconds']:.0f} s)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="JSON report of a tensorplay-opinfo run")
    parser.add_argument("--torch", metavar="JSON", help="JSON report of a torch-opinfo run of the same checks")
    args = parser.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    summary, cases = report["summary"], report["cases"]
    checks = list(summary["by_check"])
    print(f"Run: `{' '.join(summary.get('command', []))}`")
    print(
        f"({summary['suite']}, {summary['mode']} mode, {summary['executor']} with {summary['workers']} worker(s), "
        f"{summary['seconds']:.0f} s, {summary['cases']:,} cases)\n"
    )
    print("Cases per verdict:\n")
    print(verdict_table(cases, checks) + "\n")
    print("Ops (OpInfo entries) per outcome:\n")
    print(op_table(cases, checks) + "\n")
    print("Skipped cases:\n")
    print(skip_table(cases) + "\n")
    table, details = kind_table(cases, checks)
    print("Kinds of failures (fail and error cases):\n")
    print(table + "\n")
    for line in detail_lines(details):
        print(line)
    if args.torch:
        with open(args.torch) as f:
            print("\n" + torch_comparison(cases, json.load(f)))


if __name__ == "__main__":
    main()
