"""Split cases: a case too long (or large) for one runner is checked by a *coordinator*, its
Jacobians cut into chunks the runners run between their items (docs/architecture.md, "Split
cases"): the dispatch's split cases (:mod:`.cases`), the coordinators (:mod:`.coordinator`), the
chunks and their lane in the work queue (:mod:`.chunks`)."""
