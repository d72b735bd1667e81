"""IMG3: ti_hub/registry (ImageRegistries, Reader) against real registries: Debian's docker-registry (distribution
v2) open, behind htpasswd (Basic), and behind a token service (Bearer); a closed port and a silent server for the
unreachable cases. The clock is injected: the cache's expiry is proven without waiting five minutes."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
import registrykit
from registrykit import Registry, push_image

from ti_hub.registry.catalog import ImageRegistries

pytestmark = registrykit.needed

LOGIN = ("puller", "pull-secret-7f3a")


@pytest.fixture(scope="module")
def open_reg(tmp_path_factory):
    with Registry(tmp_path_factory.mktemp("open-registry")) as reg:
        yield reg


@pytest.fixture(scope="module")
def basic_reg(tmp_path_factory):
    with Registry(tmp_path_factory.mktemp("basic-registry"), users=dict([LOGIN])) as reg:
        yield reg


@pytest.fixture(scope="module")
def token_reg(tmp_path_factory):
    with Registry(tmp_path_factory.mktemp("token-registry"), users=dict([LOGIN]), auth="token") as reg:
        yield reg


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def catalog(clock=None, **settings) -> ImageRegistries:
    return ImageRegistries(clock=clock or Clock(), **{"timeout": 10.0, "list_wait": 10.0, **settings})


def logins(*creds: tuple[int, str, str, str]):
    """Saved credentials as the catalog gets them; the 'encrypted' password is the password (the opener is ours)."""
    return [(cid, server, user, pw.encode()) for cid, server, user, pw in creds], lambda c: (c[2], c[3].decode())


async def facts(cat: ImageRegistries, address: str, creds=()) -> dict:
    saved, opener = logins(*creds)
    (item,) = await cat.annotate([{"address": address}], saved, opener)
    return item


async def test_an_open_registry_gives_version_size_created_and_the_platform_of_an_index(open_reg):
    single = push_image(open_reg, "team/plain", "1.0", created="2024-05-06T07:08:09.5Z")
    multi = push_image(open_reg, "team/multi", "2.1", layers=3, index=True, created="2023-01-02T03:04:05+01:00")
    cat = catalog()
    item = await facts(cat, single.address)
    assert item == {"address": single.address, "version": "1.0", "size_bytes": single.size,
                    "size_mib": round(single.size / (1 << 20), 1), "image_created": "2024-05-06T07:08:09Z",
                    "digest": single.digest, "registry": "ok"}
    item = await facts(cat, multi.address)
    # the index's digest (what the tag names), the amd64 image's size (the arm64 one is a layer short)
    assert (item["registry"], item["version"], item["digest"]) == ("ok", "2.1", multi.digest)
    assert item["size_bytes"] == multi.size and item["image_created"] == "2023-01-02T02:04:05Z"
    by_digest = await facts(cat, f"{open_reg.host}/team/plain@{single.digest}")
    assert (by_digest["size_bytes"], by_digest["version"]) == (single.size, single.digest[7:19])
    missing = await facts(cat, f"{open_reg.host}/team/plain:nope")
    assert missing["registry"] == "not found: the registry has no team/plain:nope" and missing["size_bytes"] is None


@pytest.mark.parametrize("kind", ["basic", "token"])
async def test_a_private_registry_is_read_with_the_saved_credential_and_never_echoes_it(kind, basic_reg, token_reg):
    reg = basic_reg if kind == "basic" else token_reg
    pushed = push_image(reg, "team/private", "3", auth=LOGIN)
    cat = catalog()
    anonymous = await facts(cat, pushed.address)
    assert anonymous["registry"].startswith("denied: ") and anonymous["size_bytes"] is None, anonymous
    assert f"save a credential for {reg.host}" in anonymous["registry"]
    wrong = await facts(cat, pushed.address, [(7, reg.host, LOGIN[0], "not-the-password")])
    assert wrong["registry"].startswith("denied: ") and "refused the saved credential" in wrong["registry"], wrong
    other_registry = await facts(cat, pushed.address, [(8, "127.0.0.1:1", *LOGIN)])  # not this one's: not sent
    assert other_registry["registry"] == anonymous["registry"]
    right = await facts(cat, pushed.address, [(8, "127.0.0.1:1", *LOGIN), (9, reg.host, *LOGIN)])
    assert (right["registry"], right["size_bytes"], right["digest"]) == ("ok", pushed.size, pushed.digest)
    for item in (anonymous, wrong, right):
        assert LOGIN[1] not in repr(item)
    if kind == "token":  # the login went to the token service, as Basic, and only there
        assert any(h and h.startswith("Basic ") for h in reg.tokens.seen)


async def test_facts_are_cached_per_credential_for_the_configured_time(open_reg):
    clock = Clock()
    cat = catalog(clock, cache_seconds=300.0)
    first = push_image(open_reg, "team/moving", "latest", created="2024-01-01T00:00:00Z")
    assert (await facts(cat, first.address))["image_created"] == "2024-01-01T00:00:00Z"
    push_image(open_reg, "team/moving", "latest", created="2024-02-02T00:00:00Z", layers=1)
    clock.now += 299
    assert (await facts(cat, first.address))["image_created"] == "2024-01-01T00:00:00Z"  # remembered
    # another credential's view is its own read (one login's answer never serves another's list)
    assert (await facts(cat, first.address, [(5, open_reg.host, "u", "p")]))["image_created"] == "2024-02-02T00:00:00Z"
    clock.now += 2
    assert (await facts(cat, first.address))["image_created"] == "2024-02-02T00:00:00Z"  # read again


@pytest.fixture
def silent_port():
    """A server that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


