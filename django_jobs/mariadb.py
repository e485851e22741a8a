"""MariaDB and MySQL: the unique index that stands in for the partial unique constraint there.

MariaDB and MySQL have no partial indexes. Django creates a ``condition=`` index there as a full
index (the status and lease indexes of ``Job.Meta`` exist in full, and the claim and rescue
read only their own states through them; the claim indexes, on the expression ``priority
DESC``, are left out on MariaDB), but it leaves a conditional ``UniqueConstraint`` out entirely
(``models.W036``), so unique jobs would not be held.

The migration that uses this module adds, on MariaDB and MySQL only, a plain unique index on
``unique_key``. It holds the same rule as PostgreSQL's partial one: a job's key is cleared to
NULL in the same UPDATE that moves it to a state the key does not guard
(``unique.keep_key_if``), and a unique index there admits any number of NULLs, so only keys in
guarded states take part. No generated column is needed.
"""

from __future__ import annotations

from typing import Any

TABLE = "django_jobs_job"

# name -> (unique, columns)
INDEXES: dict[str, tuple[bool, str]] = {
    # At most one job per key; NULL (no key, or a key released) repeats freely.
    "django_jobs_unique_key_my": (True, "unique_key"),
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
