"""Signals sent along a job's life. Receivers get ``sender=Job`` and ``job=``.

``use_caching``, as Django's model signals: each is checked or sent once per job in the worker's
loop, and a cached lookup of the receivers costs a tenth of the search it replaces.
"""

from django.dispatch import Signal

#: Sent by Job.enqueue / enqueue_many for each new job, inside the caller's transaction.
job_enqueued = Signal(use_caching=True)
#: Sent by the worker just before the handler runs; ``attempt`` is the attempt number.
job_started = Signal(use_caching=True)
#: Sent by the worker (and ``run_jobs``) after the outcome is written; ``outcome`` is an
#: Attempt.Outcome value.
job_finished = Signal(use_caching=True)
