"""The overview's charts in a real headless Chromium, after a real worker's run: the SVG bars
add up to the attempts the worker ended, the wait's lines have their points, and the queue
filter narrows them. Saves tests/artifacts/overview-charts.png (scripts/overview-charts copies
it to the docs, after a run spread over some minutes: ``DJANGO_JOBS_CHART_SPREAD`` seconds)."""

import os
import signal

import pytest

from django_jobs.models import Job, JobAttempt
from tests.admin_helpers import staff
from tests.conftest import wait_for
from tests.faces.admin.conftest import missing
from tests.faces.admin.test_admin_browser import ARTIFACTS, log_in

try:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
except ImportError:  # pragma: no cover - depends on the machine
    By = None
    StaleElementReferenceException = Exception

pytestmark = [
    pytest.mark.skipif(bool(missing), reason="browser test needs " + ", ".join(missing)),
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]

SPREAD = float(os.environ.get("DJANGO_JOBS_CHART_SPREAD", "0"))


def enqueue_a_day_of_work() -> None:
    """Completions, retried failures, dead jobs and waits, in two queues; spread over
    ``SPREAD`` seconds of run_at when a screenshot should show several minutes."""
    def delay(i: int, n: int) -> float:
        return SPREAD * i / n

    for i in range(40):
        Job.enqueue("noop", delay=delay(i, 40))
    for i in range(12):
        Job.enqueue("echo", {"i": i}, queue="mail", delay=delay(i, 12))
    for i in range(6):
        Job.enqueue("slow", {"seconds": 0.3}, queue="mail", delay=delay(i, 6))
    for i in range(3):
        Job.enqueue("permanent", queue="mail", delay=delay(i, 3))
    for i in range(4):
        Job.enqueue("always_fails", {"n": i}, delay=delay(i, 4))


def settled() -> bool:
    return not Job.objects.filter(status__in=("pending", "processing", "failed")).exists()


def drawn(browser, chart: str) -> dict[str, int]:
    """The jobs the bars of one chart show, by outcome."""
    counts: dict[str, int] = {}
    for rect in browser.find_elements(By.CSS_SELECTOR, f"#{chart} rect.dj-jobs-bar"):
        outcome = rect.get_attribute("class").split("dj-jobs-bar-")[1]
        counts[outcome] = counts.get(outcome, 0) + int(rect.get_attribute("data-count"))
    return counts


def selected(browser, css: str) -> bool:
    """Whether the option is selected; False while the page it was found on is replaced."""
    try:
        return browser.find_element(By.CSS_SELECTOR, css).is_selected()
    except StaleElementReferenceException:
        return False


def test_overview_charts_show_the_attempts_a_worker_ended(browser, live_server, start_worker):
    staff("triage", "view_job")
    enqueue_a_day_of_work()
    worker = start_worker("--concurrency", "2", "--poll-interval", "0.2")
    wait_for(settled, timeout=SPREAD + 120)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    ended = {}  # attempts handed back unspent (released) are no end of an attempt
    for outcome in JobAttempt.objects.exclude(outcome="released").values_list("outcome",
                                                                                flat=True):
        ended[outcome] = ended.get(outcome, 0) + 1
    assert set(ended) == {"completed", "failed", "dead"}

    log_in(browser, live_server.url)
    browser.get(live_server.url + "/admin/django_jobs/job/overview/")
    for chart in ("chart-hour", "chart-day"):
        assert drawn(browser, chart) == ended
        points = browser.find_elements(By.CSS_SELECTOR, f"#{chart} circle.dj-jobs-point-p95")
        assert points and all(p.is_displayed() for p in points)
    svg = browser.find_element(By.CSS_SELECTOR, "#chart-hour svg.dj-jobs-chart-bars")
    assert svg.size["width"] > 300 and svg.size["height"] > 60
    ARTIFACTS.mkdir(exist_ok=True)
    browser.set_window_size(1600, 1000)
    browser.find_element(By.ID, "finished").location_once_scrolled_into_view  # noqa: B018
    browser.find_element(By.ID, "finished-charts").screenshot(
        str(ARTIFACTS / "overview-charts.png"))

    # The queue filter, chosen in the form.
    browser.find_element(By.CSS_SELECTOR, "#chart-filter select[name=queue] option[value=mail]"
                         ).click()
    browser.find_element(By.CSS_SELECTOR, "#chart-filter button").click()
    wait_for(lambda: "queue=mail" in browser.current_url, timeout=20)
    chosen = "#chart-filter select[name=queue] option[value=mail]"
    wait_for(lambda: selected(browser, chosen), timeout=20)
    mail = JobAttempt.objects.filter(job__queue="mail").exclude(outcome="released")
    assert drawn(browser, "chart-hour") == {
        outcome: mail.filter(outcome=outcome).count()
        for outcome in set(mail.values_list("outcome", flat=True))}
