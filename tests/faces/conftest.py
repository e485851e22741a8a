"""Fixtures of the faces' tests: the JSON API's client, for the API's tests and the Tasks
backend's (tasks are jobs in the API)."""

import pytest

from tests.api_support import ALL_SCOPES, Api, make_token


@pytest.fixture
def api(request) -> Api:
    """A client of the JSON API with a Bearer token of the scopes the test module names in
    ``API_SCOPES`` (every scope if it names none)."""
    return Api(make_token(*getattr(request.module, "API_SCOPES", ALL_SCOPES)))
