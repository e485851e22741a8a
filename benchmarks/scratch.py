"""Scratch PostgreSQL databases for the benchmarks that configure Django themselves.

PGHOST, PGPORT and PGUSER say where PostgreSQL is (127.0.0.1:5432, postgres by default).
"""

from __future__ import annotations

import os
from typing import Any

import django
import psycopg
from django.conf import settings

HOST = os.environ.get("PGHOST", "127.0.0.1")
PORT = os.environ.get("PGPORT", "5432")
USER = os.environ.get("PGUSER", "postgres")


def recreate_database(name: str) -> None:
    """Drop the database ``name`` if it exists and create it empty."""
    with psycopg.connect(host=HOST, port=PORT, user=USER, dbname="postgres",
                         autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def configure(name: str, apps: list[str], **extra: Any) -> None:
    """Configure Django on the database ``name`` with django_jobs and ``apps``, then set up."""
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": name,
                               "USER": USER, "HOST": HOST, "PORT": PORT}},
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_jobs",
                        *apps],
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        **extra,
    )
    django.setup()
