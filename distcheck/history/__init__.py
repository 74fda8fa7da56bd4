"""The nightly across nights (``distcheck history``): since when a case fails, how flaky it is,
what got slower.

Finished runs go into a **store** (``store.py``: a folder, local or under any fsspec URL, of
immutable objects: one per run, plus a small index), each filed under its **night**, the UTC
date it started (``night_run.py``: a run as the history keeps it: verdict codes and seconds by
case id, with the run's library versions). A query reads the runs of a mode into a table of
nights × cases (``table.py``; per PyTorch test: ``pytorch_tests.py``) and reads each case's
history off it column-wise (``cases.py``: its current failure streak, last pass, flaky rate,
duration against its median); ``marks.py`` words a failure for the reports (new, failing
since NIGHT, flaky), ``render.py`` prints a history (text, markdown, JSON).

The package reads runs through ``reports/load.py`` and feeds ``distcheck compare``, the console
summary and the HTML report's trends page (``reports/trends.py``), which import it.
"""
