"""End to end in a real headless Chromium: a staff user finds a dead job, retries it, and a
real worker completes it. Saves screenshots to tests/artifacts/ (the docs use them)."""

import signal
from pathlib import Path

import pytest

from django_jobs.models import Job, QueueState, Worker
from tests.admin_helpers import staff
from tests.conftest import ROOT, wait_for
from tests.faces.admin.conftest import missing

ARTIFACTS = ROOT / "tests" / "artifacts"

try:
    from selenium.webdriver.common.by import By
except ImportError:  # pragma: no cover - depends on the machine
    By = None

pytestmark = [
    pytest.mark.skipif(bool(missing), reason="browser test needs " + ", ".join(missing)),
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def shoot(driver, name: str) -> Path:
    """Screenshot the whole page, not just the window."""
    ARTIFACTS.mkdir(exist_ok=True)

    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1440, max(height, 600))
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1440, 1000)
    return path


def log_in(driver, base: str, fold_sidebar: bool = True) -> None:
    driver.get(base + "/admin/login/?next=/admin/django_jobs/job/")
    driver.find_element(By.NAME, "username").send_keys("triage")
    driver.find_element(By.NAME, "password").send_keys("pw")
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    # Wait for the job list: refreshing before the login's redirect has landed would reload
    # the login page instead (seen once under load).
    driver.find_element(By.ID, "changelist")
    if fold_sidebar:
        # The admin's navigation sidebar folded away, as a user who folded it once has it.
        driver.execute_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
        driver.refresh()


def make_history(start_worker) -> Job:
    """A realistic table, made by a real worker: completed, dead and scheduled jobs."""
    for n in range(4):
        Job.enqueue("echo", {"n": n})
    Job.enqueue("always_fails", {"n": 7}, max_attempts=1)
    Job.enqueue("permanent", {"invoice": 1042})
    target = Job.enqueue("flaky", {"fail_times": 1, "to": "ada@example.com"}, max_attempts=1)
    Job.enqueue("echo", {"later": True}, delay=3600)
    assert start_worker("--burst").wait() == 0
    target.refresh_from_db()
    assert target.status == "dead"
    return target


def test_staff_find_a_dead_job_retry_it_and_see_it_completed(browser, live_server,
                                                              start_worker):
    staff("triage", "view_job", "retry_job", "cancel_job")
    target = make_history(start_worker)
    log_in(browser, live_server.url)

    # Filter the list to dead jobs with the sidebar filter.
    dead_filter = "#changelist-filter a[href*='status__exact=dead']"
    browser.find_element(By.CSS_SELECTOR, dead_filter).click()
    assert "status__exact=dead" in browser.current_url
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 3
    assert target.public_id in browser.find_element(By.ID, "result_list").text
    # Each row says why it died.
    errors = browser.find_elements(By.CSS_SELECTOR, "#result_list td.field-error_line")
    assert "Fragile: attempt 1 failed" in [cell.text for cell in errors]
    shoot(browser, "admin-list-dead")

    # Open the job: the error and its traceback are on the page.
    browser.find_element(By.LINK_TEXT, target.public_id).click()
    page = browser.find_element(By.ID, "content").text
    assert "Fragile: attempt 1 failed" in page
    assert "Traceback (most recent call last)" in page
    # A real worker's traceback: its own frames are folded, the handler's shown.
    folded = browser.find_elements(By.CSS_SELECTOR,
                                   ".field-error_details details.dj-jobs-worker-frames")
    assert folded and "of the worker (django_jobs.worker)" in folded[0].text
    assert "worker/" not in browser.execute_script(
        "const pre = document.querySelector('.field-error_details pre.dj-jobs-traceback');"
        "return [...pre.childNodes].filter(n => n.nodeType === 3)"
        ".map(n => n.textContent).join('');")
    shoot(browser, "admin-job-dead")

    # Retry it from the job page.
    browser.find_element(By.CSS_SELECTOR, "button.dj-jobs-button-retry").click()
    assert "1 job retried" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    assert Job.objects.get(pk=target.pk).status == "pending"

    # A real worker, in burst mode, runs it.
    assert start_worker("--burst").wait() == 0
    browser.refresh()
    status = browser.find_element(By.CSS_SELECTOR, ".field-status_badge .dj-jobs-status")
    assert status.text == "Completed"
    assert '"succeeded_on": 2' in browser.find_element(By.CSS_SELECTOR, ".field-result_json").text
    shoot(browser, "admin-job-completed")


def test_overview_shows_counts_workers_and_a_paused_queue(browser, live_server, start_worker):
    staff("triage", "view_job", "change_queuestate")
    make_history(start_worker)
    Job.enqueue("echo", {"n": 99}, queue="mail")
    QueueState.objects.pause("mail")
    worker = start_worker("--concurrency", "2")
    wait_for(lambda: Worker.objects.exists(), timeout=20)
    log_in(browser, live_server.url)
    browser.get(live_server.url + "/admin/django_jobs/job/overview/")
    queues = browser.find_element(By.ID, "queues").text
    assert "mail" in queues and "paused" in queues
    assert "2" in browser.find_element(By.ID, "workers").text
    shoot(browser, "admin-overview")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
