"""Charts drawn on the server as inline SVG (no script): stacked bars of jobs finished by
outcome, and lines of the wait's p50 and p95. Each bar and point carries a ``<title>``, which
the browser shows on hover; every name written is escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from django_jobs.core.states import Outcome

if TYPE_CHECKING:
    from django_jobs.admin.charts import Bin

WIDTH, HEIGHT = 720, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 24, 10, 24  # room for the last tick's label on the right
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
COLOURS: dict[str, str] = {
    Outcome.COMPLETED: "#2e7d32", Outcome.FAILED: "#ef8c00", Outcome.DEAD: "#c62828",
    Outcome.CANCELED: "#757575",
}
LINES = (("p50", 0.5, "#1565c0"), ("p95", 0.95, "#8e24aa"))


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * power * (1 + 1e-9):
            return step * power
    return 10.0 * power


def seconds(value: float) -> str:
    """A wait, in the unit that reads best."""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def count(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 or value == 0 else f"{value:g}"


def local(moment: datetime) -> datetime:
    return timezone.localtime(moment) if timezone.is_aware(moment) else moment


def when(moment: datetime, fmt: str) -> str:
    """A bin's start in the current time zone."""
    return local(moment).strftime(fmt)


def frame(label: str, top: str, kind: str, ticks: str, body: str, empty: str | None,
          name: str) -> SafeString:
    """The SVG around a chart: its name, the axes, the top of the scale, the time ticks."""
    parts = [
        f'<svg class="dj-jobs-chart dj-jobs-chart-{kind}" role="img" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" preserveAspectRatio="xMidYMid meet" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="{escape(label)}">',
        f"<title>{escape(label)}</title>",
        f'<line class="dj-jobs-axis" x1="{LEFT}" y1="{TOP + PLOT_H}" x2="{LEFT + PLOT_W}" '
        f'y2="{TOP + PLOT_H}" stroke="#999" stroke-width="1"/>',
        f'<line class="dj-jobs-grid" x1="{LEFT}" y1="{TOP}" x2="{LEFT + PLOT_W}" y2="{TOP}" '
        f'stroke="#ddd" stroke-width="1" stroke-dasharray="3 3"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end" font-size="11" '
        f'fill="currentColor">{escape(top)}</text>',
        f'<text x="{LEFT - 4}" y="{TOP + PLOT_H}" text-anchor="end" font-size="11" '
        f'fill="currentColor">0</text>',
        f'<text class="dj-jobs-chart-name" x="{LEFT + 6}" y="{TOP + 14}" font-size="12" '
        f'font-weight="bold" fill="currentColor">{escape(name)}</text>',
        ticks, body,
    ]
    if empty:
        parts.append(f'<text class="dj-jobs-chart-empty" x="{LEFT + PLOT_W / 2}" '
                     f'y="{TOP + PLOT_H / 2}" text-anchor="middle" font-size="13" '
                     f'fill="currentColor">{escape(empty)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 (every value above is a number or escaped)


def on_the_tick(moment: datetime, tick: str, every: int) -> bool:
    """Whether a bin starts a tick: a round minute (per minute) or hour (per hour)."""
    start = local(moment)
    return (start.hour if tick == "%H:00" else start.minute) % every == 0


def time_ticks(bins: Sequence[Bin], tick: str, every: int) -> str:
    step = PLOT_W / len(bins)
    out = []
    for i, b in enumerate(bins):
        if on_the_tick(b.start, tick, every):
            x = LEFT + i * step
            out.append(f'<line x1="{x:.1f}" y1="{TOP + PLOT_H}" x2="{x:.1f}" '
                       f'y2="{TOP + PLOT_H + 4}" stroke="#999"/>'
                       f'<text x="{x:.1f}" y="{HEIGHT - 6}" font-size="11" '
                       f'fill="currentColor">{escape(when(b.start, tick))}</text>')
    return "".join(out)


def bars(bins: Sequence[Bin], label: str, tick: str, every: int) -> SafeString:
    """Stacked bars, one a bin, of the jobs finished by outcome."""
    top = nice_ceiling(max((b.total for b in bins), default=0))
    step = PLOT_W / len(bins)
    width = max(step * 0.8, 1.0)
    body = []
    for i, b in enumerate(bins):
        if not b.total:
            continue
        x = LEFT + i * step + (step - width) / 2
        y = float(TOP + PLOT_H)
        said = ", ".join(f"{n} {o}" for o, n in b.counts.items() if n)
        rects = []
        for outcome, n in b.counts.items():
            if not n:
                continue
            height = PLOT_H * n / top
            y -= height
            rects.append(f'<rect class="dj-jobs-bar dj-jobs-bar-{outcome}" x="{x:.1f}" '
                         f'y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
                         f'fill="{COLOURS[outcome]}" data-count="{n}"/>')
        body.append(f'<g class="dj-jobs-bin"><title>{escape(when(b.start, tick))}: '
                    f'{escape(said)}</title>{"".join(rects)}</g>')
    empty = None if body else "No job finished"
    return frame(label, count(top), "bars", time_ticks(bins, tick, every), "".join(body), empty,
                 "jobs finished")


def lines(bins: Sequence[Bin], label: str, tick: str, every: int) -> SafeString:
    """The wait's p50 and p95 of each bin with jobs, as lines with a point per bin."""
    values = {name: [b.wait(q) for b in bins] for name, q, _ in LINES}
    highest = max((v for series in values.values() for v in series if v is not None),
                  default=0.0)
    top = nice_ceiling(highest)
    step = PLOT_W / len(bins)
    body = []
    for name, _, colour in LINES:
        body += _series(bins, name, colour, values[name], top, step, tick)
    empty = None if body else "No job finished"
    return frame(label, seconds(top), "lines", time_ticks(bins, tick, every), "".join(body),
                 empty, "wait from run_at to start: p50, p95")


def _series(bins: Sequence[Bin], name: str, colour: str, values: list[float | None],
            top: float, step: float, tick: str) -> list[str]:
    """One quantile's line (broken where a bin has no job) and then its points."""
    path, points = [], []
    gap = True
    for i, value in enumerate(values):
        if value is None:
            gap = True
            continue
        x = LEFT + i * step + step / 2
        y = TOP + PLOT_H - PLOT_H * value / top
        path.append(f"{'M' if gap else 'L'}{x:.1f},{y:.1f}")
        gap = False
        points.append(
            f'<circle class="dj-jobs-point dj-jobs-point-{name}" cx="{x:.1f}" cy="{y:.1f}" '
            f'r="2.5" fill="{colour}"><title>{escape(when(bins[i].start, tick))}: {name} '
            f'{escape(seconds(value))}</title></circle>')
    if not path:
        return points
    return [f'<path class="dj-jobs-line dj-jobs-line-{name}" d="{" ".join(path)}" '
            f'fill="none" stroke="{colour}" stroke-width="1.5"/>', *points]
