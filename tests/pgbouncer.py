"""A real PgBouncer (Debian's package) in front of the test PostgreSQL, on a port of its own.

Each instance writes its configuration to a temporary directory and runs ``pgbouncer`` in the
foreground as a child process; tests that need one skip, with the reason, where the binary is
missing. Its admin console (database ``pgbouncer``) pauses, kills and refuses clients to
simulate a database going away.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port

BINARY = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")


class PgBouncer:
    """One pgbouncer process: ``pool_mode`` transaction or session, trust authentication.

    Everything else is PgBouncer's default, ``ignore_startup_parameters`` included (none): a
    client that sends a startup parameter PgBouncer does not track, such as ``options``, is
    refused at login, as it would be by a site's stock PgBouncer.
    """

    def __init__(self, pool_mode: str, *, server_port: int = 5432, **settings: Any) -> None:
        if BINARY is None:
            pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
        self.pool_mode, self.port = pool_mode, free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        (self.dir / "users.txt").write_text('"postgres" ""\n')
        options = {
            "listen_addr": "127.0.0.1", "listen_port": self.port, "unix_socket_dir": "",
            "auth_type": "trust", "auth_file": self.dir / "users.txt", "pool_mode": pool_mode,
            "admin_users": "postgres", "max_client_conn": 200, "default_pool_size": 20,
            **settings,
        }
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            if not user_exists("postgres"):
                pytest.skip("pgbouncer will not run as root and there is no postgres user")
            options["user"] = "postgres"
            self.dir.chmod(0o755)
        lines = ["[databases]", f"* = host=127.0.0.1 port={server_port}", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in options.items()]
        (self.dir / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
        for path in self.dir.iterdir():
            path.chmod(0o644)
        self.log = open(self.dir / "pgbouncer.log", "w+")
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([BINARY, str(self.dir / "pgbouncer.ini")],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen on {self.port}: {self.output()}")

    def kill(self) -> None:
        """Stop the process (SIGINT: at once, closing every connection)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(2)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def admin(self, command: str) -> list[tuple]:
        """Run one admin console command (``PAUSE db``, ``KILL db``, ``SHOW POOLS``...)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname="pgbouncer", autocommit=True) as conn:
            cur = conn.execute(command)
            return cur.fetchall() if cur.description else []

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def env(self) -> dict[str, str]:
        """Environment for a worker subprocess (tests/settings.py reads PGPORT)."""
        return {"PGPORT": str(self.port)}


@contextmanager
def pgbouncer(pool_mode: str, **settings: Any) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(pool_mode, **settings)
    try:
        yield bouncer
    finally:
        bouncer.stop()


@contextmanager
def default_through(bouncer: PgBouncer) -> Iterator[None]:
    """This process's ``default`` connection goes through ``bouncer`` meanwhile."""
    from django.db import connection

    connection.close()
    port = connection.settings_dict["PORT"]
    connection.settings_dict["PORT"] = str(bouncer.port)
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
