"""Where the store's verbs find the engine, without importing it.

Layers point one way (models <- engine): the engine imports the models, so the models and
their managers cannot import the engine back. ``Job.objects.claim(...)`` and the other verbs
of ``models/managers.py`` call ``engine(using)`` here instead, and the app's ``ready()``
(``apps.py``) provides the engine once, when Django starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_engine_for: Callable[[str], Any] | None = None


def provide(engine_for: Callable[[str], Any]) -> None:
    """Install ``engine_for(using)``, the function that gives a database's engine."""
    global _engine_for
    _engine_for = engine_for


def engine(using: str) -> Any:
    """The engine of database ``using``: an object with the verbs of ``engine/verbs.py``."""
    if _engine_for is None:
        raise ImproperlyConfigured(
            "django_jobs has no engine: add 'django_jobs' to INSTALLED_APPS and call "
            "django.setup() before writing jobs"
        )
    return _engine_for(using)
