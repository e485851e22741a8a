"""The two layouts of ``benchmarks/partitioned_history.py``: the plain tables as
``migrate django_jobs 0027`` makes them (the layout before migration 0028 partitions them on
PostgreSQL, as MariaDB keeps it) and the partitioned design of
docs/explanation-history-partitions.md beside them (``parted_job``, ``parted_attempt``), their
rows, their sizes, and the claim statement on each."""

from __future__ import annotations

import statistics
from datetime import date, timedelta

import psycopg

DB = "bench_partitioned_history"
MIGRATION_DB = "bench_partitioned_migration"
OPEN = "'1000-01-01'::date"  # core/shelves.py OPEN_SHELF
READY = "('pending', 'failed')"


def migrate(port: int) -> None:
    """The plain layout in ``DB`` and in ``MIGRATION_DB``: ``migrate django_jobs 0027``, the
    tables as they were before migration 0028 made them partitioned on PostgreSQL (as MariaDB
    keeps them). ``MIGRATION_DB`` is the ``migration`` alias, for the real 0028 measured."""
    import django
    from django.conf import settings

    def database(name: str) -> dict:
        return {"ENGINE": "django.db.backends.postgresql", "NAME": name, "USER": "postgres",
                "HOST": "127.0.0.1", "PORT": str(port)}

    settings.configure(
        DATABASES={"default": database(DB), "migration": database(MIGRATION_DB)},
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_jobs"],
        USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField")
    django.setup()
    from django.core.management import call_command

    for alias in ("default", "migration"):
        call_command("migrate", "django_jobs", "0027", database=alias, verbosity=0)
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
    """``parted_job`` and ``parted_attempt``: the plain tables' columns (``shelf`` among them,
    from migration 0027) and indexes; an open partition, one per prune day and one for jobs
    kept for ever."""
    for table, plain in (("parted_job", "django_jobs_job"),
                         ("parted_attempt", "django_jobs_jobattempt")):
        conn.execute(f"CREATE SEQUENCE {table}_id_seq")
        conn.execute(f"CREATE TABLE {table} (LIKE {plain} INCLUDING DEFAULTS) "
                     "PARTITION BY RANGE (shelf)")
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
