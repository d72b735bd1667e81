"""/vcs, /vcs/{name}, /vcs/{name}/machines, /vcs/{name}/access, /me/vc (SPEC RES2)."""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import quote

from jupyterhub.utils import url_path_join
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from ..domain import scopes as S
from ..domain import validation as v
from ..domain.errors import Conflict, HubUnavailable, NotFound
from ..ops import vcdelete, vcs
from .base import APIHandler
from .schemas.common import FLAG_VALUES


async def group_members(hub_auth, group: str) -> list[str]:
    """A hub group's users (a revocation strands their running work); 404 when the hub has no such group."""
    url = url_path_join(hub_auth.api_url, "groups", quote(group, safe=""))
    try:
        resp = await AsyncHTTPClient().fetch(url, headers={"Authorization": f"token {hub_auth.api_token}"},
                                             request_timeout=20)
    except HTTPClientError as e:
        if e.code == 404:
            raise NotFound(f"the hub has no group {group!r}", field="group") from None
        raise HubUnavailable(f"the hub did not answer group {group!r}: {e}") from None
    except OSError as e:
        raise HubUnavailable(f"the hub did not answer group {group!r}: {e}") from None
    return list(json.loads(resp.body).get("users") or [])


async def grantee_check(ti, hub_auth, actor, data) -> list[str] | None:
    """Before an access change: only managers ask the hub anything (nobody else learns which names exist); a
    grant goes to an existing user or group only (one nobody holds would go to whoever signs up with it later);
    a group's revocation needs its members (whose running work it may strand). Returns those members."""
    if not isinstance(data, dict):
        return None
    kind = "group" if "group" in data and "user" not in data else "user"
    name = data.get(kind)
    if not isinstance(name, str) or not name:
        return None
    actor.need(S.MANAGE_VC, "changing who may use virtual clusters")
    if kind == "group" and data.get("remove"):
        return await group_members(hub_auth, name)
    if not data.get("remove") and not await ti.hub_names.exists(hub_auth, kind, name):
        raise NotFound(f"the hub has no {kind} named {name!r}: access goes to existing users and groups only",
                       field=kind)
    return None


def kubernetes(backend) -> bool:
    """Whether VCs own whole nodes here (Kubernetes) rather than devices of the local machine."""
    return bool(getattr(backend, "vc_whole_nodes", False))


async def delete_with_jobs(ti, actor, name: str) -> dict:
    """RES2: stop every unfinished job of the VC through the normal stop path, wait until the backend has ended
    them (the grace of a stop, and some), then delete the VC (its machines back to default). A stop that outlasts
    the wait is a 409 naming what still stops: the VC stays draining, and the same delete finishes it later."""
    first = await ti.db(vcdelete.stop_jobs, actor, name)
    ti.poke()
    waiting, deadline = first["stopping"], time.monotonic() + ti.stop_grace_seconds + 20
    while waiting and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
        waiting = await ti.db(vcdelete.still_stopping, waiting, readonly=True)
    if waiting:
        raise Conflict(f"the jobs of virtual cluster {name!r} are being stopped but {len(waiting)} have not ended "
                       f"yet ({', '.join(map(str, waiting[:10]))}): it drains meanwhile; delete it with its jobs "
                       "again to finish", field="with_jobs", stopping=waiting)
    out = await ti.db(vcdelete.delete, actor, name, True, first["jobs"])
    if kubernetes(ti.backend):  # its whole nodes go back to default: their label says so
        for node in out["machines"]:
            await ti.backend.assign_machine(node, vcs.DEFAULT)
    await ti.refresh_capacity()
    ti.poke()
    return out


class VCsHandler(APIHandler):
    async def get(self):
        self.send(await self.op(vcs.list_vcs, self.actor))

    async def post(self):
        self.send(await self.op(vcs.create, self.actor, self.body(), self.ti.ops_settings.nodes), 201)


class VCHandler(APIHandler):
    async def get(self, name: str):
        self.send(await self.op(vcs.show, self.actor, name))

    async def patch(self, name: str):
        out = await self.op(vcs.change, self.actor, name, self.body(), self.ti.ops_settings.nodes)
        # a rename renames its capacity slices' pool: plans are offered by capacity, so read it now
        await self.ti.refresh_capacity()
        self.ti.poke()  # caps and draining change what may be admitted, and the reasons of what waits
        self.send(out)

    async def delete(self, name: str):
        raw = self.args().get("with_jobs", "")
        if v.choice(raw, "with_jobs", FLAG_VALUES) in ("1", "true", "yes"):
            await delete_with_jobs(self.ti, self.actor, name)
        else:
            await self.op(vcdelete.delete, self.actor, name)
        self.set_status(204)
        self.finish()


class VCMachinesHandler(APIHandler):
    async def post(self, name: str):
        k8s = kubernetes(self.ti.backend)
        out = await self.op(vcs.assign, self.actor, name, self.body(), self.ti.ops_settings.nodes, k8s)
        if k8s:  # Kubernetes: the node's label is the assignment the scheduler reads
            for moved in out.get("moved", []):
                if not moved["draining"]:
                    await self.ti.backend.assign_machine(moved["machine"], moved["to"])
        await self.ti.refresh_capacity()
        self.ti.poke()
        self.send(out)


class VCAccessHandler(APIHandler):
    async def post(self, name: str):
        data = self.body()
        members = await grantee_check(self.ti, self.hub_auth, self.actor, data)
        out = await self.op(vcs.set_access, self.actor, name, data, members)
        self.ti.poke()  # a revocation with drain holds back what waits
        self.send(out)


class CurrentVCHandler(APIHandler):
    async def get(self):
        self.send(await self.op(vcs.current, self.actor))

    async def put(self):
        self.send(await self.op(vcs.use, self.actor, self.body()))
