from django.apps import AppConfig, apps


class DjangoJobsConfig(AppConfig):
    name = "django_jobs"
    # The admin's heading and breadcrumb: "Background jobs > Jobs", not "Jobs > Jobs".
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # checks, dbchecks, scheduling.checks: the system checks; execution:
        # notes the threads that open connections
        from . import checks, dbchecks, execution, hooks, store  # noqa: F401
        from .backends import setup as setup_tasks_backend
        from .callbacks import Callbacks
        from .control import FollowUps
        from .crashes import CrashCounting
        from .dependencies import Dependencies
        from .engine import engine_for, load_engines
        from .enqueueing import UniqueAndDependencies
        from .limits.claim import Limits
        from .registry import autodiscover
        from .retention import Retention
        from .scheduling import checks as scheduling_checks  # noqa: F401
        from .scheduling.ticker import Schedules

        if apps.is_installed("django.contrib.admin"):
            # API tokens are created and revoked there; schedules are paused and run there.
            from .api import admin as api_admin  # noqa: F401
            from .scheduling import admin as scheduling_admin  # noqa: F401

        store.provide(engine_for)  # the store's verbs reach the engine through store.py
        load_engines()

        # The features' hooks, in the order they run at each point: a finish enqueues the
        # callbacks, then the follow-ups, then releases dependents; a heartbeat enqueues due
        # recurring jobs, then prunes (see hooks.py).
        for feature in (Callbacks(), FollowUps(), Dependencies(), UniqueAndDependencies(),
                        Limits(), CrashCounting(), Schedules(), Retention()):
            hooks.register(feature)

        setup_tasks_backend()  # the django.tasks backend: task: job types, task_finished
        autodiscover()
