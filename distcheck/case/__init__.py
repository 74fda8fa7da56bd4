"""One case wherever it runs (a runner on a worker, a split case's coordinator, a serial run):
rebuilt from its id and fingerprinted (:mod:`.run`), estimated against its budgets
(:mod:`.budget`), judged into a verdict (:mod:`.judge`) and recorded; a test expected to fail
stops at its first failing sample (:mod:`.first_failure`). The runner (:mod:`distcheck.runner`)
decides where and when; this package, what one case gives."""
