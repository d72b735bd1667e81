"""/workspaces/{owner}/{name}[/running|/stop]: the hub's spawner asks for admission here (and waits for it: ``wait``,
a long poll); /lease: the owner renews a workspace's lease on its devices (the idle policy, ops/idle.py).

The spawner sends the owner's hub scopes (``scopes``) with each start and form: the hub's RBAC, custom roles
included, decides what a workspace may do, and only the spawner's identity may vouch for them
(``ops/workspaces.owner_actor``).
"""

from __future__ import annotations

import asyncio

from ..domain import states as st
from ..domain import validation as v
from ..ops import idle, images, workspaces
from .base import APIHandler


class WorkspaceHandler(APIHandler):
    async def get(self, owner: str, name: str):
        wait = int(self.args().get("wait") or 0)  # the contract checked it: whole seconds, 0-60
        ws = await self.op(workspaces.get, self.actor, owner, name)
        if wait and ws["status"] == st.QUEUED and await self._admitted_within(ws["id"], wait):
            ws = await self.op(workspaces.get, self.actor, owner, name)
        self.send(self._with_mounts(owner, ws))

    async def post(self, owner: str, name: str):
        body = self.body()
        v.check_fields(body, ("groups", "options", "scopes", "wait"))
        groups = body.get("groups") or []
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise v.ValidationError("groups must be a list of group names", field="groups")
        scopes = body.get("scopes")  # checked once the caller is known to be the spawner
        options = body.get("options") or {}
        wait = body.get("wait") or 0
        args = (self.actor, owner, name, groups, options, self.ti.ops_settings)
        # the checks that only read run outside TiHub's write lock, side by side with other starts' (a burst of
        # starts queues on that lock one by one, the hub waiting for them: docs/benchmarks.md)
        checked = await self.ti.db(workspaces.check_start, *args, scopes=scopes, readonly=True)
        out = await self.op(workspaces.start, *args, scopes=scopes, checked=checked, position=False)
        # admitted or queued: the owner's personal storage exists before the spawner mounts it
        await asyncio.to_thread(self.ti.volume_driver.ensure_personal, owner)
        if out.get("credential_id"):
            await self._pull_secret(out)
        self.ti.poke()
        if wait and out["status"] == st.QUEUED and await self._admitted_within(out["id"], wait):
            out = await self.ti.db(workspaces.get, self.actor, owner, name, readonly=True)
        elif out["status"] == st.QUEUED:
            out = await self.with_queue_place(out)
        self.send(self._with_mounts(owner, out), 201)

    async def _admitted_within(self, job_id: int, wait: float) -> bool:
        """A long poll: whether the workspace left the queue within ``wait`` seconds (the spawner waits here for
        its admission instead of asking again and again; ops/statuswait.py)."""
        return await self.ti.status_waits.until_not(job_id, st.QUEUED, wait)

    def _with_mounts(self, owner: str, ws: dict) -> dict:
        # where each volume's bytes are, for a spawner on this machine (the local driver's paths)
        driver = self.ti.volume_driver
        ws["mounts"] = [{"source": str(driver.path(vol["volume_id"])), "kind": vol["kind"],
                         "mount_path": vol["mount_path"], "read_only": vol["read_only"], "claim": ""}
                        for vol in ws["volumes"]]
        # STO8: the owner's work and archive directories, in every workspace
        ws["mounts"] += [{"source": p.source, "kind": p.kind, "mount_path": p.mount_path, "read_only": False,
                          "claim": p.claim} for p in driver.personal_mounts(owner)]
        return ws

    async def _pull_secret(self, ws: dict) -> None:
        """The workspace's registry credential as its image pull Secret (Kubernetes; TiKubeSpawner finds it by
        name), made here because only the ti service can open the password. A failure fails the start: the spawner
        reports it stopped, which deletes whatever was made."""
        cid = int(ws["credential_id"])
        cred = (await self.ti.db(images.registry_credentials, {cid}, readonly=True)).get(cid)
        if cred is None:  # deleted since admission a moment ago
            raise v.ValidationError(f"credential: registry credential {cid} was just deleted", field="credential")
        await self.ti.backend.workspace_pull_secret(ws["id"], ws["owner"], ws["name"],
                                                    images.opened_login(self.ti.fernet, cred))


class WorkspaceRunningHandler(APIHandler):
    async def post(self, owner: str, name: str):
        body = self.body()
        v.check_fields(body, ("state",))
        self.send(await self.op(workspaces.set_running, self.actor, owner, name, body.get("state") or {}))


class WorkspaceStopHandler(APIHandler):
    async def post(self, owner: str, name: str):
        body = self.body()
        v.check_fields(body, ("reason",))
        out = await self.op(workspaces.stop, self.actor, owner, name, v.text(body.get("reason", ""), "reason", 500))
        if out.get("credential_id"):  # its image pull Secret goes with it (a restart makes it again)
            await self.ti.backend.drop_workspace_pull_secret(out["id"], owner, name)
        self.ti.poke()
        self.send(out)


class WorkspaceLeaseHandler(APIHandler):
    async def post(self, owner: str, name: str):
        """WS6: the owner (or a manager of all jobs) renews the lease: the idle clock restarts (ops/idle.py)."""
        self.send(await self.op(idle.renew, self.actor, owner, name))


class WorkspaceResetHandler(APIHandler):
    async def post(self, owner: str, name: str):
        """WS7: the owner resets a stopped workspace to a fresh state, keeping its volumes (ops/workspaces.reset)."""
        self.send(await self.op(workspaces.reset, self.actor, owner, name, self.ti.backend.clear_workspace_state))


class WorkspaceOptionsHandler(APIHandler):
    async def get(self, owner: str):
        groups = [g for g in self.args().get("groups", "").split(",") if g]
        scopes = [x for x in self.args().get("scopes", "").split(",") if x]
        choices = await self.op(workspaces.form_options, self.actor, owner, groups, self.ti.ops_settings,
                                scopes=scopes)
        self.send({**choices, "image_note": self.ti.backend.image_note})
