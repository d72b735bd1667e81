"""/jobs/{id}/ports (open a port while running) and /jobs/{id}/tensorboard (TensorBoard for a logdir); the
endpoint URLs of a job's detail. The proxy itself is ``ti_hub/endpoints/proxy.py``."""

from __future__ import annotations

import os
from typing import Any

from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import NotHere, ValidationError
from ..endpoints.pure import check_logdir, inside, port_url, tensorboard_key, tensorboard_prefix
from ..ops import endpoints as ops
from .base import APIHandler

NO_DIRECTORY = ("this TiHub's volumes have no directory on the service's machine, where its TensorBoards run: run "
                "TensorBoard in a job instead (declare a port, e.g. 40006, run `tensorboard --logdir DIR --host "
                "0.0.0.0 --port 40006`, then open the port's endpoint)")


async def endpoint_info(service_prefix: str, tensorboards: Any, actor: Actor, job: dict[str, Any]
                        ) -> dict[str, Any]:
    """The detail's endpoint URLs (paths on the hub), for the owner only: each declared port of instance 0 while
    the job runs (instance N: replace the /0/), and the TensorBoards running for it."""
    if job.get("owner") != actor.name or job.get("kind") == "workspace":
        return job
    ports = (job.get("ports") or []) if job.get("status") == "running" else []
    job["endpoint_urls"] = {str(p): port_url(service_prefix, job["id"], 0, p) for p in ports}
    job["tensorboards"] = [tb_doc(r) for r in await tensorboards.list_of(job["id"])] if tensorboards else []
    return job


def tb_doc(rec: dict[str, Any]) -> dict[str, Any]:
    return {"logdir": rec["logdir"], "url": rec["prefix"] + "/", "key": rec["key"], "started_at": rec["started_at"]}


class JobPortsHandler(APIHandler):
    async def post(self, ref: str):
        out = await self.op(ops.add_port, self.actor, ref, self.body(),
                            shared_network=self.ti.backend.shares_host_network)
        self.send(await endpoint_info(self.settings["service_prefix"], self.ti.tensorboards, self.actor, out))


class JobTensorBoardHandler(APIHandler):
    async def get(self, ref: str):
        job = await self.op(ops.owned_job, self.actor, ref)
        items = [tb_doc(r) for r in await self.ti.tensorboards.list_of(job["id"])]
        self.send({"items": items, "total": len(items)})

    async def post(self, ref: str):
        data = self.body()
        v.check_fields(data, ("logdir",))
        src = await self.ti.db(ops.tensorboard_source, self.actor, ref, data.get("logdir"), readonly=True)
        logdir, tbs = src["logdir"], self.ti.tensorboards
        key = tensorboard_key(logdir)
        prefix = tensorboard_prefix(self.settings["service_prefix"], src["id"], key)
        if hasattr(tbs, "start_on_volume"):  # Kubernetes: a pod mounts the volume's claim (endpoints/kubetb.py)
            rec, started = await tbs.start_on_volume(src["id"], src["owner"], logdir, src["volume_id"],
                                                     src["volume"], src["rel"], prefix, key)
        else:
            root = str(self.ti.volume_driver.path(src["volume_id"]) or "")
            if not root:
                raise NotHere(NO_DIRECTORY)
            hostdir = _resolve(root, src["rel"], logdir)
            rec, started = await tbs.start(src["id"], src["owner"], logdir, hostdir, prefix)
        self.send({**tb_doc(rec), "job": src["id"], "started": started}, 201 if started else 200)

    async def delete(self, ref: str):
        args = self.args()
        v.check_fields(args, ("logdir",))
        job = await self.ti.db(ops.owned_job, self.actor, ref, readonly=True)
        key = tensorboard_key(check_logdir(args["logdir"])) if args.get("logdir") else None
        self.send({"stopped": await self.ti.tensorboards.stop_some(job["id"], key)})


def _resolve(root: str, rel: str, logdir: str) -> str:
    """The host directory behind the logdir, symlinks resolved: it must stay inside the volume."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, rel)) if rel else real_root
    if not inside(real, real_root):
        raise ValidationError(f"logdir {logdir} leads out of its volume (a symbolic link?)", field="logdir")
    return real
