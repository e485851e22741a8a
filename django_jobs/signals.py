"""Signals sent along a job's life. Receivers get ``sender=Job`` and ``job=``.

``use_caching``, as Django's model signals: each is checked or sent once per job in the worker's
loop, and a cached lookup of the receivers costs a tenth of the search it replaces.

The worker sends ``job_started`` and ``job_finished`` robustly: a receiver that raises changes
nothing of the job, and is reported once per process (``core/observers.py``) rather than logged
at every job, as ``Signal.send_robust`` would. ``job_enqueued`` is sent as Django's ``post_save``
is: a receiver's error is the caller's.
"""

from typing import Any

from django.dispatch import Signal


class JobSignal(Signal):
    """A signal whose ``send_robust`` leaves reporting a receiver's failure to its caller."""

    def _log_robust_failure(self, receiver: Any, err: Exception) -> None:
        pass


#: Sent by Job.enqueue / enqueue_many for each new job, inside the caller's transaction.
job_enqueued = JobSignal(use_caching=True)
#: Sent by the worker just before the handler runs, in its thread; ``attempt`` is the attempt
#: number.
job_started = JobSignal(use_caching=True)
#: Sent by the worker (and ``run_jobs``) after the outcome is written; ``outcome`` is an
#: Attempt.Outcome value, ``exception`` the handler's exception where this process has it (else
#: None: a job rescued as dead after its worker was lost, or one that did not fail). The worker
#: sends it from a thread of its own, in the order the outcomes were written, so that a receiver
#: that blocks does not hold its loop.
job_finished = JobSignal(use_caching=True)
