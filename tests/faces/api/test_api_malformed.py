"""Malformed and hostile requests: every one is answered with a JSON 4xx naming the problem,
never a 5xx and never Django's HTML pages, on SQLite and on PostgreSQL (which refuses a NUL in
any text it is asked to compare)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_jobs.models import Job
from tests.api_support import ALL_SCOPES, make_token

pytestmark = pytest.mark.django_db

REAL = "j-0123456789abcdef0123"  # a job's id: the test gives its job this one


@dataclass(frozen=True)
class Row:
    method: str
    path: str  # percent-encoded, with any query string
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    environ: dict[str, str] = field(default_factory=dict)


def body(**fields: object) -> bytes:
    return json.dumps({"type": "echo", **fields}).encode()


ROWS = [
    # --- path ids: a NUL or odd text answered 500 on PostgreSQL; any id not j-<20 hex> is 404
    Row("GET", "/api/jobs/%00", 404),  # NUL as the id
    Row("POST", "/api/jobs/%00/cancel", 404),  # NUL on the cancel route
    Row("POST", "/api/jobs/%00/retry", 404),  # NUL on the retry route
    Row("GET", "/api/jobs/j-0123456789abcdef012%00", 404),  # NUL at the end of a real-looking id
    Row("GET", "/api/jobs/%F0%9F%92%A5", 404),  # an emoji
    Row("GET", "/api/jobs/%ED%A0%80", 404),  # the UTF-8 bytes of a lone surrogate
    Row("GET", "/api/jobs/%FF%FE", 404),  # bytes that are not UTF-8 at all
    Row("GET", "/api/jobs/J-0123456789ABCDEF0123", 404),  # upper case is another id
    Row("GET", "/api/jobs/" + "x" * 10_000, 404),  # a 10,000-character id
    Row("GET", "/api/jobs/%0A", 404),  # a newline
    # --- a trailing slash, and paths that are no route: JSON 404, not Django's HTML page
    Row("GET", "/api/jobs/", 404),  # the list with a trailing slash
    Row("POST", "/api/jobs/", 404),  # submitting to it
    Row("GET", f"/api/jobs/{REAL}/", 404),  # one job with a trailing slash
    Row("POST", f"/api/jobs/{REAL}/cancel/", 404),  # cancel with a trailing slash
    Row("POST", f"/api/jobs/{REAL}/retry/", 404),  # retry with a trailing slash
    Row("GET", "/api/metrics/jobs/", 404),  # metrics with a trailing slash
    Row("GET", "/api/openapi.json/", 404),  # the document with a trailing slash
    Row("GET", "/api/", 404),  # the mount itself
    Row("DELETE", "/api/nothing/here", 404),  # an unknown path, any method
    Row("GET", "/api/%00", 404),  # NUL as a route
    # --- limit: str.isdigit() let non-ASCII digits through to int(); 5,000 digits overflowed
    Row("GET", "/api/jobs?limit=%C2%B2", 400),  # superscript two
    Row("GET", "/api/jobs?limit=%D9%A3", 400),  # Arabic-Indic digit three
    Row("GET", "/api/jobs?limit=%EF%BC%95", 400),  # fullwidth five
    Row("GET", "/api/jobs?limit=" + "9" * 5000, 400),  # 5,000 digits
    Row("GET", "/api/jobs?limit=", 400),  # empty
    Row("GET", "/api/jobs?limit=5%0A", 400),  # a trailing newline
    Row("GET", "/api/jobs?limit=+5", 400),  # a sign (+ is a space in a query string)
    Row("GET", "/api/jobs?limit=-1", 400),  # negative
    Row("GET", "/api/jobs?limit=0x10", 400),  # hexadecimal
    Row("GET", "/api/jobs?limit=5", 200),  # (the good one)
    # --- the other list parameters
    Row("GET", "/api/jobs?status=", 400),  # empty status
    Row("GET", "/api/jobs?status=%00", 400),  # NUL status
    Row("GET", "/api/jobs?status=pending,", 400),  # a trailing comma
    Row("GET", "/api/jobs?cursor=", 400),  # empty cursor
    Row("GET", "/api/jobs?cursor=o1%00.1", 400),  # NUL in a cursor
    Row("GET", "/api/jobs?cursor=o" + "9" * 5000 + ".1", 400),  # 5,000 digits in a cursor
    Row("GET", "/api/jobs?cursor=o%C2%B2.1", 400),  # a non-ASCII digit in a cursor
    Row("GET", "/api/jobs?cursor=o" + "9" * 19 + "." + "9" * 19, 200),  # beyond any job: clamped
    Row("GET", "/api/jobs?cursor=n-" + "9" * 19 + ".1", 200),  # before any job: clamped
    Row("GET", "/api/jobs?since=", 400),  # empty since
    Row("GET", "/api/jobs?since=2024-06-14T12:00:00%00Z", 400),  # NUL in since
    Row("GET", "/api/jobs?since=%EF%BC%92024-06-14T12:00:00Z", 400),  # a fullwidth digit
    Row("GET", "/api/jobs?since=" + "2" * 5000, 400),  # 5,000 digits
    Row("GET", "/api/jobs?type=%00", 400),  # NUL in type
    Row("GET", "/api/jobs?queue=a%00b", 400),  # NUL in queue
    Row("GET", "/api/jobs?type=", 200),  # empty type: an exact match that finds nothing
    Row("GET", "/api/jobs?type=%ED%A0%80", 200),  # bytes of a lone surrogate read as U+FFFD
    Row("GET", "/api/jobs?%00=1", 400),  # NUL as a parameter name
    Row("GET", "/api/jobs?" + "&".join(f"p{i}=1" for i in range(1200)), 400),  # 1,200 fields
    # --- metrics
    Row("GET", "/api/metrics/jobs?window=0", 400),  # zero
    Row("GET", "/api/metrics/jobs?window=000", 400),  # zero, written long
    Row("GET", "/api/metrics/jobs?window=", 400),  # empty
    Row("GET", "/api/metrics/jobs?window=%C2%B2", 400),  # superscript two
    Row("GET", "/api/metrics/jobs?window=" + "9" * 5000, 400),  # 5,000 digits
    Row("GET", "/api/metrics/jobs?window=5%0A", 400),  # a trailing newline
    Row("GET", "/api/metrics/jobs?window=%00", 400),  # NUL
    Row("GET", "/api/metrics/jobs?window=" + "9" * 20 + "", 200),  # 20 digits: 3650 days
    Row("GET", "/api/metrics/jobs?format=", 400),  # empty format
    Row("GET", "/api/metrics/jobs?format=prometheus%00", 400),  # NUL in format
    # --- headers
    Row("GET", "/api/jobs", 401, headers={"Authorization": "Bearer djj_\x00"}),  # NUL token
    Row("GET", "/api/jobs", 401, headers={"Authorization": "Bearer djj_\ud800"}),  # surrogate
    Row("GET", "/api/jobs", 401, headers={"Authorization": "Bearer djj_\u00e9"}),  # non-ASCII
    Row("GET", "/api/jobs", 401, headers={"Authorization": "Bearer " + "x" * 100_000}),  # long
    Row("GET", "/api/jobs", 401, headers={"Authorization": "\x00"}),  # NUL as the scheme
    Row("GET", "/api/jobs", 401, headers={"Authorization": "Bearer"}),  # no token
    Row("GET", "/api/jobs", 401, headers={"Authorization": "Basic dXNlcjpwYXNz"}),  # Basic
    Row("POST", "/api/jobs", 400, body(), headers={"Idempotency-Key": ""}),  # empty key
    Row("POST", "/api/jobs", 400, body(), headers={"Idempotency-Key": "k\x00"}),  # NUL
    Row("POST", "/api/jobs", 400, body(), headers={"Idempotency-Key": "k\n"}),  # newline
    Row("POST", "/api/jobs", 400, body(), headers={"Idempotency-Key": "cl\u00e9"}),  # non-ASCII
    Row("POST", "/api/jobs", 400, body(), headers={"Idempotency-Key": "k\ud800"}),  # surrogate
    Row("POST", "/api/jobs", 400, body(), headers={"Idempotency-Key": "k" * 256}),  # too long
    # --- bodies
    Row("POST", "/api/jobs", 400, b'{"type": "echo\\u0000"}'),  # NUL in the type
    Row("POST", "/api/jobs", 400, body(payload={"a": "\x00"})),  # NUL in a payload string
    Row("POST", "/api/jobs", 400, body(payload={"\x00": 1})),  # NUL in a payload key
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "payload": "\\ud800"}'),  # lone surrogate
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "queue": "\\udfff"}'),  # in the queue
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "payload": "\xff\xfe"}'),  # not UTF-8
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "payload": 1e400}'),  # infinity
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "payload": NaN}'),  # NaN
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "priority": ' + b"9" * 5000 + b"}"),
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "delay": 1e20}'),  # beyond ten years
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "delay": 1.5}'),  # fractional ms
    Row("POST", "/api/jobs", 201, b'{"type": "echo", "delay": 5.0, "priority": 3.0}'),  # whole
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "queue": "a\\n"}'),  # newline in a queue
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "callback_url": ""}'),  # empty URL
    Row("POST", "/api/jobs", 400, body(callback_url="http://127.0.0.1/\x00")),  # NUL in a URL
    Row("POST", "/api/jobs", 400, body(callback_url="HTTP://127.0.0.1/")),  # not lower case
    Row("POST", "/api/jobs", 400, body(callback_url=["http://127.0.0.1/"])),  # not a string
    Row("POST", "/api/jobs", 400, b'{"type": 5}'),  # a number as the type
    Row("POST", "/api/jobs", 400, b'{"type": ""}'),  # empty type
    Row("POST", "/api/jobs", 400, b'{"type": "echo",'),  # cut off
    Row("POST", "/api/jobs", 400, b"[" * 100_000),  # deep nesting, malformed
    Row("POST", "/api/jobs", 400, b'{"type": "echo", "payload": ' + b"[" * 70 + b"]" * 70 + b"}"),
    Row("POST", "/api/jobs", 400, b'"echo"'),  # a string, not an object
    Row("POST", "/api/jobs", 400, b"null"),  # null
    Row("POST", "/api/jobs", 400, b""),  # empty
    Row("POST", "/api/jobs", 400, b"\x00"),  # one NUL byte
    Row("POST", "/api/jobs", 400, "{}".encode("utf-16")),  # UTF-16 with a BOM: no type
    Row("POST", "/api/jobs", 415, body(), content_type="text/plain"),  # wrong type
    Row("POST", "/api/jobs", 415, b"type=echo", content_type="application/x-www-form-urlencoded"),
    Row("POST", "/api/jobs", 415, b"--x\r\n", content_type="multipart/form-data; boundary=x"),
    Row("POST", "/api/jobs", 415, body(), content_type="application/json\x00"),  # NUL in it
    Row("POST", "/api/jobs", 201, body(), content_type="application/json; charset=latin-1"),
    Row("POST", "/api/jobs", 400, body(), environ={"CONTENT_LENGTH": "abc"}),  # not a number
    Row("POST", "/api/jobs", 400, body(), environ={"CONTENT_LENGTH": "1" + "0" * 30}),  # huge
    Row("POST", "/api/jobs", 400, body(), environ={"CONTENT_LENGTH": "-1"}),  # negative
    # --- methods
    Row("DELETE", "/api/jobs", 405),  # a method no route has
    Row("PUT", f"/api/jobs/{REAL}", 405),  # nor this
    Row("GET", f"/api/jobs/{REAL}/cancel", 405),  # cancel is POST only
    Row("HEAD", "/api/jobs", 405),  # HEAD is not GET here
    Row("OPTIONS", "/api/jobs", 405),  # no CORS preflight answers
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{i:03d}" for i in range(len(ROWS))])
def test_malformed_requests_get_a_json_answer_and_no_5xx(row: Row) -> None:
    Job.objects.filter(pk=Job.enqueue("echo").pk).update(public_id=REAL)
    client = Client()
    token = make_token(*ALL_SCOPES)
    headers = {"Authorization": f"Bearer {token}", **row.headers}
    response = client.generic(row.method, row.path, row.body, content_type=row.content_type,
                              headers=headers, **row.environ)
    assert response.status_code == row.status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    if row.status >= 400 and row.method != "HEAD":  # a HEAD answer has no body
        assert response.json()["detail"]


def test_a_session_posting_an_unreadable_form_gets_a_json_400(db) -> None:
    """The CSRF check of a session caller reads the form body; a broken multipart body makes
    Django raise, which the API answers as JSON, not as Django's HTML 400."""
    user = User.objects.create_user("ada")
    user.user_permissions.add(Permission.objects.get(codename="add_job"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.generic("POST", "/api/jobs", b"--x\r\nbroken",
                              content_type="multipart/form-data; boundary=x")
    assert 400 <= response.status_code < 500
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]
