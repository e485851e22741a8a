"""Run ``runworker --burst`` in this process and print, as JSON on the last line of stdout, the
django_jobs modules whose code ran from its start to its end (every thread's calls, under
``sys.setprofile`` and ``threading.setprofile``; the migrations left out). Django is set up
first, outside the count, as a site's process is before it runs a command.

    python -m tests.worker.profiled_burst [runworker options]
"""

from __future__ import annotations

import json
import sys
import threading
from types import FrameType

import django


def main(argv: list[str]) -> None:
    django.setup()
    from django.core.management import call_command

    seen: set[str] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("django_jobs") and ".migrations" not in name:
                seen.add(name)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        call_command("runworker", "--burst", *argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    print(json.dumps(sorted(seen)))


if __name__ == "__main__":
    main(sys.argv[1:])
