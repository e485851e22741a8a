"""The finished jobs counted: one row per minute and one per hour, for each worker, queue, type
and outcome, which a worker adds to at its heartbeat with the counts it kept since the last one
(``engine/finish_counts.py``), and which the admin's charts sum (``admin/charts.py``): the
last hour from the minutes, the last day from the hours, so that a day is read in 24 rows
per worker, queue, type and outcome rather than 1,440.

Each worker adds only to its own rows, so two workers never wait on each other's row lock;
a reader sums the workers' rows. The wait from ``run_at`` to the start of the attempt is kept
as its sum and a histogram of fixed buckets (``WAIT_BOUNDS``), enough for percentiles; the
run time as its sum. Times are whole microseconds.
"""

from __future__ import annotations

from django.db import models

# Upper bounds (seconds) of the wait histogram's buckets; a last bucket holds the longer waits.
WAIT_BOUNDS = (0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
WAIT_BOUNDS_US = tuple(int(bound * 1_000_000) for bound in WAIT_BOUNDS)
WAIT_FIELDS = tuple(f"wait_le_{i}" for i in range(len(WAIT_BOUNDS) + 1))
# The columns a write adds to, in order.
SUMMED = ("count", "wait_sum_us", "run_sum_us", *WAIT_FIELDS)
# The unique key, the worker first: a worker's rows sit together in its index, so that the
# index entries (and on MariaDB the gaps between them) one worker's write locks are its own.
KEY = ("worker_id", "span", "bucket", "queue", "type", "outcome")
MINUTE, HOUR = 1, 60  # a row's span, in minutes


class JobStat(models.Model):
    """Attempts that ended in one minute or hour (``span`` minutes from ``bucket``, the
    database's time) in one worker, of one queue, type and outcome (completed, failed and to
    be retried, dead, canceled)."""

    id = models.BigAutoField(primary_key=True)
    span = models.PositiveSmallIntegerField(default=MINUTE)
    bucket = models.DateTimeField()
    worker_id = models.CharField(max_length=100)
    queue = models.CharField(max_length=100)
    type = models.CharField(max_length=100)
    outcome = models.CharField(max_length=16)
    count = models.BigIntegerField(default=0)
    wait_sum_us = models.BigIntegerField(default=0)
    run_sum_us = models.BigIntegerField(default=0)
    # Waits of at most WAIT_BOUNDS[i] seconds (and above the bound before); the last: longer.
    wait_le_0 = models.BigIntegerField(default=0)
    wait_le_1 = models.BigIntegerField(default=0)
    wait_le_2 = models.BigIntegerField(default=0)
    wait_le_3 = models.BigIntegerField(default=0)
    wait_le_4 = models.BigIntegerField(default=0)
    wait_le_5 = models.BigIntegerField(default=0)
    wait_le_6 = models.BigIntegerField(default=0)
    wait_le_7 = models.BigIntegerField(default=0)
    wait_le_8 = models.BigIntegerField(default=0)
    wait_le_9 = models.BigIntegerField(default=0)
    wait_le_10 = models.BigIntegerField(default=0)
    wait_le_11 = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=list(KEY), name="django_jobs_stat_key"),
        ]
        # The charts read a range of minutes or hours; retention deletes the oldest ones.
        indexes = [models.Index(fields=["span", "bucket"], name="django_jobs_stat_bucket")]

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} {self.queue}/{self.type} {self.outcome}: {self.count}"
