"""The test settings, with an OpenTelemetry SDK tracer provider writing every span to the file
``JOBS_TRACE_FILE`` names (each export waiting while the file ``JOBS_TRACE_GATE`` names
exists, if set): for the worker subprocesses of tests/worker/test_tracing.py."""

import os

from tests.settings import *  # noqa: F403

if os.environ.get("JOBS_TRACE_FILE"):
    from tests.tracing_support import file_provider

    file_provider(os.environ["JOBS_TRACE_FILE"], os.environ.get("JOBS_TRACE_GATE"))
