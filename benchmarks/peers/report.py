"""Tables and plots from a ``benchmarks/peers/run.py`` result file.

    benchmarks/peers/.venv/bin/python -m benchmarks.peers.report benchmarks/results/peers-*.json

Prints two Markdown tables (the rates, and the ratios to raw with their spread over repeats),
writes them into ``docs/explanation-peers.md`` between its ``peers-table`` markers, and draws
``docs/images/peers-drain.png``, ``peers-enqueue.png`` and ``peers-wakeup.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

from benchmarks.peers.systems import ROOT, SYSTEMS

DOC = ROOT / "docs" / "explanation-peers.md"
IMAGES = ROOT / "docs" / "images"
RATES = [("enqueue_one", "enqueue one by one"), ("enqueue_bulk", "bulk enqueue"),
         ("drain_1", "drain, 1 worker"), ("drain_4", "drain, 4 workers")]


def rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(system, variant) in the order of SYSTEMS, as measured."""
    first = data["repeats"][0]
    return [(system, variant) for system in SYSTEMS if system in first
            for variant in SYSTEMS[system].variants if f"drain_1:{variant}" in first[system]]


def rate(repeat: dict, system: str, variant: str, measure: str) -> float:
    key = measure if measure.startswith("enqueue") else f"{measure}:{variant}"
    return repeat[system][key]["rate"]


def summary(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for system, variant in rows(data):
        row: dict[str, Any] = {}
        for measure, _label in RATES:
            rates = [rate(r, system, variant, measure) for r in data["repeats"]]
            ratios = [rate(r, system, variant, measure) / rate(r, "raw", "default", measure)
                      for r in data["repeats"]]
            row[measure] = {"rate": statistics.median(rates),
                            "ratio": statistics.median(ratios),
                            "low": min(ratios), "high": max(ratios)}
        latencies = sorted(x * 1000 for r in data["repeats"]
                           for x in r[system][f"wake:{variant}"]["latencies"])
        quantiles = statistics.quantiles(latencies, n=20, method="inclusive")
        row["wake"] = {"p50": statistics.median(latencies), "p95": quantiles[18]}
        row["bulk_how"] = data["repeats"][0][system]["enqueue_bulk"]["how"]
        out[(system, variant)] = row
    return out


def name(system: str, variant: str) -> str:
    return f"{SYSTEMS[system].label}, {variant}" if system != "raw" else SYSTEMS[system].label


def tables(data: dict[str, Any], rows_: dict[tuple[str, str], dict[str, Any]]) -> str:
    n = len(data["repeats"])
    head = "| system | " + " | ".join(label for _m, label in RATES)
    lines = [
        f"Jobs/s (median of {n} repeat(s)) and wake-up latency of an idle worker (ms, "
        f"{data['options']['samples']} probes per repeat):",
        "",
        head + " | wake-up p50 | wake-up p95 |",
        "| --- " * (len(RATES) + 3) + "|",
    ]
    for (system, variant), row in rows_.items():
        cells = [f"{row[m]['rate']:,.0f}" for m, _label in RATES]
        lines.append(f"| {name(system, variant)} | " + " | ".join(cells)
                     + f" | {row['wake']['p50']:.1f} | {row['wake']['p95']:.1f} |")
    lines += ["", f"Ratio to raw measured in the same repeat: median (lowest to highest of {n}):",
              "", head + " |", "| --- " * (len(RATES) + 1) + "|"]
    for (system, variant), row in rows_.items():
        if system == "raw":
            continue
        cells = [f"{row[m]['ratio']:.2f} ({row[m]['low']:.2f} to {row[m]['high']:.2f})"
                 for m, _label in RATES]
        lines.append(f"| {name(system, variant)} | " + " | ".join(cells) + " |")
    versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items())
    lines += ["", f"Measured {data['when']} (commit {data['commit']}), {data['cpus']} CPUs, "
              f"PostgreSQL {data['postgresql']}; {versions}. Command: "
              f"`benchmarks/peers/.venv/bin/{data['command'].replace('python', 'python', 1)}`."]
    return "\n".join(lines)


def log_axis(ax: Any, values: list[float]) -> None:
    """A log scale whose bars start at a round value below the smallest and read as numbers."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    low = 10 ** math.floor(math.log10(max(min(values), 1e-3)))
    ax.set_xscale("log")
    ax.set_xlim(low, max(values) * 3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot(rows_: dict[tuple[str, str], dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMAGES.mkdir(parents=True, exist_ok=True)
    labels = [name(s, v) for s, v in rows_]
    values = list(rows_.values())
    y = range(len(labels))

    def bars(measures: list[tuple[str, str]], filename: str, title: str) -> None:
        fig, axes = plt.subplots(1, len(measures), figsize=(5 * len(measures), 4.5),
                                 sharey=True)
        for ax, (measure, label) in zip(axes, measures, strict=True):
            ratios = [row[measure]["ratio"] for row in values]
            errors = [[row[measure]["ratio"] - row[measure]["low"] for row in values],
                      [row[measure]["high"] - row[measure]["ratio"] for row in values]]
            ax.barh(list(y), ratios, xerr=errors, color=[
                "#888888" if s == "raw" else "#2b6cb0" if s == "ours" else "#c7a252"
                for s, _v in rows_])
            ax.axvline(1.0, color="black", linewidth=0.8)
            log_axis(ax, [*ratios, *(row[measure]["high"] for row in values)])
            for i, ratio in enumerate(ratios):
                ax.annotate(f"{ratio:.2f}", (ratio, i), xytext=(4, 0),
                            textcoords="offset points", va="center", fontsize=8)
            ax.set_title(label)
            ax.set_xlabel("ratio to raw (same repeat; log scale)")
        axes[0].set_yticks(list(y), labels)
        axes[0].invert_yaxis()
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(IMAGES / filename, dpi=90)
        plt.close(fig)

    bars(RATES[2:], "peers-drain.png", "Drain of no-op jobs, ratio to raw psycopg (k=10)")
    bars(RATES[:2], "peers-enqueue.png", "Enqueue, ratio to raw psycopg")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.barh([i - 0.2 for i in y], [r["wake"]["p50"] for r in values], height=0.4, label="p50")
    ax.barh([i + 0.2 for i in y], [r["wake"]["p95"] for r in values], height=0.4, label="p95")
    log_axis(ax, [v for r in values for v in (r["wake"]["p50"], r["wake"]["p95"])])
    ax.set_yticks(list(y), labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the enqueue's commit to the job's start (log scale)")
    ax.set_title("Wake-up latency of an idle worker")
    ax.legend()
    fig.tight_layout()
    fig.savefig(IMAGES / "peers-wakeup.png", dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", help="a benchmarks/results/peers-*.json file")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args(argv)
    data = json.loads(Path(args.result).read_text())
    rows_ = summary(data)
    text = tables(data, rows_)
    print("\n" + text)
    if args.no_docs:
        return
    plot(rows_)
    doc = DOC.read_text()
    start, end = "<!-- peers-table-start -->", "<!-- peers-table-end -->"
    doc = re.sub(re.escape(start) + ".*?" + re.escape(end),
                 lambda _m: f"{start}\n{text}\n{end}", doc, flags=re.S)
    DOC.write_text(doc)
    print(f"\nwrote {DOC.relative_to(ROOT)} and docs/images/peers-*.png")


if __name__ == "__main__":
    main()
