"""Handlers for the scheduling-issue benchmarks (limits, unique jobs)."""
