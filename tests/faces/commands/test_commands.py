"""``manage.py jobs`` and ``manage.py jobstoken``, run in-process on the test database."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_jobs.models import Job
from django_jobs.models.tokens import ApiToken
from django_jobs.testing import run_jobs

pytestmark = pytest.mark.django_db
S = Job.Status


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def make(status: str, **fields) -> Job:
    job = Job.enqueue(fields.pop("type", "noop"), {}, queue=fields.pop("queue", "default"))
    Job.objects.filter(pk=job.pk).update(status=status, **fields)
    job.refresh_from_db()
    return job


def test_list_filters_by_status_type_and_queue_newest_first():
    dead = make(S.DEAD, type="echo", queue="mail", error={"type": "ValueError", "message": "x"})
    make(S.COMPLETED, type="echo", queue="mail")
    newer_dead = make(S.DEAD, type="noop")
    listed = json.loads(run("jobs", "list", "--status", "dead", "--json"))
    assert [j["job_id"] for j in listed] == [newer_dead.public_id, dead.public_id]
    assert [j["job_id"] for j in json.loads(run("jobs", "list", "--queue", "mail",
                                                  "--type", "echo", "--status", "dead",
                                                  "--json"))] == [dead.public_id]
    assert len(json.loads(run("jobs", "list", "--limit", "1", "--json"))) == 1
    text = run("jobs", "list", "--status", "dead")
    assert dead.public_id in text and "ValueError: x" in text


def test_list_since_takes_an_age_or_a_date():
    make(S.PENDING)
    assert len(json.loads(run("jobs", "list", "--since", "1h", "--json"))) == 1
    assert json.loads(run("jobs", "list", "--since", "2999-01-01T00:00", "--json")) == []


def test_show_prints_the_job_and_its_attempts():
    job = make(S.PENDING)
    data = json.loads(run("jobs", "show", job.public_id, "--json"))
    assert data["job_id"] == job.public_id and data["attempts"] == []
    assert f"job_id:           {job.public_id}" in run("jobs", "show", job.public_id)
    with pytest.raises(CommandError, match="no job j-00000000000000000000"):
        run("jobs", "show", "j-00000000000000000000")


def test_show_prints_errors_and_tracebacks_as_lines():
    """The human layout: the error's type and message, then its traceback line by line, for
    the job and for each attempt; ``--json`` keeps the stored strings."""
    job = Job.enqueue("always_fails", {"n": 7})
    run_jobs(include_delayed=True)
    job.refresh_from_db()
    assert job.status == S.DEAD and job.attempts.count() == 3
    text = run("jobs", "show", job.public_id)
    lines = text.splitlines()
    assert "\\n" not in text
    assert "error:            RuntimeError: boom 7" in lines
    assert "traceback:" in lines
    assert "  Traceback (most recent call last):" in lines
    assert "  RuntimeError: boom 7" in lines
    for number in (1, 2, 3):
        at = lines.index(f"attempt {number} (failed):" if number < 3 else "attempt 3 (dead):")
        assert lines[at + 1] == "  error:            RuntimeError: boom 7"
        assert lines[at + 2] == "  traceback:"
        assert lines[at + 3] == "    Traceback (most recent call last):"
    data = json.loads(run("jobs", "show", job.public_id, "--json"))
    assert "\n" in data["error"]["traceback"]
    assert [a["outcome"] for a in data["attempts"]] == ["failed", "failed", "dead"]


def test_list_keeps_each_job_on_one_line():
    make(S.DEAD, error={"type": "ValueError", "message": "first line\nsecond line",
                        "traceback": "Traceback (most recent call last):\n  ..."})
    make(S.PENDING)
    text = run("jobs", "list")
    assert len(text.splitlines()) == 3  # the headers and two jobs
    assert "ValueError: first line" in text and "second line" not in text


def test_retry_and_cancel_use_the_jobs_verbs_and_say_what_they_left():
    dead, completed = make(S.DEAD), make(S.COMPLETED)
    assert run("jobs", "retry", dead.public_id) == f"{dead.public_id}: pending\n"
    dead.refresh_from_db()
    assert dead.status == S.PENDING
    with pytest.raises(CommandError, match="1 of 1 job"):
        run("jobs", "retry", completed.public_id)
    assert run("jobs", "cancel", dead.public_id, "--json").count('"changed": true') == 1
    assert Job.objects.get(pk=dead.pk).status == S.CANCELED


def test_an_unknown_id_changes_nothing():
    dead = make(S.DEAD)
    with pytest.raises(CommandError, match="nothing was changed"):
        run("jobs", "retry", dead.public_id, "j-00000000000000000000")
    assert Job.objects.get(pk=dead.pk).status == S.DEAD


def test_counts_per_queue_and_status():
    make(S.DEAD, queue="mail")
    make(S.DEAD, queue="mail")
    make(S.PENDING)
    data = json.loads(run("jobs", "counts", "--json"))
    assert data["queues"]["mail"]["dead"] == 2 and data["queues"]["default"]["pending"] == 1
    assert data["total"]["dead"] == 2 and sum(data["total"].values()) == 3
    assert run("jobs", "counts").splitlines()[-1].split()[0] == "(all)"


@pytest.mark.parametrize("args, message", [
    (["jobs", "show", "42"], "is not a job id"),
    (["jobs", "list", "--status", "done"], "unknown status"),
    (["jobs", "list", "--limit", "0"], "from 1 to"),
    (["jobs", "list", "--limit", "²"], "from 1 to"),
    (["jobs", "list", "--since", "yesterday"], "neither an age"),
    (["jobs", "list", "--since", "999999999w"], "out of range"),
    (["jobs", "list", "--since", "0001-01-01T00:00+14:00"], "out of range"),
    (["jobs", "list", "--type", "a\x00b"], "is not a job type"),
    (["jobs", "retry", "j-\x00"], "is not a job id"),
    (["jobs", "list", "--queue", "a b"], "not a queue name"),
    (["jobstoken", "create", "ci", "--scopes", "admin"], "unknown scope"),
    (["jobstoken", "revoke", "secret"], "neither a token id"),
])
def test_bad_arguments_are_command_errors(args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_a_token_is_created_shown_once_listed_and_revoked():
    out = run("jobstoken", "create", "ci", "--scopes", "read,submit")
    secret = out.splitlines()[-1]
    token = ApiToken.find(secret)
    assert token is not None and token.scopes == ["read", "submit"]
    assert secret not in run("jobstoken", "list") and token.key_prefix in run("jobstoken", "list")
    assert run("jobstoken", "revoke", token.key_prefix).endswith(": revoked\n")
    assert ApiToken.find(secret) is None
    assert run("jobstoken", "list") == "no tokens\n"
    listed = json.loads(run("jobstoken", "list", "--all", "--json"))
    assert listed[0]["revoked_at"] is not None and "token" not in listed[0]


def test_revoke_checks_every_token_before_revoking_any():
    _token, secret = ApiToken.generate("a", ["read"])
    _token.save()
    with pytest.raises(CommandError, match="no token 999999"):
        run("jobstoken", "revoke", str(_token.pk), "999999")
    assert ApiToken.find(secret) is not None
