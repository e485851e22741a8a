from django_jobs.backends.compat import task


@task()
def task_noop(n):
    return None
