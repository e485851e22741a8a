"""Workers on other hosts: the drain with each worker in its own network namespace, RTT added.

    sudo python benchmarks/netem.py [--jobs 20000] [--repeat 3] [--latencies 0,1,5] [--quick]

Needs root (``ip netns``). Each of the 4 worker processes (``--workers``) runs with
``ip netns exec`` in a namespace of its own (``djbench1``...), joined to the root namespace by a
veth pair: 10.77.N.1/24 on the root side, 10.77.N.2/24 in the namespace, so it reaches
PostgreSQL from an address of its own over a link of its own. PostgreSQL listens on 127.0.0.1
only and the shared server is not reconfigured: a TCP forwarder (a process of this benchmark)
listens on each 10.77.N.1 and relays to 127.0.0.1:5432.

The round trip added at each latency (``--latencies``, ms) is added by the forwarder, all of it
on one side: it holds every chunk of PostgreSQL's replies back by that long before passing it
on, in order. ``tc qdisc ... netem delay`` would do the same in the kernel, but this machine's
kernel has no netem qdisc (``Error: Specified qdisc kind is unknown.``). Each latency's line
shows the median ``SELECT 1`` measured from inside a namespace, which is what a worker sees.

In each set-up (the ``drain.py`` harness: the clock starts when every worker waits on the table
lock and stops at the last ``finished_at``): ``runworker --burst`` as shipped, ``--tuned`` (what
``docs/reference-runworker.md`` recommends), and ``benchmarks/rawloop.py`` claiming 10 and 50.

Round trips per job are counted at the forwarder, not guessed: a round trip is each time the
client starts sending after the server last spoke (a request and its reply, however many
protocol messages or TCP segments they take), summed over the workers' connections from the
start of the clock to the workers' exit, divided by the jobs. The namespaces are deleted on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.synchronize
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_netem_drain")

from benchmarks import drain as drain_module  # noqa: E402
from benchmarks import throughput  # noqa: E402
from benchmarks.as_shipped import loadavg, parse_args  # noqa: E402

PORT = 15432
PREFIX = "djbench"
SETUPS = ["shipped", "tuned", "raw_k10", "raw_k50"]


def run(*cmd: str, check: bool = True) -> None:
    subprocess.run(cmd, check=check, capture_output=True, text=True)


def namespace(index: int) -> tuple[str, str, str]:
    """(namespace, root-side veth, namespace-side veth) of worker ``index`` (from 1)."""
    return f"{PREFIX}{index}", f"{PREFIX}{index}r", f"{PREFIX}{index}n"


def create_namespaces(count: int) -> None:
    for i in range(1, count + 1):
        ns, root_side, ns_side = namespace(i)
        run("ip", "netns", "del", ns, check=False)  # a leftover from an interrupted run
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", root_side, "type", "veth", "peer", "name", ns_side, "netns", ns)
        run("ip", "addr", "add", f"10.77.{i}.1/24", "dev", root_side)
        run("ip", "link", "set", root_side, "up")
        run("ip", "-n", ns, "addr", "add", f"10.77.{i}.2/24", "dev", ns_side)
        run("ip", "-n", ns, "link", "set", ns_side, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")


def delete_namespaces(count: int) -> None:
    for i in range(1, count + 1):
        run("ip", "netns", "del", namespace(i)[0], check=False)  # takes its veth pair with it


class Forwarder:
    """Relays 10.77.N.1:PORT to PostgreSQL, holds each reply back by the round trip to add, and
    counts round trips; in a process of its own, so that the benchmark's own work cannot hold it up.
    """

    def __init__(self, count: int) -> None:
        self.delay = multiprocessing.Value("d", 0.0, lock=False)  # seconds, replies only
        self.trips = multiprocessing.Value("q", 0, lock=False)  # written by the forwarder only
        ready = multiprocessing.Event()
        self.process = multiprocessing.Process(target=self._serve, args=(count, ready),
                                               daemon=True)
        self.process.start()
        if not ready.wait(10):
            raise RuntimeError("the forwarder did not start")

    @property
    def round_trips(self) -> int:
        return self.trips.value

    def set_round_trip(self, rtt_ms: float) -> None:
        self.delay.value = rtt_ms / 1000

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(5)

    def _serve(self, count: int, ready: multiprocessing.synchronize.Event) -> None:
        loop = asyncio.new_event_loop()
        for i in range(1, count + 1):
            loop.run_until_complete(asyncio.start_server(self._relay, f"10.77.{i}.1", PORT))
        ready.set()
        loop.run_forever()

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(
            os.environ.get("PGHOST", "127.0.0.1"), int(os.environ.get("PGPORT", "5432")))
        last = ["server"]
        loop = asyncio.get_running_loop()

        async def requests() -> None:
            try:
                while data := await client_r.read(65536):
                    if last[0] == "server":
                        self.trips.value += 1
                    last[0] = "client"
                    server_w.write(data)
                    await server_w.drain()
            except ConnectionError:
                pass
            finally:
                server_w.close()

        async def replies() -> None:
            # Each chunk leaves ``delay`` after it arrived, in order: a fixed delay, with no
            # jitter beyond the event loop's timer (epoll waits in whole milliseconds).
            queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

            async def send() -> None:
                while (item := await queue.get())[1]:
                    due, data = item
                    if (wait := due - loop.time()) > 0:
                        await asyncio.sleep(wait)
                    client_w.write(data)
                    await client_w.drain()
                client_w.close()

            sender = asyncio.ensure_future(send())
            try:
                while data := await server_r.read(65536):
                    last[0] = "server"
                    queue.put_nowait((loop.time() + self.delay.value, data))
            except ConnectionError:
                pass
            finally:
                queue.put_nowait((0.0, b""))
                await sender

        await asyncio.gather(requests(), replies(), return_exceptions=True)


def probe_round_trip(index: int) -> float:
    """Median ms of ``SELECT 1`` from inside namespace ``index``, through the forwarder."""
    code = (
        "import psycopg, time, statistics\n"
        f"c = psycopg.connect('host=10.77.{index}.1 port={PORT} user=postgres dbname=postgres')\n"
        "t = []\n"
        "for _ in range(20):\n"
        "    s = time.perf_counter(); c.execute('SELECT 1').fetchone()\n"
        "    t.append(time.perf_counter() - s)\n"
        "print(statistics.median(t) * 1000)\n"
    )
    out = subprocess.run(["ip", "netns", "exec", namespace(index)[0], sys.executable, "-c", code],
                         check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def in_namespace(original):  # type: ignore[no-untyped-def]
    """``drain.command`` that runs worker ``index`` in namespace index+1, through the forwarder."""
    def command(side: str, index: int, args: argparse.Namespace, dsn: str,
                options: list[str] | None = None) -> list[str]:
        i = index + 1
        remote = f"host=10.77.{i}.1 port={PORT} user=postgres dbname={throughput.DB_NAME}"
        return ["ip", "netns", "exec", namespace(i)[0], "env", f"PGHOST=10.77.{i}.1",
                f"PGPORT={PORT}", *original(side, index, args, remote, options)]
    return command


def one_latency(args: argparse.Namespace, forwarder: Forwarder, rtt_ms: float,
                reverse: bool) -> dict[str, dict[str, float]]:
    forwarder.set_round_trip(rtt_ms)
    probe = probe_round_trip(1)
    mark = [0]
    blocked = drain_module.wait_until_blocked

    def wait_then_mark(*a, **kw) -> None:  # type: ignore[no-untyped-def]
        blocked(*a, **kw)
        mark[0] = forwarder.round_trips

    drain_module.wait_until_blocked = wait_then_mark
    figures: dict[str, dict[str, float]] = {}
    try:
        with psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control, \
                psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as raw:
            for name in SETUPS[::-1] if reverse else SETUPS:
                throughput.reset(control)
                if name.startswith("raw_k"):
                    args.k = int(name[5:])
                    outcome = drain_module.drain("raw", args.workers, args, control, raw)
                else:
                    options = shlex.split(args.tuned) if name == "tuned" else []
                    outcome = drain_module.drain("ours", args.workers, args, control, raw,
                                                 options=options)
                trips = (forwarder.round_trips - mark[0]) / args.jobs
                figures[name] = {"rate": outcome["rate"], "round_trips_per_job": trips,
                                 "probe_ms": probe}
                print(f"  {rtt_ms:g} ms {name}: {outcome['rate']:.0f} jobs/s, "
                      f"{trips:.3f} round trips/job", flush=True)
    finally:
        drain_module.wait_until_blocked = blocked
    return figures


def summarise(repeats: list[dict[str, dict[str, dict[str, float]]]]) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for rtt in repeats[0]:
        for name in SETUPS:
            rows = [r[rtt] for r in repeats]
            summary[f"{rtt} {name}"] = {
                "rtt_ms": float(rtt), "setup": name,
                "rate": statistics.median(r[name]["rate"] for r in rows),
                "vs_k10": statistics.median(r[name]["rate"] / r["raw_k10"]["rate"] for r in rows),
                "vs_k50": statistics.median(r[name]["rate"] / r["raw_k50"]["rate"] for r in rows),
                "vs_0ms": statistics.median(
                    r[rtt][name]["rate"] / r[next(iter(r))][name]["rate"] for r in repeats),
                "round_trips_per_job": statistics.median(
                    r[name]["round_trips_per_job"] for r in rows),
                "probe_ms": statistics.median(r[name]["probe_ms"] for r in rows),
            }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", default="0,1,5", help="round trips added, ms")
    args = parse_args(parser)
    latencies = [float(x) for x in args.latencies.split(",")]
    drain_module.command = in_namespace(drain_module.command)
    forwarder = None
    try:
        create_namespaces(args.workers)
        forwarder = Forwarder(args.workers)
        with throughput.bench_database():
            repeats = []
            for index in range(args.repeat):
                repeats.append({f"{rtt:g}": one_latency(args, forwarder, rtt, (index + j) % 2 == 1)
                                for j, rtt in enumerate(latencies)})
            summary = summarise(repeats)
            print(f"\n{args.jobs} no-op jobs, {args.workers} workers each in its own namespace, "
                  f"median of {args.repeat}; tuned = {args.tuned!r}")
            throughput.print_columns(
                [("RTT", 4, "g"), ("SELECT 1", 9, ""), ("set-up", 9, ""), ("/raw k10", 9, ".2f"),
                 ("/raw k50", 9, ".2f"), ("/same at 0", 10, ".2f"), ("trips/job", 10, ".3f"),
                 ("jobs/s", 8, ".0f")],
                [[row["rtt_ms"], f"{row['probe_ms']:.2f}ms", row["setup"], row["vs_k10"],
                  row["vs_k50"], row["vs_0ms"], row["round_trips_per_job"], row["rate"]]
                 for row in summary.values()])
            path = throughput.write_json("netem", args, summary=summary, repeats=repeats,
                                         loadavg=loadavg())
            print(f"\nwritten to {path.relative_to(ROOT)}")
    finally:
        if forwarder is not None:
            forwarder.stop()
        delete_namespaces(args.workers)


if __name__ == "__main__":
    main()
