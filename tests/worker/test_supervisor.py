"""``runworker --processes``: a real supervisor and its real worker processes, real signals."""

import os
import signal
import socket

import pytest
from django.core.management import CommandError, call_command

from django_jobs.models import Job, JobAttempt, Worker
from django_jobs.worker.supervisor import Supervisor, available_cpus, cgroup_cpu_quota
from tests.conftest import requires_row_locks, wait_for
from tests.worker.test_sdnotify import NotifySocket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
OUT = JobAttempt.Outcome
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


def status_of(job):
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (the supervisor, killed, cannot reap it) is gone for our purpose
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def child_pids(markers) -> list[int]:
    return [int(marker.read_text().split()[0]) for marker in markers]


def slow_jobs(tmp_path, count, seconds):
    markers = [tmp_path / f"started-{n}" for n in range(count)]
    jobs = [Job.enqueue("slow", {"seconds": seconds, "marker": str(m)}) for m in markers]
    return jobs, markers


@requires_row_locks
def test_sigterm_drains_every_child(start_worker, tmp_path):
    jobs, markers = slow_jobs(tmp_path, 2, 1.5)
    supervisor = start_worker("--processes", "2", *FAST)
    wait_for(lambda: all(m.exists() for m in markers))
    pids = child_pids(markers)
    assert len(set(pids)) == 2 and supervisor.proc.pid not in pids  # one job in each child
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output()
    assert [status_of(job) for job in jobs] == [S.COMPLETED, S.COMPLETED]
    assert not any(alive(pid) for pid in pids)
    assert Worker.objects.count() == 0
    assert supervisor.output().count("stopping; 1 job(s) running") == 2


def test_a_second_sigint_hands_the_running_jobs_back(start_worker, tmp_path):
    jobs, markers = slow_jobs(tmp_path, 1, 60)
    supervisor = start_worker("--processes", "1", "--max-memory-per-process", "4000", *FAST)
    wait_for(lambda: all(m.exists() for m in markers))
    supervisor.signal(signal.SIGINT)
    wait_for(lambda: "stopping; 1 job(s) running" in supervisor.output())
    supervisor.signal(signal.SIGINT)
    assert supervisor.wait(timeout=20) == 0, supervisor.output()
    job = Job.objects.get(pk=jobs[0].pk)
    assert job.status == S.PENDING and job.attempt == 0  # handed back, its attempt unspent
    assert "handed back 1 job(s) still running" in supervisor.output()
    assert not alive(child_pids(markers)[0])


def test_kill_9_of_the_supervisor_stops_its_children_and_their_jobs_are_taken_up(
        start_worker, tmp_path):
    jobs, markers = slow_jobs(tmp_path, 1, 3)
    supervisor = start_worker("--processes", "1", "--shutdown-timeout", "0.5",
                              "--max-memory-per-process", "4000", *FAST)
    wait_for(lambda: all(m.exists() for m in markers))
    supervisor.signal(signal.SIGKILL)
    assert supervisor.wait() == -signal.SIGKILL
    child = child_pids(markers)[0]
    wait_for(lambda: not alive(child), timeout=20)  # it saw the pipe close, and stopped
    assert "the supervisor is gone; stopping" in supervisor.output()
    rescuer = start_worker("--worker-id", "rescuer", *FAST)
    wait_for(lambda: status_of(jobs[0]) == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=jobs[0].pk).worker_id == "rescuer"
    rescuer.signal(signal.SIGTERM)
    assert rescuer.wait() == 0


@requires_row_locks
def test_kill_9_of_a_child_replaces_it_and_its_job_is_rescued(start_worker, tmp_path):
    jobs, markers = slow_jobs(tmp_path, 1, 1.5)
    supervisor = start_worker("--processes", "2", "--worker-id", "sup", *FAST)
    wait_for(lambda: all(m.exists() for m in markers))
    doomed = child_pids(markers)[0]
    lost_worker = Worker.objects.get(pid=doomed).worker_id
    os.kill(doomed, signal.SIGKILL)
    wait_for(lambda: status_of(jobs[0]) == S.COMPLETED, timeout=60)
    attempts = list(jobs[0].attempts.order_by("number").values_list("worker_id", "outcome"))
    assert attempts[0] == (lost_worker, OUT.LOST) and attempts[-1][1] == OUT.COMPLETED
    # The slot's new process registered under the same name, with a new pid.
    wait_for(lambda: Worker.objects.filter(worker_id=lost_worker).exclude(pid=doomed).exists())
    assert "was ended by signal 9" in supervisor.output()
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output()


