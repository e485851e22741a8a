"""A handler and a task that do nothing, for benchmarks/tasks_overhead.py."""
