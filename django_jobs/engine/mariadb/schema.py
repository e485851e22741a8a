"""MariaDB and MySQL: the unique index in place of the partial constraint and the list indexes,
run by the migrations.

MariaDB and MySQL have no partial indexes. Django creates a ``condition=`` index there as a full
index (the status and lease indexes of ``Job.Meta`` exist in full, and the claim and rescue
read only their own states through them; the claim indexes, on the expression ``priority
DESC``, are left out on MariaDB), but it leaves a conditional ``UniqueConstraint`` out entirely
(``models.W036``), so unique jobs would not be held.

The migration that uses this module adds, on MariaDB and MySQL only, a plain unique index on
``unique_key``. It holds the same rule as PostgreSQL's partial one: a job's key is cleared to
NULL in the same UPDATE that moves it to a state the key does not guard
(``uniquekey.keep_key_if``), and a unique index there admits any number of NULLs, so only keys in
guarded states take part. No generated column is needed. A later one rebuilds the two list
indexes so that they serve the lists' order (``LIST_INDEXES``) and adds the ready index; the
next widens the status index so that the admin's overview counts from it alone
(``COVERING_STATUS_INDEX``) and adds the type and queue list indexes (``FILTER_INDEXES``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.db.backends.base.schema import BaseDatabaseSchemaEditor
    from django.db.migrations.state import StateApps

TABLE = "django_jobs_job"

# name -> (unique, columns)
INDEXES: dict[str, tuple[bool, str]] = {
    # At most one job per key; NULL (no key, or a key released) repeats freely.
    "django_jobs_unique_key_my": (True, "unique_key"),
}


def is_mysql_family(schema_editor: BaseDatabaseSchemaEditor) -> bool:
    """MariaDB or MySQL: Django's ``mysql`` backend serves both."""
    return schema_editor.connection.vendor == "mysql"


