"""Who gets in: Bearer tokens with scopes, logged-in users with permissions; nobody else."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from django_jobs.models import ApiToken, Job
from tests.api_support import ALL_SCOPES, Api, make_token

pytestmark = pytest.mark.django_db

# (method, path, body, scope that opens it, permission that opens it for a session user)
ROUTES = [
    ("post", "/api/jobs", {"type": "noop"}, "submit", "add_job"),
    ("get", "/api/jobs", None, "read", "view_job"),
    ("get", "/api/jobs/{job_id}", None, "read", "view_job"),
    ("post", "/api/jobs/{job_id}/cancel", None, "manage", "cancel_job"),
    ("post", "/api/jobs/{job_id}/retry", None, "manage", "retry_job"),
    ("get", "/api/metrics/jobs", None, "read", "view_job"),
    ("get", "/api/openapi.json", None, "read", "view_job"),
]
ROUTE_IDS = [f"{m} {p}" for m, p, *_ in ROUTES]


@pytest.fixture
def job():
    return Job.enqueue("noop")


def call(api: Api, method: str, path: str, body, job):
    path = path.format(job_id=job.public_id)
    return api.get(path) if method == "get" else api.post(path, body)


@pytest.mark.parametrize(("method", "path", "body", "scope", "perm"), ROUTES, ids=ROUTE_IDS)
def test_anonymous_callers_get_401_with_a_bearer_challenge(job, method, path, body, scope, perm):
    response = call(Api(), method, path, body, job)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["detail"]


@pytest.mark.parametrize(("method", "path", "body", "scope", "perm"), ROUTES, ids=ROUTE_IDS)
def test_a_token_without_the_scope_gets_403_and_with_it_gets_in(
    job, method, path, body, scope, perm
):
    others = [s for s in ALL_SCOPES if s != scope]
    assert call(Api(make_token(*others)), method, path, body, job).status_code == 403
    assert call(Api(make_token(scope)), method, path, body, job).status_code not in (401, 403)


@pytest.mark.parametrize(("method", "path", "body", "scope", "perm"), ROUTES, ids=ROUTE_IDS)
def test_a_session_user_needs_the_model_permission(job, method, path, body, scope, perm):
    user = User.objects.create_user("staff")
    client = Client()
    client.force_login(user)
    assert call(Api(client=client), method, path, body, job).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename=perm))
    client.force_login(User.objects.get(pk=user.pk))
    assert call(Api(client=client), method, path, body, job).status_code not in (401, 403)


@pytest.mark.parametrize("header", [
    "Bearer djj_not-a-real-token",
    "Bearer ",
    "Basic dXNlcjpwYXNz",
    "Token abc",
    "Bearer",
])
def test_wrong_credentials_get_401(header):
    response = Client().get("/api/jobs", headers={"Authorization": header})
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_token_gets_401():
    raw = make_token("read")
    assert Api(raw).get("/api/jobs").status_code == 200
    ApiToken.objects.update(revoked_at=timezone.now())
    assert Api(raw).get("/api/jobs").status_code == 401


def test_tokens_are_stored_hashed_and_recognised_by_prefix():
    raw = make_token("read")
    token = ApiToken.objects.get()
    assert raw not in (token.key_hash, token.key_prefix)
    assert raw.startswith(token.key_prefix)
    assert ApiToken.find(raw) == token
    assert ApiToken.find(raw + "x") is None


def test_using_a_token_records_when_it_was_last_used():
    raw = make_token("read")
    assert ApiToken.objects.get().last_used_at is None
    Api(raw).get("/api/jobs")
    assert ApiToken.objects.get().last_used_at is not None


def test_a_session_post_without_the_csrf_token_is_403_and_creates_nothing():
    user = User.objects.create_superuser("admin")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = Api(client=client).post("/api/jobs", {"type": "noop"})
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert Job.objects.count() == 0


def test_a_session_post_with_the_csrf_token_is_accepted():
    user = User.objects.create_superuser("admin")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/admin/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    response = Api(client=client).post("/api/jobs", {"type": "noop"},
                                       headers={"X-CSRFToken": token})
    assert response.status_code == 201


def test_a_bearer_post_needs_no_csrf_token():
    client = Client(enforce_csrf_checks=True)
    response = Api(make_token("submit"), client=client).post("/api/jobs", {"type": "noop"})
    assert response.status_code == 201


def test_an_inactive_user_gets_401():
    user = User.objects.create_superuser("gone")
    client = Client()
    client.force_login(user)
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert Api(client=client).get("/api/jobs").status_code == 401


def test_a_wrong_method_is_405_with_allow():
    response = Api(make_token(*ALL_SCOPES)).client.delete(
        "/api/jobs", headers={"Authorization": f"Bearer {make_token(*ALL_SCOPES)}"}
    )
    assert response.status_code == 405
    assert response["Allow"] == "GET, POST"


# The admin: tokens are made and revoked there.


def test_the_admin_creates_a_token_shows_its_secret_once_and_stores_only_the_hash():
    admin = User.objects.create_superuser("admin")
    client = Client()
    client.force_login(admin)
    response = client.post("/admin/django_jobs/apitoken/add/",
                           {"name": "billing", "scopes": ["submit", "read"]})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get()
    page = response.content.decode()
    start = page.index("djj_")
    raw = page[start:page.index("<", start)].strip()
    assert token.scopes == ["read", "submit"]
    assert raw not in token.key_hash
    assert ApiToken.find(raw) == token
    assert Api(raw).get("/api/jobs").status_code == 200
    change = client.get(f"/admin/django_jobs/apitoken/{token.pk}/change/").content.decode()
    assert raw not in change


def test_the_admin_revoke_action_shuts_a_token_out():
    admin = User.objects.create_superuser("admin")
    raw = make_token("read")
    client = Client()
    client.force_login(admin)
    client.post("/admin/django_jobs/apitoken/", {
        "action": "revoke", "_selected_action": [ApiToken.objects.get().pk],
    })
    assert ApiToken.objects.get().revoked_at is not None
    assert Api(raw).get("/api/jobs").status_code == 401
