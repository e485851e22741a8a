"""The core: what every layer shares and nothing of the package below it.

The states of a job, the settings, the rules for stored JSON and errors, an attempt's outcome,
the retry policy, the checks on ``Job.enqueue``'s arguments, a job as JSON, the database's
clock and the engine's contract. No module here imports a table, the engine, the worker, a
feature or a face.
"""
