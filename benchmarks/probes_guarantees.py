"""Probes of the guarantees with real ``runworker`` processes: clock skew, a stop with a short
shutdown timeout, a read-only window, a role's statement timeout, and jobs on a database of
their own (a router). Each probe runs once, in a child process of its own on a database it
creates and drops; the numbers are printed as one JSON line per probe, then a table.

    python -m benchmarks.probes_guarantees [--small] [--probe clock,stop,readonly,timeout,routed]

PostgreSQL at 127.0.0.1:5432 (user postgres), MariaDB at 127.0.0.1:3306 (root). ``--small``
is a quick form with fewer jobs and runs. The numbers are measurements, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SUFFIX = "_hremeasure_probe"
LOGS = Path(os.environ.get("PROBES_LOGS", "/tmp/probes_hremeasure"))  # noqa: S108
ROLE = f"probe{SUFFIX}_role"
PROBES = ["clock", "stop", "readonly", "timeout", "routed"]


# --- the parent: one child per probe and database ---

def child_env(db: str, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "benchmarks.settings_probes", "DJANGO_JOBS_TEST_DB": db,
            "DJANGO_JOBS_TEST_SUFFIX": SUFFIX, "JOBS_DB_NAME": name, **(extra or {})}


def run_child(probe: str, db: str, small: bool, skew: int = 0) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.probes_guarantees", "--child", probe,
               "--db", db, "--skew", str(skew), *(["--small"] if small else [])]
    done = subprocess.run(command, cwd=ROOT, env=child_env(db, ""), capture_output=True,
                          text=True, timeout=900)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"probe": probe, "db": db, "skew": skew, "error": done.stderr[-3000:]}
    return json.loads(lines[-1])


# --- the child ---

class Workers:
    """Real ``runworker`` processes on the probe's database; all killed at the end."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str, env: dict[str, str] | None = None,
              prefix: list[str] | None = None) -> subprocess.Popen:
        LOGS.mkdir(exist_ok=True)
        log = open(LOGS / f"worker-{time.time_ns()}.log", "w")
        proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "django", "runworker", *args],
            cwd=ROOT, env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        """SIGKILL to each worker's process group: ``faketime`` runs the worker as a child
        of its own, which a signal to ``faketime`` alone would leave running."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        self.procs = []


def wait_for(predicate, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def pg_admin():
    import psycopg

    return psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres",
                           autocommit=True)


def create_database(db: str, name: str, owner: str | None = None) -> None:
    if db == "postgres":
        with pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"' + (f' OWNER "{owner}"' if owner else ""))
    else:
        import MySQLdb

        admin = MySQLdb.connect(host="127.0.0.1", port=3306, user="root")
        cursor = admin.cursor()
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 "
                       "COLLATE utf8mb4_unicode_ci")
        admin.close()


def drop_database(db: str, name: str) -> None:
    if db == "postgres":
        with pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        import MySQLdb

        admin = MySQLdb.connect(host="127.0.0.1", port=3306, user="root")
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def migrate(env: dict[str, str], database: str = "default") -> None:
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0",
                    f"--database={database}"], cwd=ROOT, env=env, check=True, timeout=300)


def db_epoch() -> float:
    from django.db import connection

    from django_jobs.core import clock

    with connection.cursor() as cursor:
        cursor.execute(clock.QUERIES[connection.vendor])
        return int(cursor.fetchone()[0]) / 1_000_000


def registered(*worker_ids: str) -> bool:
    from django_jobs.models import Worker

    return Worker.objects.filter(pk__in=worker_ids).count() == len(worker_ids)


def runs_per_job() -> dict[int, int]:
    """How many jobs ran how many times: {runs: jobs} (jobs that never ran not counted)."""
    from tests.models import Execution

    per_job = Counter(Execution.objects.values_list("job_public_id", flat=True))
    return dict(sorted(Counter(per_job.values()).items()))


def other_outcomes() -> dict[str, int]:
    """The attempts other than completed, by outcome and error type."""
    from django_jobs.models import JobAttempt

    outcomes = Counter(
        f"{outcome} {(error or {}).get('type', '') if isinstance(error, dict) else ''}".strip()
        for outcome, error in JobAttempt.objects.exclude(outcome="completed")
        .values_list("outcome", "error"))
    return dict(outcomes)


def other_messages() -> dict[str, int]:
    """The error messages of the attempts other than completed (their first line, cut)."""
    from django_jobs.models import JobAttempt

    errors = JobAttempt.objects.exclude(outcome="completed").values_list("error", flat=True)
    return dict(Counter(str((error or {}).get("message", "")).splitlines()[0][:120]
                        if isinstance(error, dict) and error.get("message") else ""
                        for error in errors))


def statuses() -> dict[str, int]:
    from django_jobs.models import Job

    return dict(Counter(Job.objects.values_list("status", flat=True)))


def completed() -> int:
    from django_jobs.models import Job

    return Job.objects.filter(status="completed").count()


def probe_clock(workers: Workers, db: str, skew: int, small: bool) -> dict[str, Any]:
    """Two workers, one under ``faketime -f <skew>s``, lease 8 s: jobs of 15 s each split
    between them (2 slots each), lost attempts and handler runs; then jobs with ``delay=20``
    run by the skewed worker alone, and how long after their ``run_at`` they start by the
    database's clock."""
    from django.utils import timezone

    from django_jobs.models import Job, JobAttempt
    from tests.models import Execution

    lease = ["--lease", "8", "--heartbeat", "2", "--poll-interval", "0.2", "--prefetch", "0",
             "--concurrency", "2"]
    plain = workers.start("--worker-id", "plain", *lease)
    workers.start("--worker-id", "skewed", *lease, env={"FAKETIME_DONT_FAKE_MONOTONIC": "1"},
                  prefix=["faketime", "-f", f"{skew:+d}s"])
    wait_for(lambda: registered("plain", "skewed"), 60)
    count = 2 if small else 4
    past = timezone.now() - timedelta(minutes=5)
    long_jobs = [Job.enqueue("record_waiting", {"wait": 15}, run_at=past) for _ in range(count)]
    wait_for(lambda: Job.objects.filter(status__in=["completed", "dead", "failed"]).count()
             == count, 150, 0.5)
    result: dict[str, Any] = {
        "long_jobs": count,
        "long_completed": completed(),
        "lost_attempts": JobAttempt.objects.filter(outcome="lost").count(),
        "handler_runs": Execution.objects.count(),
        "runs_per_job": runs_per_job(),
        "held_by": dict(Counter(Job.objects.filter(pk__in=[j.pk for j in long_jobs])
                                .values_list("worker_id", flat=True))),
    }
    # The delayed jobs are the skewed worker's alone: it is the one that could start them
    # early (ahead) or late (behind).
    plain.send_signal(signal.SIGTERM)
    plain.wait(timeout=60)
    delayed = [Job.enqueue("record_waiting", {"wait": 0}, delay=20) for _ in range(3)]
    run_at = {job.public_id: job.run_at.timestamp() for job in delayed}
    started: dict[str, float] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(started) < len(delayed):
        seen = set(Execution.objects.filter(job_public_id__in=run_at)
                   .values_list("job_public_id", flat=True))
        now = db_epoch()  # read after: a job seen started began before ``now``
        for public_id in seen - started.keys():
            started[public_id] = round(now - run_at[public_id], 2)
        time.sleep(0.05)
    result["delayed_start_after_run_at_s"] = sorted(started.values())
    result["delayed_started"] = len(started)
    result["delayed_run_by"] = dict(Counter(
        Job.objects.filter(public_id__in=run_at).values_list("worker_id", flat=True)))
    return result