def add_indexes(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if not is_mysql_family(schema_editor):
        return
    for name, (unique, columns) in INDEXES.items():
        kind = "UNIQUE INDEX" if unique else "INDEX"
        schema_editor.execute(f"CREATE {kind} {name} ON {TABLE} ({columns})")


def drop_indexes(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if not is_mysql_family(schema_editor):
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX {name} ON {TABLE}")


# The list indexes (``Job.Meta``) as they are rebuilt here, under the same names, with ``id``
# last: an InnoDB secondary index ends in the primary key in ascending order, so Django's
# ``(created_at DESC)`` orders as ``created_at DESC, id ASC`` and cannot serve the lists'
# ``ORDER BY created_at DESC, id DESC`` (the admin's, the API's cursor pages), which MariaDB
# then sorts in full. Rebuilt ascending, InnoDB reads them backwards for that order, forwards
# for the API's previous pages, and ``MIN``/``MAX(created_at)`` (the admin's date drill-down)
# from their ends, which MariaDB does not do on a descending key.
# name -> (columns as rebuilt, columns as Django made them)
LIST_INDEXES: dict[str, tuple[str, str]] = {
    "django_jobs_created_idx": ("created_at, id", "created_at DESC"),
    "django_jobs_status_idx": ("status, created_at, id", "status, created_at DESC"),
}
# The ready jobs by due time, in place of PostgreSQL's partial ready index: the admin counts the
# due ones and finds the oldest from this index alone.
READY_INDEX = ("django_jobs_ready_my", "status, run_at")


def _rebuild_list_indexes(schema_editor: BaseDatabaseSchemaEditor, which: int) -> None:
    if not is_mysql_family(schema_editor):
        return
    changes = [f"DROP INDEX {name}, ADD INDEX {name} ({columns[which]})"
               for name, columns in LIST_INDEXES.items()]
    name, columns = READY_INDEX
    changes.append(f"ADD INDEX {name} ({columns})" if which == 0 else f"DROP INDEX {name}")
    schema_editor.execute(f"ALTER TABLE {TABLE} {', '.join(changes)}")  # one table rebuild


def order_list_indexes_by_id(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _rebuild_list_indexes(schema_editor, 0)


def restore_list_indexes(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _rebuild_list_indexes(schema_editor, 1)


# The status index widened with the columns the admin's overview groups and counts by (its
# queue, type and due time), after the columns the lists walk: the overview's counts of the open
# jobs and of the last day's completed ones then read this index alone, where they looked up
# every counted row in the table (0.9 s for 100,000 open jobs; 0.07 s from the index). The
# entry is rewritten when the status changes, as it already was; the queue and type never
# change, and ``run_at`` changes only with the status or a snooze.
# (name, columns widened, columns before)
COVERING_STATUS_INDEX = (
    "django_jobs_status_idx",
    "status, created_at, id, queue, type, run_at",
    LIST_INDEXES["django_jobs_status_idx"][0],
)
# The lists filtered by type or by queue (admin, API), in their order: without them a page walks
# the created index until 50 rows match, which for a type or queue with few jobs (or none) is
# the whole table (1.8-2.3 s at a million rows). A job's type, queue and creation time never
# change, so these are written when a job is inserted or deleted, never by a claim or finish.
FILTER_INDEXES: dict[str, str] = {
    "django_jobs_type_my": "type, created_at, id",
    "django_jobs_queue_my": "queue, created_at, id",
}


def _rebuild_admin_indexes(schema_editor: BaseDatabaseSchemaEditor, add: bool) -> None:
    if not is_mysql_family(schema_editor):
        return
    name, widened, narrow = COVERING_STATUS_INDEX
    changes = [f"DROP INDEX {name}", f"ADD INDEX {name} ({widened if add else narrow})"]
    for index, columns in FILTER_INDEXES.items():
        changes.append(f"ADD INDEX {index} ({columns})" if add else f"DROP INDEX {index}")
    schema_editor.execute(f"ALTER TABLE {TABLE} {', '.join(changes)}")  # one table rebuild


def add_admin_indexes(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _rebuild_admin_indexes(schema_editor, add=True)


def drop_admin_indexes(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _rebuild_admin_indexes(schema_editor, add=False)


# The failed and dead jobs by ``updated_at``, for the lists with ``since`` (the API's ``GET
# /jobs?status=failed&since=``), which otherwise walk every failed job's entry of the status
# index and read its row for ``updated_at`` (0.46 s at a million rows). With no partial index
# here, the key is a virtual column that is ``updated_at`` for a failed or dead job and NULL
# for any other: a claim or a finish that leaves a job outside those states leaves the key
# NULL, so InnoDB writes no entry for it; only a job entering or leaving them, or a failed one
# written again, moves one. The column is the database's alone: the model does not know it,
# and the lists read it through ``models/updated.py``.
ENDED_UPDATED_INDEX = "django_jobs_updated_my"
# ``models.jobs.UPDATED_SINCE`` as the migration writes them into the column's expression.
ENDED_STATES = ("failed", "dead")


def add_updated_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if not is_mysql_family(schema_editor):
        return
    from django_jobs.models.updated import ENDED_UPDATED_COLUMN

    states = ", ".join(f"'{state}'" for state in ENDED_STATES)
    # Two statements: a virtual column is added in place at once, the index is built online
    # (writes go on meanwhile), which one ALTER of both would not allow.
    schema_editor.execute(
        f"ALTER TABLE {TABLE} ADD COLUMN {ENDED_UPDATED_COLUMN} DATETIME(6) "
        f"AS (IF(status IN ({states}), updated_at, NULL)) VIRTUAL")
    schema_editor.execute(
        f"ALTER TABLE {TABLE} ADD INDEX {ENDED_UPDATED_INDEX} ({ENDED_UPDATED_COLUMN})")


def drop_updated_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if not is_mysql_family(schema_editor):
        return
    from django_jobs.models.updated import ENDED_UPDATED_COLUMN

    schema_editor.execute(f"ALTER TABLE {TABLE} DROP INDEX {ENDED_UPDATED_INDEX}")
    schema_editor.execute(f"ALTER TABLE {TABLE} DROP COLUMN {ENDED_UPDATED_COLUMN}")


@contextmanager
def updated_index_set_aside(schema_editor: BaseDatabaseSchemaEditor) -> Iterator[None]:
    """On MariaDB and MySQL, the updated index dropped around the block and built again after
    it (online: writes go on while it builds). MariaDB adds a column to a table instantly (in
    its definition, no row rewritten) only while no index holds a virtual column; with the
    updated index in place, ``ADD COLUMN`` rebuilds the whole table. Elsewhere, nothing."""
    if not is_mysql_family(schema_editor):
        yield
        return
    from django_jobs.models.updated import ENDED_UPDATED_COLUMN

    schema_editor.execute(f"ALTER TABLE {TABLE} DROP INDEX {ENDED_UPDATED_INDEX}")
    try:
        yield
    finally:
        schema_editor.execute(
            f"ALTER TABLE {TABLE} ADD INDEX {ENDED_UPDATED_INDEX} ({ENDED_UPDATED_COLUMN})")
