"""A picture of related jobs: a dependency chain's or a group's jobs and their states, drawn on
the server as inline SVG (no script, nothing to build).

A job is a box coloured by its state, with the state's word in it (colour is never the only
signal), linked to its page; an arrow runs from a job to each job that waits on it. Jobs are laid
out in columns, left to right: a job's column is one more than the deepest job it waits on, so a
chain reads in the order it runs. Past ``MAX_NODES`` jobs a graph cannot be read and its reads
would grow with it, so the picture becomes a bar of counts by state instead.

``render`` draws any nodes and edges (the workflow pages can draw their steps with it);
``dependency_chain`` and ``group_jobs`` read what to draw, each in a bounded number of queries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.urls import NoReverseMatch, reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from django_jobs.core.states import JobStatus
from django_jobs.models import Job, JobDependency, JobGroupMember

if TYPE_CHECKING:
    from django_jobs.models import JobGroup

MAX_NODES = 200  # past this many jobs, counts by state instead of a graph
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 168, 40, 44, 12, 8
COLOURS: dict[str, str] = {
    JobStatus.PENDING: "#e3f2fd", JobStatus.PROCESSING: "#bbdefb",
    JobStatus.COMPLETED: "#c8e6c9", JobStatus.FAILED: "#ffe0b2", JobStatus.DEAD: "#ffcdd2",
    JobStatus.CANCELED: "#e0e0e0", JobStatus.WAITING: "#fff9c4",
}
UNKNOWN = "#f5f5f5"  # a deleted job, or a state this version does not know
NOT_ENDED = "not ended"  # a large group's jobs that have not ended, whatever their state
COUNTED = (*JobStatus.values, NOT_ENDED)


@dataclass(frozen=True)
class Node:
    """One box: ``key`` is unique in the picture; ``state`` picks the colour and its word."""

    key: int
    label: str
    state: str
    state_label: str = ""
    href: str = ""
    title: str = ""


@dataclass(frozen=True)
class Picture:
    """What a page draws: the nodes and edges, or, past the bound, the counts by state."""

    nodes: Sequence[Node]
    edges: Sequence[tuple[int, int]]
    counts: Counter[str] | None = None  # set when the graph was too large to draw
    counted_all: bool = True  # False: the counts are of the first jobs read only
    current: int | None = None  # the job whose page shows the picture, outlined

    def svg(self) -> SafeString:
        """The picture in a frame that scrolls on its own when the graph is wider than the
        page, so the page itself never scrolls sideways."""
        if self.counts is not None:
            inner = counts_bar(self.counts, counted_all=self.counted_all)
        else:
            inner = render(self.nodes, self.edges, current=self.current)
        return format_html('<div class="dj-jobs-graph-frame">{}</div>', inner)


def columns(keys: Iterable[int], edges: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Each node's column: 0 for a node that waits on none, else one more than the deepest
    node it waits on (the longest path to it). Edges naming an unknown node are ignored; a
    cycle, which dependencies cannot form, would leave its nodes in column 0."""
    keys = list(keys)
    known = set(keys)
    waits_on: dict[int, list[int]] = {key: [] for key in keys}
    for source, target in edges:
        if source in known and target in known and source != target:
            waits_on[target].append(source)
    column: dict[int, int] = {}
    for start in keys:
        if start in column:
            continue
        # Depth-first, without recursion (chains can be long): a node's column is known
        # once every node it waits on has one.
        stack, on_path = [start], {start}
        while stack:
            key = stack[-1]
            pending = [k for k in waits_on[key] if k not in column and k not in on_path]
            if pending:
                stack.append(pending[0])
                on_path.add(pending[0])
                continue
            column[key] = max((column[k] + 1 for k in waits_on[key] if k in column), default=0)
            stack.pop()
            on_path.discard(key)
    return column