def probe_stop(workers: Workers, db: str, skew: int, small: bool) -> dict[str, Any]:
    """A worker with ``--shutdown-timeout 1`` and a 1 s atexit hook gets SIGTERM while its
    handler (5 s) runs and another worker is up: the overlap of the two processes' runs."""
    from django_jobs.models import Job, JobAttempt

    runs = []
    for index in range(2 if small else 6):
        JobAttempt.objects.all().delete()
        Job.objects.all().delete()
        marks = LOGS / f"marks-{index}-{time.time_ns()}"
        stopping = workers.start("--worker-id", f"stopping-{index}", "--shutdown-timeout", "1",
                                 env={"DJANGO_JOBS_TEST_EXIT_HOOK": "1"})
        wait_for(lambda i=index: registered(f"stopping-{i}"), 60)
        job = Job.enqueue("marking", {"seconds": 5, "log": str(marks)})
        wait_for(lambda i=index, pk=job.pk: Job.objects.filter(
            pk=pk, status="processing", worker_id=f"stopping-{i}").exists(), 60)
        other = workers.start("--worker-id", f"other-{index}")
        wait_for(lambda i=index: registered(f"other-{i}"), 60)
        time.sleep(0.5)
        stopping.send_signal(signal.SIGTERM)
        wait_for(lambda pk=job.pk: Job.objects.filter(pk=pk, status="completed").exists(), 60,
                 0.1)
        stopping.wait(timeout=30)
        other.send_signal(signal.SIGTERM)
        other.wait(timeout=30)
        by_pid: dict[int, list[int]] = {}
        for line in marks.read_text().splitlines():
            pid, ns = line.split()
            by_pid.setdefault(int(pid), []).append(int(ns))
        # The stopping process's last mark minus the other's first: > 0 is an overlap.
        overlap_ms = None
        if stopping.pid in by_pid and other.pid in by_pid:
            overlap_ms = (max(by_pid[stopping.pid]) - min(by_pid[other.pid])) / 1e6
        runs.append({
            "overlap_ms": None if overlap_ms is None else round(max(0.0, overlap_ms), 1),
            "gap_ms": None if overlap_ms is None else round(max(0.0, -overlap_ms), 1),
            "processes_that_ran_it": len(by_pid),
            "attempts": list(JobAttempt.objects.filter(job=job).order_by("id")
                             .values_list("outcome", flat=True)),
            "stopping_exit": stopping.returncode,
        })
    return {"runs": runs,
            "max_overlap_ms": max((run["overlap_ms"] or 0.0) for run in runs)}


