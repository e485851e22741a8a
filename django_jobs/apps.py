from django.apps import AppConfig


class DjangoJobsConfig(AppConfig):
    name = "django_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .registry import autodiscover

        autodiscover()
        from django.apps import apps

        if apps.is_installed("django.contrib.admin"):  # sched: the schedules admin
            from .scheduling import admin  # noqa: F401

