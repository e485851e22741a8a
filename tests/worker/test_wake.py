"""The loop's wake (``worker/wake.py``): ``threading.Event``'s behaviour, and a socket's bytes
ending its wait too."""

import socket
import threading
import time

from django_jobs.worker.wake import Wake


def test_set_before_the_wait_ends_it_at_once_and_clear_forgets_it():
    wake = Wake()
    wake.set()
    wake.set()  # a second set writes nothing more: one clear empties the pipe
    assert wake.is_set() and wake.wait(10)
    wake.clear()
    assert not wake.is_set()
    began = time.monotonic()
    assert not wake.wait(0.2)
    assert time.monotonic() - began >= 0.19
    wake.close()


def test_a_set_from_another_thread_ends_the_wait():
    wake = Wake()
    threading.Timer(0.1, wake.set).start()
    began = time.monotonic()
    assert wake.wait(30)
    assert time.monotonic() - began < 20
    wake.close()


def test_a_socket_with_bytes_to_read_ends_the_wait_and_is_left_unread():
    wake, (ours, theirs) = Wake(), socket.socketpair()
    assert wake.wait_for(0.05, ours.fileno()) == (False, False)
    threading.Timer(0.1, theirs.send, [b"note"]).start()
    assert wake.wait_for(30, ours.fileno()) == (False, True)
    assert ours.recv(16) == b"note"
    wake.set()
    assert wake.wait_for(30, ours.fileno()) == (True, False)
    wake.close()
    ours.close()
    theirs.close()


def test_a_set_after_close_does_nothing():
    wake = Wake()
    wake.close()
    wake.set()  # a slot thread still running after the worker stopped
    assert wake.is_set()
