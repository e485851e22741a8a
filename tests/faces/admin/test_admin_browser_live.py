"""Live pages in a real headless Chromium: the job list shows a job enqueued after it was
loaded and a job's page its new status, without a reload; a ticked row is not swapped away; a
hidden tab polls nothing."""

import time

import pytest
from django.core.cache import cache

from django_jobs.models import Job
from tests.admin_helpers import job_url, staff
from tests.faces.admin.conftest import BROWSER_TESTS

from .test_admin_browser import log_in

try:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait
except ImportError:  # pragma: no cover - depends on the machine
    By = WebDriverWait = StaleElementReferenceException = None


def until(driver, condition, seconds: float = 15):
    """Wait for ``condition``; an element swapped out while it was read (the page refreshing
    itself, which is what these tests wait for) is read again."""
    return WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,)
                         ).until(condition)

pytestmark = BROWSER_TESTS


@pytest.fixture
def live_every_second(settings):
    settings.DJANGO_JOBS = {**getattr(settings, "DJANGO_JOBS", {}), "ADMIN_REFRESH_SECONDS": 1}
    cache.clear()
    yield
    cache.clear()


def polls(driver) -> int:
    return driver.execute_script(
        "return performance.getEntriesByType('resource')"
        ".filter(e => e.name.includes('/job/live/')).length;")


def mark_page(driver) -> None:
    """A mark a reload would wipe: its survival proves the page was swapped, not reloaded."""
    driver.execute_script("window.djJobsSamePage = true;")


def same_page(driver) -> bool:
    return driver.execute_script("return window.djJobsSamePage === true;")


def test_the_list_and_a_jobs_page_follow_the_queue_without_a_reload(
        browser, live_server, live_every_second):
    staff("triage", superuser=True)
    first = Job.enqueue("echo", {"n": 1})
    browser.set_window_size(1280, 800)
    log_in(browser, live_server.url)
    browser.get(live_server.url + "/admin/django_jobs/job/")
    until(browser, lambda d: polls(d) >= 1, 10)
    mark_page(browser)

    later = Job.enqueue("echo", {"n": 2})
    until(browser, lambda d: later.public_id in d.find_element(By.ID, "result_list").text)
    assert same_page(browser)
    assert "Live: checked at" in browser.find_element(By.ID, "dj-jobs-live").text

    # A ticked row keeps the page as it is: the line offers the reload instead. (The tick
    # can meet a swap that lands at that moment: tick the row as the page then is.)
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "tr input.action-select").click()
          or True)
    Job.enqueue("echo", {"n": 3})
    until(browser, lambda d: "reload the page" in d.find_element(By.ID, "dj-jobs-live").text)
    assert browser.find_element(By.CSS_SELECTOR, "tr input.action-select").is_selected()
    assert same_page(browser)

    browser.get(live_server.url + job_url(first))
    until(browser, lambda d: polls(d) >= 1, 10)
    mark_page(browser)
    Job.objects.filter(pk=first.pk).update(status="dead")
    until(browser,
          lambda d: "Dead" in d.find_element(By.CSS_SELECTOR, ".field-status_badge").text)
    assert same_page(browser)


def test_a_hidden_tab_polls_nothing_and_polls_again_when_shown(
        browser, live_server, live_every_second):
    staff("triage", superuser=True)
    browser.set_window_size(1280, 800)
    log_in(browser, live_server.url)
    browser.get(live_server.url + "/admin/django_jobs/job/overview/")
    until(browser, lambda d: polls(d) >= 2, 10)
    # The page as the browser has it when the user switches tabs.
    browser.execute_script(
        "Object.defineProperty(document, 'visibilityState', {value: 'hidden', "
        "configurable: true}); document.dispatchEvent(new Event('visibilitychange'));")
    time.sleep(0.5)  # a poll already on its way may land
    hidden_from = polls(browser)
    time.sleep(3.5)
    assert polls(browser) == hidden_from
    browser.execute_script(
        "Object.defineProperty(document, 'visibilityState', {value: 'visible', "
        "configurable: true}); document.dispatchEvent(new Event('visibilitychange'));")
    until(browser, lambda d: polls(d) > hidden_from, 5)