def test_a_leaking_child_is_recycled_by_the_memory_cap(start_worker):
    jobs = [Job.enqueue("leak", {"mb": 60}) for _ in range(4)]
    # --prefetch 0: a job claimed ahead could start before the loop sees the memory.
    supervisor = start_worker("--processes", "1", "--max-memory-per-process", "160",
                              "--prefetch", "0", *FAST)
    wait_for(lambda: all(status_of(job) == S.COMPLETED for job in jobs), timeout=90)
    pids = {Job.objects.get(pk=job.pk).result["pid"] for job in jobs}
    assert len(pids) >= 2, supervisor.output()  # a fresh process took over
    output = supervisor.output()
    assert "past --max-memory-per-process 160 MB" in output
    assert "killing" not in output  # it left by itself, below the hard cap
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output()


def test_a_child_that_starts_above_the_cap_is_reported_not_recycled(start_worker):
    job = Job.enqueue("echo", {"n": 1})
    supervisor = start_worker("--processes", "1", "--max-memory-per-process", "1", *FAST)
    wait_for(lambda: status_of(job) == S.COMPLETED)
    output = supervisor.output()
    assert "above --max-memory-per-process 1 MB" in output
    assert output.count("started worker process") == 1
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output()


def test_a_wedged_child_is_killed_and_replaced(start_worker):
    supervisor = start_worker("--processes", "1", "--max-memory-per-process", "4000",
                              "--worker-id", "wedge", *FAST)
    job = Job.enqueue("echo", {"n": 1})
    wait_for(lambda: status_of(job) == S.COMPLETED)  # its loop turns: it has said it is ready
    first = Worker.objects.get(worker_id="wedge-0")
    os.kill(first.pid, signal.SIGSTOP)  # its loop stops turning: no more heartbeats
    wait_for(lambda: Worker.objects.filter(worker_id="wedge-0").exclude(pid=first.pid).exists())
    assert "no heartbeat for" in supervisor.output()
    assert not alive(first.pid)
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output()


DATABASE_PORTS = {5432, 3306}


def database_handles(pid: int) -> list[str]:
    """The database connections a process holds: its TCP sockets to PostgreSQL's or MariaDB's
    port, and its open SQLite files."""
    inodes, files = set(), []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
        elif target.endswith(".sqlite3"):
            files.append(target)
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as connections:
            for line in list(connections)[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) in DATABASE_PORTS and fields[9] in inodes:
                    files.append(fields[2])
    return files


def credentials_socket(address: str) -> NotifySocket:
    receiver = NotifySocket(address)
    receiver.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    return receiver


def senders_and_lines(receiver: NotifySocket, into: list) -> list:
    """(pid, line) of each message received so far, the sender's pid from its credentials."""
    size = socket.CMSG_SPACE(12)
    while True:
        try:
            data, ancillary, _flags, _address = receiver.sock.recvmsg(4096, size)
        except (TimeoutError, BlockingIOError):
            return into
        pid = next(int.from_bytes(cdata[:4], "little") for level, kind, cdata in ancillary
                   if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS)
        into += [(pid, line) for line in data.decode().splitlines()]


def test_under_systemd_the_supervisor_alone_notifies(start_worker, tmp_path):
    receiver = credentials_socket(str(tmp_path / "notify.sock"))
    heard: list = []
    try:
        supervisor = start_worker("--processes", "2", *FAST, env={
            "NOTIFY_SOCKET": receiver.address, "WATCHDOG_USEC": "1000000"})
        wait_for(lambda: ("WATCHDOG=1" in [line for _, line in senders_and_lines(
            receiver, heard)]), timeout=60)
        lines = [line for _, line in heard]
        assert lines[0] == "READY=1" and "STATUS=working: 2 of 2 worker process(es) ready" in lines
        assert Worker.objects.count() == 2  # READY came once both children were registered
        # The supervisor holds no database connection; its children do.
        assert database_handles(supervisor.proc.pid) == []
        assert all(database_handles(row.pid) for row in Worker.objects.all())
        supervisor.signal(signal.SIGTERM)
        assert supervisor.wait() == 0, supervisor.output()
        senders_and_lines(receiver, heard)
        assert "STOPPING=1" in [line for _, line in heard]
        assert {pid for pid, _ in heard} == {supervisor.proc.pid}  # children never notify
    finally:
        receiver.close()


