"""Concurrency and rate limits per job type or per payload key, enforced when jobs are claimed.

    @handler("provider_call", limits=[ConcurrencyLimit(5), RateLimit(100, per=60)])
    @handler("tenant_sync", limits=[ConcurrencyLimit(1, key="tenant_id")])

``rules`` holds the limits (``ConcurrencyLimit``, ``RateLimit``; both importable from
``django_jobs``), ``models`` the rows the claim locks and counts, and ``claim`` the admission
at claim time (the ``Limits`` feature). This file imports nothing: loading the models, which
Django does for every process, runs no code of the feature.
"""
