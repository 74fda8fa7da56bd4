"""What several commands parse alike: names, check kinds, counts, and a suite's selection."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator

from distcheck.devices import id_device
from distcheck.suites import CHECK_KINDS, DEFAULT_SUITE, MODES, CaseInfo, GroupInfo, Selection, UsageError, get_suite
from distcheck.suites.base import Suite

USAGE_ERROR = 2


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line on stderr and exit status 2 (as every
    other bad input of the command line): argparse prints its usage first, which buries the error."""

    def error(self, message: str):
        sys.stderr.write(f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")
        sys.exit(USAGE_ERROR)


def names(text: str) -> tuple[str, ...]:
    """The comma-separated names in ``text``; an empty list is an error, not "all" (an empty
    ``$OPS`` in a script would otherwise run every op)."""
    found = tuple(name.strip() for name in text.split(",") if name.strip())
    if not found:
        raise argparse.ArgumentTypeError(f"no name in {text!r} (leave the option out to select them all)")
    return found


def check_kinds(text: str) -> tuple[str, ...]:
    kinds = names(text)
    for kind in kinds:
        if kind not in CHECK_KINDS:
            raise argparse.ArgumentTypeError(f"unknown check kind {kind!r} (choose from {', '.join(CHECK_KINDS)})")
    return kinds


def positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
        return value

    return parse


OP_NAMES = object()  # ``distcheck list --ops`` (no names): list the op names, not the cases (argparse converts a str)


def selection_arguments(parser: argparse.ArgumentParser, op_names: bool = False) -> None:
    """The options that choose a suite's cases; ``op_names``: ``--ops`` without a value is
    :data:`OP_NAMES` (``distcheck list``)."""
    parser.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        metavar="SUITE",
        help=f"a suite's name (`distcheck list --suites`; default {DEFAULT_SUITE}) or MODULE:NAME (a suite in any "
        "importable module: a Suite class, a factory taking the mode, or a suite object)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="fast",
        help="fast (default: fast-mode gradcheck, as PyTorch's CI) or slow (full Jacobians, small "
        "samples, as PyTorch's periodic slow-gradcheck job)",
    )
    parser.add_argument(
        "--checks",
        type=check_kinds,
        default=CHECK_KINDS,
        help=f"comma-separated check kinds (default: all of {','.join(CHECK_KINDS)})",
    )
    if op_names:
        parser.add_argument(
            "--ops",
            type=names,
            nargs="?",
            const=OP_NAMES,
            help="comma-separated op names (default: every op); without names: list the suite's op names",
        )
    else:
        parser.add_argument(
            "--ops", type=names, help="comma-separated op names (default: every op; `distcheck list --ops` lists them)"
        )
    parser.add_argument("--dtypes", type=names, help="comma-separated dtypes (default: float64,complex128)")
    parser.add_argument("-k", dest="substring", metavar="SUBSTRING", help="only case ids containing SUBSTRING")
    parser.add_argument("--max-cases", type=positive(int), metavar="N", help="only the first N cases")
    parser.add_argument(
        "--disabled-tests",
        metavar="FILE",
        help="PyTorch's disabled-tests JSON (.pytorch-disabled-tests.json): the cases of those tests are skipped, "
        "with their issue (torch-opinfo)",
    )


def suite(args: argparse.Namespace) -> Suite:
    """The suite to run or list, with ``--disabled-tests`` skipped."""
    loaded = get_suite(args.suite, args.mode, getattr(args, "device", "cpu"))
    if args.disabled_tests:
        from distcheck.suites.torch_opinfo.disabled import with_disabled_tests

        return with_disabled_tests(loaded, args.disabled_tests)
    return loaded


def suite_options(loaded: Suite) -> dict:
    """What a run folder records of how ``loaded`` was made (its disabled tests), for a resume."""
    from distcheck.suites.torch_opinfo.disabled import suite_options as recorded

    return recorded(loaded)


def selection(args: argparse.Namespace) -> Selection:
    return Selection(checks=args.checks, dtypes=args.dtypes, ops=args.ops, substring=args.substring)


def selected_work(loaded: Suite, chosen: Selection, max_cases: int | None = None) -> Iterator[GroupInfo | CaseInfo]:
    """What a run of ``chosen`` enumerates on the driver (groups, and cases decided without
    running), less the groups none of whose case ids can contain ``-k``'s substring: as far as
    the driver knows before anything starts (a group's samples are listed where it runs).
    Unknown names raise UsageError."""
    from distcheck.runner.run import work

    device = id_device(getattr(loaded, "device", "cpu"))
    for item in work(loaded, chosen, max_cases):
        if not isinstance(item, GroupInfo) or chosen.may_want(item, device):
            yield item


def check_selected(loaded: Suite, chosen: Selection, max_cases: int | None) -> None:
    """UsageError unless ``chosen`` may select a case of ``loaded`` (see :func:`selected_work`)."""
    if next(selected_work(loaded, chosen, max_cases), None) is None:
        raise UsageError("no case matches the selection")
