"""A free TCP port on 127.0.0.1 for a server a test starts (a throwaway PostgreSQL cluster, a
PgBouncer), below the kernel's range of ephemeral ports.

A port in that range may be taken at any moment as the local end of an outgoing connection: the
suite's own connections to its databases take thousands of them, and two runs side by side
twice as many. A server started, or started again after a crash, on such a port then fails
with "Address already in use". Below the range only another listener can hold the port, which
binding it first shows.
"""

import random
import socket
from pathlib import Path

PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
SPAN = 10_000


def ephemeral_low() -> int:
    """The first ephemeral port (Linux: 32768 by default)."""
    try:
        return int(PORT_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port below the ephemeral range that nothing is bound to now."""
    high = ephemeral_low()
    low = max(1024, high - SPAN)
    for _ in range(200):
        port = random.randrange(low, high)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {low} and {high}")
