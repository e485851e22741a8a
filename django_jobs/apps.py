from django.apps import AppConfig, apps


class DjangoJobsConfig(AppConfig):
    name = "django_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import callbacks, checks  # noqa: F401  (register the callback handler, checks)
        from .registry import autodiscover

        if apps.is_installed("django.contrib.admin"):
            from .api import admin  # noqa: F401  (API tokens are created and revoked there)

        autodiscover()
