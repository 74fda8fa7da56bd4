"""The suite runner: a suite's cases dispatched serially or on Ray, a record per case.

- ``runner.py``: options and orchestration (enumerate, dispatch, collect, rerun);
- ``protocols.py``: what the parts implement (``Dispatcher``, ``Sink``, ``Listener``), below them all;
- ``result.py``: a run's result and tally; ``collector.py``: the run's sink; ``reruns.py``: reruns;
- ``records.py``: a case's record, records as they travel (a batch), a run's records in order;
- ``case_runner.py``: one case where it lands (rebuild, fingerprint, budget, check);
- ``judge.py``: a built case's verdict under a checker; ``budget.py``: size and time estimates;
- ``serial.py``, ``ray_dispatch.py`` (with ``feed.py`` and ``split.py``): the dispatchers.
"""

from distcheck.runner.runner import RunOptions, run_suite

__all__ = ["RunOptions", "run_suite"]  # the public API (the README's "Your own suites")