async def test_unreachable_registries_are_said_per_image_and_never_hold_the_list(open_reg, silent_port):
    ok = push_image(open_reg, "team/fine", "1")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    clock = Clock()
    cat = catalog(clock, timeout=1.5, list_wait=0.5, failure_cache_seconds=30.0)
    saved, opener = logins()
    # no host off this machine: tests reach nothing outside it (an unknown name would ask the DNS resolver)
    addresses = [ok.address, f"127.0.0.1:{closed}/team/x:1", f"127.0.0.1:{silent_port}/team/y:2"]
    beat = []

    async def heartbeat():  # the event loop keeps turning while registries are read
        while True:
            beat.append(time.monotonic())
            await asyncio.sleep(0.05)

    ticker = asyncio.ensure_future(heartbeat())
    started = time.monotonic()
    items = await cat.annotate([{"address": a} for a in addresses], saved, opener)
    took = time.monotonic() - started
    assert took < 1.4, took  # list_wait, not the silent registry's timeout
    by = {i["address"]: i["registry"] for i in items}
    assert by[ok.address] == "ok"
    assert by[addresses[1]] == "unreachable: connection refused"
    assert by[addresses[2]].startswith("pending: ")
    await asyncio.sleep(1.5)  # the silent read runs on past the list, to its timeout
    items = await cat.annotate([{"address": a} for a in addresses], saved, opener)
    ticker.cancel()
    assert items[2]["registry"] == "unreachable: no answer within 1.5 s"
    assert all(i["version"] for i in items) and items[0]["size_bytes"] == ok.size
    gaps = [b - a for a, b in zip(beat, beat[1:])]
    assert max(gaps) < 0.5, max(gaps)
    # a failure is remembered briefly, then the registry is tried again
    clock.now += 31
    again = await cat.annotate([{"address": addresses[1]}], saved, opener)
    assert again[0]["registry"] == "unreachable: connection refused"


async def test_reach_leaves_out_registries_off_the_machine_without_reading_them(open_reg):
    """ImageRegistries.reach: `loopback` reads only registries on this machine (the test hubs' setting), `none`
    none; the images left out say so and nothing is asked of their registries."""
    ok = push_image(open_reg, "team/near", "1")
    saved, opener = logins()
    far = "quay.io/jupyter/scipy-notebook:latest"
    near = catalog(reach="loopback")
    items = await near.annotate([{"address": ok.address}, {"address": far}], saved, opener)
    assert items[0]["registry"] == "ok" and items[0]["size_bytes"] == ok.size
    assert items[1]["registry"] == "not read: this platform reads only registries on this machine " \
                                   "(ImageRegistries.reach)" and items[1]["version"] == "latest"
    assert not near._inflight and (far, None) not in near._cache
    none = catalog(reach="none")
    items = await none.annotate([{"address": ok.address}], saved, opener)
    assert items[0]["registry"].startswith("not read: this platform reads no registries")
