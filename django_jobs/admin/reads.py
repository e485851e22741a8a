"""Which database an admin page reads.

The job list (with its filters, search, counts and the strip above it) and the overview read the
replica the site names in ``READ_REPLICA`` (``models/reads.py``) when they only look: a GET or
HEAD. A POST to the list runs an action on the selected jobs and a POST to the overview pauses
a queue; those read and write the jobs' database, as do the job page and its buttons, which
must show the job as the primary holds it before a retry or a cancel.
"""

from __future__ import annotations

from django.http import HttpRequest

from django_jobs.models.reads import read_database
from django_jobs.models.schema import jobs_database

LOOKING = ("GET", "HEAD")


def list_database(request: HttpRequest) -> str:
    """The alias a list or overview request reads: the replica for a GET or HEAD, else the
    jobs' database."""
    return read_database() if request.method in LOOKING else jobs_database()
