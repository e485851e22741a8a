"""The JSON API's tables: API tokens (stored hashed, with scopes) and remembered idempotency
keys.

They live with the other tables, below the API, the admin and the ``jobstoken`` command that use
them; ``models/__init__.py`` imports them, so they belong to the django_jobs app.
"""

from __future__ import annotations

import hashlib
import secrets

from django.db import models
from django.utils import timezone

from django_jobs.models.managers import ReloadsWhereWritten, RoutedManager

TOKEN_PREFIX = "djj_"  # noqa: S105 (the public prefix every token shows, not a secret)


def hash_token(raw: str) -> str:
    """SHA-256 of the token: tokens are 256 random bits, so a fast hash is enough."""
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(ReloadsWhereWritten, models.Model):
    class Scope(models.TextChoices):
        SUBMIT = "submit", "Submit jobs"  # POST /jobs
        READ = "read", "Read jobs and metrics"  # GET /jobs, /jobs/<id>, /metrics/jobs
        MANAGE = "manage", "Cancel and retry jobs"  # POST /jobs/<id>/cancel, /retry

    name = models.CharField(max_length=100, help_text="Who or what uses this token.")
    scopes = models.JSONField(default=list, blank=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_prefix = models.CharField(
        max_length=12, editable=False, help_text="The first characters, to recognise a token."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = RoutedManager()

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.key_prefix}…)"

    @classmethod
    def generate(cls, name: str, scopes: list[str]) -> tuple[ApiToken, str]:
        """A new unsaved token and its secret, which is shown once and never stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls(name=name, scopes=sorted(set(scopes)), key_hash=hash_token(raw),
                    key_prefix=raw[:12])
        return token, raw

    @classmethod
    def find(cls, raw: str) -> ApiToken | None:
        """The live token with this secret, or None.

        Found by the hash, never by comparing secrets: the lookup's timing depends on the
        SHA-256 of what was sent, which tells an attacker nothing about any real token.
        """
        if not raw.startswith(TOKEN_PREFIX) or not raw.isascii():
            return None
        return cls.objects.filter(key_hash=hash_token(raw), revoked_at__isnull=True).first()

    def has_scope(self, scope: str) -> bool:
        return scope in (self.scopes or [])


class IdempotencyKey(models.Model):
    """A POST /jobs with an ``Idempotency-Key``: the same key and body return the same job.

    A key lives until ``expires_at`` whatever becomes of its job: it keeps the job's public id,
    which is all a replay answers, and a pruned or deleted job only empties ``job``."""

    owner = models.CharField(max_length=64)  # "token:<id>" or "user:<id>": keys are per caller
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    job = models.ForeignKey("django_jobs.Job", on_delete=models.SET_NULL, null=True,
                            blank=True, related_name="+")
    job_public_id = models.CharField(max_length=24, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    objects = RoutedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="django_jobs_idem_key_uniq"),
        ]
        indexes = [models.Index(fields=["expires_at"], name="django_jobs_idem_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.owner} {self.key}"
