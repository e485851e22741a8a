"""PostgreSQL LISTEN/NOTIFY: wakes an idle worker the moment a job is enqueued.

A trigger (migration 0002) sends ``NOTIFY django_jobs`` when jobs are inserted or become
pending again; notifications are delivered only when the enqueuing transaction commits. Polling
stays as the fallback, since PgBouncer in transaction mode drops notifications.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger("django_jobs.worker")

CHANNEL = "django_jobs"


class Listener(threading.Thread):
    def __init__(self, db_wrapper: Any, wake: threading.Event) -> None:
        super().__init__(name="django-jobs-listener", daemon=True)
        self.db_wrapper, self.wake = db_wrapper, wake
        self.stopped = threading.Event()

    @classmethod
    def start_for(cls, db_wrapper: Any, wake: threading.Event) -> Listener | None:
        if db_wrapper.vendor != "postgresql":
            return None
        listener = cls(db_wrapper, wake)
        listener.start()
        return listener

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self._listen()
            except Exception:
                logger.debug("LISTEN connection failed; polling meanwhile", exc_info=True)
                self.stopped.wait(5.0)

    def _listen(self) -> None:
        params = self.db_wrapper.get_connection_params()
        conn = self.db_wrapper.get_new_connection(params)
        try:
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
            while not self.stopped.is_set():
                for _ in conn.notifies(timeout=1.0, stop_after=1):
                    self.wake.set()
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopped.set()
