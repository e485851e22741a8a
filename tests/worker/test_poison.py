"""Poison isolation: outcomes the database cannot store, on real worker processes.

Every hostile outcome runs in one batch with ordinary jobs; the worker must finish them all,
spend the poison jobs' attempts and store an error the database can hold.
"""

import signal

import pytest
from django.db import connection

from django_jobs.core.stored_errors import error_dict, storable, storable_text
from django_jobs.models import Job, JobAttempt
from tests.conftest import wait_for
from tests.edge_jobs import read_claim_log

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
OUT = JobAttempt.Outcome
FAST = ["--lease", "5", "--heartbeat", "0.5", "--poll-interval", "0.1"]
KINDS = ["nul", "surrogate", "pair"]

PG_TRIGGER = """
CREATE OR REPLACE FUNCTION test_refuse_marked() RETURNS trigger AS $$
BEGIN
    IF jsonb_typeof(NEW.result) = 'object' AND NEW.result ? 'refuse_me' THEN
        RAISE EXCEPTION 'refused by the test trigger';
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER test_refuse_marked BEFORE UPDATE ON django_jobs_job
    FOR EACH ROW EXECUTE FUNCTION test_refuse_marked();
"""
PG_DROP = "DROP TRIGGER IF EXISTS test_refuse_marked ON django_jobs_job"
SQLITE_TRIGGER = """
CREATE TRIGGER test_refuse_marked BEFORE UPDATE OF result ON django_jobs_job
WHEN json_extract(NEW.result, '$.refuse_me') IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END
"""
SQLITE_DROP = "DROP TRIGGER IF EXISTS test_refuse_marked"
MARIADB_TRIGGER = """
CREATE TRIGGER test_refuse_marked BEFORE UPDATE ON django_jobs_job FOR EACH ROW
BEGIN
    IF JSON_EXISTS(NEW.result, '$.refuse_me') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test trigger';
    END IF;
END
"""
MARIADB_DROP = "DROP TRIGGER IF EXISTS test_refuse_marked"
TRIGGERS = {"postgresql": (PG_TRIGGER, PG_DROP), "sqlite": (SQLITE_TRIGGER, SQLITE_DROP),
            "mysql": (MARIADB_TRIGGER, MARIADB_DROP)}


