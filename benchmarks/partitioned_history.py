"""Finished jobs out of the claim's table on PostgreSQL: the plain table against a layout
partitioned by prune day, measured on a throwaway cluster (default server settings).

    python benchmarks/partitioned_history.py                       # 20,000 finished, small
    python benchmarks/partitioned_history.py --finished 5000000 --upgrade-rows 1000000

The plain layout is the one ``migrate`` makes (``django_jobs_job``, ``django_jobs_jobattempt``);
the partitioned one (``parted_job``, ``parted_attempt``) has the same columns and indexes plus
``shelf``, the partition key: ``-infinity`` while a job is open, the day it may be pruned once
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
   probe waited meanwhile.

Figures go to stdout and, as JSON, to benchmarks/results/partitioned_history.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.chaos.cluster import Cluster, find_bindir  # noqa: E402

DB = "bench_partitioned_history"
OPEN = "'-infinity'::date"
READY = "('pending', 'failed')"
RESULTS: dict = {}


# ---------------------------------------------------------------- layouts

def migrate(port: int) -> None:
    """The plain layout, as ``migrate`` makes it."""
    import django
    from django.conf import settings

    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": DB,
                               "USER": "postgres", "HOST": "127.0.0.1", "PORT": str(port)}},
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_jobs"],
        USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connections

    connections.close_all()


def index_defs(conn: psycopg.Connection, table: str) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s ORDER BY 1",
        [table]).fetchall()


def partitioned_index(name: str, definition: str, table: str, new_table: str) -> str:
    """A plain index's definition for the partitioned table: unique ones gain ``shelf``."""
    sql = definition.replace(f" ON public.{table} ", f" ON public.{new_table} ")
    sql = sql.replace(f"INDEX {name} ", f"INDEX {name.replace(table, new_table)}_p ")
    if "UNIQUE" in sql:
        head, _, tail = sql.partition(") ")
        sql = f"{head}, shelf) {tail}" if tail else f"{sql[:-1]}, shelf)"
    return sql


def day_name(base: str, day: date) -> str:
    return f"{base}_{day:%Y%m%d}"


def build_partitioned(conn: psycopg.Connection, days: list[date]) -> None:
    """``parted_job`` and ``parted_attempt``: the plain tables' columns and indexes plus
    ``shelf``; an open partition, one per prune day and one for jobs kept for ever."""
    for table, plain in (("parted_job", "django_jobs_job"),
                         ("parted_attempt", "django_jobs_jobattempt")):
        conn.execute(f"CREATE SEQUENCE {table}_id_seq")
        conn.execute(f"CREATE TABLE {table} (LIKE {plain} INCLUDING DEFAULTS, "
                     f"shelf date NOT NULL DEFAULT {OPEN}) PARTITION BY RANGE (shelf)")
        conn.execute(f"ALTER TABLE {table} ALTER id SET DEFAULT nextval('{table}_id_seq')")
        # A unique index, not a PRIMARY KEY: an upgraded site's open partition keeps its own
        # primary key (id), which a primary key on the parent would rebuild under lock.
        conn.execute(f"CREATE UNIQUE INDEX {table}_id_shelf ON {table} (id, shelf)")
        for name, definition in index_defs(conn, plain):
            if name.endswith("_pkey"):
                continue
            conn.execute(partitioned_index(name, definition, plain, table))
        conn.execute(f"CREATE TABLE {table}_open PARTITION OF {table} "
                     f"FOR VALUES FROM (MINVALUE) TO ('2000-01-01')")
        for day in days:
            conn.execute(f"CREATE TABLE {day_name(table, day)} PARTITION OF {table} "
                         f"FOR VALUES FROM ('{day}') TO ('{day + timedelta(days=1)}')")
        conn.execute(f"CREATE TABLE {table}_kept PARTITION OF {table} "
                     f"FOR VALUES FROM ('9999-01-01') TO (MAXVALUE)")


