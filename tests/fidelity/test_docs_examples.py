"""The examples of docs/howto-test-handlers.md run as written, as one test module."""

import os
import re
import subprocess
import sys

from tests.conftest import ROOT

HOWTO = ROOT / "docs" / "howto-test-handlers.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_the_test_your_handlers_examples_pass(tmp_path):
    blocks = python_blocks(HOWTO.read_text())
    source = "\n\n".join(blocks)
    tests = re.findall(r"^\s*def (test_\w+)\(", source, flags=re.MULTILINE)
    assert len(blocks) >= 4 and len(tests) >= 5
    module = tmp_path / "test_howto_examples.py"
    module.write_text(source)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        # A test database of its own: this suite's is in use by this process.
        "DJANGO_JOBS_TEST_SUFFIX": os.environ.get("DJANGO_JOBS_TEST_SUFFIX", "") + "_howto",
        # A site's backoff (the suite's is a few milliseconds: a retry would be due at once).
        "DJANGO_JOBS_TEST_EXTRA": '{"BACKOFF_BASE": 10.0, "BACKOFF_CAP": 60.0}',
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(module), "-q", "-p", "no:cacheprovider",
         "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(tests)} passed" in result.stdout, result.stdout
