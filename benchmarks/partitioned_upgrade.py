"""The upgrade of ``benchmarks/partitioned_history.py``: the populated plain tables made the open
partitions of partitioned ones, statement by statement, each watched (``partitioned_watch``)."""

from __future__ import annotations

from datetime import date, timedelta

import psycopg

from benchmarks.partitioned_layouts import day_name, index_defs, partitioned_index
from benchmarks.partitioned_watch import Probe, step


def upgrade(conn: psycopg.Connection, probe: Probe, dsn: str, days: list[date]) -> list[dict]:
    """The populated plain tables made the open partitions of partitioned ones named as
    before, statement by statement (the migration docs/explanation-history-partitions.md
    proposes; ``shelf`` itself is added by migration 0027)."""
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
