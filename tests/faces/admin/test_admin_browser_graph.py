"""The picture of related jobs in a real headless Chromium: a long dependency chain is drawn on
the job page at 1280x800 and 1920x1080, its boxes link to their jobs, and however wide the
graph, the page does not scroll sideways (the graph scrolls in its own frame)."""

import pytest

from django_jobs.models import Job
from tests.admin_helpers import job_url, staff
from tests.faces.admin.conftest import missing

from .test_admin_browser import log_in
from .test_admin_browser_widths import screenshot, scrolls_sideways

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


@pytest.mark.parametrize(("window_width", "window_height"), [(1280, 800), (1920, 1080)])
def test_a_long_chain_is_drawn_and_the_page_does_not_scroll_sideways(
        browser, live_server, window_width, window_height):
    staff("triage", superuser=True)
    chain = [Job.enqueue("echo", {"step": 0})]
    for step in range(1, 12):
        chain.append(Job.enqueue("noop", {"step": step}, depends_on=[chain[-1]]))
    Job.objects.filter(pk=chain[0].pk).update(status="completed")
    browser.set_window_size(window_width, window_height)
    log_in(browser, live_server.url)

    browser.get(live_server.url + job_url(chain[5]))
    nodes = browser.find_elements(By.CSS_SELECTOR, "svg.dj-jobs-graph g.dj-jobs-node")
    assert len(nodes) == 12
    assert browser.find_elements(By.CSS_SELECTOR, "g.dj-jobs-node-completed")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});",
                           browser.find_element(By.CSS_SELECTOR, ".dj-jobs-graph-frame"))
    screenshot(browser, f"admin-job-graph-{window_width}")
    page, client = scrolls_sideways(browser)
    assert page <= client, f"the job page scrolls sideways at {window_width}: {page} > {client}"
    frame, box = scrolls_sideways(browser, ".dj-jobs-graph-frame")
    assert frame > box, "a twelve-job chain is wider than the page: its frame should scroll"

    # A box is a link to its job's page.
    link = browser.find_element(By.CSS_SELECTOR, "svg.dj-jobs-graph a")
    href = browser.execute_script("return arguments[0].getAttribute('href');", link)
    assert href and "/admin/django_jobs/job/" in href
