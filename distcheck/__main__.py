"""``python -m distcheck``: the command line (see :mod:`distcheck.cli`)."""

import sys

from distcheck.cli import main

sys.exit(main())
