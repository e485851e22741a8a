from django.apps import AppConfig, apps


class DjangoJobsConfig(AppConfig):
    name = "django_jobs"
    # The admin's heading and breadcrumb: "Background jobs > Jobs", not "Jobs > Jobs".
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # checks: the system checks, registered on import; execution: notes the threads that
        # open connections
        from django_jobs.backends import setup as setup_tasks_backend
        from django_jobs.checks import configuration, databases, schedules  # noqa: F401
        from django_jobs.core import contract, database_parts
        from django_jobs.engine import hooks, load_engines, make_engine, parts_for
        from django_jobs.features.callbacks import Callbacks
        from django_jobs.features.crashes import CrashCounting
        from django_jobs.features.dependencies import Dependencies
        from django_jobs.features.groups import Groups
        from django_jobs.features.guarded_insert import UniqueAndDependencies
        from django_jobs.features.handler_control import FollowUps
        from django_jobs.features.limits.claim import Limits
        from django_jobs.features.retention import Retention
        from django_jobs.features.schedules.ticker import Schedules
        from django_jobs.handlers.registry import autodiscover, register_resolver
        from django_jobs.worker import execution  # noqa: F401

        if apps.is_installed("django.contrib.admin"):
            # API tokens are created and revoked there; schedules are paused and run there;
            # groups and actions over a filter show their progress there.
            from django_jobs.admin import bulk as bulk_admin  # noqa: F401
            from django_jobs.admin import groups as groups_admin  # noqa: F401
            from django_jobs.admin import schedules as schedules_admin  # noqa: F401
            from django_jobs.admin import tokens as tokens_admin  # noqa: F401

        contract.provide(make_engine)  # every verb reaches the engine through core/contract.py
        database_parts.provide(parts_for)  # and the engine's modules, their database's parts
        load_engines()

        # The features' hooks, in the order they run at each point: a finish enqueues the
        # callbacks, then the follow-ups, then releases dependents, then counts the jobs of
        # groups; a heartbeat enqueues due recurring jobs, then prunes (see engine/hooks.py).
        for feature in (Callbacks(), FollowUps(), Dependencies(), Groups(), UniqueAndDependencies(),
                        Limits(), CrashCounting(), Schedules(), Retention()):
            hooks.register(feature)

        # Actions over a filter run as jobs of their own type, its module loaded on first use.
        register_resolver(BULK_ACTION, bulk_action_handler)
        setup_tasks_backend()  # the django.tasks backend: task: job types, task_finished
        autodiscover()


BULK_ACTION = "django_jobs.bulk_action"  # features/bulk_actions.py's TYPE


def bulk_action_handler(type: str):  # a Handler, imported with its module
    """The handler of the jobs that run actions over a filter, imported when one is met."""
    if type != BULK_ACTION:
        return None
    from django_jobs.features import bulk_actions

    return bulk_actions.HANDLER
