"""The pytest fixture ``jobs``, registered through the ``pytest11`` entry point.

Installed with the package, so a site's tests need no ``conftest.py`` line. It needs
pytest-django, whose ``db`` fixture it asks for: the test runs in a transaction that is rolled
back afterwards, and ``jobs.run()`` runs the handlers inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from django_jobs.testing import JobsHelper


@pytest.fixture
def jobs(db: None) -> JobsHelper:
    """``run`` the ready jobs inline, list what is ``enqueued``, ``assert_enqueued``."""
    from django_jobs.testing import JobsHelper  # imported when used: Django is set up by then

    return JobsHelper()
