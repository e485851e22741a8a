"""The MariaDB side of ``benchmarks/admin_pages.py``: a scratch database and the same rows.

``fill`` writes what the PostgreSQL fill writes (same types, statuses, queues, payloads, errors
and spacing of ``created_at``), server-side, from MariaDB's sequence tables (``seq_1_to_N``).
"""

from __future__ import annotations

import os

import MySQLdb

STATUS_SQL = """CASE WHEN MOD(g, 100) < 90 THEN 'completed' WHEN MOD(g, 100) < 95 THEN 'dead'
    WHEN MOD(g, 100) < 97 THEN 'failed' WHEN MOD(g, 100) < 99 THEN 'pending' ELSE 'canceled' END"""
FILL_SQL = """
INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue, run_at, attempt,
    max_attempts, result, error, created_at, updated_at, started_at, finished_at, worker_id,
    cancel_requested, callback_url, has_dependents, crashes)
SELECT CONCAT('j-', LPAD(LOWER(HEX(g)), 20, '0')),
    ELT(1 + MOD(g, 5), 'email_send', 'invoice_pdf', 'resize_image', 'sync_crm', 'webhook'),
    JSON_OBJECT('n', g, 'to', CONCAT('user', g, '@example.com')),
    status, ELT(1 + MOD(g, 5), -10, 0, 0, 0, 10), ELT(1 + MOD(g, 3), 'default', 'mail', 'media'),
    created + INTERVAL 1 SECOND, 1, 3,
    CASE WHEN status = 'completed' THEN '{{"ok": true}}' END,
    CASE WHEN status IN ('dead', 'failed') THEN JSON_OBJECT(
        'type', 'SMTPError', 'message', CONCAT('mailbox unavailable for user', g),
        'traceback', 'Traceback (most recent call last):\\n  File "jobs.py"\\nSMTPError: 550',
        'details', JSON_OBJECT()) END,
    created, created + INTERVAL 2 SECOND, created + INTERVAL 1 SECOND,
    CASE WHEN status IN ('completed', 'dead', 'canceled') THEN created + INTERVAL 2 SECOND END,
    'bench-worker', 0, '', 0, 0
FROM (SELECT g, {status} AS status,
             UTC_TIMESTAMP(6) - INTERVAL (({stop} - g) * 2) SECOND AS created
      FROM (SELECT seq AS g FROM seq_{start}_to_{stop}) AS s) AS t
"""
ATTEMPTS_SQL = """
INSERT INTO django_jobs_jobattempt (job_id, number, worker_id, started_at, finished_at, outcome,
    error, cpu_time, peak_memory)
SELECT id, 1, 'bench-worker', started_at, started_at + INTERVAL 1 SECOND,
    CASE status WHEN 'dead' THEN 'dead' ELSE 'failed' END, error, 0.01, 52428800
FROM django_jobs_job WHERE status IN ('dead', 'failed') AND id > %s
"""


def recreate_database(name: str) -> None:
    """Drop the database ``name`` if it exists and create it empty."""
    conn = MySQLdb.connect(host=os.environ.get("MARIADB_HOST", "127.0.0.1"),
                           port=int(os.environ.get("MARIADB_PORT", "3306")),
                           user=os.environ.get("MARIADB_USER", "root"), charset="utf8mb4")
    try:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        conn.close()


def fill(start: int, stop: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM django_jobs_job")
        last = cursor.fetchone()[0]
        cursor.execute(FILL_SQL.format(status=STATUS_SQL, start=int(start), stop=int(stop)))
        cursor.execute(ATTEMPTS_SQL, [last])
        cursor.execute("ANALYZE TABLE django_jobs_job, django_jobs_jobattempt")
        cursor.fetchall()
