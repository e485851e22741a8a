"""Plot a sustained.py result: backlog, rates, wait, table sizes, dead tuples and load over time.

    python benchmarks/plot_sustained.py                       # the newest benchmarks/results/
    python benchmarks/plot_sustained.py RESULT.json --out docs/images/sustained-30min.png

Needs matplotlib (the ``docs`` extra).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from plot import ROOT, newest_result  # benchmarks/plot.py, beside this script

JOBS, ATTEMPTS = "django_jobs_job", "django_jobs_jobattempt"
MIB = 2**20


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["samples"]
    minutes = [s["minute"] for s in samples]

    def table(name: str, key: str, scale: float = 1.0) -> list[float]:
        return [s["tables"].get(name, {}).get(key, 0) / scale for s in samples]

    def sizes_panel(axis, name: str, title: str) -> None:
        for key, label in (
            ("total_bytes", "total"),
            ("heap_bytes", "table"),
            ("index_bytes", "indexes"),
        ):
            axis.plot(minutes, table(name, key, MIB), label=label)
        axis.set_ylabel("MiB")
        axis.set_ylim(bottom=0)
        axis.set_title(title)
        axis.legend()

    fig, axes = plt.subplots(3, 2, figsize=(12, 10), sharex=True, layout="constrained")
    (rates, wait), (sizes, attempts), (dead, load) = axes

    rates.plot(minutes, [s["enqueued_per_s"] for s in samples], label="enqueued")
    rates.plot(minutes, [s["finished_per_s"] for s in samples], label="finished")
    rates.set_ylabel("jobs/s over the interval")
    rates.set_ylim(bottom=0)
    backlog = rates.twinx()
    backlog.plot(
        minutes,
        [s["backlog"] for s in samples],
        color="#c53030",
        linestyle=":",
        label="backlog (pending, due)",
    )
    backlog.set_ylabel("backlog (jobs)")
    backlog.set_ylim(bottom=0)
    rates.legend(loc="lower left")
    backlog.legend(loc="lower right")
    rates.set_title("Producers' and workers' rates; backlog")

    for key, label in (("wait_p50_ms", "p50"), ("wait_p99_ms", "p99")):
        wait.plot(
            minutes, [s[key] if s[key] is not None else float("nan") for s in samples], label=label
        )
    wait.set_yscale("log")
    wait.set_ylabel("ms (log scale)")
    wait.set_title("Wait from run_at to started_at, jobs started in the interval")
    wait.legend()

    sizes_panel(sizes, JOBS, "Jobs table (django_jobs_job)")
    sizes_panel(attempts, ATTEMPTS, "Attempts table (django_jobs_jobattempt)")

    for name, label in ((JOBS, "jobs"), (ATTEMPTS, "attempts")):
        (line,) = dead.plot(minutes, table(name, "dead_tuples", 1000), label=f"{label}: dead")
        dead.plot(
            minutes,
            table(name, "live_tuples", 1000),
            color=line.get_color(),
            linestyle="--",
            label=f"{label}: live",
        )
    vacuums = [s["tables"].get(JOBS, {}).get("autovacuums", 0) for s in samples]
    for minute, before, after in zip(minutes[1:], vacuums, vacuums[1:], strict=False):
        if after > before:
            dead.axvline(minute, color="#a0aec0", linewidth=0.8)
    dead.set_ylabel("thousand tuples")
    dead.set_ylim(bottom=0)
    dead.set_title("Tuples (pg_stat_user_tables); grey: an autovacuum of the jobs table")
    dead.legend(fontsize=8)

    load.plot(minutes, [s["loadavg"][0] for s in samples], label="1 min")
    load.set_ylabel("load average (2 CPUs)")
    load.set_ylim(bottom=0)
    load.set_title("The machine's load (shared with other work)")
    for ax in (dead, load):
        ax.set_xlabel("minutes")

    options = result.get("options", {})
    fig.suptitle(
        f"sustained.py: {options.get('rate', 0):.0f} jobs/s asked by "
        f"{options.get('producers', '?')} producers ({result.get('producers_rate', 0):.0f} "
        f"reached), {options.get('workers', '?')} runworker as shipped, retention "
        f"{options.get('retention', 0):.0f} s\nPostgreSQL {result.get('postgresql', '?')}, "
        f"{result.get('cpus', '?')} CPUs, commit {result.get('commit', '?')}",
        fontsize=10,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", nargs="?", type=Path, help="a sustained-*.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "sustained.png")
    args = parser.parse_args()
    source = args.result or newest_result("sustained")
    plot(json.loads(source.read_text()), args.out)
    print(f"{source} -> {args.out}")


if __name__ == "__main__":
    main()
