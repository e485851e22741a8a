"""Django settings for the Django-based systems of ``benchmarks/peers``.

``PEERS_DB`` names the database; ``PEERS_Q_WORKERS`` and ``PEERS_VARIANT`` (``default`` or
``tuned``) shape django-q2's cluster. PGHOST, PGPORT and PGUSER say where PostgreSQL is.
"""

import os

# The connection and the site-wide settings of benchmarks/settings.py; Django reads them here.
from benchmarks.settings import (  # noqa: F401
    DATABASES,
    DEFAULT_AUTO_FIELD,
    SECRET_KEY,
    TIME_ZONE,
    USE_TZ,
)

DATABASES = {"default": {**DATABASES["default"],
                         "NAME": os.environ.get("PEERS_DB", "bench_peers_ours")}}
INSTALLED_APPS = [
    "django_jobs",
    "django_tasks",
    "django_tasks_db",
    "django_q",
    "benchmarks.peers.peerapp",
]
DJANGO_JOBS: dict = {}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

# django-q2 with its ORM broker (the PostgreSQL one), as many workers as asked. Tuned: "bulk"
# (messages fetched per broker call), which its configuration page says can improve performance.
Q_CLUSTER = {
    "name": "peers",
    "orm": "default",
    "workers": int(os.environ.get("PEERS_Q_WORKERS", "1")),
    "timeout": 60,
    "retry": 120,
}
if os.environ.get("PEERS_VARIANT") == "tuned":
    Q_CLUSTER["bulk"] = 10
