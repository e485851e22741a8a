"""``runworker --processes``: the command's options as the supervisor and its children take them
(``worker/supervisor.py``, ``worker/supervised.py``)."""

from __future__ import annotations

import os
import signal
import socket
from typing import Any

from django.core.management.base import CommandError

from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions
from django_jobs.worker.supervised import ORDER_SIGNAL, PipeNotifier, rss_kb, take_orders
from django_jobs.worker.supervisor import Supervisor, available_cpus

# runworker's options a child is given as they were given to the supervisor.
PASSED_ON = ("concurrency", "burst_wait", "max_jobs", "poll_interval", "prefetch",
             "shutdown_timeout", "lease", "heartbeat", "max_memory_per_process", "verbosity",
             "settings", "pythonpath")
PASSED_ON_FLAGS = ("burst", "skip_checks", "traceback", "no_color", "force_color")


def child_arguments(options: dict[str, Any]) -> list[str]:
    args: list[str] = []
    if options["queues"]:
        args += ["--queues", ",".join(options["queues"])]
    for key in PASSED_ON:
        if options.get(key) is not None:
            args += ["--" + key.replace("_", "-"), str(options[key])]
    args += ["--" + key.replace("_", "-") for key in PASSED_ON_FLAGS if options.get(key)]
    return args


def supervise(options: dict[str, Any], worker_options: WorkerOptions) -> int:
    """Run the supervisor (it opens no database connection); its exit status."""
    if options["reload"]:
        raise CommandError("--reload runs one process: it cannot be used with --processes")
    if options["supervised_fd"] is not None:
        raise CommandError("--processes cannot be given to a supervised worker process")
    if options["max_memory_per_process"] and rss_kb() is None:
        raise CommandError("--max-memory-per-process needs /proc/self/statm (Linux)")
    count = options["processes"] or available_cpus()
    cap = options["max_memory_per_process"]
    supervisor = Supervisor(
        count, child_arguments(options), shutdown_timeout=worker_options.shutdown_timeout,
        lease_seconds=worker_options.lease_seconds, burst=worker_options.burst,
        max_memory_kb=cap * 1024 if cap else None, worker_id=worker_options.worker_id)
    return supervisor.run()


def supervised(worker: Worker, options: dict[str, Any]) -> None:
    """Make ``worker`` a supervisor's child: stop orders and reports over the pipe."""
    try:
        sock = socket.socket(fileno=options["supervised_fd"])
    except OSError as exc:
        raise CommandError(f"--supervised-fd: {exc}") from None
    os.set_inheritable(sock.fileno(), False)  # a handler's subprocess must not hold it open
    cap = options["max_memory_per_process"]
    notifier = PipeNotifier(sock, cap * 1024 if cap else None)
    notifier.worker = worker
    worker.watchman.systemd = notifier  # started without NOTIFY_SOCKET, it keeps this one
    worker.options.stop_signals = (ORDER_SIGNAL,)
    signal.signal(ORDER_SIGNAL, worker.stop)  # an order before the worker installs it
    take_orders(sock, worker)