def test_auto_counts_the_cpus_this_process_may_use(tmp_path):
    assert 1 <= available_cpus() <= len(os.sched_getaffinity(0))
    with open("/proc/self/cgroup") as cgroups:
        path = next(line.split("::", 1)[1].strip() for line in cgroups if line.startswith("0::"))
    limit = tmp_path / path.lstrip("/") / "cpu.max"
    limit.parent.mkdir(parents=True, exist_ok=True)
    limit.write_text("150000 100000\n")  # one and a half CPUs
    assert cgroup_cpu_quota(str(tmp_path)) == 1.5
    limit.write_text("max 100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) is None


@pytest.mark.skipif(os.environ.get("DJANGO_JOBS_TEST_DB", "sqlite") != "sqlite",
                    reason="an empty SQLite file is a database that is not migrated")
def test_a_child_that_cannot_start_ends_the_supervisor_with_its_status(start_worker, tmp_path):
    supervisor = start_worker("--processes", "2", *FAST,
                              env={"JOBS_DB_NAME": str(tmp_path / "empty.sqlite3")})
    assert supervisor.wait() == 1, supervisor.output()
    output = supervisor.output()
    assert "is not migrated" in output and "failed before it could start" in output


def test_crashes_back_off_and_the_fifth_within_a_minute_ends_the_supervisor():
    supervisor = Supervisor(1, [], shutdown_timeout=1, lease_seconds=2)
    delays = []
    for now in (100.0, 101.0, 102.0, 103.0):
        supervisor._crashed(0, now)
        delays.append(supervisor.slots[0].start_at - now)
    assert delays == [0.0, 1.0, 2.0, 4.0] and supervisor.signals == 0
    supervisor._crashed(0, 170.0)  # the first four are more than a minute old
    assert supervisor.slots[0].start_at == 170.0 and supervisor.signals == 0
    for now in (171.0, 172.0, 173.0, 174.0):
        supervisor._crashed(0, now)
    assert supervisor.signals == 1 and supervisor.status == 1  # a stop, then exit status 1


@pytest.mark.parametrize("args, message", [
    (["--processes", "2", "--reload"], "--reload runs one process"),
    (["--processes", "2", "--supervised-fd", "9"], "cannot be given to a supervised"),
])
def test_combinations_the_supervisor_refuses(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("runworker", *args)


def test_what_a_job_starts_gets_the_default_stop_signals(start_worker):
    """The supervised process takes the group's stop signals and does nothing with them; a
    subprocess or a forked child a handler starts is stopped by them as usual."""
    forked = Job.enqueue("fork_dispositions", {})
    started = Job.enqueue("exec_dispositions", {})
    supervisor = start_worker("--processes", "1", "--max-memory-per-process", "4000", *FAST)
    wait_for(lambda: status_of(forked) == status_of(started) == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=started.pk).result == {"SIGTERM": "SIG_DFL", "SIGHUP": "SIG_DFL"}
    fork = Job.objects.get(pk=forked.pk).result
    assert fork["SIGTERM"] == fork["SIGHUP"] == "SIG_DFL"
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output()


def test_max_jobs_recycles_each_process_by_count(start_worker):
    jobs = [Job.enqueue("record", {}) for _ in range(2)]
    supervisor = start_worker("--processes", "1", "--max-jobs", "1",
                              "--max-memory-per-process", "4000", *FAST)
    wait_for(lambda: all(status_of(job) == S.COMPLETED for job in jobs), timeout=60)
    assert len({Job.objects.get(pk=job.pk).result["pid"] for job in jobs}) == 2
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output()
