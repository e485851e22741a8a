"""Fixtures of the admin's tests: a staff client that may view jobs, and a real headless
Chromium for the browser tests."""

import os

import pytest

from tests.admin_helpers import staff

CHROMIUM = os.environ.get("DJANGO_JOBS_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DJANGO_JOBS_CHROMEDRIVER", "/usr/bin/chromedriver")

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - depends on the machine
    webdriver = None

# What this machine lacks for the browser tests (they skip, naming it).
missing = [
    what for what, absent in (
        ("the selenium package (pip install selenium)", webdriver is None),
        (f"{CHROMIUM} (apt-get install chromium)", not os.path.exists(CHROMIUM)),
        (f"{CHROMEDRIVER} (apt-get install chromium-driver)", not os.path.exists(CHROMEDRIVER)),
    ) if absent
]
# The marks of a module of browser tests: skipped, naming what is missing, where the machine
# lacks the browser; slow; a live server (a transaction of its own).
BROWSER_TESTS = [
    pytest.mark.skipif(bool(missing), reason="browser test needs " + ", ".join(missing)),
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def viewer(client):
    """The test client, logged in as staff with only the view permission on jobs."""
    client.force_login(staff("viewer", "view_job"))
    return client


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-dev-shm-usage", "--window-size=1440,1000"):
        options.add_argument(flag)
    # An explicit driver path: selenium-manager must not look for, or download, a browser.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()
