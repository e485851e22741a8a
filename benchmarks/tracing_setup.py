"""How a benchmark worker meets OpenTelemetry (``BENCH_OTEL``, read by benchmarks/settings.py):

- ``blocked``: the package cannot be imported (``sys.modules`` holds None for it), as when the
  ``otel`` extra is not installed;
- ``installed`` (or unset): installed, and nothing in the process imports it;
- ``imported``: the site imports the API (as instrumented code does) but configures no SDK;
- ``sdk``: the SDK's tracer provider, its batch processor handing every span to an exporter
  that drops it (the cost of making and ending spans, not of sending them).
"""

from __future__ import annotations

import sys


def configure(mode: str) -> None:
    if mode == "blocked":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    elif mode == "imported":
        import opentelemetry.trace  # noqa: F401
    elif mode == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Dropped(SpanExporter):
            def export(self, spans):  # type: ignore[no-untyped-def]
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)
    elif mode not in ("", "installed"):
        raise ValueError(f"BENCH_OTEL={mode!r}: blocked, installed, imported or sdk")