JOB_COLUMNS = ("public_id, type, payload, status, priority, queue, run_at, attempt, "
               "max_attempts, created_at, updated_at, started_at, finished_at, worker_id, "
               "cancel_requested, callback_url, has_dependents, crashes")


def fill(conn: psycopg.Connection, table: str, attempts: str, first: int, count: int,
         status: str, days: int, partitioned: bool, tag: str) -> None:
    """``count`` jobs (numbered from ``first``) of ``status``, with one attempt each if
    finished; finished ones spread over ``days`` prune days."""
    finished = status != "pending"
    state = ("CASE WHEN g % 50 = 0 THEN 'dead' ELSE 'completed' END" if finished
             else "'pending'")
    ended = "now() - interval '1 hour'" if finished else "NULL"
    shelf = (f", CASE WHEN {finished} THEN current_date + 1 + (g % {days}) ELSE {OPEN} END"
             if partitioned else "")
    columns = JOB_COLUMNS + (", shelf" if partitioned else "")
    conn.execute(f"""
        INSERT INTO {table} ({columns})
        SELECT 'j-{tag}' || lpad(to_hex(g), 18, '0'), 'bench.noop', '{{}}', {state}, 0,
            'default', now() - interval '2 hours', {int(finished)}, 3,
            now() - interval '2 hours' + g * interval '1 microsecond', now(),
            {ended}, {ended}, 'w', false, '', false, 0{shelf}
        FROM generate_series({first}, {first + count - 1}) AS g""")
    if finished:
        conn.execute(f"""
            INSERT INTO {attempts} (job_id, number, worker_id, started_at, finished_at,
                outcome{', shelf' if partitioned else ''})
            SELECT id, 1, 'w', started_at, finished_at, status{', shelf' if partitioned else ''}
            FROM {table} WHERE public_id >= 'j-{tag}' || lpad(to_hex({first}), 18, '0')
                AND public_id <= 'j-{tag}' || lpad(to_hex({first + count - 1}), 18, '0')
                AND status IN ('completed', 'dead')""")


def size(conn: psycopg.Connection, tables: list[str]) -> int:
    """Bytes of ``tables`` with their indexes (a partitioned one: all its partitions)."""
    total = 0
    for table in tables:
        total += conn.execute(
            "SELECT COALESCE(sum(pg_total_relation_size(relid)), 0) FROM "
            "pg_partition_tree(%s::regclass)", [table]).fetchone()[0] or conn.execute(
            "SELECT pg_total_relation_size(%s::regclass)", [table]).fetchone()[0]
    return int(total)


# ---------------------------------------------------------------- the claim

def claim_sql(table: str, shelf: bool) -> str:
    """The product's claim shape (engine/postgres/statements.py, CLAIM with READY)."""
    only_open = f" AND shelf = {OPEN}" if shelf else ""
    return f"""UPDATE {table} SET status = 'processing', lease_token = gen_random_uuid(),
    leased_until = now() + interval '5 minutes', worker_id = 'bench', attempt = attempt + 1,
    started_at = now(), updated_at = now(),
    unique_key = CASE WHEN substr(unique_key, 3, 1) = '1' THEN unique_key END
WHERE id = ANY(ARRAY(
    SELECT id FROM {table} WHERE status IN {READY} AND run_at <= now(){only_open}
    ORDER BY priority DESC, run_at, id LIMIT (SELECT 10) FOR UPDATE SKIP LOCKED
)){only_open}
RETURNING id"""


def explain_claim(conn: psycopg.Connection, table: str, shelf: bool = False,
                  repeat: int = 7) -> dict:
    """The claim's median execution and planning time and its buffers, each run rolled back."""
    runs = []
    for _ in range(repeat):
        with conn.transaction(force_rollback=True):
            plan = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {claim_sql(table, shelf)}"
                                ).fetchone()[0][0]
        top = plan["Plan"]
        runs.append((plan["Execution Time"], plan["Planning Time"],
                     top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)))
    return {"execution_ms": round(statistics.median(r[0] for r in runs), 3),
            "planning_ms": round(statistics.median(r[1] for r in runs), 3),
            "buffers": runs[-1][2]}


