"""Triage starts with why: the failed and dead lists show each job's error, a failed or dead
job's page starts with its error and the handler's own frames (the worker's folded), every
date reads alike, and the job's times say what they measure beside its attempts'."""

import re

import pytest

from django_jobs.admin import display
from django_jobs.core.stored_errors import error_dict
from tests.admin_helpers import add_attempt, job_url, make_job

LIST = "/admin/django_jobs/job/"
pytestmark = pytest.mark.django_db

# A traceback as a worker stores it: the worker's own call into the handler, then the
# handler's frames, then the exception.
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/venv/lib/python3.12/site-packages/django_jobs/worker/execution.py", '
    "line 90, in _call\n    result = _invoke(found, job)\n"
    '  File "/srv/app/venv/lib/python3.12/site-packages/django_jobs/worker/execution.py", '
    "line 131, in _invoke\n    return found.func(**arguments)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/srv/app/shop/mail.py", line 12, in email_send\n'
    "    smtp.send(to, body)\n"
    "SMTPRecipientsRefused: mailbox unavailable for ada@example.com\n"
)
ERROR = error_dict(type="SMTPRecipientsRefused",
                   message="mailbox unavailable for ada@example.com\nsecond line, not shown "
                           "in the list",
                   traceback=TRACEBACK)


def column(html: str, name: str) -> list[str]:
    return re.findall(rf'<td class="field-{name}">(.*?)</td>', html, re.S)


@pytest.mark.parametrize("query", ["?status__exact=dead", "?status__exact=failed",
                                   "?has_error=yes"])
def test_the_failed_and_dead_lists_show_each_error(viewer, query):
    status = "failed" if "failed" in query else "dead"
    make_job(status, type="email_send", error=ERROR)
    make_job(status, type="email_send", error=error_dict(
        type="ValueError", message="x" * 400))
    html = viewer.get(LIST + query).content.decode()
    cells = column(html, "error_line")
    assert "SMTPRecipientsRefused: mailbox unavailable for ada@example.com" in cells
    assert not [cell for cell in cells if "second line" in cell]
    (long,) = [cell for cell in cells if cell.startswith("ValueError")]
    assert len(long) == 90 and long.endswith("…")  # cut, not the whole message
    assert ("field-next_run" in html) == (query != "?status__exact=dead")  # the dead: none


def test_other_lists_have_no_error_column(viewer):
    make_job("dead", error=ERROR)
    html = viewer.get(LIST).content.decode()
    assert "field-error_line" not in html and "SMTPRecipientsRefused" not in html


def test_the_error_column_reads_no_payload_or_traceback(viewer):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(3):
        make_job("dead", error=ERROR)
    with CaptureQueriesContext(connection) as queries:
        viewer.get(LIST + "?status__exact=dead")
    listing = [q["sql"] for q in queries if "LIMIT" in q["sql"] and "ORDER BY" in q["sql"]
               and "django_jobs_job" in q["sql"]]
    assert listing, [q["sql"] for q in queries]
    assert "traceback" not in " ".join(listing)
    selects = [q for q in queries if "SELECT" in q["sql"] and "django_jobs_job" in q["sql"]]
    assert len(selects) < 12  # one read of the page, not one per row


@pytest.mark.parametrize("status", ["dead", "failed"])
def test_a_failed_or_dead_jobs_page_starts_with_its_error(viewer, status):
    job = make_job(status, error=ERROR, payload={"to": "ada@example.com"})
    add_attempt(job, status, number=1, error=ERROR)
    html = viewer.get(job_url(job)).content.decode()
    error_at = html.index('<p class="dj-jobs-error-head">')
    assert error_at < html.index("field-public_id") < html.index('class="dj-jobs-json"')
    assert error_at < html.index("Claimed by its worker")
    # The handler's frames show; the worker's two are folded under one summary.
    pre = html[html.index('<pre class="dj-jobs-traceback">', error_at):]
    pre = pre[:pre.index("</pre>")]
    folded = re.search(r'<details class="dj-jobs-worker-frames"><summary>(.*?)</summary>(.*?)'
                       r"</details>", pre, re.S)
    assert folded and folded.group(1) == "2 frames of the worker (django_jobs.worker)"
    assert "_invoke" in folded.group(2) and "shop/mail.py" not in folded.group(2)
    handler = pre[folded.end():]
    assert "shop/mail.py&quot;, line 12, in email_send" in handler
    assert "SMTPRecipientsRefused: mailbox unavailable" in handler


def test_other_jobs_pages_keep_their_order(viewer):
    job = make_job("completed", payload={"to": "ada@example.com"})
    html = viewer.get(job_url(job)).content.decode()
    assert html.index("field-public_id") < html.index('class="dj-jobs-json"')


def test_a_traceback_without_worker_frames_is_shown_whole():
    text = 'Traceback (most recent call last):\n  File "jobs.py", line 3, in send\nKeyError: 1'
    assert display.traceback_parts(text) == [(False, text)]
    assert "<details" not in display.folded_traceback(text)


def test_times_say_what_they_measure_and_every_date_reads_alike(viewer):
    job = make_job("dead", error=ERROR)
    add_attempt(job, "dead", number=1, error=ERROR)
    html = viewer.get(job_url(job)).content.decode()
    for label in ("claimed by its worker", "outcome written", "claim to outcome",
                  "handler started", "handler ended", "handler ran"):
        assert label in html.lower()
    assert "The job's times are the database's" in html
    listed = viewer.get(LIST).content.decode()
    for page in (html, listed):
        assert "a.m." not in page and "p.m." not in page
    assert display.when(job.created_at) in listed
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+", display.when(job.created_at))
