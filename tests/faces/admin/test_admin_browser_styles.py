"""The custom admin pages look like the stock ones on the running Django: in a real headless
Chromium, the breadcrumbs of the overview, edit-payload and delete-confirmation pages have the
computed styles of a stock page's breadcrumbs. Saves a screenshot of each page per Django
version to tests/artifacts/."""

import django
import pytest

from tests.admin_helpers import job_url, make_job, staff
from tests.faces.admin.conftest import missing

from .test_admin_browser import log_in, shoot

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError:  # pragma: no cover - depends on the machine
    By = Select = None

pytestmark = [
    pytest.mark.skipif(bool(missing), reason="browser test needs " + ", ".join(missing)),
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]
VERSION = f"django{django.VERSION[0]}{django.VERSION[1]}"
# What makes breadcrumbs look like the admin's: the bar, its spacing, the text and the links.
BAR = ["background-color", "padding-top", "padding-right", "padding-bottom", "padding-left",
       "margin-top", "margin-bottom", "color", "display"]
TEXT = ["font-size", "font-family", "color", "line-height"]
LINK = ["color", "font-size", "text-decoration-line"]


def styles(driver, selector: str, names: list[str]) -> dict[str, str]:
    element = driver.find_element(By.CSS_SELECTOR, selector)
    return driver.execute_script(
        "const s = getComputedStyle(arguments[0]);"
        "return Object.fromEntries(arguments[1].map(n => [n, s.getPropertyValue(n)]));",
        element, names,
    )


def look(driver) -> dict[str, dict[str, str]]:
    """The breadcrumbs' computed styles; the text is a <li> from Django 6.1, the bar before."""
    text = ".breadcrumbs li" if django.VERSION >= (6, 1) else ".breadcrumbs"
    return {
        "bar": styles(driver, ".breadcrumbs", BAR),
        "text": styles(driver, text, TEXT),
        "link": styles(driver, ".breadcrumbs a", LINK),
    }


def test_custom_pages_have_the_stock_breadcrumbs(browser, live_server):
    staff("triage", superuser=True)
    dead = make_job("dead")
    log_in(browser, live_server.url)

    browser.get(live_server.url + "/admin/django_jobs/apitoken/")  # a stock change list
    stock = look(browser)
    assert stock["bar"]["background-color"] != "rgba(0, 0, 0, 0)"  # the admin styled it

    pages = {}
    browser.get(live_server.url + "/admin/django_jobs/job/overview/")
    pages["overview"] = look(browser)
    shoot(browser, f"admin-overview-{VERSION}")

    browser.get(live_server.url + job_url(dead, "edit_payload"))
    pages["edit-payload"] = look(browser)
    shoot(browser, f"admin-edit-payload-{VERSION}")

    browser.get(live_server.url + "/admin/django_jobs/job/")
    browser.find_element(By.CSS_SELECTOR, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("delete_jobs")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    browser.find_element(By.CSS_SELECTOR, "body.delete-confirmation")
    pages["delete-confirmation"] = look(browser)
    shoot(browser, f"admin-delete-confirmation-{VERSION}")

    for page, seen in pages.items():
        assert seen == stock, page
