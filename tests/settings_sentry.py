"""The test settings with the Sentry snippet of ``docs/howto-error-trackers.md`` run as written
(its DSN from ``SENTRY_DSN``: a server of the test's that records what the SDK sends), for the
worker subprocesses of ``tests/worker/test_sentry.py``. Retries are due at once."""

import re
from pathlib import Path

from tests.settings import *  # noqa: F403

DJANGO_JOBS = {**DJANGO_JOBS, "BACKOFF_SCHEDULE": [0]}  # noqa: F405


def howto_snippet() -> str:
    """The how-to's first Python block that sets up Sentry."""
    text = (Path(__file__).parent.parent / "docs" / "howto-error-trackers.md").read_text()
    return next(block for block in re.findall(r"```python\n(.*?)```", text, re.S)
                if "sentry_sdk.init(" in block)


exec(howto_snippet())  # the documented snippet, as a site would paste it
