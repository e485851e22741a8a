"""Requests no row can answer get the stock admin's answers, never a server error.

A NUL character is in no key and no text column of the app's tables (what they hold is
checked or escaped before it is written), and PostgreSQL refuses to compare a text with one:
a NUL in an object id is a missing object, as the stock admin answers an id it cannot read
(a redirect to the admin index with a message), and a NUL in a list's filters, search, order
or page is a bad request (400), as Django answers a malformed one. A job's id is an integer
in the primary key's range; anything else (``²``, ``1e3``, a 30-digit number) is no job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import BadRequest, ValidationError
from django.http import HttpRequest

if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin[Any]
else:
    _AdminBase = object

NUL = "\x00"
PK_RANGE = range(-(2**63), 2**63)  # a BigAutoField's


def job_pk(object_id: object) -> int | None:
    """The job's primary key ``object_id`` names, read as the stock admin reads it (Python's
    ``int``), or None if no row can have it: not an integer, or outside the column's range."""
    from django_jobs.models import Job

    try:
        pk = Job._meta.pk.to_python(object_id)
    except ValidationError:
        return None
    return pk if pk in PK_RANGE else None


def refuse_nul(request: HttpRequest) -> None:
    """BadRequest if a name or a value of the query string holds a NUL."""
    for name, values in request.GET.lists():
        if NUL in name or any(NUL in value for value in values):
            raise BadRequest(f"a NUL character in the query parameter {name!r}")


class StockAnswers(_AdminBase):
    """Mixed into the app's ModelAdmins, before ``admin.ModelAdmin``."""

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None):
        if NUL in str(object_id):
            return None  # the stock admin's answer for a missing object
        return super().get_object(request, object_id, from_field)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None):
        refuse_nul(request)
        return super().changelist_view(request, extra_context)
