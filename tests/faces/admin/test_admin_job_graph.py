"""The picture of related jobs on the job and group pages: a dependency chain's and a group's
jobs with their states, as server-drawn SVG, and counts by state past the bound."""

import re
from xml.etree import ElementTree

import pytest
from django.urls import reverse

from django_jobs import enqueue_group
from django_jobs.admin import job_graph
from django_jobs.models import Job, JobGroup
from tests.admin_helpers import job_url, staff

pytestmark = pytest.mark.django_db(transaction=True)


def graph_of(response) -> ElementTree.Element:
    """The page's graph, parsed as XML (which also proves it is well formed)."""
    found = re.search(r'<svg class="dj-jobs-graph.*?</svg>', response.content.decode(), re.S)
    assert found, "the page has no graph"
    return ElementTree.fromstring(found.group(0))  # noqa: S314  # our own page


def boxes(svg: ElementTree.Element) -> dict[str, str]:
    """Each node's title (public id and type) -> its state's class."""
    ns = "{http://www.w3.org/2000/svg}"
    return {
        group.find(f"{ns}title").text: group.get("class").split("dj-jobs-node-")[1]
        for group in svg.iter(f"{ns}g") if "dj-jobs-node" in (group.get("class") or "")
    }


def test_a_chain_is_drawn_from_any_of_its_jobs_with_each_state(viewer):
    extract = Job.enqueue("echo", {"n": 1})
    clean = Job.enqueue("echo", {"n": 2})
    report = Job.enqueue("noop", {}, depends_on=[extract, clean])
    publish = Job.enqueue("noop", {}, depends_on=[report])
    Job.objects.filter(pk=extract.pk).update(status="completed")

    for job in (extract, report, publish):
        svg = graph_of(viewer.get(job_url(job)))
        drawn = boxes(svg)
        assert len(drawn) == 4
        states = {title.split()[0]: state for title, state in drawn.items()}
        (outlined,) = [title for title in drawn if title.endswith("(this job)")]
        assert outlined.startswith(job.public_id)
        assert states[extract.public_id] == "completed"
        assert states[clean.public_id] == "pending"
        assert states[publish.public_id] == "waiting"
        assert len([p for p in svg.iter("{http://www.w3.org/2000/svg}path")
                    if p.get("class") == "dj-jobs-edge"]) == 3


def test_columns_follow_the_longest_path_so_a_chain_reads_in_run_order():
    edges = [(1, 2), (2, 3), (1, 3), (4, 3)]
    assert job_graph.columns([1, 2, 3, 4], edges) == {1: 0, 2: 1, 3: 2, 4: 0}
    # Unknown nodes and self-loops are ignored; a cycle leaves no node without a column.
    assert set(job_graph.columns([1, 2], [(1, 1), (2, 1), (1, 2), (9, 1)])) == {1, 2}


def test_a_plain_job_page_has_no_related_jobs_section(viewer):
    job = Job.enqueue("echo", {})
    page = viewer.get(job_url(job)).content.decode()
    assert "Related jobs" not in page and "dj-jobs-graph" not in page


def test_a_groups_page_draws_its_jobs_and_the_callback(client):
    viewer = client
    viewer.force_login(staff("groups", "view_job", "view_jobgroup"))
    group = enqueue_group("g", [("echo", {"n": n}) for n in range(3)], callback="noop")
    url = reverse("admin:django_jobs_jobgroup_change", args=[group.pk])
    drawn = boxes(graph_of(viewer.get(url)))
    assert len(drawn) == 3  # the callback is enqueued only once every job has ended
    member = Job.objects.filter(group=group).first()
    assert len(boxes(graph_of(viewer.get(job_url(member))))) == 3


def test_past_the_bound_the_picture_is_counts_by_state(viewer, monkeypatch):
    monkeypatch.setattr(job_graph, "MAX_NODES", 5)
    root = Job.enqueue("echo", {})
    for _ in range(8):
        Job.enqueue("noop", {}, depends_on=[root])
    picture = job_graph.dependency_chain(Job.objects.get(pk=root.pk), limit=5)
    assert picture is not None and picture.counts is not None
    assert picture.counts["waiting"] + picture.counts["pending"] >= 6
    (svg,) = ElementTree.fromstring(picture.svg())  # noqa: S314  # the frame holds one svg
    assert "related jobs, by state" in svg.get("aria-label")

    group = enqueue_group("g", [("echo", {"n": n}) for n in range(8)], callback="noop")
    counts = job_graph.group_jobs(JobGroup.objects.get(pk=group.pk), limit=5)
    assert counts is not None and counts.counts == {job_graph.NOT_ENDED: 8}


def test_names_in_the_graph_are_escaped(viewer):
    first = Job.enqueue("echo", {})
    Job.enqueue("noop", {}, depends_on=[first])
    Job.objects.filter(pk=first.pk).update(type='<script>alert("x")</script>')
    page = viewer.get(job_url(first)).content.decode()
    assert "<script>alert" not in page
    graph_of(viewer.get(job_url(first)))  # still well-formed XML
