from django.apps import AppConfig


class DjangoJobsConfig(AppConfig):
    name = "django_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .backends import setup as setup_tasks_backend
        from .registry import autodiscover

        setup_tasks_backend()  # the django.tasks backend: task: job types, task_finished
        autodiscover()
