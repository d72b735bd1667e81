"""The route table of the ti service and its OpenAPI document (built from the same table)."""

from __future__ import annotations

import json
from typing import Any

from jupyterhub.services.auth import HubOAuthCallbackHandler
from tornado import web

from .. import __version__
from ..api import account, endpoints, jobs, resources, ssh, workspaces
from ..api.base import APIHandler
from ..endpoints.proxy import EndpointHandler
from ..ops.jobspec import JOB_FIELDS
from .health import HealthHandler
from .pages import page_routes

ID = r"([^/]+)"
# (path, handler, {method: summary}) -- the OpenAPI document is derived from this table
ROUTES: list[tuple[str, type, dict[str, str]]] = [
    ("/me", account.MeHandler, {"get": "Who I am, my groups and TiHub permissions"}),
    ("/plans", resources.PlansHandler, {"get": "Plans I can use (?kind=)", "post": "Define a plan (admin)"}),
    (f"/plans/{ID}", resources.PlanHandler, {"patch": "Change a plan (admin)", "delete": "Delete a plan (admin)"}),
    ("/quota", resources.MyQuotaHandler, {"get": "My compute and storage quota with usage"}),
    ("/quotas", resources.QuotasHandler, {"get": "Quotas (admin, ?user=)", "put": "Set a quota (admin)"}),
    ("/jobs", jobs.JobsHandler, {"get": "My jobs (?status=&kind=&name=&owner=&all=1&limit=&offset=)",
                                 "post": "Submit a training job"}),
    (f"/jobs/{ID}", jobs.JobHandler, {"get": "A job's detail, queue position and history (another user's "
                                             "waiting job: its summary, with view-all)"}),
    (f"/jobs/{ID}/logs", jobs.JobLogsHandler, {"get": "Log text of one instance (?instance=&offset=&tail=)"}),
    (f"/jobs/{ID}/metrics", jobs.JobMetricsHandler, {"get": "Resource use of a running job's instances now: CPU "
                                                            "cores busy, memory, GPU utilization and memory"}),
    (f"/jobs/{ID}/ports", endpoints.JobPortsHandler, {"post": "Open one more interactive port {port} on my running "
                                                              "job (40000-49999)"}),
    (f"/jobs/{ID}/tensorboard", endpoints.JobTensorBoardHandler,
     {"get": "My job's running TensorBoards", "post": "Start (or find) TensorBoard for {logdir} inside my job's "
                                                      "volume mounts; returns its URL",
      "delete": "Stop my job's TensorBoards (?logdir=)"}),
    (f"/jobs/{ID}/(kill|pause|resume|clone|pin|unpin|priority|move|cancel)", jobs.JobActionHandler,
     {"post": "Kill, pause, resume or clone; pin, unpin, priority {priority} (admins); move {to|before|after} "
              "(owners); cancel (queued)"}),
    ("/queue", jobs.QueueHandler, {"get": "Queued jobs in queue order: position, reason, estimated start "
                                          "(?all=1&queue=POOL/TYPE/KIND)"}),
    ("/queue/scores", jobs.ScoresHandler, {"get": "Usage scores (mine; ?all=1 or ?user= with view-all)"}),
    ("/queue/panel", jobs.PanelHandler, {"get": "Resource panel: mine per kind and type; cluster per type"}),
    ("/volumes", resources.VolumesHandler, {"get": "My volumes and those shared with me", "post": "Create"}),
    (f"/volumes/{ID}", resources.VolumeHandler, {"get": "Detail with usage and holders",
                                                 "patch": "Expand (capacity_gib) or describe", "delete": "Delete"}),
    (f"/volumes/{ID}/shares", resources.VolumeSharesHandler, {"post": "Share with a user or group (ro/rw)"}),
    (f"/volumes/{ID}/shares/{ID}", resources.VolumeShareHandler, {"delete": "Remove a share"}),
    (f"/volumes/{ID}/files", resources.VolumeFilesHandler, {"get": "Browse a volume (?path=)"}),
    ("/images", account.ImagesHandler, {"get": "Public images", "post": "Add a public image (admin)"}),
    (f"/images/{ID}", account.ImageHandler, {"delete": "Delete a public image (admin)"}),
    ("/credentials", account.CredentialsHandler, {"get": "My registry credentials (no passwords)",
                                                  "post": "Save a registry credential"}),
    (f"/credentials/{ID}", account.CredentialHandler, {"delete": "Delete a registry credential"}),
    ("/keys", account.KeysHandler, {"get": "My SSH public keys", "post": "Add an SSH public key"}),
    (f"/keys/{ID}", account.KeyHandler, {"delete": "Remove an SSH public key"}),
    ("/templates", account.TemplatesHandler, {"get": "Templates of mine and my teams", "post": "Save a template"}),
    (f"/templates/{ID}", account.TemplateHandler, {"get": "A template", "delete": "Delete my template"}),
    ("/cluster", resources.ClusterHandler, {"get": "Nodes, devices and usage"}),
    (f"/workspaces/{ID}/{ID}", workspaces.WorkspaceHandler,
     {"get": "Workspace admission state (spawner)", "post": "Ask to start a workspace (spawner)"}),
    (f"/workspaces/{ID}/{ID}/running", workspaces.WorkspaceRunningHandler, {"post": "Report running (spawner)"}),
    (f"/workspaces/{ID}/{ID}/stop", workspaces.WorkspaceStopHandler, {"post": "Report stopped (spawner)"}),
    (f"/workspace-options/{ID}", workspaces.WorkspaceOptionsHandler, {"get": "Spawn form choices (spawner)"}),
    ("/ssh/command", ssh.SSHCommandHandler, {"get": "The ssh command to copy (?name=WORKSPACE|JOB&instance=N)"}),
    (f"/ssh/keys/{ID}", ssh.SSHKeysHandler, {"get": "A user's SSH public keys (SSH gateway)"}),
    (f"/ssh/targets/{ID}", ssh.SSHTargetsHandler, {"get": "Where a user's workspaces or a job run (SSH gateway)"}),
]