@pytest.fixture
def refusing_database():
    """A trigger that makes the database refuse any result holding the key ``refuse_me``:
    a refusal no validation in Python can foresee."""
    create, drop = TRIGGERS[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(create)
    yield
    with connection.cursor() as cursor:
        cursor.execute(drop)


def test_hostile_outcomes_in_one_batch_with_ordinary_jobs(
    start_worker, refusing_database, tmp_path
):
    ordinary = [Job.enqueue("echo", {"n": n}) for n in range(8)]
    hostile = {}
    for kind in KINDS:
        for job_type in ("poison_message", "poison_traceback", "poison_details", "poison_result"):
            hostile[job_type, kind] = Job.enqueue(job_type, {"kind": kind})
        ordinary.append(Job.enqueue("echo", {"after": kind}))
    refused = Job.enqueue("refused_result")
    unprintable = Job.enqueue("unprintable_error")
    everyone = [*ordinary, *hostile.values(), refused, unprintable]
    log = tmp_path / "claims.log"
    env = {"DJANGO_JOBS_TEST_CLAIM_LOG": str(log)}
    # A first claim takes as many jobs as the worker has threads: one thread per job, so the
    # first batch holds them all. ``--burst`` leaves jobs whose retry is due later
    # (reference-runworker.md): a burst worker can end a moment before the last retry comes
    # due, so burst workers run until none is left.
    concurrency = str(len(everyone))
    for _ in range(20):
        worker = start_worker("--burst", "--concurrency", concurrency, *FAST, env=env)
        assert worker.wait(timeout=120) == 0, worker.output()
        if not Job.objects.exclude(status__in=[S.COMPLETED, S.DEAD]).exists():
            break

    # The first attempt of every job, hostile and ordinary, came from one claim.
    claims = read_claim_log(log)
    first_claims = {claims[job.public_id, 1] for job in everyone}
    assert len(first_claims) == 1, claims
    assert set(claims) == set(JobAttempt.objects.filter(job__in=everyone).values_list(
        "job__public_id", "number"))  # the log holds every attempt, and only those

    for job in ordinary:
        job.refresh_from_db()
        assert job.status == S.COMPLETED, (job, job.error)
    for (job_type, kind), job in hostile.items():
        job.refresh_from_db()
        if job_type == "poison_result":
            # The result rule refuses what no database may store before anything is written
            # (jsonvalues.py): the attempt fails with InvalidResult, a permanent error.
            assert (job.status, job.attempt) == (S.DEAD, 1), (kind, job.error)
            assert job.error["type"] == "InvalidResult", job.error
            assert_storable(job.error)
            continue
        assert (job.status, job.attempt) == (S.DEAD, 2), (job_type, kind, job.error)
        assert list(job.attempts.values_list("outcome", flat=True)) == [OUT.FAILED, OUT.DEAD]
        assert_storable(job.error)
    for job_type in ("poison_message", "poison_traceback"):
        error = hostile[job_type, "nul"].error
        assert "before\\x00after" in error["message" if job_type == "poison_message"
                                           else "traceback"]
        assert "before\\ud800after" in hostile[job_type, "surrogate"].error["traceback"]
    details = hostile["poison_details", "nul"].error["details"]
    assert details["before\\x00after"] == "before\\x00after"
    assert details["nested"] == ["before\\x00after", {"deeper": ["before\\x00after", 1.5]}]
    assert details["obj"].startswith("<object object") and details["nan"] == "nan"

    refused.refresh_from_db()
    assert (refused.status, refused.attempt, refused.result) == (S.DEAD, 2, None)
    assert refused.error["type"] == "OutcomeRefused"
    assert "the database refused this job's outcome" in refused.error["message"]
    assert "refused by the test trigger" in refused.error["message"]
    unprintable.refresh_from_db()
    assert unprintable.status == S.DEAD
    assert unprintable.error["message"] == "<Unprintable: its str() raised>"


def test_refused_outcome_spends_attempts_until_dead_and_others_keep_running(
    start_worker, refusing_database, tmp_path
):
    """A long-running worker is not jammed: it goes on claiming after each refusal."""
    refused = Job.enqueue("refused_result", max_attempts=3)
    later = [Job.enqueue("echo", {"n": n}, priority="low") for n in range(20)]
    log = tmp_path / "claims.log"
    # Not --burst: the retries come due later. The first claim takes two jobs, one per thread:
    # the refused job and the first ordinary one.
    worker = start_worker("--concurrency", "2", *FAST, env={"DJANGO_JOBS_TEST_CLAIM_LOG": str(log)})
    wait_for(lambda: Job.objects.filter(pk=refused.pk, status=S.DEAD).exists()
             and not Job.objects.exclude(status__in=[S.DEAD, S.COMPLETED]).exists(), timeout=120)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=120) == 0, worker.output()
    refused.refresh_from_db()
    assert (refused.status, refused.attempt) == (S.DEAD, 3)
    assert refused.attempts.count() == 3
    assert Job.objects.filter(pk__in=[j.pk for j in later], status=S.COMPLETED).count() == 20
    assert "the database refused a batch" in worker.output()
    claims = read_claim_log(log)
    batch_mates = [job for job in later if claims[job.public_id, 1] == claims[refused.public_id, 1]]
    assert batch_mates == [later[0]]  # its batch held an ordinary job, which completed


def assert_storable(error):
    """What was stored holds no NUL and no lone surrogate, and reads back as written."""
    text = repr(error)
    assert "\x00" not in text
    for value in (error["message"], error["traceback"], error["type"]):
        value.encode("utf-8")
    return True


