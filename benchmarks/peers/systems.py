"""What the harness needs to know of each system: its database set-up, the command of one
worker at each variant, how to tell its unfinished jobs, and how to empty it.

Each variant's source (the page of the system's own documentation it follows) is in
``docs/explanation-peers.md``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.as_shipped import TUNED

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
DJANGO = [sys.executable, "-m", "django"]
SETTINGS = "--settings=benchmarks.peers.settings"
PROCRASTINATE = [str(BIN / "procrastinate"), "--app=benchmarks.peers.proc_app.app"]
PGQ = str(BIN / "pgq")


@dataclass(frozen=True)
class System:
    name: str
    label: str
    unfinished_sql: str
    reset_sql: str
    # variant -> extra arguments of one worker; "one process per worker" unless per_cluster.
    variants: dict[str, list[str]] = field(default_factory=dict)
    # django-q2 runs one cluster whose "workers" setting is the worker count.
    per_cluster: bool = False


SYSTEMS: dict[str, System] = {
    s.name: s for s in [
        System(
            "raw", "raw psycopg (k=10)",
            "SELECT count(*) FROM raw_jobs WHERE status <> 'completed'",
            "TRUNCATE raw_jobs RESTART IDENTITY",
            {"default": []},
        ),
        System(
            "ours", "django-jobs",
            "SELECT count(*) FROM django_jobs_job WHERE status <> 'completed'",
            "TRUNCATE django_jobs_job, django_jobs_jobattempt RESTART IDENTITY CASCADE",
            {"default": [], "tuned": shlex.split(TUNED)},
        ),
        System(
            "pgqueuer", "PGQueuer",
            "SELECT count(*) FROM pgqueuer",
            "TRUNCATE pgqueuer, pgqueuer_log RESTART IDENTITY",
            {"default": [], "tuned": ["--batch-size", "25"]},
        ),
        System(
            "procrastinate", "Procrastinate",
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')",
            "TRUNCATE procrastinate_jobs RESTART IDENTITY CASCADE",
            {"default": [], "tuned": ["--concurrency", "10", "--delete-jobs", "successful"]},
        ),
        System(
            "tasksdb", "django-tasks-db",
            "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status <> 'SUCCESSFUL'",
            "TRUNCATE django_tasks_database_dbtaskresult",
            {"default": [], "tuned": ["--interval", "0.1"]},
        ),
        System(
            "q2", "django-q2",
            "SELECT count(*) FROM django_q_ormq",
            "TRUNCATE django_q_ormq, django_q_task",
            {"default": [], "tuned": []},
            per_cluster=True,
        ),
    ]
}


def db_name(system: str) -> str:
    return f"bench_peers_{system}"


def dsn(dbname: str) -> str:
    return (
        f"host={os.environ.get('PGHOST', '127.0.0.1')} port={os.environ.get('PGPORT', '5432')} "
        f"user={os.environ.get('PGUSER', 'postgres')} dbname={dbname}"
    )


def env(system: str, variant: str, workers: int = 1, probe_file: str = "") -> dict[str, str]:
    """The environment of a worker or client of ``system``."""
    return {
        **os.environ, "PEERS_DB": db_name(system), "PEERS_DSN": dsn(db_name(system)),
        "PGDATABASE": db_name(system), "PEERS_VARIANT": variant,
        "PEERS_Q_WORKERS": str(workers), "PEERS_PROBE_FILE": probe_file,
        "PYTHONPATH": str(ROOT),
    }


def worker_command(system: str, variant: str, index: int) -> list[str]:
    extra = SYSTEMS[system].variants[variant]
    if system == "raw":
        return [sys.executable, "-m", "benchmarks.peers.rawworker", dsn(db_name(system)),
                "--k", "10"]
    if system == "ours":
        return [*DJANGO, "runworker", SETTINGS, "--worker-id", f"peers-{index}", *extra]
    if system == "tasksdb":
        return [*DJANGO, "db_worker", SETTINGS, "--worker-id", f"peers-{index}", *extra]
    if system == "q2":
        return [*DJANGO, "qcluster", SETTINGS]
    if system == "procrastinate":
        return [*PROCRASTINATE, "worker", "--name", f"peers-{index}", *extra]
    return [sys.executable, "-m", "benchmarks.peers.pgq_app", *extra]


def run(cmd: list[str], system: str, variant: str = "default") -> None:
    subprocess.run(cmd, cwd=ROOT, env=env(system, variant), check=True,
                   stdout=subprocess.DEVNULL)


def set_up(system: str) -> None:
    """Create the system's schema in its (fresh) database."""
    if system == "raw":
        import psycopg

        from benchmarks import rawloop

        with psycopg.connect(dsn(db_name(system)), autocommit=True) as conn:
            conn.execute(rawloop.CREATE_TABLE)
    elif system in ("ours", "tasksdb", "q2"):
        run([*DJANGO, "migrate", SETTINGS, "-v", "0", "--skip-checks"], system)
    elif system == "procrastinate":
        run([*PROCRASTINATE, "schema", "--apply"], system)
    else:
        run([PGQ, "install"], system)


def prepare_variant(system: str, variant: str) -> None:
    """Database-side tuning: PgQueuer's durability level ("balanced" when tuned)."""
    if system == "pgqueuer":
        run([PGQ, "durability", "balanced" if variant == "tuned" else "durable"], system)
