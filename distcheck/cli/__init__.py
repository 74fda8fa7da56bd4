"""The command line, one module per command:

    distcheck run --suite torch-opinfo --checks grad,gradgrad          # run.py: local Ray, all cores
    distcheck run --ops nn.functional.conv2d --mode slow --serial      # in this process
    distcheck run --resume runs/torch-opinfo-fast-20261201T030000Z   # finish an interrupted run
    distcheck list --ops add --checks grad                              # list.py: the case ids
    distcheck compare last-night/ tonight/ --format markdown            # compare.py: what changed
    distcheck repro 'torch-opinfo::mm::complex128::sample0::grad' > repro.py   # repro.py: one case
    distcheck report tonight/ --html report.html --junit junit.xml      # report.py: reports of a past run
    distcheck history history/ tonight/                                 # history.py: the nightly across nights

Each command's module has ``add_parser(commands)``, which adds its subparser and registers the
function that runs it with ``set_defaults(func=...)``: ``func(args, argv)`` returns the exit
status. Exit status: 0 when every case passed (or was skipped / expected to fail, or was flaky
without ``--strict-flaky``), 1 when a case failed, errored or timed out, 2 for usage errors
(unknown suite, check, dtype or op names, nothing selected, unwritable outputs, an unreachable
cluster, a run folder that cannot be resumed, conflicting options), 130 / 143 when SIGINT /
SIGTERM stopped the run (its partial report written, the command that resumes it printed).
``compare`` exits 1 when NEW has a new failure (see ``--fail-on``).
"""

from __future__ import annotations

import argparse
import sys

from distcheck import hash_seed
from distcheck.cli import compare, history, report, repro, run
from distcheck.cli import list as listing
from distcheck.cli.arguments import USAGE_ERROR, Parser
from distcheck.suites import UsageError

COMMANDS = (run, listing, compare, repro, report, history)


def parser() -> argparse.ArgumentParser:
    import distcheck

    top = Parser(prog="distcheck", description="Distributed gradient checking of operator suites.")
    top.add_argument("--version", action="version", version=f"distcheck {distcheck.__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    """The command line. Started as a command (no ``argv``), it first makes sure that it runs
    with the run's string-hash seed, re-executing itself if needed (see ``distcheck.hash_seed``)."""
    if argv is None:
        if not hash_seed.is_fixed():
            hash_seed.reexec(["-m", "distcheck", *sys.argv[1:]])
        argv = sys.argv[1:]
    args = parser().parse_args(argv)
    try:
        return args.func(args, argv)
    except UsageError as e:
        print(f"distcheck: error: {e}", file=sys.stderr)
        if "ray" in sys.modules:  # e.g. a cluster without the run's GPUs: Ray was started to find out
            from distcheck.executors.ray_settings import stop_ray

            stop_ray()
        return USAGE_ERROR
    except ImportError as e:
        print(
            f"distcheck: error: {getattr(args, 'suite', None) or 'this command'!r} needs a library that is not "
            f"installed: {e}",
            file=sys.stderr,
        )
        return USAGE_ERROR
    except ConnectionError as e:  # joining the cluster failed (ensure_ray explains why)
        print(f"distcheck: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("\ndistcheck: interrupted", file=sys.stderr)
        return 130
