"""Durable workflows: a function registered with ``@workflow`` runs as a job that is replayed
on every run, its finished steps returning their stored results (``history``, ``steps``), its
sleeps and waits ending the run without holding a worker, and events sent to it kept until a
wait takes them (``events``). Only workflow jobs enter this feature: a plain job's path runs
none of it. See docs/explanation-workflows.md."""