ERROR_SCHEMA = {"type": "object", "required": ["error", "detail"], "properties": {
    "error": {"type": "string"}, "detail": {"type": "string"}, "field": {"type": ["string", "null"]}}}


def openapi(prefix: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, _handler, methods in ROUTES:
        oa_path, n = path, 0
        while ID in oa_path:
            n += 1
            oa_path = oa_path.replace(ID, "{id}" if n == 1 else f"{{id{n}}}", 1)
        oa_path = oa_path.replace("(kill|pause|resume|clone|pin|unpin|priority|move|cancel)", "{action}")
        params = [{"name": p.strip("{}"), "in": "path", "required": True, "schema": {"type": "string"}}
                  for p in oa_path.split("/") if p.startswith("{")]
        ops = {}
        for method, summary in methods.items():
            op: dict[str, Any] = {"summary": summary, "parameters": params, "responses": {
                "200": {"description": "OK"}, "4XX": {"description": "Refused",
                                                      "content": {"application/json": {"schema": ERROR_SCHEMA}}}}}
            if path == "/jobs" and method == "post":
                op["requestBody"] = {"content": {"application/json": {"schema": {
                    "type": "object", "required": ["name", "plan", "image", "command"], "additionalProperties": False,
                    "properties": {f: {} for f in JOB_FIELDS}}}}}
            ops[method] = op
        paths[oa_path] = ops
    return {"openapi": "3.1.0", "info": {"title": "TiHub API", "version": __version__},
            "servers": [{"url": prefix}], "paths": paths,
            "components": {"securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "Authorization"}}},
            "security": [{"token": []}]}


class OpenAPIHandler(web.RequestHandler):
    """Public on purpose: the document describes routes, not data."""

    def get(self):
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(openapi(self.settings["api_prefix"])))


class RootHandler(APIHandler):
    async def get(self):
        self.send({"name": "TiHub", "version": __version__, "api": self.settings["api_prefix"]})


class NotFoundHandler(APIHandler):
    async def get(self, *a):
        self.send({"error": "not_found", "detail": f"no such API route: {self.request.path}", "field": None}, 404)

    post = patch = put = delete = get


def origin_handlers() -> list[tuple]:
    """Job endpoints on origins of their own (TiService.endpoint_origin): every path of LABEL.<domain>."""
    from ..endpoints.originproxy import OriginEndpointHandler

    return [(r"/.*", OriginEndpointHandler)]


def handlers(prefix: str, service_prefix: str) -> list[tuple]:
    api = [(prefix + path, handler) for path, handler, _ in ROUTES]
    return [
        (prefix + "/openapi.json", OpenAPIHandler),
        (prefix + "/health", HealthHandler),
        (prefix + "/?", RootHandler),
        *api,
        (service_prefix + "oauth_callback", HubOAuthCallbackHandler),
        # JOB6: a job's ports and TensorBoards (docs/api.md "Endpoints"); not in ROUTES: not JSON, any method
        (service_prefix + "endpoints/.*", EndpointHandler),
        *page_routes(service_prefix),
        (prefix + "/(.*)", NotFoundHandler),
    ]
