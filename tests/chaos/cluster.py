"""A throwaway PostgreSQL cluster that a test creates, crashes and restarts on a port of its own,
and a streaming standby of one (``Standby``).

``initdb`` into a temporary directory, ``pg_ctl start`` on a free port below the ephemeral range
(``tests/ports.py``; never the shared server's 5432), ``pg_ctl stop -m immediate`` for a crash
(no checkpoint: the restart runs crash recovery from the WAL). PostgreSQL refuses to run as
root, so as root every command runs as the ``postgres`` user through ``runuser``, in a directory
that user owns.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.ports import free_port

SHARED_PORT = 5432


def find_bindir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``: PG_BINDIR, PATH, or Debian's layout."""
    candidates = [os.environ.get("PG_BINDIR", "")]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent))
    candidates += sorted(map(str, Path("/usr/lib/postgresql").glob("*/bin")), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    return None


class Cluster:
    """One temporary cluster; ``start``, ``crash``, ``destroy``. Trust auth, user postgres."""

    def __init__(self, bindir: Path) -> None:
        self._place(bindir)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--no-sync")

    def _place(self, bindir: Path) -> None:
        """A port and a temporary directory of its own, owned by the server's user."""
        self.bindir = bindir
        self.port = free_port()
        assert self.port != SHARED_PORT
        self.root = Path(tempfile.mkdtemp(prefix="django-jobs-chaos-pg-"))
        self.data = self.root / "data"
        self.logfile = self.root / "postgres.log"
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:  # PostgreSQL refuses to run as root
            entry = pwd.getpwnam(os.environ.get("CHAOS_PG_USER", "postgres"))
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        command = [str(self.bindir / tool), *args]
        if self.as_postgres:
            command = ["runuser", "-u", os.environ.get("CHAOS_PG_USER", "postgres"), "--",
                       *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120,
                                cwd=self.root)
        if result.returncode != 0:
            raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stderr[-2000:]}"
                               f"\n{self.log()[-2000:]}")
        return result

    def start(self, **settings: object) -> None:
        """Start the server; ``settings`` are server settings (``max_prepared_transactions=2``)."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        options += "".join(f" -c {name}={value}" for name, value in settings.items())
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-o", options,
                  "-w", "-t", "60", "start")

    def crash(self) -> None:
        """Stop at once, like a power cut for the server: no shutdown checkpoint."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def log(self) -> str:
        return self.logfile.read_text() if self.logfile.exists() else ""

    def destroy(self) -> None:
        if self.running():
            try:
                self.crash()
            except RuntimeError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


class Standby(Cluster):
    """A streaming standby of ``primary`` on a port of its own: the primary's data copied by
    ``pg_basebackup -R`` (which writes the connection to the primary and ``standby.signal``;
    ``--checkpoint=fast``: a spread checkpoint would keep it waiting minutes),
    then started as a hot standby that applies the primary's WAL as it streams in."""

    def __init__(self, primary: Cluster) -> None:
        self._place(primary.bindir)
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
                  "-D", str(self.data), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")


@contextmanager
def throwaway(database: str, **settings: object) -> Iterator[Cluster]:
    """A started cluster with ``database`` made in it, destroyed at the end; ``settings`` are
    server settings. Skips the test where the server binaries or ``runuser`` are missing."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        pytest.skip("running as root without runuser: cannot start PostgreSQL as another user")
    made = Cluster(bindir)
    try:
        made.start(**settings)
        made.create_database(database)
        yield made
    finally:
        made.destroy()
