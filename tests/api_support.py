"""Helpers for the API tests: tokens, a client that sends them, and running jobs in-process."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django.test import Client

from django_jobs.engine import finish_counts
from django_jobs.models import ApiToken, Job
from django_jobs.worker.execution import run_job

ALL_SCOPES = ("submit", "read", "manage")


def make_token(*scopes: str, name: str = "test") -> str:
    token, raw = ApiToken.generate(name, list(scopes))
    token.save()
    return raw


class Api:
    """A Django test client that speaks JSON and sends a Bearer token (or none)."""

    def __init__(self, token: str | None = None, client: Client | None = None) -> None:
        self.client = client or Client()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path: str, **params: Any):
        return self.client.get(path, params, headers=self.headers)

    def post(self, path: str, data: Any = None, *, raw: str | bytes | None = None,
             content_type: str = "application/json", headers: dict | None = None):
        body = raw if raw is not None else ("" if data is None else json.dumps(data))
        return self.client.post(path, body, content_type=content_type,
                                headers={**self.headers, **(headers or {})})


def submit(api: Api, **body: Any) -> str:
    response = api.post("/api/jobs", body)
    assert response.status_code == 201, response.content
    return response.json()["job_id"]


def run_ready(limit: int = 10) -> list:
    """Claim, run and finish ready jobs once, through the worker's own write path.

    ``run_job`` rolls back any open transaction when it ends, as a worker thread must: tests
    that call this need ``django_db(transaction=True)``.
    """
    jobs = Job.objects.claim(worker_id="test-worker", limit=limit, lease_seconds=30)
    done = Job.objects.finish([run_job(job) for job in jobs])
    finish_counts.flush()  # the finished jobs' counts, as the worker's heartbeat writes them
    return done


def page_queries(get) -> list[tuple[str, tuple]]:
    """The statements ``get()`` sends that read one page of jobs in order."""
    sent: list[tuple[str, tuple]] = []

    def log(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(log):
        get()
    table = connection.ops.quote_name(Job._meta.db_table)
    row_id = f"{table}.{connection.ops.quote_name('id')}"
    # A page reads whole rows (their ids among them); the queue filter's probes, which read
    # one queue name each along the ready index, are not pages.
    return [(sql, params) for sql, params in sent
            if f"FROM {table}" in sql and "ORDER BY" in sql and "LIMIT" in sql
            and row_id in sql.split(f" FROM {table}")[0]]
