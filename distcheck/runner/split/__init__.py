"""Split cases: a case too long (or too large) for one runner is checked by a *coordinator*, its
Jacobians cut into chunks that the runners run between their items (docs/architecture.md,
"Split cases"): on the driver, a dispatch's split cases (:mod:`.cases`); on the cluster, the
coordinators and what they run (:mod:`.coordinator`), the chunks and their lane in the work
queue (:mod:`.chunks`)."""
