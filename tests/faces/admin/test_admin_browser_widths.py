"""The job list and the job page read well on a laptop's screen and on a desktop's, in a real
headless Chromium: at 1280x800 and 1920x1080, with the admin's navigation sidebar as a fresh
browser has it (open, nothing in localStorage) and folded, neither page scrolls sideways, every
column of the job list is on screen, and an attempt's traceback, opened, is a wide block, not a
column of a few characters. The job page keeps the sidebar; the job list leaves it out. Saves a
screenshot of each page at each size and sidebar state to tests/artifacts/ (the admin how-to
shows the 1280 ones of a fresh browser, copied to docs/images/ by
scripts/admin-screenshots)."""

import pytest

from django_jobs.core.stored_errors import error_dict
from tests.admin_helpers import add_attempt, job_url, make_job, staff
from tests.faces.admin.conftest import missing

from .test_admin_browser import ARTIFACTS, log_in

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait
except ImportError:  # pragma: no cover - depends on the machine
    By = WebDriverWait = None

pytestmark = [
    pytest.mark.skipif(bool(missing), reason="browser test needs " + ", ".join(missing)),
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]
SIZES = [(1280, 800), (1920, 1080)]
# A traceback as a handler's is: paths and source lines of 60 to 90 characters, and a last
# line longer than any screen.
TRACEBACK = "Traceback (most recent call last):\n" + "".join(
    f'  File "/srv/shop/venv/lib/python3.11/site-packages/shop/billing/invoices.py", line '
    f"{100 + n}, in render_invoice_pdf\n    document = renderer.render(template, "
    f"context=build_context(order, customer, locale))\n" for n in range(6)
) + "shop.billing.errors.TemplateMissing: no template named 'invoice-de-AT.html' in " + (
    "/srv/shop/templates/billing/" * 12)


def scrolls_sideways(driver, selector: str | None = None) -> tuple[int, int]:
    """(scrollWidth, clientWidth) of the page, or of the element ``selector`` names."""
    return tuple(driver.execute_script(
        "const e = arguments[0] ? document.querySelector(arguments[0]) "
        ": document.documentElement; return [e.scrollWidth, e.clientWidth];", selector))


def width(driver, element) -> float:
    return driver.execute_script("return arguments[0].getBoundingClientRect().width;", element)


