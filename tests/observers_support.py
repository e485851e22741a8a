"""Observers that fail, for tests/worker/test_observers.py: a span processor that raises, log
handlers that raise or block, signal receivers that raise or block. ``tests/settings_observe.py``
puts them in a worker subprocess as a site's settings would; this process may arm them too."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from opentelemetry.sdk.trace import SpanProcessor


class Broken(Exception):
    """What the broken observers raise."""


class RaisingSpanProcessor(SpanProcessor):
    """A span processor (a misconfigured or broken SDK's) that raises at a span's start or end,
    while ``armed``."""

    def __init__(self, at: str, armed: bool = True) -> None:
        self.at = at
        self.armed = armed

    def on_start(self, span, parent_context=None) -> None:
        if self.armed and self.at == "start":
            raise Broken("the span processor fails at on_start")

    def on_end(self, span) -> None:
        if self.armed and self.at == "end":
            raise Broken("the span processor fails at on_end")


class RaisingHandler(logging.Handler):
    """A log handler whose ``emit`` raises (and does not call ``handleError``)."""

    def emit(self, record: logging.LogRecord) -> None:
        raise Broken("the log handler fails")


class BlockingHandler(logging.Handler):
    """A log handler writing to a collector that does not answer: each record blocks until the
    file ``release`` names exists (at most 120 s), as a write to a dead socket does until it
    times out."""

    def __init__(self, release: str) -> None:
        super().__init__()
        self.gate = Path(release)

    def emit(self, record: logging.LogRecord) -> None:
        deadline = time.monotonic() + 120
        while not self.gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def raising_receiver(sender, **kwargs) -> None:
    raise Broken("the receiver fails")


def blocking_receiver(sender, **kwargs) -> None:
    """Blocks until the file ``JOBS_OBSERVE_RELEASE`` names exists (at most 120 s)."""
    release = Path(os.environ["JOBS_OBSERVE_RELEASE"])
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
