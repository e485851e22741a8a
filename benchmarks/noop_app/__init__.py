"""A tiny app whose jobs.py registers the no-op handler the benchmarks run."""
