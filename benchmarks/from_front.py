"""``runworker`` whose every claim reads the ready index from its front: the worker's claim
cursor (``worker/producer.py``) never hands out a key, which is the worker without the
cursor and nothing else changed. For ``benchmarks/held_snapshot.py --from-front`` only.

    python -m benchmarks.from_front --settings=benchmarks.settings --burst ...
"""

from __future__ import annotations

import os
import sys

import django


def main() -> None:
    settings = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--settings=")),
                    "benchmarks.settings")
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    django.setup()
    from django.core.management import execute_from_command_line

    from django_jobs.worker.producer import ClaimCursor

    ClaimCursor.after = lambda self, now: None  # type: ignore[method-assign]
    execute_from_command_line([sys.argv[0], "runworker", *sys.argv[1:]])


if __name__ == "__main__":
    main()
