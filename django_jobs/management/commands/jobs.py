"""``manage.py jobs``: list, show, retry and cancel jobs, and count them, from a shell.

    manage.py jobs list --status dead --since 1d
    manage.py jobs show j-2b7001373cf13110e31b
    manage.py jobs retry j-2b7001373cf13110e31b j-9155980434f8c88d698a
    manage.py jobs counts --json
    manage.py jobs bulk retry --status dead --type email.send --yes
"""

from __future__ import annotations

import argparse
import builtins
import json
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count, QuerySet

from django_jobs.core.job_json import attempt_json, iso, job_json
from django_jobs.exceptions import JobConflict
from django_jobs.management import arguments
from django_jobs.models import Job

# Why a job was not changed when another action came first.
GONE = "it was deleted meanwhile"
CONFLICT = "another action or a worker changed it at the same moment; try again"

VERBS: dict[str, tuple[Callable[[Job], bool], str]] = {
    # verb: (the job's own method, which jobs it changes)
    "retry": (Job.retry, "only dead, failed and canceled jobs are retried"),
    "cancel": (Job.cancel, "only pending, waiting, failed and processing jobs are canceled"),
}


class Command(BaseCommand):
    help = "List, show, retry, cancel and count jobs."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing = sub.add_parser("list", help="newest jobs first, filtered")
        listing.add_argument("--status", type=arguments.statuses, default=None,
                             help="comma-separated statuses (default: all)")
        listing.add_argument("--type", type=arguments.job_type, default=None,
                             help="job type (default: all)")
        listing.add_argument("--queue", type=arguments.queue, default=None,
                             help="queue (default: all)")
        listing.add_argument("--since", type=arguments.since, default=None,
                             help="created within an age (90m, 12h, 7d) or since a date and "
                             "time (default: any time)")
        listing.add_argument("--limit", type=arguments.limit, default=20,
                             help=f"most jobs shown, 1 to {arguments.MAX_LIMIT} (default: 20)")
        show = sub.add_parser("show", help="one job with its attempts")
        show.add_argument("job_id", type=arguments.job_id)
        for verb, (_method, rule) in VERBS.items():
            changer = sub.add_parser(verb, help=f"{verb} jobs by id ({rule})")
            changer.add_argument("job_ids", nargs="+", type=arguments.job_id, metavar="job_id")
        sub.add_parser("counts", help="jobs per status and queue (counts every row)")
        bulk = sub.add_parser("bulk", help="retry, cancel or delete every job matching a "
                              "filter, as a job of its own (counts first; --yes starts it)")
        bulk.add_argument("verb", choices=["retry", "cancel", "delete"])
        bulk.add_argument("--status", type=arguments.statuses, default=None,
                          help="comma-separated statuses (default: all)")
        bulk.add_argument("--type", type=arguments.job_type, default=None)
        bulk.add_argument("--queue", type=arguments.queue, default=None)
        bulk.add_argument("--since", type=arguments.since, default=None,
                          help="created within an age (90m, 12h, 7d) or since a date and time")
        bulk.add_argument("--error-contains", default=None,
                          help="the error's message contains this text")
        bulk.add_argument("--yes", action="store_true",
                          help="start it (without: only count the jobs it would reach)")
        for action in sub.choices.values():
            action.add_argument("--json", action="store_true", help="print JSON")
            arguments.common_options(action)

    def handle(self, *args: Any, **options: Any) -> None:
        arguments.ensure_migrated()
        action = options["action"]
        if action == "list":
            self.list(options)
        elif action == "show":
            self.show(options["job_id"], options["json"])
        elif action == "counts":
            self.counts(options["json"])
        elif action == "bulk":
            self.bulk(options)
        else:
            self.change(action, options["job_ids"], options["json"])

    def list(self, options: dict[str, Any]) -> None:
        found = builtins.list(listed(options).defer("payload", "result")[: options["limit"]])
        if options["json"]:
            rows = [{key: value for key, value in job_json(job).items()
                     if key not in ("url", "payload", "result")} for job in found]
            self.stdout.write(json.dumps(rows, indent=2))
            return
        lines = arguments.table(
            ["job", "type", "queue", "status", "attempts", "created", "error"],
            [(job.public_id, job.type, job.queue, job.status, f"{job.attempt}/{job.max_attempts}",
              iso(job.created_at), error_line(job.error)) for job in found],
        )
        self.stdout.write("\n".join(lines) if found else "no jobs")

    def show(self, public_id: str, as_json: bool) -> None:
        job = Job.objects.filter(public_id=public_id).first()
        if job is None:
            raise CommandError(f"no job {public_id}")
        attempts = builtins.list(job.attempts.order_by("number", "started_at"))
        if as_json:
            self.stdout.write(json.dumps(job_json(job, attempts=attempts), indent=2))
            return
        self.stdout.write("\n".join(job_lines(job_json(job))))
        if attempts:
            self.stdout.write("")
            self.stdout.write("\n".join(attempts_lines([attempt_json(a) for a in attempts])))

    def change(self, verb: str, public_ids: builtins.list[str], as_json: bool) -> None:
        jobs = found_all(public_ids)
        method, rule = VERBS[verb]
        results = [(job, *self.act(method, job)) for job in jobs]
        if as_json:
            self.stdout.write(json.dumps([change_json(*result) for result in results],
                                         indent=2))
        else:
            for result in results:
                self.stdout.write(change_line(verb, *result))
        unchanged = [why or rule for _job, changed, why in results if not changed]
        if unchanged:
            raise CommandError(f"{len(unchanged)} of {len(results)} job(s) not changed: "
                               f"{'; '.join(dict.fromkeys(unchanged))}")

    @staticmethod
    def act(method: Callable[[Job], bool], job: Job) -> tuple[bool, str]:
        """``method(job)``, and why nothing changed if another action came first: the job was
        deleted, or the two met head on (``JobConflict``)."""
        try:
            return method(job), ""
        except Job.DoesNotExist:
            return False, GONE
        except JobConflict:
            return False, CONFLICT

    def bulk(self, options: dict[str, Any]) -> None:
        """Count the jobs the filter matches; with --yes, start the action over them."""
        from django_jobs.features import bulk_actions

        spec = {"status": options["status"], "type": options["type"], "queue": options["queue"],
                "created_from": options["since"], "error_contains": options["error_contains"]}
        try:
            spec = bulk_actions.clean_spec(spec)
        except bulk_actions.BadSpec as exc:
            raise CommandError(str(exc)) from None
        if not options["yes"]:
            matched, capped = bulk_actions.count(spec)
            result = {"verb": options["verb"], "matched": matched, "more": capped,
                      "filter": bulk_actions.describe(spec), "started": False}
            self.stdout.write(json.dumps(result) if options["json"] else
                              f"{'more than ' if capped else ''}{matched} job(s) match: "
                              f"{result['filter']}; add --yes to {options['verb']} them")
            return
        action = bulk_actions.start(options["verb"], spec, user="manage.py jobs bulk")
        job = Job.objects.get(pk=action.job_id or 0)  # set by start()
        result = {"verb": action.verb, "matched": action.matched, "more": action.matched_capped,
                  "filter": action.description, "started": True, "action": action.pk,
                  "job_id": job.public_id}
        self.stdout.write(json.dumps(result) if options["json"] else
                          f"started action {action.pk}: {action.verb} {action.description} "
                          f"({action.matched} jobs), run by job {job.public_id}")

    def counts(self, as_json: bool) -> None:
        grouped = Job.objects.order_by().values_list("queue", "status").annotate(n=Count("pk"))
        by_queue: dict[str, dict[str, int]] = {}
        for queue, status, n in grouped:
            by_queue.setdefault(queue, dict.fromkeys(Job.Status.values, 0))[status] = n
        totals = {status: sum(row[status] for row in by_queue.values())
                  for status in Job.Status.values}
        if as_json:
            self.stdout.write(json.dumps({"queues": dict(sorted(by_queue.items())),
                                          "total": totals}, indent=2))
            return
        statuses = list(Job.Status.values)
        rows = [(name, *(row[s] for s in statuses), sum(row.values()))
                for name, row in sorted(by_queue.items())]
        rows.append(("(all)", *(totals[s] for s in statuses), sum(totals.values())))
        self.stdout.write("\n".join(arguments.table(["queue", *statuses, "total"], rows)))


