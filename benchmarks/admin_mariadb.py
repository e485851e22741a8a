"""The MariaDB side of ``benchmarks/admin_pages.py``: a scratch database and the same rows.

``fill`` writes what the PostgreSQL fill writes (same types, statuses, queues, payloads, errors
and spacing of ``created_at``), server-side, from MariaDB's sequence tables (``seq_1_to_N``).
"""

from __future__ import annotations

import os

import MySQLdb

STATUS_SQL = """CASE WHEN MOD(g, 100) < 85 THEN 'completed' WHEN MOD(g, 100) < 88 THEN 'dead'
    WHEN MOD(g, 100) < 90 THEN 'canceled' WHEN MOD(g, 100) < 96 THEN 'pending'
    WHEN MOD(g, 100) < 98 THEN 'failed' ELSE 'processing' END"""
# The types and queues of admin_pages.py (BASE_TYPES, TYPES, QUEUES), spelled for ELT.
BASE_TYPES = "'email_send', 'invoice_pdf', 'resize_image', 'sync_crm', 'webhook'"
QUEUES = ("'default', 'mail', 'media', 'billing', 'search', 'sync', 'export', 'import', "
          "'notify', 'thumbs', 'ml', 'audit'")
FILL_SQL = """
INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue, run_at, attempt,
    max_attempts, result, error, created_at, updated_at, started_at, finished_at, worker_id,
    lease_token, leased_until, cancel_requested, callback_url, has_dependents, crashes)
SELECT CONCAT('j-', LPAD(LOWER(HEX(g)), 20, '0')),
    CONCAT(ELT(1 + MOD(g DIV 7, 5), {types}),
           IF(MOD(g DIV 7, 40) < 5, '', CONCAT('_', MOD(g DIV 7, 40) DIV 5))),
    JSON_OBJECT('n', g, 'to', CONCAT('user', g, '@example.com')),
    status, ELT(1 + MOD(g, 5), -10, 0, 0, 0, 10), ELT(1 + MOD(MOD(g DIV 7, 40), 12), {queues}),
    IF(MOD(g, 100) BETWEEN 94 AND 97, UTC_TIMESTAMP(6) + INTERVAL MOD(g, 1440) MINUTE,
       created + INTERVAL 1 SECOND),
    1, 3,
    CASE WHEN status = 'completed' THEN '{{"ok": true}}' END,
    CASE WHEN status IN ('dead', 'failed') THEN JSON_OBJECT(
        'type', 'SMTPError', 'message', CONCAT('mailbox unavailable for user', g),
        'traceback', 'Traceback (most recent call last):\\n  File "jobs.py"\\nSMTPError: 550',
        'details', JSON_OBJECT()) END,
    created, created + INTERVAL 2 SECOND,
    IF(status <> 'pending', created + INTERVAL 1 SECOND, NULL),
    CASE WHEN status IN ('completed', 'dead', 'canceled') THEN created + INTERVAL 2 SECOND END,
    IF(status = 'pending', '', CONCAT('bench-worker-', MOD(g, 8))),
    IF(status = 'processing', REPLACE(UUID(), '-', ''), NULL),
    IF(status = 'processing', UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE, NULL),
    0, '', 0, 0
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


# The JobStat rows of the last day, as admin_pages.py's STATS_SQL.
STATS_SQL = """
INSERT INTO django_jobs_jobstat (span, bucket, worker_id, queue, type, outcome, count,
    wait_sum_us, run_sum_us, wait_le_0, wait_le_1, wait_le_2, wait_le_3, wait_le_4, wait_le_5,
    wait_le_6, wait_le_7, wait_le_8, wait_le_9, wait_le_10, wait_le_11)
SELECT {span}, DATE_FORMAT(finished_at, '{unit}') AS b, worker_id, queue, type, status, COUNT(*),
    0, COUNT(*) * 1000000, COUNT(*), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
FROM django_jobs_job
WHERE created_at >= UTC_TIMESTAMP(6) - INTERVAL {back} MINUTE
    AND status IN ('completed', 'dead', 'canceled')
GROUP BY b, worker_id, queue, type, status
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
        cursor.execute(FILL_SQL.format(status=STATUS_SQL, types=BASE_TYPES, queues=QUEUES,
                                       start=int(start), stop=int(stop)))
        cursor.execute(ATTEMPTS_SQL, [last])
        cursor.execute("DELETE FROM django_jobs_jobstat")
        cursor.execute(STATS_SQL.format(span=60, unit="%Y-%m-%d %H:00:00", back=25 * 60))
        cursor.execute(STATS_SQL.format(span=1, unit="%Y-%m-%d %H:%i:00", back=61))
        cursor.execute("ANALYZE TABLE django_jobs_job, django_jobs_jobattempt")
        cursor.fetchall()
