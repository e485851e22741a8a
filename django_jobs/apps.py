from django.apps import AppConfig, apps


class DjangoJobsConfig(AppConfig):
    name = "django_jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # callbacks: registers the callback handler; checks, dbchecks: the system checks; execution:
        # notes the threads that open connections
        from . import callbacks, checks, dbchecks, execution  # noqa: F401
        from .backends import setup as setup_tasks_backend
        from .registry import autodiscover

        if apps.is_installed("django.contrib.admin"):
            # API tokens are created and revoked there; schedules are paused and run there.
            from .api import admin as api_admin  # noqa: F401
            from .scheduling import admin as scheduling_admin  # noqa: F401

        setup_tasks_backend()  # the django.tasks backend: task: job types, task_finished
        autodiscover()
