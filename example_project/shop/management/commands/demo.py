"""``manage.py demo``: migrate, enqueue the example jobs, run a burst worker, print outcomes."""

import time

from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils import timezone

from django_jobs.models import Job

ROW = "{:<24} {:<16} {:<10} {:<8} {}  {}"


class Command(BaseCommand):
    help = "Run the django-jobs demo end to end on this project's database."

    def handle(self, *args, **options):
        call_command("migrate", verbosity=0)
        Job.objects.all().delete()  # a fresh demo each run
        Job.enqueue("email_send", {"to": "ada@example.com", "template": "welcome"},
                    priority="high")
        Job.enqueue("email_send", {"to": ""})
        Job.enqueue("image_resize", {"image_id": 12345, "width": 800, "height": 600})
        Job.enqueue("report_generate", {"name": "sales", "rows": 1042}, priority="low")
        Job.enqueue("flaky", {"service": "inventory"})
        Job.enqueue("broken", {"invoice": "INV-7"})
        self.stdout.write(f"enqueued {Job.objects.count()} jobs; running a burst worker\n")
        # Retries come back after a short backoff: run burst workers until nothing waits.
        while True:
            call_command("runworker", burst=True, concurrency=4, verbosity=options["verbosity"])
            waiting = Job.objects.filter(status__in=["pending", "failed"]).order_by("run_at")
            if not waiting.exists():
                break
            pause = (waiting.first().run_at - timezone.now()).total_seconds()
            time.sleep(min(max(pause, 0.0), 5.0))
        self._print_outcomes()

    def _print_outcomes(self):
        self.stdout.write(ROW.format("job", "type", "status", "attempts", "result / error", ""))
        for job in Job.objects.order_by("id").prefetch_related("attempts"):
            if job.error:
                detail = f"{job.error['type']}: {job.error['message']}"
            else:
                detail = str(job.result)
            outcomes = ",".join(a.outcome for a in job.attempts.all())
            tries = f"{job.attempt}/{job.max_attempts}"
            self.stdout.write(ROW.format(job.public_id, job.type, job.status, tries, detail,
                                         f"[{outcomes}]"))
