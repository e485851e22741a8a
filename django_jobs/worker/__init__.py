"""The worker: the loop ``runworker`` starts, its steps, and the process around it.

``loop`` holds ``Worker``, and ``options`` its ``WorkerOptions``; each other module is one step
of the loop (``turn``, ``heartbeat``, ``shutdown``...) or a part of the process (``process``: the
worker's row and signals; ``systemd``; ``log_lines``; ``exit``). The steps see the worker as a
``state.WorkerState`` and never import the loop. This file imports nothing, so that importing
one step does not load the loop.
"""