# ---------------------------------------------------------------- watching a statement

class Probe(threading.Thread):
    """A claim-like read of the open rows every 10 ms on its own connection; the longest
    one while ``window`` is open is what a worker's claim would have waited."""

    def __init__(self, dsn: str, table: str) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.table = table
        self.longest = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.perf_counter()
            try:
                self.conn.execute(f"SELECT id FROM {self.table} WHERE status IN {READY} "
                                  "ORDER BY priority DESC, run_at, id LIMIT 1 "
                                  "FOR UPDATE SKIP LOCKED")
            except psycopg.Error:  # the table renamed under it: the next read finds the new one
                pass
            self.longest = max(self.longest, time.perf_counter() - start)
            time.sleep(0.01)

    @contextmanager
    def window(self):
        self.longest = 0.0
        yield self
        time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        self.join()
        self.conn.close()


class Sampler(threading.Thread):
    """The relation locks ``pid`` holds or waits for, sampled every 2 ms from another session
    (for statements that cannot run in a transaction)."""

    def __init__(self, dsn: str, pid: int) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.pid = pid
        self.seen: set[tuple[str, str]] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for relation, mode in self.conn.execute(LOCKS, [self.pid]).fetchall():
                self.seen.add((relation, mode))
            time.sleep(0.002)

    def close(self) -> set[tuple[str, str]]:
        self.stop.set()
        self.join()
        self.conn.close()
        return self.seen


LOCKS = """SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
WHERE l.pid = %s AND c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace"""


