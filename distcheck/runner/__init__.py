"""The suite runner: a suite's cases run serially or by runners on Ray, a record per case (docs/architecture.md)."""

from distcheck.runner.options import RunOptions
from distcheck.runner.run import run_suite

__all__ = ["RunOptions", "run_suite"]  # the public API (the README's "Your own suites")
