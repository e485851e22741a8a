"""The test settings with a broken observer, for the worker subprocesses of
tests/worker/test_observers.py, chosen by environment variables:

- ``JOBS_OBSERVE_SPANS``: ``start`` or ``end``, a tracer provider whose span processor raises
  there (spans are also written to ``JOBS_TRACE_FILE`` when it is set);
- ``JOBS_OBSERVE_LOG``: ``raise``, or ``block`` (until ``JOBS_OBSERVE_RELEASE`` exists), a
  handler of the ``django_jobs`` logger at DEBUG;
- ``JOBS_OBSERVE_RECEIVER``: ``<signal>:raise`` or ``<signal>:block``, a receiver of
  ``job_started`` or ``job_finished``.
"""

import os

from tests.settings import *  # noqa: F403

if os.environ.get("JOBS_OBSERVE_SPANS"):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tests.observers_support import RaisingSpanProcessor
    from tests.tracing_support import FileExporter

    _provider = TracerProvider()
    _provider.add_span_processor(RaisingSpanProcessor(os.environ["JOBS_OBSERVE_SPANS"]))
    if os.environ.get("JOBS_TRACE_FILE"):
        _provider.add_span_processor(SimpleSpanProcessor(FileExporter(
            os.environ["JOBS_TRACE_FILE"])))
    trace.set_tracer_provider(_provider)

if os.environ.get("JOBS_OBSERVE_LOG"):
    _handler = ({"()": "tests.observers_support.RaisingHandler"}
                if os.environ["JOBS_OBSERVE_LOG"] == "raise" else
                {"()": "tests.observers_support.BlockingHandler",
                 "release": os.environ["JOBS_OBSERVE_RELEASE"]})
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"broken": _handler},
        "loggers": {"django_jobs": {"handlers": ["broken"], "level": "DEBUG"}},
    }

if os.environ.get("JOBS_OBSERVE_RECEIVER"):
    _signal_name, _kind = os.environ["JOBS_OBSERVE_RECEIVER"].split(":")
    from django_jobs import signals
    from tests import observers_support

    _receivers = {"raise": observers_support.raising_receiver,
                  "block": observers_support.blocking_receiver}
    getattr(signals, _signal_name).connect(_receivers[_kind], dispatch_uid="tests.observe")
