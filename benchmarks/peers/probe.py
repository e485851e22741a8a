"""What every system's no-op job does: nothing, or note the moment it started.

A job whose payload says ``probe`` appends ``"n time"`` to the file named by
``PEERS_PROBE_FILE``; the client that enqueued it reads the file to time the wake-up.
"""

from __future__ import annotations

import os
import time


def run(n: int, probe: bool = False) -> None:
    if probe:
        with open(os.environ["PEERS_PROBE_FILE"], "a") as file:
            file.write(f"{n} {time.time()}\n")
