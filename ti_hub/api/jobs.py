"""/jobs, /jobs/{id}[/action|/logs|/metrics], /queue."""

from __future__ import annotations

import datetime as dt

from ..domain.errors import NotFound, ValidationError
from ..domain import validation as v
from ..ops import drafts, jobadmin, jobs, queue
from ..ops.scoring import list_scores
from ..hubclient import api as hubapi
from .base import APIHandler
from .endpoints import endpoint_info


async def clean_after_reset(ti, job: dict, state: dict | None) -> None:
    """What a reset job may have left (``ops/jobadmin.reset``): its processes or pods (no grace: it is stuck
    already), and a workspace's server at the hub. Best effort: the record is reset either way; a failure is
    logged."""
    try:
        if state:
            await ti.backend.stop(job["id"], state, grace_seconds=0.0)
            await ti.backend.cleanup(job["id"], state)
        if job["kind"] == "workspace":
            await hubapi.stop_server(ti.hub_auth(), job["owner"], job["name"])
    except Exception:
        ti.log.exception("cleaning up after resetting job %s", job["id"])


class JobsHandler(APIHandler):
    async def get(self):
        self.send(await self.op(jobs.list_jobs, self.actor, self.args(), cache=self.ti.render_cache))

    async def post(self):
        body, settings = self.body(), self.ti.ops_settings
        draft = v.boolean(body.pop("draft", False), "draft")  # JOB10: saved, not queued (ops/drafts.py)
        # what only reads runs outside TiHub's write lock, side by side with other requests; the write holds it
        # for name, quota and the insert, and the queue position is counted after the commit
        checked = await self.ti.db(jobs.check_submit, self.actor, body, settings, readonly=True)
        if draft:
            return self.send(await self.op(drafts.save, self.actor, body, settings, checked=checked), 201)
        out = await self.with_queue_place(
            await self.op(jobs.submit, self.actor, body, settings, checked=checked, position=False))
        self.ti.poke()
        self.send(out, 201)


class JobHandler(APIHandler):
    async def get(self, ref: str):
        out = await self.op(jobs.show, self.actor, ref)
        self.send(await endpoint_info(self.settings["service_prefix"], self.ti.tensorboards, self.actor, out,
                                      self.ti.endpoint_origins))

    async def delete(self, ref: str):
        await self.op(drafts.discard, self.actor, ref)
        self.set_status(204)
        self.finish()


ACTIONS = ("start", "kill", "stop", "requeue", "reset", "pause", "resume", "clone", "pin", "unpin", "priority", "move",
           "cancel")


class JobActionHandler(APIHandler):
    async def post(self, ref: str, action: str):
        actor = self.actor
        if action == "start":
            out = await self.op(drafts.start, actor, ref, self.ti.ops_settings)
        elif action == "kill":
            out = await self.op(jobs.kill, actor, ref)
        elif action == "stop":
            out = await self.op(jobadmin.stop, actor, ref)
        elif action == "requeue":
            out = await self.op(jobadmin.requeue, actor, ref, self.ti.ops_settings)
        elif action == "reset":
            out, old_state = await self.op(jobadmin.reset, actor, ref)
            await clean_after_reset(self.ti, out, old_state)
        elif action == "pause":
            out = await self.op(jobs.pause, actor, ref)
        elif action == "resume":
            out = await self.op(jobs.resume, actor, ref, self.ti.ops_settings)
        elif action in ("pin", "unpin"):
            out = await self.op(queue.pin, actor, ref, action == "pin", self.ti.usage_settling_time)
        elif action == "priority":
            out = await self.op(queue.set_priority, actor, ref, self.body(), self.ti.usage_settling_time)
        elif action == "move":
            out = await self.op(queue.move, actor, ref, self.body(), self.ti.usage_settling_time)
        elif action == "cancel":
            out = await self.op(queue.cancel, actor, ref)
        elif action == "clone":
            out = await self.op(jobs.clone, actor, ref, self.body(), self.ti.ops_settings)
            self.ti.poke()
            return self.send(out, 201)
        else:
            raise ValidationError(f"unknown action {action!r}; one of: {', '.join(ACTIONS)}", field="action")
        self.ti.poke()
        self.send(out)


class JobLogsHandler(APIHandler):
    async def get(self, ref: str):
        args = self.args()
        # `ti job logs -f` polls this every second: one light read, not the job's detail and history
        job = await self.op(jobs.log_source, self.actor, ref)
        try:
            instance = int(args.get("instance", "0"))
            offset = int(args.get("offset", "0"))
            tail = int(args["tail"]) if "tail" in args else None
        except ValueError:
            raise ValidationError("instance, offset and tail must be integers", field="instance") from None
        if not 0 <= instance < job["instances"]:  # the job's size decides, as for its endpoints
            raise NotFound(f"job {job['id']} has no instance {instance} (0-{job['instances'] - 1})",
                           field="instance")
        if offset < 0:
            raise ValidationError("offset must be >= 0", field="offset")
        if tail is not None and not 1 <= tail <= 2000:
            raise ValidationError("tail must be between 1 and 2000 lines", field="tail")
        state = job["backend_state"]
        text, nxt = "", offset
        if state:
            if tail is not None:
                text, nxt = await self.ti.backend.tail_lines(job["id"], state, instance, tail)
            else:
                text, nxt = await self.ti.backend.logs(job["id"], state, instance, offset, 1 << 20)
        self.send({"text": text, "offset": nxt, "instance": instance, "instances": job["instances"],
                   "status": job["status"], "finished": job["finished"]})


class JobMetricsHandler(APIHandler):
    async def get(self, ref: str):
        # the monitors poll this every 2 s: a light read (no history), then the backend's sample (~0.25 s locally)
        job = await self.op(jobs.metrics_source, self.actor, ref)
        items: list = []
        note = ""
        if job["status"] != "running" or not job["backend_state"]:
            note = f"the job is {job['status']}: metrics exist while it runs"
        else:
            try:
                items = [m.to_json() for m in await self.ti.backend.metrics(job["id"], job["backend_state"],
                                                                            job["devices"])]
            except NotImplementedError:
                note = "this TiHub's backend reports no metrics"
        self.send({"job": job["id"], "status": job["status"], "instances": items, "note": note,
                   "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})


class QueueHandler(APIHandler):
    async def get(self):
        self.send(await self.op(queue.queue_view, self.actor, self.args()))


class ScoresHandler(APIHandler):
    async def get(self):
        self.send(await self.op(list_scores, self.actor, self.args(), self.ti.usage_settling_time,
                                self.ti.usage_device_weights))


class PanelHandler(APIHandler):
    async def get(self):
        self.send(await self.op(queue.panel, self.actor, self.ti.ops_settings.nodes))
