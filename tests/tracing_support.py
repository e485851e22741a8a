"""OpenTelemetry's SDK for the tracing tests: this process's spans in the SDK's in-memory
exporter, a worker subprocess's written to a file (``tests/settings_tracing.py``), both read back
as the same records."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@dataclass(frozen=True)
class Span:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str | None
    links: list[tuple[str, str]]  # (trace id, span id) of each link
    attributes: dict
    status: str
    events: list[str]

    @classmethod
    def of(cls, span: ReadableSpan) -> Span:
        return cls.from_json(json.loads(span.to_json(indent=None)))

    @classmethod
    def from_json(cls, data: dict) -> Span:
        return cls(
            name=data["name"], kind=data["kind"], trace_id=data["context"]["trace_id"],
            span_id=data["context"]["span_id"], parent_id=data["parent_id"],
            links=[(link["context"]["trace_id"], link["context"]["span_id"])
                   for link in data["links"]],
            attributes=data["attributes"], status=data["status"]["status_code"],
            events=[event["name"] for event in data["events"]],
        )


class FileExporter(SpanExporter):
    """Appends each finished span, as ``ReadableSpan.to_json`` gives it, to a file: one line.

    With a ``gate`` (a file's path), an export waits while that file exists, as an exporter
    waits on a collector that does not answer, having first created ``gate + ".waited"``."""

    def __init__(self, path: str, gate: str | None = None) -> None:
        self.path = path
        self.gate = gate
        self.lock = threading.Lock()

    def export(self, spans) -> SpanExportResult:
        if self.gate and os.path.exists(self.gate):
            open(self.gate + ".waited", "a").close()
            while os.path.exists(self.gate):
                time.sleep(0.05)
        with self.lock, open(self.path, "a") as out:
            for span in spans:
                out.write(span.to_json(indent=None) + "\n")
        return SpanExportResult.SUCCESS


def read_spans(path: Path) -> list[Span]:
    if not path.exists():
        return []
    return [Span.from_json(json.loads(line)) for line in path.read_text().splitlines()]


_memory: InMemorySpanExporter | None = None


def in_memory() -> InMemorySpanExporter:
    """This process's tracer provider (set once: OpenTelemetry allows one per process),
    exporting to memory; cleared for each caller."""
    global _memory
    if _memory is None:
        _memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_memory))
        trace.set_tracer_provider(provider)
    _memory.clear()
    return _memory


def finished(exporter: InMemorySpanExporter) -> list[Span]:
    return [Span.of(span) for span in exporter.get_finished_spans()]


def file_provider(path: str, gate: str | None = None) -> None:
    """The worker subprocess's tracer provider: every span written to ``path`` as it ends, by
    the ``SimpleSpanProcessor`` (its export run by the span's end), after waiting while the
    file ``gate`` exists."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(path, gate)))
    trace.set_tracer_provider(provider)