def screenshot(driver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def sidebar_shown(driver) -> bool:
    """Whether the navigation sidebar is on the page and open (the toggle shifts #main)."""
    return driver.execute_script(
        "const bar = document.getElementById('nav-sidebar'); return !!bar && "
        "document.getElementById('main').classList.contains('shifted') && "
        "bar.getBoundingClientRect().width > 0;")


@pytest.mark.parametrize("sidebar", ["open", "folded"])
@pytest.mark.parametrize(("window_width", "window_height"), SIZES)
def test_the_list_and_the_attempts_fit_the_screen(browser, live_server,
                                                  window_width, window_height, sidebar):
    staff("triage", superuser=True)
    error = error_dict(type="TemplateMissing", message="no template named 'invoice-de-AT.html'",
                       traceback=TRACEBACK)
    for _ in range(3):
        make_job("completed", type="invoice_pdf_render", queue="billing-exports")
    dead = make_job("dead", type="invoice_pdf_render", queue="billing-exports", error=error,
                    attempt=3)
    for number, outcome in ((1, "failed"), (2, "failed"), (3, "dead")):
        add_attempt(dead, outcome, number=number, error=error,
                    worker_id=f"web-worker-07.example.internal-41{number}27-9f3a1c")
    browser.set_window_size(window_width, window_height)
    log_in(browser, live_server.url, fold_sidebar=sidebar == "folded")
    stored = browser.execute_script("return localStorage.getItem('django.admin.navSidebarIsOpen');")
    assert stored == (None if sidebar == "open" else "false")
    size = f"{window_width}" + ("" if sidebar == "open" else "-folded")

    browser.get(live_server.url + "/admin/django_jobs/job/")
    browser.find_element(By.ID, "result_list")
    screenshot(browser, f"admin-list-{size}")
    widths = browser.execute_script(
        "return [...document.querySelectorAll('#result_list thead th')]"
        ".map(th => [th.textContent.trim(), Math.round(th.getBoundingClientRect().width)]);")
    page, client = scrolls_sideways(browser)
    assert page <= client, f"the job list scrolls sideways at {size} px: {page} > {client}"
    table, box = scrolls_sideways(browser, "#changelist .results")
    assert table <= box, f"the job list's table scrolls at {size} px: {table} > {box}, {widths}"
    right = browser.execute_script("return document.documentElement.clientWidth;")
    for header in browser.find_elements(By.CSS_SELECTOR, "#result_list thead th"):
        edge = browser.execute_script("return arguments[0].getBoundingClientRect().right;",
                                      header)
        assert edge <= right, f"column {header.text!r} is off screen at {size} px: {widths}"

    # The breadcrumbs lead back from the list, sidebar or not.
    assert browser.find_element(By.CSS_SELECTOR, ".breadcrumbs a[href$='/admin/']")

    browser.get(live_server.url + job_url(dead))
    # Every other admin page keeps the sidebar where Django puts it.
    assert sidebar_shown(browser) == (sidebar == "open")
    summaries = browser.find_elements(By.CSS_SELECTOR, "#attempts-group summary")
    assert len(summaries) == 3
    summaries[0].click()
    # The browser fires <details>' toggle event, which shows the traceback's row, as a task
    # of its own after the click: wait for it.
    tracebacks = "#attempts-group pre.dj-jobs-traceback"
    shown = WebDriverWait(browser, 5).until(lambda driver: [
        pre for pre in driver.find_elements(By.CSS_SELECTOR, tracebacks) if pre.is_displayed()])
    (traceback,) = shown
    assert "TemplateMissing" in traceback.text
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", traceback)
    screenshot(browser, f"admin-attempt-traceback-{size}")
    assert width(browser, traceback) >= 600, f"the attempt's traceback at {size} px"
    page, client = scrolls_sideways(browser)
    assert page <= client, f"the job page scrolls sideways at {size} px: {page} > {client}"


LONG_ERROR = error_dict(
    type="SMTPRecipientsRefused",
    message="mailbox unavailable for accounts-payable@customer-with-a-long-name.example.com "
            "(550 5.1.1 the email account that you tried to reach does not exist)",
    traceback="Traceback (most recent call last):\n"
    '  File "/srv/shop/venv/lib/python3.12/site-packages/django_jobs/worker/execution.py", '
    "line 90, in _call\n    result = _invoke(found, job)\n"
    '  File "/srv/shop/venv/lib/python3.12/site-packages/django_jobs/worker/execution.py", '
    "line 131, in _invoke\n    return found.func(**arguments)\n" + TRACEBACK.split("\n", 1)[1])
SCHEDULES = {"DJANGO_JOBS": {"SCHEDULES": {
    "nightly_invoice_reminders": {"type": "invoice_pdf_render", "cron": "0 3 * * 1-5",
                                  "timezone": "Europe/Vienna"},
    "refresh_exchange_rates": {"type": "email_send", "every": 5, "misfire": "skip"},
}}}


@pytest.mark.parametrize("sidebar", ["open", "folded"])
@pytest.mark.parametrize(("window_width", "window_height"), SIZES)
def test_triage_starts_with_why_and_every_list_fits(browser, live_server, settings,
                                                    window_width, window_height, sidebar):
    """The dead list shows each error; a dead job's page shows its error above the fold;
    the dead list, the schedules, groups and API tokens lists and the overview do not scroll
    sideways, and no list cell breaks inside a word."""
    from django_jobs.models import JobGroup, Schedule
    from django_jobs.models.tokens import ApiToken

    settings.DJANGO_JOBS = SCHEDULES["DJANGO_JOBS"]
    staff("triage", superuser=True)
    for n in range(3):
        make_job("dead", type="invoice_pdf_render", queue="billing-exports", error=LONG_ERROR,
                 attempt=3, payload={"invoice": 1040 + n, "lines": list(range(40))})
    dead = make_job("dead", type="email_send", queue="mail", error=LONG_ERROR, attempt=3,
                    payload={"to": "ada@example.com", "body": "x" * 3000})
    for number in (1, 2, 3):
        add_attempt(dead, "dead" if number == 3 else "failed", number=number, error=LONG_ERROR)
    JobGroup.objects.create(name="monthly invoices for every customer of the shop")
    ApiToken.generate("deploy pipeline of the shop", ["submit", "read"])
    browser.set_window_size(window_width, window_height)
    log_in(browser, live_server.url, fold_sidebar=sidebar == "folded")
    size = f"{window_width}" + ("" if sidebar == "open" else "-folded")

    def fits(path: str) -> None:
        browser.get(live_server.url + path)
        page, inner = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth];")
        assert page <= inner, f"{path} scrolls sideways at {size}: {page} > {inner}"
        table, box = scrolls_sideways(browser, "#changelist .results") if \
            browser.find_elements(By.CSS_SELECTOR, "#changelist .results") else (0, 0)
        assert table <= box, f"{path}'s table scrolls at {size}: {table} > {box}"
        # No cell breaks inside a word: every cell's word is as wide as its text asks.
        broken = browser.execute_script("""
            return [...document.querySelectorAll('#result_list td, #result_list th')]
              .filter(c => getComputedStyle(c).wordBreak === 'break-all'
                        || getComputedStyle(c).overflowWrap === 'anywhere')
              .map(c => c.className);""")
        assert not broken, f"{path}: cells that may break inside a word: {broken}"

    fits("/admin/django_jobs/job/?status__exact=dead")
    screenshot(browser, f"admin-list-dead-{size}")
    errors = browser.find_elements(By.CSS_SELECTOR, "#result_list td.field-error_line")
    assert len(errors) == 4 and all("SMTPRecipientsRefused: mailbox" in e.text for e in errors)
    for cell in browser.find_elements(By.CSS_SELECTOR, "#result_list td.field-type"):
        assert cell.text in ("invoice_pdf_render", "email_send")  # on one line, whole
    fits("/admin/django_jobs/schedule/")  # which makes the schedules' rows
    Schedule.objects.filter(name="refresh_exchange_rates").update(paused=True)
    fits("/admin/django_jobs/schedule/")
    screenshot(browser, f"admin-schedules-{size}")
    rows = browser.find_element(By.ID, "result_list").text
    assert "every 5 s" in rows and "paused" in rows and "active" in rows
    header = browser.find_element(By.CSS_SELECTOR, "#result_list th.column-next_run")
    right = browser.execute_script("return arguments[0].getBoundingClientRect().right;", header)
    assert right <= window_width, f"next run is off screen at {size}"
    fits("/admin/django_jobs/jobgroup/")
    fits("/admin/django_jobs/apitoken/")
    fits("/admin/django_jobs/job/overview/")

    browser.get(live_server.url + job_url(dead))
    head = browser.find_element(By.CSS_SELECTOR, ".dj-jobs-error-head")
    top = browser.execute_script("return arguments[0].getBoundingClientRect().top;", head)
    assert top < window_height / 2, f"the error is {top} px down at {size}"
    handler = browser.execute_script(
        "const pre = document.querySelector('.field-error_details pre.dj-jobs-traceback');"
        "return pre.getBoundingClientRect().top;")
    assert handler < window_height, f"the traceback starts below the fold at {size}"
    folded = browser.find_element(By.CSS_SELECTOR, "details.dj-jobs-worker-frames")
    # Folded: one line, the summary's (the frames' lines are not drawn).
    assert folded.get_attribute("open") is None and width(browser, folded) > 0
    lines = browser.execute_script("return arguments[0].getBoundingClientRect().height;",
                                   folded) / 14
    assert lines < 2, f"the worker's frames are not folded at {size}"
    assert "render_invoice_pdf" in browser.find_element(
        By.CSS_SELECTOR, ".field-error_details pre.dj-jobs-traceback").text
    screenshot(browser, f"admin-job-dead-{size}")