def terminate_sessions(name: str) -> int:
    from django.db import connections

    for connection in connections.all():
        connection.close()
    with pg_admin() as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = %s AND pid <> pg_backend_pid()", [name]).fetchall()
    return len(rows)


def probe_readonly(workers: Workers, db: str, skew: int, small: bool) -> dict[str, Any]:
    """Jobs draining with 4 workers; mid-drain the database goes read-only for 4 s
    (``default_transaction_read_only`` on, the sessions terminated), then back."""
    from django.db import connection

    from django_jobs.models import Job

    name = connection.settings_dict["NAME"]
    count = 200 if small else 600
    ids = [f"drain-{n}" for n in range(4)]
    for worker_id in ids:
        workers.start("--worker-id", worker_id, "--poll-interval", "0.2")
    wait_for(lambda: registered(*ids), 60)
    Job.enqueue_many("record", [{"sleep": 0.05} for _ in range(count)])
    wait_for(lambda: completed() >= count // 4, 120, 0.1)
    at_window = completed()
    with pg_admin() as admin:
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    terminated = terminate_sessions(name)
    time.sleep(4)
    with pg_admin() as admin:
        admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
    for conn in __import__("django.db").db.connections.all():
        conn.close()  # this process's sessions of the window were read-only too
    back = time.monotonic()
    done = wait_for(lambda: completed() == count, 120, 0.2)
    return {
        "jobs": count, "completed_at_window": at_window, "sessions_terminated": terminated,
        "completed": completed(),
        "seconds_to_all_after_window": round(time.monotonic() - back, 1) if done else None,
        "statuses": statuses(), "runs_per_job": runs_per_job(),
        "attempts_not_completed": other_outcomes(), "their_messages": other_messages(),
    }


def probe_timeout(workers: Workers, db: str, skew: int, small: bool) -> dict[str, Any]:
    """A role with ``statement_timeout = 300ms``; jobs whose results are 1 MB each, one
    worker with 32 threads."""
    from django_jobs.models import Job

    count, concurrency = (32, 16) if small else (96, 32)
    start = time.monotonic()
    Job.enqueue_many("probe_big_result", [{} for _ in range(count)])
    workers.start("--worker-id", "timeout", "--concurrency", str(concurrency))
    done = wait_for(lambda: completed() == count, 180, 0.2)
    elapsed = time.monotonic() - start
    return {
        "jobs": count, "concurrency": concurrency, "completed": completed(),
        "seconds_to_all": round(elapsed, 1) if done else None,
        "left_processing": Job.objects.filter(status="processing").count(),
        "statuses": statuses(), "runs_per_job": runs_per_job(),
        "attempts_not_completed": other_outcomes(),
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def probe_routed(workers: Workers, db: str, skew: int, small: bool) -> dict[str, Any]:
    """The app on a ``jobs`` alias: a drain whose jobs database's sessions are terminated
    mid-drain; an idle worker's wake-up after an enqueue; concurrent API POSTs with one
    Idempotency-Key."""
    from django.conf import settings

    from django_jobs.models import Job, JobAttempt
    from django_jobs.models.tokens import ApiToken
    from tests.models import Execution

    jobs_name = settings.DATABASES["jobs"]["NAME"]
    count = 120 if small else 403
    ids = ["routed-0", "routed-1"]
    for worker_id in ids:
        workers.start("--worker-id", worker_id, "--concurrency", "4", "--poll-interval", "0.2")
    wait_for(lambda: registered(*ids), 60)
    start = time.monotonic()
    Job.enqueue_many("record", [{"sleep": 0.1} for _ in range(count)])
    wait_for(lambda: completed() >= count // 4, 120, 0.1)
    at_cut = completed()
    terminated = terminate_sessions(jobs_name)
    done = wait_for(lambda: completed() == count, max(1.0, 120 - (time.monotonic() - start)),
                    0.2)
    result: dict[str, Any] = {
        "jobs": count, "completed_at_cut": at_cut, "sessions_terminated": terminated,
        "completed_in_120s": completed(),
        "seconds_to_all": round(time.monotonic() - start, 1) if done else None,
        "runs_per_job": runs_per_job(), "attempts_not_completed": other_outcomes(),
    }
    workers.kill_all()
    JobAttempt.objects.all().delete()
    Job.objects.all().delete()
    Execution.objects.all().delete()

    workers.start("--worker-id", "idle", "--poll-interval", "30")
    wait_for(lambda: registered("idle"), 60)
    time.sleep(2)
    latencies = []
    for _ in range(5 if small else 20):
        job = Job.enqueue("noop", {})
        wait_for(lambda j=job: Job.objects.filter(pk=j.pk, status="completed").exists(), 60,
                 0.01)
        attempt = JobAttempt.objects.filter(job=job).first()
        if attempt is not None:
            latencies.append((attempt.started_at - job.created_at).total_seconds() * 1000)
        time.sleep(0.3)
    result["wakeup_samples"] = len(latencies)
    if latencies:
        result["wakeup_p50_ms"] = round(percentile(latencies, 0.5), 1)
        result["wakeup_p95_ms"] = round(percentile(latencies, 0.95), 1)
    workers.kill_all()

    token, raw = ApiToken.generate("probe", ["submit"])
    token.save()
    port = 55120
    LOGS.mkdir(exist_ok=True)
    server_log = open(LOGS / f"runserver-{time.time_ns()}.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT, env=workers.env, stdout=server_log, stderr=subprocess.STDOUT)
    try:
        def up() -> bool:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/jobs", timeout=2)
            except urllib.error.HTTPError:
                return True
            except OSError:
                return False
            return True

        wait_for(up, 60, 0.2)
        rounds = []
        for index in range(2 if small else 5):
            key = f"probe-{index}-{uuid.uuid4().hex}"
            barrier = threading.Barrier(20)
            codes: list[int] = []

            def post(index: int = index, key: str = key, barrier=barrier, codes=codes) -> None:
                body = json.dumps({"type": "echo", "payload": {"round": index}}).encode()
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/jobs", data=body, method="POST",
                    headers={"Authorization": f"Bearer {raw}",
                             "Content-Type": "application/json", "Idempotency-Key": key})
                barrier.wait()
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                        codes.append(response.status)
                except urllib.error.HTTPError as error:
                    codes.append(error.code)

            threads = [threading.Thread(target=post) for _ in range(20)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            made = Job.objects.filter(type="echo", payload__round=index).count()
            rounds.append({"jobs_made": made, "codes": dict(Counter(codes))})
        result["idempotency_rounds"] = rounds
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        server_log.close()
    return result


def child(probe: str, db: str, skew: int, small: bool) -> dict[str, Any]:
    name = f"probes{SUFFIX}_{probe}"
    extra: dict[str, str] = {}
    created: list[tuple[str, str]] = []
    if probe == "routed":
        extra["DJANGO_JOBS_TEST_ROUTER"] = "jobs"
        names = [f"test_django_jobs{SUFFIX}_jobs_default", f"test_django_jobs{SUFFIX}_jobs_jobs"]
        for each in names:
            create_database(db, each)
            created.append((db, each))
    elif probe == "timeout":
        with pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{ROLE}"')
            admin.execute(f'CREATE ROLE "{ROLE}" LOGIN')
            admin.execute(f"ALTER ROLE \"{ROLE}\" SET statement_timeout = '300ms'")
        create_database(db, name, owner=ROLE)
        created.append((db, name))
        extra["PGUSER"] = ROLE
    else:
        create_database(db, name)
        created.append((db, name))
    env = child_env(db, name, extra)
    os.environ.update(env)
    workers = Workers(env)
    try:
        if probe == "routed":
            migrate(env, "default")
            migrate(env, "jobs")
        else:
            # The migrations run without the role's statement timeout: it is the workers' limit.
            migrate({**env, "PGOPTIONS": "-c statement_timeout=0"})
        import django

        django.setup()
        function = globals()[f"probe_{probe}"]
        return {"probe": probe, "db": db, "skew": skew, **function(workers, db, skew, small)}
    finally:
        workers.kill_all()
        from django.db import connections

        for connection in connections.all():
            connection.close()
        for each_db, each in created:
            drop_database(each_db, each)
        if probe == "timeout":
            with pg_admin() as admin:
                admin.execute(f'DROP ROLE IF EXISTS "{ROLE}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="fewer jobs and runs")
    parser.add_argument("--probe", default=",".join(PROBES))
    parser.add_argument("--child", choices=PROBES, help=argparse.SUPPRESS)
    parser.add_argument("--db", default="postgres", help=argparse.SUPPRESS)
    parser.add_argument("--skew", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.db, args.skew, args.small)))
        return
    plan: list[tuple[str, str, int]] = []
    for probe in args.probe.split(","):
        if probe == "clock":
            plan += [("clock", db, skew) for db in ("postgres", "mariadb") for skew in (30, -30)]
        else:
            plan.append((probe, "postgres", 0))
    for probe, db, skew in plan:
        started = time.monotonic()
        result = run_child(probe, db, args.small, skew)
        result["wall_s"] = round(time.monotonic() - started, 1)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
