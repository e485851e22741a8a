"""Finished jobs out of the claim's table on PostgreSQL: the plain table against a layout
partitioned by prune day, measured on a throwaway cluster (default server settings).

    python benchmarks/partitioned_history.py                       # 20,000 finished, small
    python benchmarks/partitioned_history.py --finished 5000000 --upgrade-rows 1000000

The plain layout is the one ``migrate django_jobs 0027`` makes (``django_jobs_job``,
``django_jobs_jobattempt`` as they were before migration 0028 partitioned them on PostgreSQL,
and as MariaDB keeps them);
the partitioned one (``parted_job``, ``parted_attempt``) has the same columns and indexes plus
``shelf``, the partition key: 1000-01-01 while a job is open, the day it may be pruned once
it has finished (docs/explanation-history-partitions.md). Both get the same rows: ``--open``
pending jobs and ``--finished`` completed ones (one in fifty dead), one attempt each, spread
over ``--days`` prune days. Measured, in this order:

1. the claim (the product's statement shape, EXPLAIN (ANALYZE, BUFFERS), rolled back) with a
   small history and with the full one, on each layout;
2. pruning every finished job: the plain table by batched DELETE (jobs and attempts, the
   product's batch size and order; a lower bound of the product's ORM pass, which runs more
   statements per batch), the partitioned one by TRUNCATE, DETACH CONCURRENTLY + DROP, and
   DROP of its day partitions; the sizes after the prune and after VACUUM; the claim again;
3. a fenced write racing a finish that moves its row to a day partition (SQLSTATE 40001 on
   the partitioned table, and what a retry sees), and which triggers fire for a moved row;
4. the upgrade of a populated plain table (``--upgrade-rows``) into the partitioned layout,
   statement by statement: its duration, the locks it holds on the job tables (read from
   ``pg_locks`` by its own session before commit, or sampled from another session for the
   statements that cannot run in a transaction) and the longest a concurrent claim-like
   probe waited meanwhile;
5. the real migration, ``migrate django_jobs 0028``, on a plain table filled the same way
   (``--upgrade-rows`` finished jobs and ``--open`` pending ones, in a database of its own),
   while the same probe runs: the migration's total time and the probe's longest wait.

Figures go to stdout and, as JSON, to benchmarks/results/partitioned_history.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.partitioned_layouts import (  # noqa: E402
    DB,
    JOB_COLUMNS,
    MIGRATION_DB,
    OPEN,
    build_partitioned,
    day_name,
    explain_claim,
    fill,
    migrate,
    size,
)
from benchmarks.partitioned_upgrade import upgrade  # noqa: E402
from benchmarks.partitioned_watch import Probe, step  # noqa: E402
from tests.chaos.cluster import Cluster, find_bindir  # noqa: E402

RESULTS: dict = {}


def prune_plain(conn: psycopg.Connection, batch: int) -> tuple[float, int]:
    """Batched DELETE of every finished job and its attempts, oldest first, as the product's
    retention does (one short transaction per batch)."""
    start, total = time.perf_counter(), 0
    while True:
        with conn.transaction():
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM django_jobs_job WHERE status IN ('completed', 'dead') "
                "AND finished_at < now() AND created_at < now() ORDER BY created_at, id "
                "LIMIT %s FOR UPDATE SKIP LOCKED", [batch]).fetchall()]
            if ids:
                conn.execute("DELETE FROM django_jobs_jobattempt WHERE job_id = ANY(%s)", [ids])
                conn.execute("DELETE FROM django_jobs_job WHERE id = ANY(%s)", [ids])
        total += len(ids)
        if len(ids) < batch:
            return time.perf_counter() - start, total


def prune_partitioned(conn: psycopg.Connection, probe: Probe, dsn: str,
                      days: list[date]) -> list[dict]:
    """Every day partition of jobs and attempts emptied: the first by TRUNCATE, the second by
    DETACH CONCURRENTLY and DROP, the rest by DROP."""
    rows = []
    for i, day in enumerate(days):
        names = [day_name("parted_job", day), day_name("parted_attempt", day)]
        if i == 0:
            rows.append(step(conn, probe, dsn, "TRUNCATE one day", [
                f"TRUNCATE {', '.join(names)}"]))
        elif i == 1:
            rows.append(step(conn, probe, dsn, "DETACH CONCURRENTLY one day", [
                f"ALTER TABLE {base} DETACH PARTITION {name} CONCURRENTLY"
                for base, name in zip(("parted_job", "parted_attempt"), names, strict=True)],
                in_transaction=False))
            rows.append(step(conn, probe, dsn, "DROP the detached day", [
                f"DROP TABLE {', '.join(names)}"]))
        else:
            rows.append(step(conn, probe, dsn, "DROP one day", [
                f"DROP TABLE {', '.join(names)}"]))
    return rows


def race(dsn: str, table: str, partitioned: bool) -> dict:
    """A fenced write (the lease's UPDATE ... WHERE lease_token AND status = processing) that
    waits for a finish which moves the row; what it gets, and what a retry sees."""
    with psycopg.connect(dsn, autocommit=True) as setup:
        job, token = setup.execute(
            f"UPDATE {table} SET status = 'processing', lease_token = gen_random_uuid() "
            f"WHERE id = (SELECT min(id) FROM {table} WHERE status = 'pending') "
            "RETURNING id, lease_token").fetchone()
    shelf = ", shelf = current_date + 1" if partitioned else ""
    finisher = psycopg.connect(dsn)
    finisher.execute(f"UPDATE {table} SET status = 'completed', finished_at = now(){shelf} "
                     "WHERE id = %s AND lease_token = %s AND status = 'processing'",
                     [job, token])
    outcome: dict = {}

    def fenced() -> None:
        with psycopg.connect(dsn, autocommit=True) as other:
            write = (f"UPDATE {table} SET leased_until = now() + interval '1 minute' "
                     "WHERE id = %s AND lease_token = %s AND status = 'processing'")
            try:
                outcome["first"] = f"{other.execute(write, [job, token]).rowcount} rows"
            except psycopg.Error as exc:
                outcome["first"] = f"SQLSTATE {exc.sqlstate}: {exc.diag.message_primary}"
                outcome["retry"] = f"{other.execute(write, [job, token]).rowcount} rows"
            outcome["status_seen"] = other.execute(
                f"SELECT status FROM {table} WHERE id = %s", [job]).fetchone()[0]

    thread = threading.Thread(target=fenced)
    thread.start()
    time.sleep(0.5)  # the fenced write now waits for the finisher's row lock
    finisher.commit()
    thread.join()
    finisher.close()
    return outcome


def moved_row_triggers(conn: psycopg.Connection) -> dict:
    """Which of the jobs table's kinds of trigger (an AFTER INSERT statement trigger with a
    transition table, as 0018's, and an AFTER UPDATE row trigger on status, as its wake of a
    retried job) fire on the partitioned parent for a row moved between partitions."""
    conn.execute("CREATE TABLE trigger_log (what text)")
    conn.execute("""CREATE FUNCTION log_inserted() RETURNS trigger AS $$ BEGIN
        INSERT INTO trigger_log SELECT 'statement insert of ' || status FROM inserted;
        RETURN NULL; END $$ LANGUAGE plpgsql""")
    conn.execute("""CREATE FUNCTION log_pending() RETURNS trigger AS $$ BEGIN
        INSERT INTO trigger_log VALUES ('row update ' || OLD.status || ' to ' || NEW.status);
        RETURN NULL; END $$ LANGUAGE plpgsql""")
    conn.execute("CREATE TRIGGER log_insert AFTER INSERT ON parted_job REFERENCING NEW TABLE "
                 "AS inserted FOR EACH STATEMENT EXECUTE FUNCTION log_inserted()")
    conn.execute("CREATE TRIGGER log_pending AFTER UPDATE OF status ON parted_job FOR EACH ROW "
                 "WHEN (NEW.status = 'pending' AND OLD.status <> 'pending') "
                 "EXECUTE FUNCTION log_pending()")
    with conn.transaction(force_rollback=True):
        dead = conn.execute(f"SELECT id FROM parted_job WHERE status = 'dead' AND shelf <> {OPEN}"
                            " LIMIT 1").fetchone()[0]
        conn.execute(f"UPDATE parted_job SET status = 'pending', finished_at = NULL, "
                     f"shelf = {OPEN} WHERE id = %s", [dead])
        moved = [r[0] for r in conn.execute("SELECT what FROM trigger_log").fetchall()]
        copied = JOB_COLUMNS.replace("public_id, ", "'j-trigger-copy', ")
        conn.execute(f"INSERT INTO parted_job ({JOB_COLUMNS}) SELECT {copied} "
                     "FROM parted_job WHERE id = %s", [dead])
        inserted = [r[0] for r in conn.execute("SELECT what FROM trigger_log").fetchall()]
    for statement in ("DROP TRIGGER log_insert ON parted_job",
                      "DROP TRIGGER log_pending ON parted_job", "DROP TABLE trigger_log"):
        conn.execute(statement)
    return {"retry of a dead job (moved to the open partition)": moved or ["nothing fired"],
            "plain INSERT through the parent": inserted}


def timed(label: str, action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    took = time.perf_counter() - start
    print(f"  {label:<48} {took:>8.1f} s")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=20_000)
    parser.add_argument("--open", type=int, default=2_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--small", type=int, default=1_000, help="the small history")
    parser.add_argument("--batch", type=int, default=500, help="PRUNE_BATCH_SIZE")
    parser.add_argument("--upgrade-rows", type=int, default=20_000)
    args = parser.parse_args()
    bindir = find_bindir()
    if bindir is None:
        sys.exit("PostgreSQL's initdb and pg_ctl are needed (PG_BINDIR)")
    cluster = Cluster(bindir)
    wall = time.perf_counter()
    try:
        cluster.start()
        cluster.create_database(DB)
        cluster.create_database(MIGRATION_DB)
        run(cluster.port, args)
    finally:
        cluster.destroy()
    RESULTS["wall_seconds"] = round(time.perf_counter() - wall, 1)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / "partitioned_history.json").write_text(json.dumps(RESULTS, indent=2, default=str))
    print(f"wall {RESULTS['wall_seconds']} s; JSON in benchmarks/results/partitioned_history.json")


def run(port: int, args: argparse.Namespace) -> None:
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname={DB}"
    RESULTS["args"] = vars(args)
    migrate(port)
    conn = psycopg.connect(dsn, autocommit=True)
    RESULTS["server"] = conn.execute("SHOW server_version").fetchone()[0]
    today = conn.execute("SELECT current_date").fetchone()[0]
    days = [today + timedelta(days=1 + i) for i in range(args.days)]
    build_partitioned(conn, days)
    layouts = {"plain": ("django_jobs_job", "django_jobs_jobattempt", False),
               "partitioned": ("parted_job", "parted_attempt", True)}
    small = min(args.small, args.finished)
    print(f"PostgreSQL {RESULTS['server']}; {args.finished:,} finished, {args.open:,} open")
    fills: dict = {}
    for name, (table, attempts, parted) in layouts.items():
        fills[name] = [
            timed(f"{name}: open rows", lambda t=table, a=attempts, p=parted: fill(
                conn, t, a, 1, args.open, "pending", args.days, p, "o")),
            timed(f"{name}: small history", lambda t=table, a=attempts, p=parted: fill(
                conn, t, a, 1, small, "completed", args.days, p, "f")),
        ]
        conn.execute(f"ANALYZE {table}")
    claims: dict = {name: {} for name in layouts}
    claims["partitioned, no shelf in the claim"] = {}

    def measure_claims(label: str) -> None:
        claims["plain"][label] = explain_claim(conn, "django_jobs_job")
        claims["partitioned"][label] = explain_claim(conn, "parted_job", shelf=True)
        claims["partitioned, no shelf in the claim"][label] = explain_claim(conn, "parted_job")

    measure_claims("small history")
    for name, (table, attempts, parted) in layouts.items():
        fills[name].append(timed(f"{name}: the rest of the history", lambda t=table,
                                 a=attempts, p=parted: fill(conn, t, a, small + 1,
                                                            args.finished - small,
                                                            "completed", args.days, p, "f")))
        conn.execute(f"ANALYZE {table}")
        conn.execute(f"ANALYZE {attempts}")
    RESULTS["fill_seconds"] = fills
    measure_claims("full history")
    sizes = {"plain": {}, "partitioned": {}}
    sizes["plain"]["full"] = size(conn, ["django_jobs_job", "django_jobs_jobattempt"])
    sizes["partitioned"]["full"] = size(conn, ["parted_job", "parted_attempt"])

    print("prune every finished job")
    took, deleted = prune_plain(conn, args.batch)
    print(f"  plain: batched DELETE of {deleted:,} jobs          {took:>8.1f} s")
    probe = Probe(dsn, "parted_job")
    probe.start()
    dropped = prune_partitioned(conn, probe, dsn, days)
    probe.close()
    RESULTS["prune"] = {"plain_batched_delete_seconds": round(took, 2), "plain_deleted": deleted,
                        "partitioned_steps": dropped,
                        "partitioned_seconds": round(sum(r["seconds"] for r in dropped), 3)}
    print(f"  partitioned: all {len(days)} days                       "
          f"{RESULTS['prune']['partitioned_seconds']:>8.3f} s")
    sizes["plain"]["pruned"] = size(conn, ["django_jobs_job", "django_jobs_jobattempt"])
    sizes["partitioned"]["pruned"] = size(conn, ["parted_job", "parted_attempt"])
    measure_claims("after the prune, before VACUUM")
    for table in ("django_jobs_job", "django_jobs_jobattempt", "parted_job", "parted_attempt"):
        conn.execute(f"VACUUM {table}")
    sizes["plain"]["vacuumed"] = size(conn, ["django_jobs_job", "django_jobs_jobattempt"])
    sizes["partitioned"]["vacuumed"] = size(conn, ["parted_job", "parted_attempt"])
    measure_claims("after VACUUM")
    RESULTS["sizes_bytes"] = sizes
    RESULTS["claims"] = claims
    print("sizes, MB (jobs and attempts with their indexes): full, pruned, vacuumed")
    for name, figures in sizes.items():
        print(f"  {name:<12} " + "  ".join(f"{v / 2**20:>9.1f}" for v in figures.values()))
    print("claim of 10: median execution ms / planning ms / buffers")
    for name, by_label in claims.items():
        for label, figure in by_label.items():
            print(f"  {name:<36} {label:<32} {figure['execution_ms']:>8.3f} "
                  f"{figure['planning_ms']:>8.3f} {figure['buffers']:>7}")

    fill(conn, "django_jobs_job", "django_jobs_jobattempt", 10_000_001, 200, "completed",
         args.days, False, "d")
    build_again = [f"CREATE TABLE {day_name(t, d)} PARTITION OF {t} FOR VALUES FROM ('{d}') "
                   f"TO ('{d + timedelta(days=1)}')" for t in ("parted_job", "parted_attempt")
                   for d in days[1:]]  # the first was truncated, not dropped
    for statement in build_again:
        conn.execute(statement)
    fill(conn, "parted_job", "parted_attempt", 10_000_001, 200, "completed", args.days, True, "d")
    RESULTS["race"] = {name: race(dsn, table, parted)
                       for name, (table, _, parted) in layouts.items()}
    RESULTS["moved_row_triggers"] = moved_row_triggers(conn)
    print("a fenced write racing a finish that moves the row:")
    for name, outcome in RESULTS["race"].items():
        print(f"  {name:<12} {outcome}")
    print("triggers on the partitioned parent:")
    for what, fired in RESULTS["moved_row_triggers"].items():
        print(f"  {what}: {fired}")

    print(f"upgrade of the plain tables with {args.upgrade_rows:,} finished jobs more")
    start = time.perf_counter()
    fill(conn, "django_jobs_job", "django_jobs_jobattempt", 20_000_001, args.upgrade_rows,
         "completed", args.days, False, "u")
    conn.execute("VACUUM ANALYZE django_jobs_job")
    conn.execute("VACUUM ANALYZE django_jobs_jobattempt")
    RESULTS["upgrade_rows_in_table"] = conn.execute(
        "SELECT count(*) FROM django_jobs_job").fetchone()[0]
    print(f"  filled to {RESULTS['upgrade_rows_in_table']:,} rows in "
          f"{time.perf_counter() - start:.1f} s")
    probe = Probe(dsn, "django_jobs_job")
    probe.start()
    RESULTS["upgrade"] = upgrade(conn, probe, dsn, days)
    probe.close()
    RESULTS["after_upgrade"] = {
        "claim": explain_claim(conn, "django_jobs_job", shelf=True),
        "rows": conn.execute("SELECT count(*) FROM django_jobs_job").fetchone()[0],
        "partitions": [r[0] for r in conn.execute(
            "SELECT relid::text FROM pg_partition_tree('django_jobs_job') WHERE isleaf")],
        "triggers": [r[0] for r in conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'django_jobs_job'::regclass "
            "AND NOT tgisinternal")],
    }
    print(f"  after: {RESULTS['after_upgrade']}")
    conn.close()
    RESULTS["migration_0028"] = migration_0028(port, args)


def migration_0028(port: int, args: argparse.Namespace) -> dict:
    """``migrate django_jobs 0028`` on the plain tables of ``MIGRATION_DB`` (left at 0027 by
    ``migrate``), filled as the upgrade's are, timed, with the probe's longest wait."""
    from django.core.management import call_command
    from django.db import connections

    dsn = f"host=127.0.0.1 port={port} user=postgres dbname={MIGRATION_DB}"
    print(f"migrate django_jobs 0028 with {args.upgrade_rows:,} finished jobs, "
          f"{args.open:,} open")
    with psycopg.connect(dsn, autocommit=True) as conn:
        fill(conn, "django_jobs_job", "django_jobs_jobattempt", 1, args.open, "pending",
             args.days, False, "o")
        fill(conn, "django_jobs_job", "django_jobs_jobattempt", 1, args.upgrade_rows,
             "completed", args.days, False, "u")
        conn.execute("VACUUM ANALYZE django_jobs_job")
        conn.execute("VACUUM ANALYZE django_jobs_jobattempt")
        rows = conn.execute("SELECT count(*) FROM django_jobs_job").fetchone()[0]
        probe = Probe(dsn, "django_jobs_job")
        probe.start()
        start = time.perf_counter()
        try:
            call_command("migrate", "django_jobs", "0028", database="migration", verbosity=0)
        finally:
            took = time.perf_counter() - start
            probe.close()
            connections.close_all()
        after = {
            "rows": conn.execute("SELECT count(*) FROM django_jobs_job").fetchone()[0],
            "partitions": [r[0] for r in conn.execute(
                "SELECT relid::text FROM pg_partition_tree('django_jobs_job') WHERE isleaf "
                "ORDER BY 1")],
        }
    result = {"rows_before": rows, "seconds": round(took, 3),
              "probe_longest_ms": round(probe.longest * 1000, 1), **after}
    print(f"  {took:.3f} s, probe's longest wait {probe.longest * 1000:.1f} ms; "
          f"{after['rows']:,} rows after, {len(after['partitions'])} partitions")
    return result


if __name__ == "__main__":
    main()
