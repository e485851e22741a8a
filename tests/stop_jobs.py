"""Fixture handlers of the stop and fork tests (tests/test_stop_running.py)."""

import json
import multiprocessing
import os
import signal
import time

from django_jobs import handler


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
