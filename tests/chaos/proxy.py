"""A TCP proxy on 127.0.0.1 that a test puts between a worker and PostgreSQL, then cuts.

``blackhole()`` is a network partition: connections stay open but nothing crosses, so the
worker's queries hang unanswered and new connections get no reply. ``restore()`` ends it the way
a partition usually ends for a client: every connection held through the partition is reset
(the worker sees its queries fail and reconnects), and new connections are forwarded again.
"""

from __future__ import annotations

import socket
import struct
import threading


class Link:
    """One client connection and its upstream, if any; ``dropped`` once it crossed a cut."""

    def __init__(self, client: socket.socket) -> None:
        self.sockets = [client]
        self.dropped = False


class Proxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.cut = False
        self.closed = False
        self._lock = threading.Lock()  # guards cut and _links together
        self._links: list[Link] = []
        threading.Thread(target=self._accept, name="chaos-proxy", daemon=True).start()

    def blackhole(self) -> None:
        with self._lock:
            self.cut = True
            for link in self._links:
                link.dropped = True

    def restore(self) -> None:
        """Reset every connection that lived through the partition, then forward again."""
        with self._lock:
            held = [link for link in self._links if link.dropped]
            self._links = [link for link in self._links if not link.dropped]
            self.cut = False
        for link in held:
            for sock in link.sockets:
                _reset(sock)

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.blackhole()
        self.restore()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            link = Link(client)
            with self._lock:
                self._links.append(link)
                link.dropped = self.cut
            if link.dropped:  # no route to the server: the client waits, unanswered
                threading.Thread(target=self._pump, args=(link, client, None),
                                 daemon=True).start()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            link.sockets.append(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(link, source, sink),
                                 daemon=True).start()

    def _pump(self, link: Link, source: socket.socket, sink: socket.socket | None) -> None:
        """Copy bytes one way; once the link is cut, read and drop them (they never arrive)."""
        try:
            while data := source.recv(65536):
                if sink is not None and not link.dropped:
                    sink.sendall(data)
        except OSError:
            pass
        if not link.dropped:
            for sock in link.sockets:
                _reset(sock)


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset, as a router that lost the connection's state would."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
