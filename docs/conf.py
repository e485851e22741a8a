"""Sphinx configuration: the Markdown pages under docs/ (MyST) and the API from docstrings.

Build with ``sphinx-build -W -b html docs docs/_build/html`` after ``pip install -e ".[docs]"``.
"""

import sys
from pathlib import Path

import django
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# autodoc imports the models: Django needs settings and a registry, never a database.
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
        "django.contrib.sessions", "django.contrib.messages", "django_jobs",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()

from django_jobs import __version__  # noqa: E402  (after django.setup())

project = "django-jobs"
copyright = "the django-jobs authors"
release = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # links such as page.md#a-heading resolve

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"exclude-members": "DoesNotExist, MultipleObjectsReturned"}
html_theme = "furo"
html_title = f"django-jobs {release}"
