"""Reports of suite runs: ``console.py`` (progress and summary), ``json_report.py``."""
