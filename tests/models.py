from django.db import models


class Execution(models.Model):
    """One row per handler run, written by ``tests.jobs.record``: counts runs per job."""

    job_public_id = models.CharField(max_length=24)
    pid = models.IntegerField()
    attempt = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.job_public_id} by {self.pid}"
