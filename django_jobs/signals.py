"""Signals sent along a job's life. Receivers get ``sender=Job`` and ``job=``."""

from django.dispatch import Signal

# Sent by Job.enqueue / enqueue_many for each new job, inside the caller's transaction.
job_enqueued = Signal()
# Sent by the worker just before the handler runs; ``attempt`` is the attempt number.
job_started = Signal()
# Sent by the worker after the outcome is written; ``outcome`` is an Attempt.Outcome value.
job_finished = Signal()
