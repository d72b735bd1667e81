"""/jobs/{id}/ports (open a port while running), /jobs/{id}/ssh (SSH on or off while running) and
/jobs/{id}/tensorboard (TensorBoard for a logdir); the endpoint URLs of a job's detail. The proxy itself is
``ti_hub/endpoints/proxy.py``."""

from __future__ import annotations

from typing import Any

from ..domain import validation as v
from ..domain.actor import Actor
from ..endpoints.origins import Origins, port_label, tensorboard_label
from ..domain.endpoints import check_logdir, port_url, tensorboard_key, tensorboard_prefix
from ..ops import endpoints as ops
from ..ops import jobssh
from .base import APIHandler


async def endpoint_info(service_prefix: str, tensorboards: Any, actor: Actor, job: dict[str, Any],
                        origins: Origins | None = None) -> dict[str, Any]:
    """The detail's endpoint URLs, for the owner only: each declared port of instance 0 while the job runs
    (instance N: replace the /0/, or the -0- of an origin), the jupyter endpoint's (``jupyter_url``), and the
    TensorBoards running for it. Paths on the hub,
    or URLs of the endpoints' own origins when ``TiService.endpoint_origin`` is set."""
    if job.get("owner") != actor.name or job.get("kind") == "workspace":
        return job
    ports = (job.get("ports") or []) if job.get("status") == "running" else []
    job["endpoint_urls"] = {str(p): (origins.url(port_label(job["id"], 0, p)) if origins
                                     else port_url(service_prefix, job["id"], 0, p)) for p in ports}
    if job.get("jupyter_port") is not None:  # the jupyter endpoint: its port's URL (None until it runs)
        job["jupyter_url"] = job["endpoint_urls"].get(str(job["jupyter_port"]))
    job["tensorboards"] = ([tb_doc(r, origins) for r in await tensorboards.list_of(job["id"])]
                           if tensorboards else [])
    return job


def tb_doc(rec: dict[str, Any], origins: Origins | None = None) -> dict[str, Any]:
    url = origins.url(tensorboard_label(rec["job_id"], rec["key"])) if origins else rec["prefix"] + "/"
    return {"logdir": rec["logdir"], "url": url, "key": rec["key"], "started_at": rec["started_at"]}


class JobPortsHandler(APIHandler):
    async def post(self, ref: str):
        out = await self.op(ops.add_port, self.actor, ref, self.body(),
                            shared_network=self.ti.backend.shares_host_network)
        self.send(await endpoint_info(self.settings["service_prefix"], self.ti.tensorboards, self.actor, out,
                                      self.ti.endpoint_origins))


class JobTensorBoardHandler(APIHandler):
    async def get(self, ref: str):
        job = await self.op(ops.owned_job, self.actor, ref)
        items = [tb_doc(r, self.ti.endpoint_origins) for r in await self.ti.tensorboards.list_of(job["id"])]
        self.send({"items": items, "total": len(items)})

    async def post(self, ref: str):
        data = self.body()
        v.check_fields(data, ("logdir",))
        src = await self.ti.db(ops.tensorboard_source, self.actor, ref, data.get("logdir"), readonly=True)
        key = tensorboard_key(src["logdir"])
        prefix = tensorboard_prefix(self.settings["service_prefix"], src["id"], key)
        # a process on the volume's directory here, or a pod mounting its claim (endpoints/kubetb.py)
        rec, started = await self.ti.tensorboards.start_on_volume(
            src["id"], src["owner"], src["logdir"], src["volume_id"], src["volume"], src["rel"], prefix, key,
            uid=src.get("uid"))
        self.send({**tb_doc(rec, self.ti.endpoint_origins), "job": src["id"], "started": started},
                  201 if started else 200)

    async def delete(self, ref: str):
        args = self.args()
        v.check_fields(args, ("logdir",))
        job = await self.ti.db(ops.owned_job, self.actor, ref, readonly=True)
        key = tensorboard_key(check_logdir(args["logdir"])) if args.get("logdir") else None
        self.send({"stopped": await self.ti.tensorboards.stop_some(job["id"], key)})


class JobSSHHandler(APIHandler):
    async def post(self, ref: str):
        out = await self.op(jobssh.set_ssh, self.actor, ref, self.body())
        self.send(await endpoint_info(self.settings["service_prefix"], self.ti.tensorboards, self.actor, out,
                                      self.ti.endpoint_origins))
