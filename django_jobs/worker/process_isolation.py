"""Each job of a handler with ``isolation="process"`` runs in a child process of its own, so
that one stuck past its timeout can be ended.

A thread cannot be stopped while it is inside C code (a socket read without a timeout, a regular
expression that backtracks for hours, a driver waiting on a dead server): the worker can only
abandon it (``worker/executor.py``). A process can be killed. For such a handler, the slot thread
that took the job starts a fresh interpreter (``subprocess``: fork and exec at once, so nothing of
the worker's threads, locks or connections is inherited), sends it the job over a socket pair
(pickle), and waits for the result or the error to come back the same way. The child sets Django
up from the worker's settings module, imports the handler's module, and runs the handler with
``current_job()`` set to the job: its ORM queries open connections of its own.

The slot thread keeps the deadline itself (the executor gives such a job none): at the handler's
``timeout``, or when the job is canceled, it asks the child to stop (a signal that raises
``JobTimeout`` or ``JobCanceled`` in the handler, as the executor does in a thread); if the child
has not answered ``KILL_GRACE`` seconds later, it is ended (SIGTERM, then SIGKILL
``KILL_WAIT_SECONDS`` later) and the attempt is written as timed out (failed, the attempt spent)
or canceled. The child dies with the thread that started it (Linux's parent-death signal), so a
worker that is killed leaves no handler running behind it.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.core.settings import jobs_settings
from django_jobs.exceptions import InvalidResult, JobCanceled, JobTimeout

if TYPE_CHECKING:
    from django_jobs.handlers.registry import Handler
    from django_jobs.models import Job

# Between the SIGTERM that ends a child and the SIGKILL that follows if it is still there.
KILL_WAIT_SECONDS = 2.0
# How long a child may take to start (Python, Django's setup, the handler's module) before its
# handler's timeout starts to count; past it (and the timeout) it is stopped as timed out.
STARTUP_SECONDS = 30.0
# How often the waiting thread looks at its deadline and for a stop order.
POLL_SECONDS = 0.05
# The signals that ask a child to stop its handler: they raise these in it.
STOP_SIGNALS: dict[type[BaseException], signal.Signals] = {
    JobTimeout: signal.SIGUSR1, JobCanceled: signal.SIGUSR2}

# The slot threads waiting on a child (by thread ident), and the stop each was asked for.
_waiting: set[int] = set()
_stops: dict[int, type[BaseException]] = {}


class HandlerProcessDied(Exception):
    """The child process running a job ended without sending its result (killed from outside,
    out of memory, a crash in C code): the attempt fails and is retried like any error."""


class RemoteTraceback(Exception):
    """The traceback of an error raised in the child, as the cause of the error it sent."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def interrupt(ident: int, exc_class: type[BaseException]) -> bool:
    """A stop (a cancel, a timeout) for the job that slot thread ``ident`` runs: True if that
    thread waits on a child, which is then asked to stop; False for any other thread."""
    if ident not in _waiting:
        return False
    _stops.setdefault(ident, exc_class)
    return True


def run_isolated(found: Handler, job: Job) -> Any:
    """Run ``job``'s handler in a child process and return its result (plain JSON), or raise
    the error it raised; ``JobTimeout`` or ``JobCanceled`` once a child that ignored a stop has
    been ended."""
    ident = threading.get_ident()
    _waiting.add(ident)  # from here a stop is the child's, never an exception in this thread
    child = None
    try:
        child = Child(found, job)
        return child.wait(found.timeout, _stops, ident)
    finally:
        _waiting.discard(ident)
        _stops.pop(ident, None)
        if child is not None:
            child.end()


