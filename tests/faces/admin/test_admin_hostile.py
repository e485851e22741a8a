"""Odd requests get the answers the stock admin gives: odd object ids, NULs in the list's
filters and search, and JSON no job can hold in the edit-payload form. Never a 500."""

from urllib.parse import quote, urlencode

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.urls import reverse

from django_jobs.models import Job
from tests.admin_helpers import job_url, make_job

pytestmark = pytest.mark.django_db

LIST = "/admin/django_jobs/job/"
# Ids no job has: not an ASCII integer, or beyond the primary key's range, or negative.
ODD_IDS = ["²", "1e3", "1.5", "0x1", "9" * 30, str(2**63), str(-(2**63) - 1), "-1",
           "\x00", "1\x00", "%00", "١٢٣٤٥٦٧٨٩"]


@pytest.fixture
def root(client):
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


def at(prefix: str, object_id: str, suffix: str) -> str:
    return f"{prefix}{quote(object_id, safe='')}/{suffix}"


def stock(client, object_id: str, suffix: str):
    """The stock admin's answer for auth.Group at the same id."""
    return client.get(at("/admin/auth/group/", object_id, suffix))


def same_as_stock(response, reference, prefix: str) -> None:
    """The same status, and a redirect to the same place (the admin index, or the model's
    own change page where the stock one goes to the group's)."""
    assert response.status_code == reference.status_code, response.content[:300]
    if reference.status_code == 302:
        assert response.url == reference.url.replace("/admin/auth/group/", prefix)


@pytest.mark.parametrize("object_id", ODD_IDS)
@pytest.mark.parametrize("suffix", ["change/", "history/", "delete/", ""])
def test_a_job_page_at_an_odd_id_answers_as_the_stock_admin(root, object_id, suffix):
    make_job("dead")
    reference = stock(root, object_id, suffix)
    assert reference.status_code in (302, 404)
    response = root.get(at(LIST, object_id, suffix))
    same_as_stock(response, reference, LIST)
    if response.status_code == 302 and suffix:
        texts = [str(m) for m in get_messages(response.wsgi_request)]
        assert any("Perhaps it was deleted?" in text for text in texts), texts


@pytest.mark.parametrize("object_id", ODD_IDS)
def test_the_job_buttons_and_the_payload_editor_at_an_odd_id_are_not_found(root, object_id):
    job = make_job("dead")
    for verb in ("retry", "cancel", "run_now"):
        assert root.post(at(LIST, object_id, f"do/{verb}/")).status_code == 404
    assert root.get(at(LIST, object_id, "edit-payload/")).status_code == 404
    assert root.post(at(LIST, object_id, "edit-payload/"),
                     {"payload": "{}"}).status_code == 404
    job.refresh_from_db()
    assert job.status == "dead"


@pytest.mark.parametrize("object_id", ODD_IDS)
@pytest.mark.parametrize("model", ["schedule", "apitoken"])
def test_the_other_pages_of_the_app_at_an_odd_id_answer_as_the_stock_admin(
    root, model, object_id
):
    prefix = f"/admin/django_jobs/{model}/"
    for suffix in ("change/", "history/", "delete/"):
        same_as_stock(root.get(at(prefix, object_id, suffix)), stock(root, object_id, suffix),
                      prefix)


def test_a_real_job_at_its_id_is_still_found(root):
    job = make_job("dead")
    assert root.get(job_url(job)).status_code == 200
    assert root.get(job_url(job, "edit_payload")).status_code == 200
    # Every page reads an id as the stock admin does (Python's int): spaces around it too.
    for suffix in ("change/", "edit-payload/"):
        assert root.get(at(LIST, f" {job.pk} ", suffix)).status_code == 200
    assert Group.objects.count() == 0  # the stock answers above were for missing rows


NUL = "a\x00b"
FILTERS = [
    {"type": NUL}, {"queue": NUL}, {"status": NUL}, {"status__exact": NUL},
    {"priority": NUL}, {"has_error": NUL}, {"q": NUL}, {"q": "j-\x00"}, {"q": "\x00"},
    {"created_at__gte": NUL}, {"created_at__lt": NUL}, {"created_at__year": NUL},
    {"created_at__year": "2026", "created_at__month": NUL}, {"o": NUL}, {"p": NUL},
    {"e": NUL}, {NUL: "1"}, {"type": "echo", "q": NUL},
]


@pytest.mark.parametrize("params", FILTERS, ids=lambda p: urlencode(p))
def test_a_nul_in_a_filter_or_the_search_is_a_bad_request(root, params):
    make_job("dead")
    assert root.get(LIST, params).status_code == 400


@pytest.mark.parametrize("params", [{"q": NUL}, {"name": NUL}, {"paused__exact": NUL},
                                    {"revoked_at__isnull": NUL}])
@pytest.mark.parametrize("model", ["schedule", "apitoken"])
def test_a_nul_in_the_other_lists_is_a_bad_request(root, model, params):
    assert root.get(f"/admin/django_jobs/{model}/", params).status_code == 400


def test_the_lists_without_a_nul_still_answer(root):
    make_job("dead")
    for model in ("job", "schedule", "apitoken"):
        assert root.get(f"/admin/django_jobs/{model}/", {"q": "a b"}).status_code == 200
    assert not root.get(LIST, {"type": "nothing-such"}).context["cl"].result_list


def edit(client, job: Job, text: str):
    return client.post(job_url(job, "edit_payload"), {"payload": text})


@pytest.mark.parametrize(("text", "problem"), [
    ("[" * 5000 + "]" * 5000, "nested"),
    ('{"a": ' * 5000 + "1" + "}" * 5000, "nested"),
    ('{"n": ' + "7" * 5000 + "}", "digits"),
    ('{"n": NaN}', "NaN"),
    ('{"n": Infinity}', "Infinity"),
    ('{"n": -Infinity}', "Infinity"),
    ('{"n": 1e400}', "float"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"a": {"b": 1, "b": 1}}', "duplicate key 'b'"),
    ('{"s": "\\u0000"}', "NUL"),
    ('{"s": "\\ud800"}', "surrogate"),
    ("\x00", "Null characters are not allowed"),
    ("", "required"),
])
def test_a_payload_no_job_can_hold_is_a_form_error_naming_the_problem(root, text, problem):
    job = make_job("dead", payload={"to": "ada@example.com"})
    response = edit(root, job, text)
    assert response.status_code in (200, 400)
    errors = " ".join(response.context["form"].errors.get("payload", []))
    assert problem in errors, errors
    job.refresh_from_db()
    assert job.status == "dead" and job.payload == {"to": "ada@example.com"}


def test_a_payload_at_the_depth_limit_is_saved(root):
    job = make_job("dead")
    response = edit(root, job, "[" * 31 + "]" * 31)
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.status == "pending"


def test_the_admin_index_is_where_a_missing_job_sends_one(root):
    response = root.get(at(LIST, "²", "change/"))
    assert response.status_code == 302 and response.url == reverse("admin:index")
