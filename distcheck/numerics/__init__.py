"""The numerical core: pure functions over numpy arrays, with no knowledge of engines or executors."""