@pytest.mark.parametrize(("value", "stored"), [
    ("plain", "plain"),
    ("a\x00b", "a\\x00b"),  # NUL: a visible escape, as repr writes it
    ("a\ud800b", "a\\ud800b"),  # a lone surrogate
    ("\ud83d\ude00", "\\ud83d\\ude00"),  # a pair as two code points is not UTF-8 either
    ("😀 é", "😀 é"),  # real astral and accented characters stay
])
def test_storable_text(value, stored):
    assert storable_text(value) == stored


def test_storable_text_is_capped():
    assert storable_text("x" * 20, 5) == "xxxxx... [15 more characters cut]"


def test_storable_details_become_plain_json():
    looped: dict = {"n": 1}
    looped["me"] = looped
    value = storable({1: (1, 2), None: {3}, "f": float("inf"), "loop": looped})
    assert value["1"] == [1, 2] and value["null"] == [3] and value["f"] == "inf"
    depth = 0
    node = value["loop"]
    while isinstance(node, dict):
        node, depth = node["me"], depth + 1
    assert isinstance(node, str) and depth < 40  # cut, written as its repr


def test_error_dict_of_an_exception_whose_details_property_raises():
    class Odd(Exception):
        @property
        def details(self):
            raise RuntimeError("no")

    error = error_dict(Odd("x\x00"))
    assert (error["message"], error["details"]) == ("x\\x00", {})


def test_error_parts_are_capped():
    error = error_dict(type="T", message="m" * 100_000, details={"k": ["v" * 1000] * 1000})
    assert len(error["message"]) < 70_000 and error["message"].endswith("characters cut]")
    assert list(error["details"]) == ["truncated"] and len(error["details"]["truncated"]) < 270_000


def _error_of(sql: str, using=None):
    """The Django error a statement raises on ``using`` (the test's connection by default)."""
    from django.db import DatabaseError

    with (using or connection).cursor() as cursor:
        try:
            cursor.execute(sql)
        except DatabaseError as exc:
            return exc
    raise AssertionError(f"{sql!r} raised nothing")


@pytest.mark.skipif(connection.vendor != "mysql", reason="MariaDB's error numbers")
def test_mariadb_refusals_are_told_apart_from_outages():
    """Real errors of the MariaDB server: what a trigger or a constraint refuses is a refusal;
    a lock wait timeout and a lost connection are outages, whose outcomes are written later."""
    from django.db import connections

    from django_jobs.worker.isolation import refused as is_refusal

    signal_error = _error_of("SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no'")
    assert signal_error.__cause__.args[0] == 1644 and is_refusal(signal_error)
    job = Job.enqueue("echo")
    constraint = _error_of(f"UPDATE django_jobs_job SET result = 'not json' WHERE id = {job.pk}")
    assert is_refusal(constraint)

    holder = connections.create_connection("default")  # a second connection, this thread's
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute(f"SELECT id FROM django_jobs_job WHERE id = {job.pk} FOR UPDATE")
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        waited = _error_of(f"SELECT id FROM django_jobs_job WHERE id = {job.pk} FOR UPDATE")
        assert waited.__cause__.args[0] == 1205 and not is_refusal(waited)
        holder.rollback()
        with holder.cursor() as cursor:
            cursor.execute(f"KILL {connection.connection.thread_id()}")
        lost = _error_of("SELECT 1")
        assert lost.__cause__.args[0] in (2006, 2013) and not is_refusal(lost)
    finally:
        holder.close()
        connection.close()  # the killed one: the next query opens a new one


@pytest.mark.parametrize("shape", ["dict", "list"])
def test_an_error_whose_details_hold_themselves_is_stored(shape):
    """Cut to a depth every database's JSON takes (MariaDB refuses 32 levels)."""
    looped: dict | list = {} if shape == "dict" else []
    if isinstance(looped, dict):
        looped["me"] = looped
    else:
        looped.append(looped)
    error = error_dict(type="T", message="m", details={"loop": looped})
    job = Job.enqueue("echo")
    Job.objects.filter(pk=job.pk).update(error=error)
    job.refresh_from_db()
    assert job.error == error
