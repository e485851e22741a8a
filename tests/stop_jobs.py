"""Fixture handlers of the stop and fork tests (tests/worker/test_stop_running.py)."""

import atexit
import json
import multiprocessing
import os
import signal
import time

from django_jobs import handler

# A worker started with DJANGO_JOBS_TEST_EXIT_HOOK=<seconds> has an exit hook that sleeps that
# long, as a site's atexit function may: a process that exits normally runs it after its main
# thread is done, while daemon threads (a handler still running) go on.
EXIT_HOOK = os.environ.get("DJANGO_JOBS_TEST_EXIT_HOOK")
if EXIT_HOOK:
    atexit.register(time.sleep, float(EXIT_HOOK))


@handler("marking")
def marking(payload):
    """Appends "<pid> <monotonic ns>" to the file ``payload["log"]`` every 5 ms while it runs,
    for ``payload["seconds"]``. CLOCK_MONOTONIC is one clock for every process of a host, so
    two processes' marks say which ran when."""
    deadline = time.monotonic() + payload["seconds"]
    with open(payload["log"], "a") as log:
        while True:
            log.write(f"{os.getpid()} {time.monotonic_ns()}\n")
            log.flush()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)


@handler("fork_pool")
def fork_pool(payload):
    """A fork pool in a ``with`` block whose children are asleep in their tasks when it ends
    (``Pool.terminate()``, which sends them SIGTERM); returns the children's pids."""
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pids = [child.pid for child in multiprocessing.active_children()]
        for _ in range(2):
            pool.apply_async(time.sleep, (60,))
        time.sleep(0.5)  # the children take their tasks
    return {"pids": pids}


def disposition(handler_):
    if handler_ is signal.default_int_handler:
        return "default_int_handler"
    if isinstance(handler_, signal.Handlers):
        return handler_.name
    return repr(handler_)


@handler("fork_dispositions")
def fork_dispositions(payload):
    """Forks a child that reports its handlers of the stop signals."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.write(write, json.dumps({
                name: disposition(signal.getsignal(getattr(signal, name)))
                for name in ("SIGTERM", "SIGINT", "SIGHUP")
            }).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(report)


@handler("exec_dispositions")
def exec_dispositions(payload):
    """Starts a Python subprocess that reports its handlers of the stop signals."""
    import subprocess
    import sys

    code = ("import json, signal; print(json.dumps({n: signal.getsignal(getattr(signal, n)).name"
            " for n in ('SIGTERM', 'SIGHUP')}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    return json.loads(done.stdout)
