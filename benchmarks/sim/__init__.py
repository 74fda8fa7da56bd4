"""A discrete-event model of the Ray dispatcher (``model.py``), fed by recorded runs
(``workload.py``) and calibrated constants (``calibration.py``, ``benchmarks/calibration.json``);
``nightly.py`` builds the whole slow nightly's workload from the slow grad suite's report.
``benchmarks/simulate.py`` is its command line."""
