"""What a run says, below the runner that makes it and the storage and reports that keep and
read it: a case's record (:mod:`~distcheck.records.case_record`), a run's records in order
(:mod:`~distcheck.records.record_list`), its result and tally (:mod:`~distcheck.records.result`),
an error's bounded traceback (:mod:`~distcheck.records.tracebacks`), and the listeners told as
it goes (:mod:`~distcheck.records.listener`)."""
