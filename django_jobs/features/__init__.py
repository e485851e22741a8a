"""The features: each joins the engine's verbs, and the worker's heartbeat, through hooks.

Unique keys, dependencies, limits, callbacks, handler control (progress, snooze, follow-ups),
crash counting, recurring schedules and retention. Each is a ``Feature`` (``engine/hooks.py``)
that ``apps.py`` registers; the engine and the worker import none of them.
"""
