"""sd_notify: a real ``runworker`` subprocess talks to a real datagram socket, as under systemd."""

import secrets
import signal
import socket

import pytest

from django_jobs.models import Job
from django_jobs.worker.systemd import Notifier, socket_address, watchdog_interval
from tests.conftest import wait_for

FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


class NotifySocket:
    """The receiving end systemd would hold: a bound AF_UNIX datagram socket."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(socket_address(address))
        self.sock.settimeout(0.05)
        self.messages: list[str] = []

    def drain(self) -> list[str]:
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except (TimeoutError, BlockingIOError):
                return self.messages

    def lines(self) -> list[str]:
        return [line for message in self.drain() for line in message.splitlines()]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=["abstract", "path"])
def notify_socket(request, tmp_path):
    if request.param == "abstract":
        address = f"@django-jobs-test-{secrets.token_hex(6)}"
    else:
        address = str(tmp_path / "notify.sock")
    receiver = NotifySocket(address)
    yield receiver
    receiver.close()


def test_the_address_of_an_abstract_socket_starts_with_a_nul():
    assert socket_address("@systemd/notify") == b"\0systemd/notify"
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"


@pytest.mark.parametrize("environ, expected", [
    ({}, None),  # no WatchdogSec= in the unit
    ({"WATCHDOG_USEC": "10000000"}, 5.0),  # ping at half the interval
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "ten"}, None),  # garbage is ignored, not fatal
    ({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "1"}, None),  # meant for another process
])
def test_watchdog_interval(environ, expected):
    assert watchdog_interval(environ) == expected


def test_without_notify_socket_nothing_is_sent():
    notifier = Notifier({})
    assert not notifier.enabled and notifier.send("READY=1") is False


def test_a_socket_nobody_listens_on_is_not_an_error(tmp_path):
    notifier = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert notifier.enabled and notifier.send("READY=1") is False


def test_messages_reach_the_socket(notify_socket):
    notifier = Notifier({"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "2000000"})
    assert notifier.send("READY=1", "STATUS=hello")
    assert notify_socket.drain() == ["READY=1\nSTATUS=hello"]
    notifier.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_runworker_says_ready_status_watchdog_and_stopping(start_worker, notify_socket):
    """READY=1 once it can claim, STATUS= with its counts, WATCHDOG=1 from the loop,
    STOPPING=1 on SIGTERM; then it exits cleanly."""
    env = {"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "400000"}
    worker = start_worker("--concurrency", "2", *FAST, env=env)
    wait_for(lambda: "READY=1" in notify_socket.lines(), timeout=60)
    Job.enqueue("record", {"n": 1})
    wait_for(lambda: any(line.startswith("STATUS=") and "1 done" in line
                         for line in notify_socket.lines()), timeout=60)
    wait_for(lambda: notify_socket.lines().count("WATCHDOG=1") >= 3, timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    lines = notify_socket.lines()
    assert lines.index("READY=1") < lines.index("STOPPING=1")
    assert lines.count("READY=1") == 1 and lines.count("STOPPING=1") == 1
    assert lines[0] == "READY=1" and lines[1].startswith("STATUS=working: 0 job(s) running")


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_burst_worker_says_stopping_when_it_runs_out_of_jobs(start_worker, notify_socket):
    Job.enqueue("record", {"n": 1})
    worker = start_worker("--burst", *FAST, env={"NOTIFY_SOCKET": notify_socket.address})
    assert worker.wait() == 0, worker.output()
    lines = notify_socket.lines()
    assert lines[0] == "READY=1" and "STOPPING=1" in lines
    assert "WATCHDOG=1" not in lines  # no WATCHDOG_USEC: no pings


def test_before_ready_no_ping_is_due():
    notifier = Notifier({"NOTIFY_SOCKET": "@unused", "WATCHDOG_USEC": "400000"})
    assert notifier.next_ping_in(0.0) == float("inf")


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_an_idle_worker_pings_the_watchdog_between_long_polls_and_heartbeats(
    start_worker, notify_socket
):
    """WatchdogSec=0.4 (a ping every 0.2 s) under a 60 s poll interval and heartbeat: the idle
    loop wakes for each ping. A loop that slept until its next poll or heartbeat would send
    one ping in the first 60 s; ten pings arrive well inside that window."""
    env = {"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "400000"}
    worker = start_worker("--poll-interval", "60", "--heartbeat", "60", "--lease", "120",
                          env=env)
    wait_for(lambda: "READY=1" in notify_socket.lines(), timeout=60)
    wait_for(lambda: notify_socket.lines().count("WATCHDOG=1") >= 10, timeout=45)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
