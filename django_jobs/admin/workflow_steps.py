"""A workflow's steps on its job page: a table of its history in order (key, kind, result, the
wake time or deadline, whether a wait is settled), rendered on the server. Past ``SHOWN`` steps
the rest are counted by kind. A job that is not a workflow gets no query."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

from django.utils.html import format_html, format_html_join

from django_jobs.admin import display
from django_jobs.features.workflows.registry import is_workflow
from django_jobs.models import WorkflowStep

if TYPE_CHECKING:
    from django.utils.safestring import SafeString

    from django_jobs.models import Job

SHOWN = 200
RESULT_CHARS = 200


def steps_table(job: Job) -> SafeString | str:
    if not is_workflow(job.type):
        return display.EMPTY
    steps = list(WorkflowStep.objects.using(job._state.db or "default")
                 .filter(job_id=job.pk).order_by("position")
                 .values_list("position", "key", "kind", "result", "until", "done")[:SHOWN + 1])
    if not steps:
        return "no step finished yet"
    rows = format_html_join(
        "", "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td>"
        "<td>{}</td></tr>",
        ((position, key, kind, json.dumps(result)[:RESULT_CHARS], until or "",
          "" if done else "waiting")
         for position, key, kind, result, until, done in steps[:SHOWN]))
    more = ""
    if len(steps) > SHOWN:
        counts = Counter(WorkflowStep.objects.using(job._state.db or "default")
                         .filter(job_id=job.pk, position__gte=SHOWN)
                         .values_list("kind", flat=True))
        more = format_html("<p>and {}</p>", ", ".join(
            f"{count} {kind}" for kind, count in sorted(counts.items())))
    return format_html(
        '<table class="workflow-steps"><thead><tr><th>#</th><th>step</th><th>kind</th>'
        "<th>result</th><th>until</th><th></th></tr></thead><tbody>{}</tbody></table>{}",
        rows, more)