def found_all(public_ids: builtins.list[str]) -> builtins.list[Job]:
    """The jobs of these public ids, each once, in the order given; CommandError naming those
    that do not exist, before anything is changed."""
    wanted = builtins.list(dict.fromkeys(public_ids))
    found = {job.public_id: job for job in Job.objects.filter(public_id__in=wanted)}
    missing = [pk for pk in wanted if pk not in found]
    if missing:
        raise CommandError(f"no job {', '.join(missing)}: nothing was changed")
    return [found[pk] for pk in wanted]


def listed(options: dict[str, Any]) -> QuerySet[Job]:
    """The jobs ``list`` shows, newest first: of the statuses, type, queue asked for, created
    since the time asked for."""
    jobs = Job.objects.order_by("-created_at", "-id")
    if options["status"]:
        jobs = jobs.filter(status__in=options["status"])
    for field in ("type", "queue"):
        if options[field] is not None:
            jobs = jobs.filter(**{field: options[field]})
    if options["since"] is not None:
        jobs = jobs.filter(created_at__gte=options["since"])
    return jobs


def job_lines(data: dict[str, Any]) -> builtins.list[str]:
    """A job's fields, one a line, then its error (after a blank line) if it has one."""
    lines = [field_line(key, "-" if data[key] is None else data[key])
             for key in ("job_id", "type", "status", "queue", "priority", "attempt",
                         "max_attempts", "run_at", "created_at", "started_at", "finished_at",
                         "cancel_requested")]
    lines += [field_line(key, json.dumps(data[key])) for key in ("payload", "result", "progress")
              if data[key] is not None]
    if data["error"] is not None:
        lines += ["", *error_lines(data["error"])]
    return lines