def render(nodes: Sequence[Node], edges: Sequence[tuple[int, int]], *,
           current: int | None = None) -> SafeString:
    """The graph as an SVG element, the ``current`` node outlined; every text written is
    escaped."""
    if not nodes:
        return mark_safe("")
    column = columns((node.key for node in nodes), edges)
    rows: dict[int, int] = {}
    place: dict[int, tuple[int, int]] = {}
    for node in sorted(nodes, key=lambda n: (column[n.key], n.key)):
        row = rows.get(column[node.key], 0)
        rows[column[node.key]] = row + 1
        place[node.key] = (PAD + column[node.key] * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    width = PAD * 2 + (max(column.values()) + 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + max(rows.values()) * (BOX_H + GAP_Y) - GAP_Y
    label = f"{len(nodes)} related jobs and their states"
    parts = [
        f'<svg class="dj-jobs-graph" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>',
        '<defs><marker id="dj-jobs-arrow" viewBox="0 0 8 8" refX="8" refY="4" '
        'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" '
        'fill="#777"/></marker></defs>',
    ]
    for source, target in edges:
        if source not in place or target not in place or source == target:
            continue
        (x1, y1), (x2, y2) = place[source], place[target]
        parts.append(
            f'<path class="dj-jobs-edge" d="M{x1 + BOX_W},{y1 + BOX_H // 2} '
            f'C{x1 + BOX_W + GAP_X // 2},{y1 + BOX_H // 2} {x2 - GAP_X // 2},{y2 + BOX_H // 2} '
            f'{x2},{y2 + BOX_H // 2}" fill="none" stroke="#777" stroke-width="1.2" '
            f'marker-end="url(#dj-jobs-arrow)"/>')
    for node in nodes:
        x, y = place[node.key]
        stroke = 3 if node.key == current else 1
        title = node.title or node.label
        title += " (this job)" if node.key == current else ""
        box = (
            f'<g class="dj-jobs-node dj-jobs-node-{escape(node.state)}">'
            f"<title>{escape(title)}</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="4" '
            f'fill="{COLOURS.get(node.state, UNKNOWN)}" stroke="#555" stroke-width="{stroke}"/>'
            f'<text x="{x + 6}" y="{y + 16}" font-size="12" fill="#111">'
            f"{escape(clip(node.label, 24))}</text>"
            f'<text x="{x + 6}" y="{y + 32}" font-size="11" fill="#333">'
            f"{escape(node.state_label or node.state)}</text></g>")
        if node.href:
            box = f'<a href="{escape(node.href)}">{box}</a>'
        parts.append(box)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308  # every text above is escaped


def counts_bar(counts: Counter[str], *, counted_all: bool = True) -> SafeString:
    """A bar of counts by state, for a graph too large to draw."""
    total = sum(counts.values())
    if not total:
        return mark_safe("")
    width, height, x = 720, 44, 0.0
    lead = "" if counted_all else "at least "
    label = f"{lead}{total:,} related jobs, by state (too many to draw one by one)"
    parts = [
        f'<svg class="dj-jobs-graph dj-jobs-graph-counts" role="img" width="100%" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMid meet" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>",
    ]
    legend = []
    for state in COUNTED:
        number = counts.get(state, 0)
        if not number:
            continue
        share = width * number / total
        name = JobStatus(state).label if state in JobStatus.values else state
        parts.append(
            f'<rect x="{x:.1f}" y="0" width="{share:.1f}" height="20" '
            f'fill="{COLOURS.get(state, UNKNOWN)}" stroke="#555" stroke-width="0.5">'
            f"<title>{escape(name)}: {number:,}</title></rect>")
        legend.append(f"{name} {number:,}")
        x += share
    parts.append(f'<text x="0" y="38" font-size="12" fill="currentColor">'
                 f"{escape(lead + ', '.join(legend))}</text></svg>")
    return mark_safe("".join(parts))  # noqa: S308  # every text above is escaped


def clip(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "\u2026"


def job_href(pk: int) -> str:
    try:
        return reverse("admin:django_jobs_job_change", args=[pk])
    except NoReverseMatch:
        return ""


def nodes_of(ids: Iterable[int], *, using: str | None = None) -> list[Node]:
    """The boxes of these jobs, read in one query; a job deleted since is left out."""
    rows = Job.objects.using(using).filter(pk__in=list(ids)).values_list(
        "pk", "public_id", "type", "status")
    return [
        Node(key=pk, label=job_type, state=status,
             state_label=JobStatus(status).label if status in JobStatus.values else status,
             href=job_href(pk), title=f"{public_id} {job_type}: {status}")
        for pk, public_id, job_type, status in rows
    ]


def counts_of(ids: Iterable[int], *, using: str | None = None) -> Counter[str]:
    return Counter(Job.objects.using(using).filter(pk__in=list(ids))
                   .values_list("status", flat=True))


def dependency_chain(job: Job, *, limit: int = MAX_NODES) -> Picture | None:
    """The jobs linked to ``job`` through dependencies, both ways, as far as they go: one
    query per step outward, and at most ``limit + 1`` jobs read. None when it has no link."""
    using = job._state.db
    seen, frontier = {job.pk}, {job.pk}
    edges: set[tuple[int, int]] = set()
    while frontier and len(seen) <= limit:
        links: list[tuple[int, int]] = [
            *JobDependency.objects.using(using).filter(
                job_id__in=frontier, depends_on__isnull=False)
            .values_list("depends_on_id", "job_id"),
            *JobDependency.objects.using(using).filter(depends_on_id__in=frontier)
            .values_list("depends_on_id", "job_id"),
        ]
        frontier = set()
        for source, target in links:
            edges.add((source, target))
            for key in (source, target):
                if key not in seen:
                    seen.add(key)
                    frontier.add(key)
    if len(seen) == 1:
        return None
    if len(seen) > limit:
        return Picture((), (), counts=counts_of(seen, using=using), counted_all=not frontier)
    return Picture(nodes_of(seen, using=using), sorted(edges), current=job.pk)


def group_jobs(group: JobGroup, *, limit: int = MAX_NODES) -> Picture | None:
    """A group's jobs and its callback job, an arrow from each member to the callback; the
    group's own counters give the counts of a group too large to draw."""
    using = group._state.db
    ids = list(JobGroupMember.objects.using(using).filter(group=group).order_by("job_id")
               .values_list("job_id", flat=True)[: limit + 1])
    if not ids:
        return None
    if len(ids) + (group.callback_job_id is not None) > limit:
        counts: Counter[str] = Counter({
            JobStatus.COMPLETED: group.completed, JobStatus.DEAD: group.dead,
            JobStatus.CANCELED: group.canceled, NOT_ENDED: group.remaining})
        return Picture((), (), counts=+counts)
    nodes = nodes_of(ids + ([group.callback_job_id] if group.callback_job_id else []),
                     using=using)
    edges = [(pk, group.callback_job_id) for pk in ids if group.callback_job_id]
    edges += list(JobDependency.objects.using(using).filter(
        job_id__in=ids, depends_on_id__in=ids).values_list("depends_on_id", "job_id"))
    return Picture(nodes, edges)


def related(job: Job) -> Picture | None:
    """What a job's page draws: its dependency chain if it has one, else its group's jobs;
    read once per page (kept on the job object for the page's render)."""
    if not hasattr(job, "_django_jobs_related"):
        picture = dependency_chain(job)
        if picture is None and job.group_id is not None:
            from django_jobs.models import JobGroup

            group = JobGroup.objects.using(job._state.db).filter(pk=job.group_id).first()
            picture = None if group is None else group_jobs(group)
        job._django_jobs_related = picture  # type: ignore[attr-defined]
    return job._django_jobs_related  # type: ignore[attr-defined]
