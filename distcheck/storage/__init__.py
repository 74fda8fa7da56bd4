"""Where run folders and reports are kept: a local folder, or an object store (``s3://``,
``gs://``, any URL fsspec knows), read and written through one small set of functions
(:mod:`~distcheck.storage.location`), and a run's records written as segments where files
cannot be appended to (:mod:`~distcheck.storage.segments`)."""
