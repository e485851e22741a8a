"""The JSON API: submit, read, cancel and retry jobs over HTTP, and read their metrics.

Mount it with ``path("api/", include("django_jobs.api.urls"))``; see docs/reference-api.md.
"""