def step(conn: psycopg.Connection, probe: Probe, dsn: str, name: str, statements: list[str],
         in_transaction: bool = True) -> dict:
    """Run ``statements`` (one transaction unless ``in_transaction`` is false), timed, with
    the table locks they hold and the probe's longest wait."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    with probe.window():
        start = time.perf_counter()
        if in_transaction:
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement)
                locks = set(conn.execute(LOCKS, [pid]).fetchall())
        else:
            sampler = Sampler(dsn, pid)
            sampler.start()
            for statement in statements:
                conn.execute(statement)
            locks = sampler.close()
        took = time.perf_counter() - start
    held: dict[str, list[str]] = {}
    for relation, mode in sorted(locks):
        held.setdefault(relation, []).append(mode)
    row = {"step": name, "seconds": round(took, 4), "locks": held,
           "probe_longest_ms": round(probe.longest * 1000, 1), "sql": statements}
    print(f"  {name:<48} {took:>8.3f} s  probe {probe.longest * 1000:>7.1f} ms  "
          + "; ".join(f"{r}: {','.join(m)}" for r, m in held.items()))
    return row


# ---------------------------------------------------------------- the measures

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


def upgrade(conn: psycopg.Connection, probe: Probe, dsn: str, days: list[date]) -> list[dict]:
    """The populated plain tables made the open partitions of partitioned ones named as
    before, statement by statement (the migration docs/explanation-history-partitions.md
    proposes)."""
    rows = []
    tables = ("django_jobs_job", "django_jobs_jobattempt")
    uniques = {t: [(n, d) for n, d in index_defs(conn, t) if "UNIQUE" in d] for t in tables}
    plain = {t: [(n, d) for n, d in index_defs(conn, t) if "UNIQUE" not in d] for t in tables}
    triggers = conn.execute(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
        "WHERE tgrelid = 'django_jobs_job'::regclass AND NOT tgisinternal").fetchall()
    fks = conn.execute(
        "SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE contype = 'f' "
        "AND confrelid IN ('django_jobs_job'::regclass, 'django_jobs_jobattempt'::regclass)"
    ).fetchall()
    sequences = {t: conn.execute("SELECT pg_get_serial_sequence(%s, 'id')", [t]).fetchone()[0]
                 for t in tables}
    rows.append(step(conn, probe, dsn, "ADD COLUMN shelf (constant default)", [
        f"ALTER TABLE {t} ADD COLUMN shelf date NOT NULL DEFAULT {OPEN}" for t in tables]))
    rows.append(step(conn, probe, dsn, "ADD CHECK (shelf < 2000) NOT VALID", [
        f"ALTER TABLE {t} ADD CONSTRAINT {t}_open_shelf CHECK (shelf < '2000-01-01') NOT VALID"
        for t in tables]))
    rows.append(step(conn, probe, dsn, "VALIDATE CONSTRAINT", [
        f"ALTER TABLE {t} VALIDATE CONSTRAINT {t}_open_shelf" for t in tables]))
    for table in tables:
        for name, definition in uniques[table]:
            sql = partitioned_index(name, definition, table, table)
            sql = sql.replace(f"INDEX {name}_p ", f"INDEX CONCURRENTLY {name}_s ")
            rows.append(step(conn, probe, dsn, f"CREATE UNIQUE INDEX CONCURRENTLY {name}_s",
                             [sql], in_transaction=False))
    if fks:
        rows.append(step(conn, probe, dsn, "DROP the foreign keys to jobs", [
            f"ALTER TABLE {t} DROP CONSTRAINT {c}" for t, c in fks]))
    swap = ["SET LOCAL lock_timeout = '2s'"]
    for table in tables:
        part = f"{table}_open"
        for name, _ in uniques[table]:
            if not name.endswith("_pkey"):  # the open partition keeps its primary key (id)
                swap.append(f"ALTER INDEX {name} RENAME TO {name}_open")
        for name, _ in plain[table]:
            swap.append(f"ALTER INDEX {name} RENAME TO {name}_open")
        swap.append(f"ALTER TABLE {table} RENAME TO {part}")
        swap.append(f"CREATE TABLE {table} (LIKE {part} INCLUDING DEFAULTS) "
                    "PARTITION BY RANGE (shelf)")
        swap.append(f"ALTER TABLE {table} ALTER id SET DEFAULT nextval('{sequences[table]}')")
        for name, definition in uniques[table]:
            if name.endswith("_pkey"):  # a PRIMARY KEY would not adopt {name}_s: rebuilt
                swap.append(f"CREATE UNIQUE INDEX {table}_id_shelf ON {table} (id, shelf)")
            else:
                swap.append(partitioned_index(name, definition, table, table)
                            .replace(f"INDEX {name}_p ", f"INDEX {name} "))
        for _, definition in plain[table]:
            swap.append(definition)
        swap.append(f"ALTER TABLE {table} ATTACH PARTITION {part} "
                    "FOR VALUES FROM (MINVALUE) TO ('2000-01-01')")
        swap.append(f"CREATE TABLE {table}_kept PARTITION OF {table} "
                    "FOR VALUES FROM ('9999-01-01') TO (MAXVALUE)")
    for name, definition in triggers:
        swap.append(f"DROP TRIGGER {name} ON django_jobs_job_open")
        swap.append(definition)
    rows.append(step(conn, probe, dsn, "swap: rename, parent, ATTACH the open partition",
                     swap))
    first, second = days[0], days[1]
    rows.append(step(conn, probe, dsn, "CREATE TABLE ... PARTITION OF (a day ahead)", [
        f"CREATE TABLE {day_name(t, first)} PARTITION OF {t} FOR VALUES FROM ('{first}') "
        f"TO ('{first + timedelta(days=1)}')" for t in tables]))
    made = [f"CREATE TABLE {day_name(t, second)} (LIKE {t} INCLUDING DEFAULTS)" for t in tables]
    rows.append(step(conn, probe, dsn, "CREATE TABLE LIKE (a day ahead, alone)", made))
    rows.append(step(conn, probe, dsn, "ATTACH PARTITION (that day, empty)", [
        f"ALTER TABLE {t} ATTACH PARTITION {day_name(t, second)} FOR VALUES FROM "
        f"('{second}') TO ('{second + timedelta(days=1)}')" for t in tables]))
    return rows


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


if __name__ == "__main__":
    main()
