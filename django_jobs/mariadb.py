"""MariaDB and MySQL: the indexes that stand in for the job table's partial indexes there.

MariaDB and MySQL have no partial indexes, so Django creates none of the ``condition=`` indexes
and constraints in ``Job.Meta`` on them (it warns ``models.W036``/``W037`` and goes on). The
migration that uses this module adds full indexes in their place, on MariaDB and MySQL only:

- ``unique_key``: a plain unique index holds the same rule as PostgreSQL's partial one. A job's
  key is cleared to NULL in the same UPDATE that moves it to a state the key does not guard
  (``unique.keep_key_if``), and a unique index there admits any number of NULLs, so only keys
  in guarded states take part. No generated column is needed.
- the claim and rescue queries lead with ``status``, so a claim reads only pending and failed
  rows and rescue only processing ones, however many finished rows the table holds.
"""

from __future__ import annotations

from typing import Any

TABLE = "django_jobs_job"

# name -> (unique, columns)
INDEXES: dict[str, tuple[bool, str]] = {
    # At most one job per key; NULL (no key, or a key released) repeats freely.
    "django_jobs_unique_key_my": (True, "unique_key"),
    # The claim: WHERE status IN ('pending', 'failed') [AND queue IN ...] AND run_at <= now.
    "django_jobs_ready_my": (False, "status, queue, run_at"),
    "django_jobs_ready_any_my": (False, "status, run_at"),
    # Rescue: WHERE status = 'processing' AND leased_until < now.
    "django_jobs_lease_my": (False, "status, leased_until"),
    # Lists filtered by status, newest first (admin, API).
    "django_jobs_status_my": (False, "status, created_at"),
}


def is_mysql_family(schema_editor: Any) -> bool:
    """MariaDB or MySQL: Django's ``mysql`` backend serves both."""
    return schema_editor.connection.vendor == "mysql"


def add_indexes(apps: Any, schema_editor: Any) -> None:
    if not is_mysql_family(schema_editor):
        return
    for name, (unique, columns) in INDEXES.items():
        kind = "UNIQUE INDEX" if unique else "INDEX"
        schema_editor.execute(f"CREATE {kind} {name} ON {TABLE} ({columns})")


def drop_indexes(apps: Any, schema_editor: Any) -> None:
    if not is_mysql_family(schema_editor):
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX {name} ON {TABLE}")
