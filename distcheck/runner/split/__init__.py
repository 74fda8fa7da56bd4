"""Split cases: a case too long (or too large) for one runner is checked by a *coordinator*, its
Jacobians cut into chunks that the runners run between their items. This package holds all
of it: on the driver, a dispatch's split cases (:mod:`.cases`); on the cluster, the
coordinators and what they run (:mod:`.coordinator`), the chunks and their lane in the work
queue (:mod:`.chunks`).

- A coordinator is a long-lived actor of the driver's Ray job, with no CPU slot of its own (it
  mostly waits); it has loaded the suite once and runs one split case at a time, in its own
  process (so with its own global RNG). A slow-mode run starts one before its first dispatch;
  later cases and runs reuse it.
- Its executor is the Ray executor's planning, its tasks put in the queue as chunks
  (:class:`~.coordinator.QueueTasks`), cut for the case's share of the workers (:func:`~.cases.split_share`). The
  queue hands chunks out before any other work; a runner runs one between two items and yields
  its result, and the driver forwards the result's reference to the coordinator (``deliver``
  runs while ``run`` waits). The driver owns the results: a runner that dies later loses none.
- A chunk whose runner was lost before the driver forwarded its result runs again, up to
  :data:`~.chunks.CHUNK_TRIES` times; then the coordinator gets the loss as the chunk's units' error.
- A split case that times out has its coordinator killed, its chunks dropped from the queue,
  and the runners running one of them stopped. A coordinator lost before it began a case hands
  the case to another (at most :data:`~.cases.COORDINATORS_LOST` times).
"""
