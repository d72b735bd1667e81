"""ti_hub/launcher/portguard.py: the platform's ports are checked and their IPv6 counterparts held (issue 30, finding 2)."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from ti_hub.launcher import portguard


def listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_held_port_is_refused_naming_its_holder_and_nothing_is_held():
    busy = listening()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    free_port = free.getsockname()[1]
    free.close()
    try:
        port = busy.getsockname()[1]
        held, problems = portguard.claim([("the hub's API", "127.0.0.1", port), ("free", "127.0.0.1", free_port)])
        assert held == [] and len(problems) == 1
        assert problems[0].startswith(f"port {port} (the hub's API) is held on 127.0.0.1 by pid {os.getpid()} "
                                      f"(uid {os.geteuid()}: ")
        assert [h.pid for h in portguard.holders(port)] == [os.getpid()]
    finally:
        busy.close()


def test_a_free_port_gets_its_ipv6_counterpart_held_until_released():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    held, problems = portguard.claim([("svc", "127.0.0.1", port), ("off", "127.0.0.1", 0)])
    assert problems == []
    try:
        if not held:
            pytest.skip("no IPv6 loopback on this machine: nothing to hold")
        with socket.socket(socket.AF_INET6) as other:
            other.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            with pytest.raises(OSError) as e:
                other.bind(("::1", port))
            assert e.value.errno == errno.EADDRINUSE
        with socket.socket() as mine:  # the platform itself still binds 127.0.0.1
            mine.bind(("127.0.0.1", port))
    finally:
        for h in held:
            h.close()
