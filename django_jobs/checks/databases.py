"""System checks on the databases that hold the job tables: refuse what cannot keep the guarantees.

django-jobs runs on PostgreSQL, SQLite and MariaDB/MySQL. On MariaDB/MySQL workers claim with
``SELECT ... FOR UPDATE SKIP LOCKED`` (MariaDB 10.6+, MySQL 8.0.1+); without it claims fall back
to a plain UPDATE race and workers wait on each other's rows, so a site would run with weaker
claims than it thinks. (Django 5.2 itself refuses MySQL before 8.0.11, not MariaDB 10.5.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

from django.core.checks import CheckMessage, Error, Tags, Warning, register, run_checks
from django.db import connections, router
from django.db.utils import ConnectionHandler

if TYPE_CHECKING:
    from collections.abc import Sequence

    from django.apps import AppConfig
    from django.db.backends.mysql.base import DatabaseWrapper as MySQLWrapper

SUPPORTED_VENDORS = {"postgresql", "sqlite", "mysql"}


def _job_databases(aliases: Iterable[str]) -> list[str]:
    from django_jobs.models import Job

    return [alias for alias in aliases if router.allow_migrate_model(alias, Job)]


def server_version(connection: MySQLWrapper) -> tuple[bool, tuple[int, ...]]:
    """Whether a MySQL-backend connection's server is MariaDB, and its version, as Django's
    backend read them from the server (``SELECT VERSION()``, once per connection object)."""
    return connection.mysql_is_mariadb, connection.mysql_version


def has_skip_locked(is_mariadb: bool, version: tuple[int, ...]) -> bool:
    """Whether a MariaDB or MySQL server of this version has SELECT ... FOR UPDATE SKIP LOCKED."""
    return version >= ((10, 6) if is_mariadb else (8, 0, 1))


@register()
def check_database_vendor(app_configs: Sequence[AppConfig] | None = None,
                          **kwargs: object) -> list[CheckMessage]:
    """A backend django-jobs was not built for (Oracle, third-party engines) is an error."""
    return vendor_problems(connections)


def vendor_problems(handler: ConnectionHandler,
                    aliases: Iterable[str] | None = None) -> list[CheckMessage]:
    """E020 and W020 for the job databases among ``aliases`` (all of ``handler``'s by default);
    reads the settings only, connects to nothing."""
    problems: list[CheckMessage] = []
    for alias in _job_databases(handler if aliases is None else aliases):
        vendor = handler[alias].vendor
        if vendor not in SUPPORTED_VENDORS:
            problems.append(Error(
                f"django-jobs does not support the {vendor!r} database of DATABASES[{alias!r}]",
                hint="use PostgreSQL, SQLite, MariaDB 10.6+ or MySQL 8.0.1+",
                id="django_jobs.E020",
            ))
        elif vendor == "mysql":
            level = handler[alias].settings_dict.get("OPTIONS", {}).get("isolation_level")
            if level is not None and str(level).lower() != "read committed":
                problems.append(Warning(
                    f"DATABASES[{alias!r}] runs at isolation level {level!r}: claims that skip "
                    "locked rows and concurrent enqueues take gap locks there and wait on "
                    "each other",
                    hint="set OPTIONS['isolation_level'] to 'read committed' (Django's default)",
                    id="django_jobs.W020",
                ))
    return problems


@register(Tags.database)
def check_skip_locked(app_configs: Sequence[AppConfig] | None = None,
                      databases: Iterable[str] | None = None,
                      **kwargs: object) -> list[CheckMessage]:
    """MariaDB before 10.6 and MySQL before 8.0.1 have no SKIP LOCKED: refuse them."""
    problems: list[CheckMessage] = []
    for alias in _job_databases(databases or ()):
        connection = connections[alias]
        if connection.vendor != "mysql":
            continue
        mariadb, version_parts = server_version(cast("MySQLWrapper", connection))
        if has_skip_locked(mariadb, version_parts):
            continue
        name = "MariaDB" if mariadb else "MySQL"
        version = ".".join(str(part) for part in version_parts)
        problems.append(Error(
            f"{name} {version} (DATABASES[{alias!r}]) has no SELECT ... FOR UPDATE SKIP LOCKED, "
            "which django-jobs claims jobs with",
            hint="upgrade to MariaDB 10.6+ or MySQL 8.0.1+",
            id="django_jobs.E021",
        ))
    return problems


def database_checks(using: str) -> list[CheckMessage]:
    """Every check tagged ``database`` (``manage.py check --database using``: SKIP LOCKED,
    migrations, Django's own), on ``using`` only, without those the site silenced."""
    return [problem for problem in run_checks(tags=[Tags.database], databases=[using])
            if not problem.is_silenced()]
