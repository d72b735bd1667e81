"""IMG3 end to end: a real hub lists public images with their version, size and creation time read from real
registries (Debian's docker-registry: one open, one behind a token service and Bearer tokens), each user's own
saved credential opening the private one; an unreachable registry is said per image. API and `ti image list`."""

from __future__ import annotations

import json
import re
import socket

import pytest
import registrykit
from registrykit import Registry, push_image

from hubproc import own_hub

pytestmark = [pytest.mark.e2e, registrykit.needed]

LOGIN = ("ci-bot", "registry-pass-9d2c")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with Registry(tmp_path_factory.mktemp("reg-open")) as open_reg, \
            Registry(tmp_path_factory.mktemp("reg-private"), users=dict([LOGIN]), auth="token") as private:
        images = {"open": push_image(open_reg, "base/python", "3.11-slim", created="2024-03-04T05:06:07Z"),
                  "private": push_image(private, "team/trainer", "2.0", auth=LOGIN, index=True,
                                        created="2024-06-07T08:09:10Z")}
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            gone = f"127.0.0.1:{s.getsockname()[1]}/team/gone:1"
        # the lists wait for the registries here (a slow machine): "pending" is the catalog's test's business
        for hub in own_hub(tmp_path_factory, "imghub", "c.ImageRegistries.list_wait = 20\n"):
            yield hub, images, private, gone


def listed(user) -> dict[str, dict]:
    r = user.api("GET", "/images", params={"limit": 500})
    assert r.status_code == 200, r.text
    assert LOGIN[1] not in r.text
    return {i["name"]: i for i in r.json()["items"]}


def test_image_lists_show_the_registrys_version_size_and_creation_time(world):
    hub, images, private, gone = world
    admin = hub.admin
    # what the admin adds is read at once: the answer says what the registry has
    added = admin.ok("POST", "/images", json={"name": "img-open", "address": images["open"].address})
    assert (added["version"], added["size_bytes"], added["registry"]) == ("3.11-slim", images["open"].size, "ok")
    admin.ok("POST", "/images", json={"name": "img-private", "address": images["private"].address,
                                      "accelerator": "gpu"})
    admin.ok("POST", "/images", json={"name": "img-gone", "address": gone})
    # typed-in versions and sizes are gone: the registry says them
    r = admin.api("POST", "/images", json={"name": "img-typed", "address": images["open"].address, "size_mib": 5})
    assert r.status_code == 400 and r.json()["field"] == "size_mib", r.text

    owner = hub.person("regowner")
    cred = owner.ok("POST", "/credentials", json={"name": "team-registry", "registry": private.host,
                                                  "username": LOGIN[0], "password": LOGIN[1]})
    mine = listed(owner)
    assert mine["img-open"] | {"id": 0} == {
        "id": 0, "name": "img-open", "address": images["open"].address, "accelerator": "cpu", "description": "",
        "created_at": mine["img-open"]["created_at"], "public": True, "version": "3.11-slim",
        "size_bytes": images["open"].size, "size_mib": 0.0, "image_created": "2024-03-04T05:06:07Z",
        "digest": images["open"].digest, "registry": "ok"}
    p = mine["img-private"]
    assert (p["registry"], p["version"], p["size_bytes"], p["image_created"], p["digest"]) == (
        "ok", "2.0", images["private"].size, "2024-06-07T08:09:10Z", images["private"].digest)
    assert mine["img-gone"]["registry"] == "unreachable: connection refused"
    assert mine["img-gone"]["version"] == "1" and mine["img-gone"]["size_bytes"] is None
    # the credential went to the registry's token service, and is still never shown
    assert any(h and h.startswith("Basic ") for h in private.tokens.seen)
    assert "password" not in owner.ok("GET", "/credentials")["items"][0]

    # another user has no credential for it: their list says so, for that image only
    other = listed(hub.person("regother"))
    assert other["img-private"]["registry"] == (f"denied: the registry wants a login: save a credential for "
                                                f"{private.host} (ti credential add)")
    assert other["img-private"]["size_bytes"] is None and other["img-open"]["registry"] == "ok"

    # the CLI shows them, and --json is the API's items
    table = owner.ti("image", "list")
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header[:8] == ["ID", "NAME", "ADDRESS", "VERSION", "ACCEL", "SIZE", "CREATED", "REGISTRY"], header
    row = next(line for line in table.stdout.splitlines() if " img-open " in line)
    assert f" {images['open'].size}B " in row and re.search(r"\sok(\s|$)", row) and "2024-03-04" in row, row
    gone_row = next(line for line in table.stdout.splitlines() if " img-gone " in line)
    assert "unreachable: connection refused" in gone_row
    as_json = owner.ti("image", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    items = {i["name"]: i for i in json.loads(as_json.stdout)}
    assert items["img-private"]["size_bytes"] == images["private"].size and LOGIN[1] not in as_json.stdout

    # deleting the credential: the next list reads the registry without it (a new cache key)
    owner.ok("DELETE", f"/credentials/{cred['id']}")
    assert listed(owner)["img-private"]["registry"].startswith("denied: ")
