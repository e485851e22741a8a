"""Every API error is JSON: ``{"detail": "...", "errors": {"field": "why"}}`` and a 4xx status."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from django_jobs.exceptions import InvalidJob

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue


class ApiError(Exception):
    """Raised in a view to answer with an error; ``errors`` names the offending fields."""

    def __init__(
        self, status: int, detail: str, errors: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail
        self.errors = errors or {}
        self.headers = headers or {}

    @classmethod
    def bad_request(cls, field: str, why: str) -> ApiError:
        return cls(400, f"{field}: {why}", {field: why})

    @classmethod
    def from_invalid_job(cls, exc: InvalidJob) -> ApiError:
        errors = {field: " ".join(messages) for field, messages in exc.message_dict.items()}
        detail = "; ".join(f"{field}: {why}" for field, why in errors.items())
        return cls(400, detail, errors)

    def response(self) -> JsonResponse:
        return json_response({"detail": self.detail, "errors": self.errors}, self.status,
                             headers=self.headers)


def json_response(
    data: JSONValue, status: int = 200, headers: dict[str, str] | None = None
) -> JsonResponse:
    response = JsonResponse(data, status=status, safe=False, encoder=DjangoJSONEncoder,
                            json_dumps_params={"allow_nan": False})
    for name, value in (headers or {}).items():
        response[name] = value
    return response


@csrf_exempt
def not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any path under the mount that is no route (a trailing slash included): JSON, any method."""
    return ApiError(404, "no such API route; see openapi.json for the routes",
                    {"path": "not found"}).response()
