"""Plot a throughput.py result: rates of ours and of the raw loop, and their ratios.

    .venv/bin/python benchmarks/plot.py                      # the newest benchmarks/results/
    .venv/bin/python benchmarks/plot.py RESULT.json --out docs/images/benchmark-throughput.png

Needs matplotlib (the ``docs`` extra).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURES = {  # key in the JSON: label, unit
    "enqueue_one": ("enqueue one by one", "jobs/s"),
    "enqueue_bulk": ("bulk enqueue", "jobs/s"),
    "drain_1": ("drain, 1 worker", "jobs/s"),
    "drain_4": ("drain, 4 workers", "jobs/s"),
    "peak_rss": ("peak RSS of a worker", "MiB"),
}


def newest_result(benchmark: str = "throughput") -> Path:
    """The newest result ``benchmarks/<benchmark>.py`` wrote in benchmarks/results/."""
    found = sorted((ROOT / "benchmarks" / "results").glob(f"{benchmark}-*.json"))
    if not found:
        raise SystemExit(f"no benchmarks/results/{benchmark}-*.json: "
                         f"run benchmarks/{benchmark}.py")
    return found[-1]


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [key for key in MEASURES if key in result["summary"]]
    labels = [MEASURES[key][0] for key in keys]
    rates = [key for key in keys if MEASURES[key][1] == "jobs/s"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")

    positions = range(len(rates))
    for offset, side, colour in ((-0.2, "ours", "#2b6cb0"), (0.2, "raw", "#a0aec0")):
        left.bar([p + offset for p in positions], [result["summary"][k][side] for k in rates],
                 width=0.4, label=side if side == "ours" else "raw psycopg loop", color=colour)
    left.set_xticks(list(positions), [MEASURES[k][0] for k in rates], rotation=15)
    left.set_yscale("log")
    left.set_ylabel("jobs/s (log scale, median)")
    left.set_title("Rates")
    left.legend()

    for row, key in enumerate(keys):
        right.barh(row, result["summary"][key]["ratio"], color="#2b6cb0", height=0.5)
        each = [r[key]["ours"] / r[key]["raw"] for r in result["repeats"] if key in r]
        right.plot(each, [row] * len(each), "o", color="#1a202c", markersize=4)
    right.axvline(1.0, color="#1a202c", linewidth=1)
    right.set_yticks(range(len(keys)), labels)
    right.invert_yaxis()
    right.set_xlabel("ours / raw (rates: higher is better; memory: lower)")
    right.set_title("Ratios: median bar, each repeat a dot")

    options = result.get("options", {})
    fig.suptitle(
        f"throughput.py: {options.get('jobs', '?')} jobs, {len(result['repeats'])} repeat(s), "
        f"{result.get('cpus', '?')} CPUs, PostgreSQL {result.get('postgresql', '?')}, "
        f"commit {result.get('commit', '?')}", fontsize=10,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", nargs="?", type=Path, help="a throughput-*.json")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "docs" / "images" / "benchmark-throughput.png")
    args = parser.parse_args()
    source = args.result or newest_result()
    plot(json.loads(source.read_text()), args.out)
    print(f"{source} -> {args.out}")


if __name__ == "__main__":
    main()
