/* django-jobs admin: live pages (admin/live.py). While the tab is visible, poll the page's
   small JSON version; when it changes, fetch the page again and swap in its new content. A
   page the user is working in (a row ticked, a field focused, text selected) is not swapped:
   a note offers the refresh instead. Slow or failed answers back the polling off; a hidden tab
   polls nothing. Without this script the pages are as they were, static. */
"use strict";
(function () {
  const status = document.getElementById("dj-jobs-live");
  if (!status || !window.fetch || !window.DOMParser) {
    return;
  }
  const url = status.dataset.url;
  const regions = (status.dataset.regions || "#content-main").split(",");
  const base = Math.max(1, parseFloat(status.dataset.interval) || 5) * 1000;
  const slow = 1000;  // an answer slower than this backs the polling off
  let wait = base, version = null, timer = null, busy = false;

  function say(text) {
    const when = new Date().toTimeString().slice(0, 8);  // 19:28:30, as the admin's times
    status.querySelector(".dj-jobs-live-text").textContent = text.replace("{time}", when);
  }

  function userIsWorking() {
    const active = document.activeElement;
    if (active && active.matches && active.matches("input, select, textarea")) {
      return true;
    }
    if (document.querySelector("input.action-select:checked, #action-toggle:checked")) {
      return true;
    }
    const picked = window.getSelection && window.getSelection();
    return !!(picked && picked.toString());
  }

  function swap(fresh) {
    // Region by region where both pages have it; the whole content where one lacks it (an
    // empty list becoming one with rows).
    const pairs = regions.map((selector) => [document.querySelector(selector),
                                             fresh.querySelector(selector)]);
    const whole = pairs.some(([now, next]) => !now !== !next);
    const targets = whole ? [[document.querySelector("#content-main"),
                              fresh.querySelector("#content-main")]] : pairs;
    targets.forEach(([now, next]) => {
      if (now && next) {
        now.replaceWith(document.importNode(next, true));
      }
    });
    if (window.Actions) {
      const boxes = document.querySelectorAll("tr input.action-select");
      if (boxes.length) {
        window.Actions(boxes);
      }
    }
    document.dispatchEvent(new CustomEvent("dj-jobs:refreshed"));
  }

  async function reload() {
    const answer = await fetch(window.location.href, {credentials: "same-origin",
                                                      headers: {"X-Requested-With": "live"}});
    if (!answer.ok) {
      throw new Error(answer.status);
    }
    swap(new DOMParser().parseFromString(await answer.text(), "text/html"));
  }

  async function poll() {
    timer = null;
    if (busy || document.visibilityState !== "visible") {
      return;
    }
    busy = true;
    const started = performance.now();
    try {
      const answer = await fetch(url, {credentials: "same-origin", cache: "no-store"});
      if (!answer.ok) {
        throw new Error(answer.status);
      }
      const body = await answer.json();
      const took = performance.now() - started;
      const asked = Math.max(1, body.interval || base / 1000) * 1000;
      wait = took > slow ? Math.min(wait * 2, 60000) : asked;
      if (version !== null && body.version !== version) {
        if (userIsWorking()) {
          status.classList.add("dj-jobs-live-stale");
          say("Newer data: reload the page to see it");
          return;  // stop polling: the page is behind until the user reloads it
        }
        await reload();
      }
      version = body.version;
      status.classList.remove("dj-jobs-live-stale", "dj-jobs-live-failing");
      say("Live: checked at {time}");
    } catch (error) {
      wait = Math.min(wait * 2, 60000);
      status.classList.add("dj-jobs-live-failing");
      say("Live: no answer at {time}, trying again later");
    } finally {
      busy = false;
    }
    schedule();
  }

  function schedule() {
    if (timer === null && document.visibilityState === "visible" &&
        !status.classList.contains("dj-jobs-live-stale")) {
      timer = window.setTimeout(poll, wait);
    }
  }

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") {
      wait = base;
      if (timer === null) {
        poll();
      }
    } else if (timer !== null) {
      window.clearTimeout(timer);
      timer = null;
    }
  });
  status.hidden = false;
  say("Live: on");
  poll();
})();
