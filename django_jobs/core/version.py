"""The version of django-jobs, as the package is built (``pyproject.toml``) and the API
reports it."""

__version__ = "0.1.0.dev0"
