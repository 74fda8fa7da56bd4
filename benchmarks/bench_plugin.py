"""The pytest plugin on real test files: each file (with a ``-k`` selection of its gradchecks)
under plain ``pytest``, ``pytest -n 2``, ``pytest -n 2`` with one intra-op thread, the plugin
(``--distcheck-torch --distcheck-executor ray``) and the plugin with ``-n 2``, in fast mode and
with ``PYTORCH_TEST_WITH_SLOW_GRADCHECK=1``: wall times, speed-ups over plain pytest (its time
/ theirs), and the outcome of every test in every configuration (exit 1 on any difference from
plain pytest's, each named).

    python benchmarks/bench_plugin.py --pytorch-tests DIR
    python benchmarks/bench_plugin.py --pytorch-tests DIR --files pooling --configs plain,plugin --modes slow
    python benchmarks/bench_plugin.py --pytorch-tests DIR --file "nn/test_convolution.py::conv_tbc" --json out.json

``DIR`` is a PyTorch checkout's ``test/`` (or a folder with the files, at the same relative
paths); the project holds none of PyTorch's files. ``--files`` picks from the built-in
selections (``FILES``), ``--file PATH::KEYWORD`` adds any file (the keyword is pytest's ``-k``,
empty for the whole file). Plain pytest runs first, as the reference; each pytest runs in
``DIR`` with ``PYTHONPATH`` pointing at this checkout, so the plugin is this checkout's. The
plugin's end-of-session line (where its checks ran) is printed under its row.

``--repeat N`` runs every configuration N times in alternating rounds (each round starts one
configuration later than the last, so that no configuration always follows the same one) and
compares the medians: a file of a few seconds on a shared machine varies by more than the
configurations differ. Every run's outcomes are compared with the first plain run's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_nightly import pytest_outcomes  # noqa: E402

# name: (path under DIR, -k selection of its gradcheck tests)
FILES = {
    "ops": ("test_ops_gradients.py", "test_fn_grad_ and (nn_functional_conv or linalg_det or cumprod)"),
    "convolution": (
        "nn/test_convolution.py",
        "conv_tbc or Conv2d_1x1 or double_backward or padding_backward or backward_depthwise or conv_backend_slow",
    ),
    "pooling": ("nn/test_pooling.py", "max_unpool or fractional_max_pool"),
}
PLUGIN = ("--distcheck-torch", "--distcheck-executor")
# name: (xdist workers, OMP_NUM_THREADS or None for torch's default, the plugin's executor or None)
CONFIGS = {
    "plain": (0, None, None),
    "-n 2": (2, None, None),
    "-n 2, 1 thread": (2, "1", None),
    "plugin": (0, None, "ray"),
    "plugin -n 2": (2, None, "ray"),
}
CONFIG_ALIASES = {"plain": "plain", "xdist": "-n 2", "xdist1": "-n 2, 1 thread", "plugin": "plugin"}
CONFIG_ALIASES["plugin-xdist"] = "plugin -n 2"
MODES = ("fast", "slow")


@dataclass
class Run:
    """One pytest run: its wall time, outcomes per test, and the plugin's line."""

    file: str
    mode: str
    config: str
    command: str
    seconds: float
    exit_code: int
    outcomes: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    plugin_line: str = ""
    round: int = 0


def pytest_command(path: str, keyword: str, config: str, junit: str, executor: str) -> list[str]:
    workers, _, plugin = CONFIGS[config]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junit-xml={junit}", path]
    command += ["-k", keyword] if keyword else []
    command += ["-n", str(workers)] if workers else []
    return command + ([*PLUGIN, executor] if plugin else [])


