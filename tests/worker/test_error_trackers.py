"""What an error tracker's logging integration receives from the worker.

Sentry's logging integration (and most others) is a ``logging.Handler``: it turns records at
ERROR and above into events, with the record's ``exc_info`` as the event's exception and its
``extra`` as tags, and keeps lower ones as breadcrumbs. ``Tracker`` below records what such a
handler is given; the worker runs in this process, so its records reach it as they would.
"""

import logging

import pytest
from django.core.checks import run_checks
from django.test import override_settings

import tests.edge_jobs  # noqa: F401  (the refused_result handler)
from django_jobs.models import Job
from tests.helpers import run_burst, run_until_settled
from tests.worker.test_poison import refusing_database  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


class Tracker(logging.Handler):
    """An error tracker's handler: the events (ERROR and above) and the breadcrumbs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[logging.LogRecord] = []
        self.breadcrumbs: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        (self.events if record.levelno >= logging.ERROR else self.breadcrumbs).append(record)

    def about(self, job: Job, records: list[logging.LogRecord]) -> list[logging.LogRecord]:
        return [r for r in records if getattr(r, "job_id", None) == job.public_id]


@pytest.fixture
def tracker():
    handler = Tracker()
    jobs_logger = logging.getLogger("django_jobs")
    level = jobs_logger.level
    jobs_logger.addHandler(handler)
    jobs_logger.setLevel(logging.INFO)
    yield handler
    jobs_logger.removeHandler(handler)
    jobs_logger.setLevel(level)


def test_a_dead_job_is_an_event_with_its_traceback_and_tags(tracker):
    job = Job.enqueue("permanent", queue="mail")
    run_burst(queues=["mail"])
    [event] = tracker.about(job, tracker.events)
    assert event.levelno == logging.ERROR and event.outcome == "dead"
    kind, exc, tb = event.exc_info
    assert kind.__name__ == "PermanentError" and str(exc) == "cannot ever work"
    # The traceback reaches into the handler that raised.
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert frames[-1] == "permanent"
    assert (event.job_id, event.job_type, event.job_queue, event.attempt) == (
        job.public_id, "permanent", "mail", 1)
    assert event.reason == "PermanentError: cannot ever work"
    assert event.next == "dead: the error is not retried"


def test_retried_failures_are_breadcrumbs_and_the_last_one_an_event(tracker):
    job = Job.enqueue("always_fails")
    run_until_settled(job)
    crumbs = tracker.about(job, tracker.breadcrumbs)
    failed = [r for r in crumbs if getattr(r, "outcome", None) == "failed"]
    assert [r.attempt for r in failed] == [1, 2]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in failed)
    [event] = tracker.about(job, tracker.events)
    assert (event.outcome, event.attempt) == ("dead", 3)
    assert str(event.exc_info[1]) == "boom"


def test_log_levels_are_a_setting_merged_over_the_defaults(tracker):
    with override_settings(DJANGO_JOBS={"LOG_LEVELS": {"failed": "INFO", "dead": 50}}):
        job = Job.enqueue("always_fails")
        run_until_settled(job)
    records = tracker.about(job, tracker.breadcrumbs + tracker.events)
    levels = [(r.outcome, r.levelno) for r in records
              if getattr(r, "event", None) == "job_finished"]
    assert sorted(levels) == [("dead", logging.CRITICAL), ("failed", logging.INFO),
                              ("failed", logging.INFO)]


def test_an_outcome_the_database_refuses_is_an_event_with_the_databases_error(
    tracker, refusing_database  # noqa: F811
):
    job = Job.enqueue("refused_result")
    run_until_settled(job)
    refusals = [r for r in tracker.about(job, tracker.events) if r.event == "outcome_refused"]
    assert refusals and all(r.levelno == logging.ERROR for r in refusals)
    assert "refused by the test trigger" in str(refusals[0].exc_info[1])
    assert (refusals[0].job_type, refusals[0].job_queue) == ("refused_result", "default")
    [dead] = [r for r in tracker.about(job, tracker.events) if r.event == "job_finished"]
    assert dead.outcome == "dead" and "refused by the test trigger" in str(dead.exc_info[1])


@pytest.mark.parametrize("levels, message", [
    ("ERROR", "must be a dict"),
    ({"lost": "ERROR"}, "unknown outcome 'lost'"),
    ({"dead": "LOUD"}, "is 'LOUD', not a logging level"),
])
def test_wrong_log_levels_are_a_system_check_error(levels, message):
    with override_settings(DJANGO_JOBS={"LOG_LEVELS": levels}):
        errors = [e for e in run_checks() if e.id == "django_jobs.E006"]
    assert errors and message in errors[0].msg