def attempts_lines(shown: builtins.list[dict[str, Any]]) -> builtins.list[str]:
    """A table of the attempts, then each attempt's error (after a blank line)."""
    rows = [(a["number"], a["outcome"], a["worker_id"], a["started_at"],
             a["duration_ms"], error_line(a["error"])) for a in shown]
    lines = arguments.table(["attempt", "outcome", "worker", "started", "ms", "error"], rows)
    for a in shown:
        if a["error"]:
            lines += ["", f"attempt {a['number']} ({a['outcome']}):",
                      *("  " + line for line in error_lines(a["error"]))]
    return lines


def change_json(job: Job, changed: bool, why: str) -> dict[str, Any]:
    return {"job_id": job.public_id, "changed": changed,
            "status": None if why == GONE else job.status,
            "cancel_requested": job.cancel_requested, **({"why": why} if why else {})}


def change_line(verb: str, job: Job, changed: bool, why: str) -> str:
    """What became of one job: its new status (a running job asked to stop), or why not."""
    if not changed:
        return f"{job.public_id}: unchanged, {why or 'it is ' + job.status}"
    said = "asked to stop" if verb == "cancel" and job.status == Job.Status.PROCESSING \
        else job.status
    return f"{job.public_id}: {said}"


def field_line(key: str, value: object) -> str:
    """``key:`` and the value, in a column; a value of several lines keeps the column."""
    lines = str(value).splitlines() or [""]
    return "\n".join([f"{key + ':':<18}{lines[0]}", *(" " * 18 + line for line in lines[1:])])


def error_lines(error: object) -> builtins.list[str]:
    """A stored error as a reader wants it: its type and message, its details, then its
    traceback as the lines Python printed (not one string of ``\\n`` escapes)."""
    if not isinstance(error, dict):
        return [field_line("error", json.dumps(error))]
    lines = [field_line("error", f"{error.get('type') or 'Error'}: {error.get('message', '')}")]
    if error.get("details"):
        lines.append(field_line("details", json.dumps(error["details"])))
    traceback = str(error.get("traceback") or "").rstrip()
    if traceback:
        lines.append("traceback:")
        lines.extend("  " + line for line in traceback.splitlines())
    return lines


def error_line(error: dict | None) -> str:
    """An error's type and the first line of its message, short enough for a table."""
    if not error:
        return ""
    message = str(error.get("message", "")).strip().splitlines()
    text = f"{error.get('type', 'Error')}: {message[0] if message else ''}"
    return text if len(text) <= 60 else text[:59] + "…"