class Child:
    """One child process running one job, seen from the worker's slot thread."""

    def __init__(self, found: Handler, job: Job) -> None:
        ours, theirs = socket.socketpair()
        from django.conf import settings

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        if getattr(settings, "SETTINGS_MODULE", None):
            env["DJANGO_SETTINGS_MODULE"] = settings.SETTINGS_MODULE
        try:
            self.process = subprocess.Popen(  # noqa: S603 (this interpreter, our own code)
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.connection = Connection(ours.detach())
        try:
            self.connection.send((found.func.__module__, pickle.dumps(job)))
        except BaseException:
            self.end()
            raise

    def wait(self, timeout: float | None, stops: dict[int, type[BaseException]],
             ident: int) -> Any:
        """The child's answer (its result, or its error raised here), watching the deadline,
        the stop orders and the grace; ends the child that outlives the grace."""
        # Until the handler starts, the child's start (Django's setup) has a deadline of its own.
        deadline: float | None = time.monotonic() + (timeout or 0) + STARTUP_SECONDS
        stop: type[BaseException] | None = None
        kill_at = 0.0
        while True:
            try:
                answer = self._answer()
                if self.process.poll() is not None and not self.connection.poll():
                    raise self._died()
            except HandlerProcessDied:
                if stop is None:
                    raise
                answer, kill_at = None, 0.0  # died of its stop (one sent as it started)
            if answer == ("started",):
                deadline = time.monotonic() + timeout if timeout else None
            elif answer is not None:
                return _unpack(answer)
            now = time.monotonic()
            if stop is None:
                stop = stops.get(ident)
                if stop is None and deadline is not None and now >= deadline:
                    stop = JobTimeout
                if stop is not None:
                    self._signal(STOP_SIGNALS.get(stop, signal.SIGUSR1))
                    kill_at = now + float(jobs_settings.KILL_GRACE)
            elif now >= kill_at:
                self.kill()  # (nothing to do if it has ended)
                what = "past its timeout" if stop is JobTimeout else "after its job was canceled"
                raise stop(f"the handler ran {what} and did not stop within KILL_GRACE "
                           f"({jobs_settings.KILL_GRACE} s); its process was ended")

    def _answer(self) -> tuple | None:
        """The child's message, if it sent one within ``POLL_SECONDS``."""
        try:
            if self.connection.poll(POLL_SECONDS):
                return self.connection.recv()
        except (EOFError, OSError):  # the child is gone without a word
            self.process.wait()
            raise self._died() from None
        return None

    def _died(self) -> HandlerProcessDied:
        return HandlerProcessDied(f"the handler's process ended (exit status "
                                  f"{self.process.returncode}) without sending its result")

    def _signal(self, signum: int) -> None:
        if self.process.poll() is None:
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGTERM, then SIGKILL if the child is still there ``KILL_WAIT_SECONDS`` later."""
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(KILL_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def end(self) -> None:
        """After the answer (or the kill): the child exits by itself; reap it."""
        self.connection.close()
        try:
            self.process.wait(KILL_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()


def _unpack(answer: tuple) -> Any:
    """The child's result, or its error raised here with the child's traceback as its cause."""
    if answer[0] == "result":
        return answer[1]
    _, module, qualname, args, state, text = answer
    exc = _rebuild(module, qualname, args, state)
    raise exc from RemoteTraceback(text)


def _rebuild(module: str, qualname: str, args: tuple, state: dict | None) -> BaseException:
    """The child's exception, of its own class if this process can import it (rebuilt without
    calling its ``__init__``, which may take other arguments than its ``args``); otherwise an
    ``Exception`` of the same name."""
    try:
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            exc = cls.__new__(cls, *args)
            exc.args = args
            if state:
                exc.__dict__.update(state)
            return exc
    except Exception:  # noqa: S110 (not importable here: an Exception of the same name)
        pass
    return type(qualname.rsplit(".", 1)[-1], (Exception,), {"__module__": module})(*args)


# The child's side.

_BOOT = ("import sys; from django_jobs.worker.process_isolation import child_main; "
         "child_main(int(sys.argv[1]), int(sys.argv[2]))")


def child_main(fd: int, parent: int) -> None:
    """In the child: run the one job the worker sends, send back what came of it, exit."""
    _die_with_parent(parent)
    # Stop orders come from the worker only: a terminal's Ctrl-C reaches the whole group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for exc_class, signum in STOP_SIGNALS.items():
        signal.signal(signum, _raiser(exc_class))
    connection = Connection(fd)
    module, job_bytes = connection.recv()
    try:
        answer: tuple = ("result", _run(connection, module, job_bytes))
    except BaseException as exc:
        answer = _error(exc)
    for signum in STOP_SIGNALS.values():  # a stop arriving now must not break the send
        signal.signal(signum, signal.SIG_IGN)
    try:
        connection.send(answer)
    except Exception as exc:  # the result or error would not pickle
        connection.send(_error(exc))
    connection.close()


def _run(connection: Connection, module: str, job_bytes: bytes) -> Any:
    import django

    django.setup()
    from django_jobs.core.current import current_job
    from django_jobs.handlers.registry import get_handler

    importlib.import_module(module)
    job = pickle.loads(job_bytes)  # noqa: S301 (sent by the worker that started this process)
    found = get_handler(job.type)
    if found is None:
        raise LookupError(f"no handler for job type {job.type!r} in the child process")
    current_job.set(job)
    connection.send(("started",))  # the handler's timeout counts from here
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    if found.arguments is None:
        args, kwargs = (job.payload,), {}
    else:
        args, kwargs = found.arguments.call(job.payload)
    result = found.func(*args, **kwargs)
    if inspect.iscoroutine(result):  # an async def handler
        result = asyncio.run(result)
    return _plain_json(result)


def _plain_json(result: Any) -> Any:
    """The result as plain JSON types, to be pickled (the worker checks it again as it does
    every result); InvalidResult, as in a thread, for one that is not storable JSON."""
    if result is None or result is True or result is False:
        return result
    try:
        text = storable_json(result, jobs_settings.MAX_RESULT_BYTES, "MAX_RESULT_BYTES")
    except NotStorable as exc:
        raise InvalidResult(f"the handler's result {exc}") from None
    return json.loads(text)


def _error(exc: BaseException) -> tuple:
    cls = exc.__class__
    state = dict(getattr(exc, "__dict__", {}))
    try:
        pickle.dumps((exc.args, state))
        args = exc.args
    except Exception:
        args, state = (str(exc),), {}
    text = "".join(traceback.format_exception(exc))
    return ("error", cls.__module__, cls.__qualname__, args, state, text)


def _raiser(exc_class: type[BaseException]) -> Any:
    def raise_it(signum: int, frame: object) -> None:
        raise exc_class()
    return raise_it


def _die_with_parent(parent: int) -> None:
    """End this process when the worker thread that started it ends (Linux); elsewhere a thread
    watching the parent's pid ends it within a second of the parent's death."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    else:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1)
            os._exit(1)
        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # the parent died before the signal was set up
        os._exit(1)