def environment(config: str, mode: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    env.pop("PYTORCH_TEST_WITH_SLOW_GRADCHECK", None)
    if mode == "slow":
        env["PYTORCH_TEST_WITH_SLOW_GRADCHECK"] = "1"
    threads = CONFIGS[config][1]
    if threads:
        env["OMP_NUM_THREADS"] = threads
    return env


def run_one(
    folder: str, name: str, spec: tuple[str, str], mode: str, config: str, out: str, executor: str, round_: int = 0
) -> Run:
    path, keyword = spec
    stem = f"{name}-{mode}-{config}".replace(" ", "").replace(",", "_") + (f"-round{round_}" if round_ else "")
    junit, log = os.path.join(out, stem + ".xml"), os.path.join(out, stem + ".log")
    command = pytest_command(path, keyword, config, junit, executor)
    print(f"$ {shlex.join(command)}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with open(log, "w") as f:
        done = subprocess.run(command, env=environment(config, mode), cwd=folder, stdout=f, stderr=subprocess.STDOUT)
    code = done.returncode
    seconds = time.perf_counter() - start
    lines = Path(log).read_text(errors="replace").splitlines()
    plugin_line = next((line for line in reversed(lines) if line.startswith("distcheck: ")), "")
    outcomes = pytest_outcomes(junit) if os.path.exists(junit) else {}
    # each run's figure as it ends: a long benchmark stopped later keeps what it measured
    load = os.getloadavg()[0]
    print(f"  {seconds:.1f} s, exit {code}, load {load:.2f}; {plugin_line}", file=sys.stderr, flush=True)
    return Run(name, mode, config, shlex.join(command), seconds, code, outcomes, plugin_line, round_)


def differences(reference: Run, run: Run) -> list[str]:
    """Every test whose outcome differs from the reference's (absent counts as an outcome), and
    a run that did not complete (pytest's exit codes 2-5: interrupted, internal error, usage,
    nothing collected)."""
    found = [f"{run.config}: pytest exited {run.exit_code}"] if run.exit_code not in (0, 1) else []
    for key in sorted(set(reference.outcomes) | set(run.outcomes)):
        theirs, ours = reference.outcomes.get(key, "absent"), run.outcomes.get(key, "absent")
        if theirs != ours:
            found.append(f"{run.config}: {'.'.join(key)}: plain {theirs}, {ours}")
    return found


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pytorch-tests", metavar="DIR", required=True, help="PyTorch's test/ folder")
    p.add_argument("--files", type=_names, help=f"built-in selections, comma-separated (default: {','.join(FILES)})")
    p.add_argument("--file", action="append", default=[], metavar="PATH::KEYWORD", help="a file, its -k (repeatable)")
    configs = ",".join(CONFIG_ALIASES)
    p.add_argument("--configs", type=_names, default=list(CONFIG_ALIASES), help=f"of {configs} (default all)")
    p.add_argument("--modes", type=_names, default=list(MODES), help="comma-separated, of fast,slow (default both)")
    p.add_argument("--executor", default="ray", choices=("ray", "serial"), help="the plugin's executor (default ray)")
    p.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="rounds of every configuration, alternating (default 1)"
    )
    p.add_argument("--json", metavar="FILE", help="also write the runs and differences as JSON")
    p.add_argument("--keep", metavar="DIR", help="keep the JUnit XMLs and logs in DIR (default: a temporary folder)")
    return p


def selections(args: argparse.Namespace, error) -> dict[str, tuple[str, str]]:
    unknown = [name for name in args.files or () if name not in FILES]
    if unknown:
        error(f"unknown --files {unknown} (known: {', '.join(FILES)})")
    chosen = {name: FILES[name] for name in (args.files or ([] if args.file else FILES))}
    for spec in args.file:
        path, _, keyword = spec.partition("::")
        chosen[path] = (path, keyword)
    missing = [path for path, _ in chosen.values() if not (Path(args.pytorch_tests) / path).is_file()]
    if missing:
        error(f"not in {args.pytorch_tests}: {', '.join(missing)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    unknown = [c for c in args.configs if c not in CONFIG_ALIASES] + [m for m in args.modes if m not in MODES]
    if unknown:
        p.error(f"unknown configs or modes: {unknown}")
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1 (got {args.repeat})")
    chosen = selections(args, p.error)
    configs = ["plain"] + [CONFIG_ALIASES[c] for c in args.configs if c != "plain"]  # plain: the reference
    folder = str(Path(args.pytorch_tests).resolve())
    runs: list[Run] = []
    found: list[str] = []
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench_plugin-") as temporary:
        out = args.keep or temporary
        os.makedirs(out, exist_ok=True)
        for name, spec in chosen.items():
            for mode in args.modes:
                group = []
                for round_ in range(args.repeat):
                    order = configs[round_ % len(configs) :] + configs[: round_ % len(configs)]
                    group += [run_one(folder, name, spec, mode, c, out, args.executor, round_) for c in order]
                    loads.append(os.getloadavg()[0])
                runs += group
                reference = group[0]  # the first round starts with plain pytest
                found += [f"{name} {mode} {d}" for run in group for d in differences(reference, run)]
    print(report_text(runs, found, loads))
    if args.json:
        with open(args.json, "w") as f:
            rows = [{**asdict(r), "outcomes": _tally(r), "tests": len(r.outcomes)} for r in runs]
            middle = [{"file": k[0], "mode": k[1], "config": k[2], "seconds": v} for k, v in medians(runs).items()]
            json.dump({"runs": rows, "medians": middle, "load": loads, "differences": found}, f, indent=1)
    return 1 if found else 0


def _tally(run: Run) -> dict[str, int]:
    tally: dict[str, int] = {}
    for outcome in run.outcomes.values():
        name = getattr(outcome, "value", outcome)  # a Verdict prints as its string
        tally[name] = tally.get(name, 0) + 1
    return tally


def rounds_of(runs: list[Run]) -> dict[tuple[str, str, str], list[Run]]:
    """Each (file, mode, configuration)'s runs, in round order (keys in order of first run)."""
    grouped: dict[tuple[str, str, str], list[Run]] = {}
    for r in runs:
        grouped.setdefault((r.file, r.mode, r.config), []).append(r)
    return grouped


def medians(runs: list[Run]) -> dict[tuple[str, str, str], float]:
    """The median wall time of each (file, mode, configuration) over its rounds."""
    return {key: statistics.median(r.seconds for r in group) for key, group in rounds_of(runs).items()}


def report_text(runs: list[Run], found: list[str], loads: list[float]) -> str:
    lines = [f"pytest plugin benchmark; 1-min load average {', '.join(f'{x:.2f}' for x in loads)}"]
    rounds = max((r.round for r in runs), default=0) + 1
    wall = "wall s" if rounds == 1 else f"median of {rounds}"
    lines.append(f"  {'file':<12} {'mode':<5} {'configuration':<15} {wall:>8} {'speed-up':>9}  outcomes")
    middle = medians(runs)
    for key, group in rounds_of(runs).items():
        r = group[0]
        seconds, plain = middle[key], middle[(r.file, r.mode, "plain")]
        ratio = plain / seconds if seconds else 0.0
        tally = ", ".join(f"{n} {outcome}" for outcome, n in sorted(_tally(r).items()))
        lines.append(f"  {r.file:<12} {r.mode:<5} {r.config:<15} {seconds:8.1f} {ratio:8.2f}x  {tally}")
        if rounds > 1:
            lines.append(f"      rounds: {', '.join(f'{x.seconds:.1f}' for x in group)} s")
        if r.plugin_line:
            lines.append(f"      {r.plugin_line}")
    lines += [f"  DIFFERENT {d}" for d in found]
    lines.append("DIFFERENT" if found else "OK: the same outcomes in every configuration")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
