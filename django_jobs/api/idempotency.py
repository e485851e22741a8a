"""``Idempotency-Key`` on ``POST /jobs``: the same key and body give back the first job.

Keys are per caller (token or user), remembered for ``IDEMPOTENCY_TTL`` seconds, and
compared with the body as canonical JSON (key order and spacing do not matter). A key outlives
its job: a replay after the job was pruned answers the same job id, and makes no second job.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from django_jobs.api.constraints import IDEMPOTENCY_KEY, matches
from django_jobs.api.errors import ApiError
from django_jobs.core import clock
from django_jobs.core.settings import jobs_settings
from django_jobs.models.tokens import IdempotencyKey

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject
    from django_jobs.models import Job


class _Raced(Exception):
    """Another request with the same key committed first."""


def check_key(key: str) -> str:
    if not matches(IDEMPOTENCY_KEY, key):
        raise ApiError.bad_request(
            "Idempotency-Key", "must be 1 to 255 printable ASCII characters without spaces"
        )
    return key


def request_hash(data: JSONObject) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def submit_once(owner: str, key: str, data: JSONObject, create: Callable[[], Job]) -> tuple[
    str, bool
]:
    """The public id of the job for this key: created now (False) or the one created before
    (True), whether that job still exists or was pruned since.

    The key row is inserted in the job's transaction; if a concurrent request with the same
    key wins the unique constraint, this request's job is rolled back and theirs answered.
    """
    digest = request_hash(data)
    for _ in range(2):
        try:
            return _submit(owner, key, digest, create)
        except _Raced:
            continue
    raise ApiError(409, "a request with this Idempotency-Key is being processed; try again",
                   {"Idempotency-Key": "in use by a concurrent request"})


def _submit(owner: str, key: str, digest: str, create: Callable[[], Job]) -> tuple[str, bool]:
    using = IdempotencyKey.objects.db  # the jobs' database: the key and its job commit together
    now = clock.now(using)
    with transaction.atomic(using=using):
        IdempotencyKey.objects.filter(expires_at__lte=now).delete()
        seen = IdempotencyKey.objects.filter(owner=owner, key=key).first()
        if seen is not None:
            if seen.request_hash != digest:
                raise ApiError(409, "this Idempotency-Key was used with a different body",
                               {"Idempotency-Key": "reused with a different body"})
            return seen.job_public_id, True
        job = create()
        ttl = timedelta(seconds=float(jobs_settings.IDEMPOTENCY_TTL))
        try:
            with transaction.atomic(using=using):
                IdempotencyKey.objects.create(
                    owner=owner, key=key, request_hash=digest, job=job,
                    job_public_id=job.public_id, created_at=now, expires_at=now + ttl,
                )
        except IntegrityError:
            raise _Raced from None
    return job.public_id, False
