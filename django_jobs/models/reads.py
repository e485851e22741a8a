"""Where the admin's and the API's lists and counts read: a replica, when the site names one.

``READ_REPLICA`` names an alias of ``DATABASES`` that replicates the jobs' database. The pages
that only look (the admin's job list with its filters, search and counts, the overview, the
API's ``GET /jobs`` and its metrics) read there, so their scans and counts cost the primary
nothing. A replica lags behind the primary: a job just enqueued or just finished may show there
a moment later.

Everything that acts reads the primary (``schema.jobs_database()``): the workers, every write
and the reads that decide one (the admin's buttons and actions, the job page that leads to
them, the API's one-job page a client polls after submitting).
"""

from __future__ import annotations

from django_jobs.core.settings import jobs_settings
from django_jobs.models.schema import jobs_database


def read_database() -> str:
    """The alias the looking pages read: ``READ_REPLICA`` if set, else the jobs' database."""
    replica = jobs_settings.READ_REPLICA
    return replica if replica else jobs_database()
