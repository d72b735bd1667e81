"""The route table of the ti service: every route with its contract (the OpenAPI document is printed from it)."""

from __future__ import annotations

from functools import lru_cache

import orjson
from jupyterhub.services.auth import HubOAuthCallbackHandler
from tornado import web

from .. import __version__
from ..api import (account, admin, alertrules, alerts, endpoints, jobs, people, resources, roles, ssh, support, vcs,
                   workspaces)
from ..api.base import APIHandler, MethodsAllowed
from ..api.contract import Op, Param, Route, route_regex
from ..api.schemas import account as A
from ..api.schemas import admin as AD
from ..api.schemas import alerts as AL
from ..api.schemas import alertrules as AR
from ..api.schemas import common as C
from ..api.schemas import jobs as J
from ..api.schemas import people as PE
from ..api.schemas import resources as R
from ..api.schemas import roles as RO
from ..api.schemas import services as S
from ..api.schemas import vcs as V
from ..endpoints.proxy import EndpointHandler
from .health import HealthHandler
from ..api.metrics import MetricsHandler
from .openapi import document
from ..pages import page_routes


class OpenAPIHandler(MethodsAllowed, web.RequestHandler):
    """Public on purpose: the document describes routes, not data."""

    def get(self):
        self.set_header("Content-Type", "application/json")
        ti = self.settings.get("ti")
        limits = () if ti is None else (("TiService.max_workers", ti.max_workers), ("TiService.max_ps", ti.max_ps),
                                        ("HealthMonitor.window", int(ti.health.window)),
                                        ("ClusterAccounting.keep_days", ti.accounting.max_days))
        self.finish(document_json(self.settings["api_prefix"], limits))


@lru_cache(maxsize=4)
def document_json(prefix: str, limits: tuple[tuple[str, float], ...] = ()) -> bytes:
    """The document is the same for the process's life: printed once (from ``ROUTES`` below; service/openapi.py
    only knows how to print routes, so it never imports this module back)."""
    return orjson.dumps(document(prefix, ROUTES, dict(limits)))


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


# Every route with each method's contract (api/contract.py): the chokepoint checks requests against it and the
# OpenAPI document is printed from it. tests/e2e/test_authz_matrix.py holds who may call each one.
J_ACTION = {  # POST /jobs/{id}/ACTION
    "start": Op("Start my draft (JOB10): checked again as a submission (plan, image, volumes, quota) and queued; "
                "not a draft: 409 (only its owner)", J.JOB, errors=(404, 409)),
    "kill": Op("Kill a job or a workspace (owner, or custom:ti:jobs:manage-all); audited when not the owner's",
               J.JOB, errors=(404, 409)),
    "stop": Op("Stop a job gracefully (SIGTERM, then SIGKILL after TiService.stop_grace_seconds) or a workspace "
               "(the hub stops its server); ends stopped (owner, or custom:ti:jobs:manage-all)", J.JOB,
               errors=(404, 409)),
    "requeue": Op("Put a running, failed, error, killed or stopped job back in its queue, keeping its age; a "
                  "running one is stopped first (custom:ti:jobs:manage-all)", J.JOB, errors=(404, 409)),
    "reset": Op("Reset a job or workspace in error, or stuck scheduling, killing or pausing, to failed (a "
                "workspace: stopped), releasing its resources (custom:ti:jobs:manage-all)", J.JOB,
                errors=(404, 409)),
    "pause": Op("Pause a queued or running job: release its resources, keep the record (JOB4)", J.JOB,
                errors=(404, 409)),
    "resume": Op("Resume a paused job: back to its queue", J.JOB, errors=(404, 409)),
    "clone": Op("Submit the job again under a new name (the caller owns the clone)", J.JOB, 201, body=J.CLONE,
                errors=(404, 409)),
    "pin": Op("Pin a queued job to the front of its queue (custom:ti:jobs:manage-all)", J.JOB, errors=(404, 409)),
    "unpin": Op("Unpin a queued job (custom:ti:jobs:manage-all)", J.JOB, errors=(404, 409)),
    "priority": Op("Set a job's priority 1-1000 (custom:ti:jobs:manage-all)", J.JOB, body=J.PRIORITY,
                   errors=(404, 409)),
    "move": Op("Reorder my queued job among my own jobs in its queue", J.JOB, body=J.MOVE, errors=(404, 409)),
    "cancel": Op("Cancel a queued job", J.JOB, errors=(404, 409)),
}
# POST /users/{user}/disable (issue 30): the user, and what the hub revoked with them
DISABLED_USER = C.answer(
    {**PE.USER["properties"], "revoked": C.answer({
        "tokens": {**C.INT, "description": "the user's hub tokens deleted: API tokens they made, and the OAuth "
                                           "tokens of their browser logins to the ti service and their servers"},
        "servers_stopped": C.array(C.STR),
        "jobs_stopped": {**C.array(C.ID), "description": "their jobs and workspaces that waited, ran or were paused: "
                                                          "killed (issue 30)"},
        "servers_starting": {**C.array(C.STR), "description": "servers that were starting: they lost their "
                                                              "token; an admin stops them at /hub/admin"}},
        title="Revoked")},
    title="DisabledUser", description="a user just disabled, with what was revoked: enabling them again brings "
                                      "none of it back, they log in again")
ROUTES: list[Route] = [
    Route("/", RootHandler, {"get": Op("The API's name and version", C.answer({"name": C.STR, "version": C.STR,
                                                                                 "api": C.STR}))}),
    Route("/me", account.MeHandler, {
        "get": Op("Who I am, my groups, TiHub permissions and profile (nickname, email, phone)", A.ME),
        "patch": Op("Change my nickname, email or phone; a new email is unverified until I open the link mailed to "
                    "it (alert notices go only to verified emails)", A.ME_CHANGED, body=A.ME_CHANGE)}),
    Route("/plans", resources.PlansHandler, {
        "get": Op("Plans I can use (custom:ti:vc:view)", R.PLAN_PAGE, query=R.PLAN_QUERY),
        "post": Op("Define a plan (custom:ti:vc:manage)", R.PLAN, 201, body=R.NEW_PLAN, errors=(409,))}),
    Route("/plans/{id}", resources.PlanHandler, {
        "patch": Op("Change a plan (custom:ti:vc:manage)", R.PLAN, body=R.PLAN_CHANGE, errors=(404, 409)),
        "delete": Op("Delete a plan no active job uses (custom:ti:vc:manage)", None, 204, errors=(404, 409))},
        {"id": C.ID_PARAM}),
    Route("/vcs", vcs.VCsHandler, {
        "get": Op("Virtual clusters: machines, per-user caps, access, whether I may use each (custom:ti:vc:view)",
                  V.VC_PAGE),
        "post": Op("Create a virtual cluster (custom:ti:vc:manage)", V.VC, 201, body=V.NEW_VC, errors=(409,))}),
    Route("/vcs/{id}", vcs.VCHandler, {
        "get": Op("A virtual cluster (custom:ti:vc:view)", V.VC, errors=(404,)),
        "patch": Op("Rename (plans and jobs follow), describe, set caps, drain or reopen a virtual cluster; a cap "
                    "under use is refused unless drain (custom:ti:vc:manage)", V.VC, body=V.VC_CHANGE,
                    errors=(404, 409)),
        "delete": Op("Delete an empty virtual cluster: no machines, unfinished jobs or plans, else 409 naming them "
                     "(its jobs also as `jobs`, `job_count`); with_jobs: stop its jobs, then delete it with its plans, "
                     "its machines back to default (custom:ti:vc:manage; other users' jobs: custom:ti:jobs:manage-all "
                     "too)",
                     None, 204, errors=(404, 409),
                     query={"with_jobs": C.flag("true: stop every unfinished job of the VC (audited), wait until "
                                                "they have ended, then delete it and its plans")})},
        {"id": Param(C.NAME, "the virtual cluster's name")}),
    Route("/vcs/{id}/machines", vcs.VCMachinesHandler, {
        "post": Op("Give machines (devices; Kubernetes: nodes) to a virtual cluster, or back to default; machines "
                   "that run jobs are refused unless drain (custom:ti:vc:manage)", V.VC, body=V.MACHINE_CHANGE,
                   errors=(404, 409))}, {"id": Param(C.NAME, "the virtual cluster's name")}),
    Route("/vcs/{id}/access", vcs.VCAccessHandler, {
        "post": Op("Grant or revoke a user's or a group's access; revoking users with running jobs is refused "
                   "unless drain (custom:ti:vc:manage)", V.VC, body=V.ACCESS_CHANGE, errors=(404, 409, 502))},
        {"id": Param(C.NAME, "the virtual cluster's name")}),
    Route("/me/vc", vcs.CurrentVCHandler, {
        "get": Op("My current virtual cluster and those I may use", V.CURRENT_VC),
        "put": Op("Choose my current virtual cluster", V.CURRENT_VC, body=V.USE_VC, errors=(404,))}),
    Route("/quota", resources.MyQuotaHandler, {
        "get": Op("My compute and storage quota with usage", R.MY_QUOTA, query=R.USER_QUERY)}),
    Route("/home", resources.HomeHandler, {
        "get": Op("My dashboard for one pool: my running and queued work there, my quota and storage use, my work "
                  "and data paths, the pool's free devices (DEV6)", R.HOME, query=R.HOME_QUERY)}),
    Route("/quotas", resources.QuotasHandler, {
        "get": Op("Quotas set (custom:ti:users:manage)", R.QUOTA_PAGE, query={**R.USER_QUERY, **C.PAGE}),
        "put": Op("Set a compute or storage quota (custom:ti:users:manage)", R.QUOTA, body=R.SET_QUOTA)}),
    Route("/jobs", jobs.JobsHandler, {
        "get": Op("My jobs, newest first; everyone's with custom:ti:jobs:view-all", J.JOB_PAGE,
                  query=J.JOB_FILTERS),
        "post": Op("Submit a training job (draft true: save it, not queued, to start later)", J.JOB, 201,
                   body=J.SUBMISSION, errors=(404, 409))}),
    Route("/jobs/{id}", jobs.JobHandler, {
        "get": Op("A job's detail, queue position and history (another user's waiting job: its summary, with "
                  "custom:ti:jobs:view-all)", J.JOB_SEEN, errors=(404,)),
        "delete": Op("Delete a draft (its name is free again); not a draft: 409 (the owner, or "
                     "custom:ti:jobs:manage-all; audited when not the owner's)", None, 204, errors=(404, 409))},
        {"id": C.JOB_REF}),
    Route("/jobs/{id}/support", support.JobSupportHandler, {
        "post": Op("Ask the admins about my finished job (JOB4): an alert of kind support with the job's facts and "
                   "its last 50 log lines (secret values scrubbed); one open request per job (409)", AL.ALERT, 201,
                   body=J.SUPPORT, errors=(404, 409))}, {"id": C.JOB_REF}),
    Route("/jobs/{id}/logs", jobs.JobLogsHandler, {
        "get": Op("Log text of one instance", J.LOGS, query=J.LOG_QUERY, errors=(404,))}, {"id": C.JOB_REF}),
    Route("/jobs/{id}/metrics", jobs.JobMetricsHandler, {
        "get": Op("Resource use of a running job's instances now: CPU cores busy, memory, GPU utilization and "
                  "memory, disk I/O and network (totals and bytes/s; network on instance 0 for the job's own "
                  "network namespace, null where not measured)", J.METRICS, errors=(404,))}, {"id": C.JOB_REF}),
    Route("/jobs/{id}/ports", endpoints.JobPortsHandler, {
        "post": Op("Open one more interactive port on my running job", J.JOB, body=J.ADD_PORT, errors=(404, 409))},
        {"id": C.JOB_REF}),
    Route("/jobs/{id}/ssh", endpoints.JobSSHHandler, {
        "post": Op("Turn SSH on or off for my running job (the gateway lets me in from the next login; recorded in "
                   "its history and audited as job.ssh)", J.JOB, body=J.SET_SSH, errors=(404, 409))},
        {"id": C.JOB_REF}),
    Route("/jobs/{id}/tensorboard", endpoints.JobTensorBoardHandler, {
        "get": Op("My job's running TensorBoards", J.TENSORBOARDS, errors=(404, 409)),
        "post": Op("Start (or find) TensorBoard for a logdir inside my job's volume mounts; returns its URL (409 "
                   "naming endpoints when the job did not ask for the tensorboard endpoint)",
                   J.TENSORBOARD_STARTED, 201, body=J.LOGDIR, also=(200,), errors=(404, 409, 501, 503)),
        "delete": Op("Stop my job's TensorBoards", J.STOPPED, query=J.LOGDIR_QUERY, errors=(404, 409))},
        {"id": C.JOB_REF}),
    *(Route(f"/jobs/{{id}}/({action})", jobs.JobActionHandler, {"post": op}, {"id": C.JOB_REF})
      for action, op in J_ACTION.items()),
    Route("/queue", jobs.QueueHandler, {
        "get": Op("Queued jobs in queue order: position, reason, estimated start", J.JOB_PAGE,
                  query=J.QUEUE_QUERY)}),
    Route("/queue/scores", jobs.ScoresHandler, {
        "get": Op("Usage scores (mine; others' with custom:ti:jobs:view-all)", J.SCORES, query=J.SCORES_QUERY)}),
    Route("/queue/panel", jobs.PanelHandler, {
        "get": Op("Resource panel: mine per kind and type; the cluster per type", J.PANEL)}),
    Route("/volumes", resources.VolumesHandler, {
        "get": Op("My volumes, those shared with me and public datasets", R.VOLUME_PAGE, query=C.PAGE),
        "post": Op("Create a volume", R.VOLUME, 201, body=R.NEW_VOLUME, errors=(404, 409))}),
    Route("/volumes/{id}", resources.VolumeHandler, {
        "get": Op("A volume with its usage and holders", R.VOLUME_DETAIL, errors=(404,)),
        "patch": Op("Expand (capacity_gib) or describe my volume", R.VOLUME, body=R.VOLUME_CHANGE,
                    errors=(404, 409)),
        "delete": Op("Delete my volume (not while mounted)", None, 204, errors=(404, 409))}, {"id": C.VOLUME_REF}),
    Route("/volumes/{id}/shares", resources.VolumeSharesHandler, {
        "post": Op("Share my volume with a user or a group of the hub (ro/rw); rw made ro stops the grantee's "
                   "writing work", R.VOLUME_SHARES, 201, body=R.NEW_SHARE,
                   errors=(404, 409, 502))}, {"id": C.VOLUME_REF}),
    Route("/volumes/{id}/shares/{share_id}", resources.VolumeShareHandler, {
        "delete": Op("Remove a share of my volume: the grantee's work that mounts it stops at once", R.VOLUME_SHARES,
                     errors=(404,))},
        {"id": C.VOLUME_REF, "share_id": C.ID_PARAM}),
    Route("/volumes/{id}/files", resources.VolumeFilesHandler, {
        "get": Op("Browse a volume", R.LISTING, query=R.FILES_QUERY, errors=(404, 409))}, {"id": C.VOLUME_REF}),
    Route("/images", account.ImagesHandler, {
        "get": Op("Public images, each with its version, size and creation time as its registry says them (read "
                  "with my saved credential for that registry; a registry that cannot be read is named per image)",
                  A.IMAGE_PAGE, query=C.PAGE),
        "post": Op("Add a public image (custom:ti:vc:manage)", A.IMAGE, 201, body=A.NEW_IMAGE, errors=(409,))}),
    Route("/images/{id}", account.ImageHandler, {
        "delete": Op("Delete a public image (custom:ti:vc:manage)", None, 204, errors=(404,))}, {"id": C.ID_PARAM}),
    Route("/credentials", account.CredentialsHandler, {
        "get": Op("My registry credentials (never their passwords)", A.CREDENTIAL_PAGE, query=C.PAGE),
        "post": Op("Save a registry credential", A.CREDENTIAL, 201, body=A.NEW_CREDENTIAL, errors=(409,))}),
    Route("/credentials/{id}", account.CredentialHandler, {
        "delete": Op("Delete my registry credential", None, 204, errors=(404,))}, {"id": C.NAME_OR_ID}),
    Route("/keys", account.KeysHandler, {
        "get": Op("My SSH public keys", A.KEY_PAGE, query=C.PAGE),
        "post": Op("Add an SSH public key", A.KEY, 201, body=A.NEW_KEY, errors=(409,))}),
    Route("/keys/{id}", account.KeyHandler, {
        "delete": Op("Remove my SSH public key", None, 204, errors=(404,))}, {"id": C.NAME_OR_ID}),
    Route("/templates", account.TemplatesHandler, {
        "get": Op("Templates of mine and of my groups", A.TEMPLATE_PAGE, query=C.PAGE),
        "post": Op("Save a template, checked as a submission is", A.TEMPLATE, 201, body=A.NEW_TEMPLATE,
                   errors=(404, 409))}),
    Route("/templates/{id}", account.TemplateHandler, {
        "get": Op("A template of mine or of my groups", A.TEMPLATE, errors=(404,)),
        "delete": Op("Delete my template", None, 204, errors=(404,))}, {"id": C.NAME_OR_ID}),
    Route("/alerts", alerts.AlertsHandler, {
        "get": Op("Alerts naming me (a job of mine past its duration, waiting past its estimate, ...), newest "
                  "first; every alert for custom:ti:jobs:manage-all or custom:ti:users:manage; user=NAME: that "
                  "user's (the hub's home page, admins)", AL.ALERT_PAGE, query=AL.ALERT_QUERY, errors=(403,))}),
    Route("/alerts/{id}/answer", support.AlertAnswerHandler, {
        "post": Op("Answer a support request, which closes it; its owner sees the answer (custom:ti:jobs:manage-all "
                   "or custom:ti:users:manage)", AL.ALERT, body=AL.ANSWER, errors=(404, 409))},
        {"id": C.ID_PARAM}),
    Route("/audit", admin.AuditHandler, {
        "get": Op("Changes operators made, newest first (custom:ti:users:manage)",
                  AD.AUDIT_PAGE, query=AD.AUDIT_QUERY)}),
    # alert rules (machine rules; the built-in job-overrun, job-wait, workspace-idle) and cordoned machines (MON2,
    # ADM3): custom:ti:vc:manage, like the machines of pools
    Route("/alert-rules", alertrules.AlertRulesHandler, {
        "get": Op("Alert rules (machine rules, and the built-in job-overrun, job-wait and workspace-idle), each "
                  "with where it fires now (custom:ti:vc:manage)", AR.RULE_PAGE),
        "post": Op("Define a machine alert rule; a rule of a built-in metric exists already: 409 "
                   "(custom:ti:vc:manage)", AR.RULE, 201, body=AR.NEW_RULE, errors=(409,))}),
    Route("/alert-rules/{id}", alertrules.AlertRuleHandler, {
        "get": Op("An alert rule and its open alerts: where it fires now (custom:ti:vc:manage)", AR.RULE,
                  errors=(404,)),
        "patch": Op("Change, enable or disable an alert rule; disabling closes its alerts; a built-in rule's fixed "
                    "fields are refused (custom:ti:vc:manage)", AR.RULE, body=AR.RULE_CHANGE, errors=(404, 409)),
        "delete": Op("Delete a machine alert rule and close its alerts; a built-in rule: 409 "
                     "(custom:ti:vc:manage)", None, 204, errors=(404, 409))}, {"id": C.ID_PARAM}),
    Route("/machines/cordoned", alertrules.CordonedHandler, {
        "get": Op("Machines out of scheduling: since when, by whom (an admin or ti-alerts) and why "
                  "(custom:ti:vc:manage)", AR.CORDON_PAGE)}),
    Route("/machines/{machine}/(cordon)", alertrules.CordonHandler, {
        "post": Op("Take a machine out of scheduling (Kubernetes: cordon the node); running work keeps running "
                   "(custom:ti:vc:manage)", AR.CORDON, body=AR.CORDON_BODY, errors=(404,))},
        {"machine": AR.MACHINE_PARAM}),
    Route("/machines/{machine}/(uncordon)", alertrules.UncordonHandler, {
        "post": Op("Put a machine back into scheduling (custom:ti:vc:manage)", AR.CORDON, errors=(404,))},
        {"machine": AR.MACHINE_PARAM}),
    # people (ACC3-4): every operation needs custom:ti:users:manage (ops/hubpeople.py)
    Route("/users", people.UsersHandler, {
        "get": Op("Users with their profiles (custom:ti:users:manage)", PE.USER_PAGE, query=C.PAGE, errors=(502,)),
        "post": Op("Create a user who logs in at once with the password given (custom:ti:users:manage)", PE.USER,
                   201, body=PE.NEW_USER, errors=(404, 409, 502))}),
    Route("/user-imports", people.UserImportsHandler, {
        "post": Op("Create users from a CSV file, all or nothing; a refused file answers with every row's outcome "
                   "in rows: 400 for faults of the file, else 404 for a group missing, 409 for a name taken "
                   "(custom:ti:users:manage)", PE.IMPORT_REPORT, 201, body=PE.IMPORT, errors=(404, 409, 502))}),
    Route("/users/{user}", people.UserHandler, {
        "get": Op("A user with their profile (custom:ti:users:manage)", PE.USER, errors=(404, 502)),
        "patch": Op("Change a user's profile, or make them an admin or demote them (never the last admin)",
                    PE.USER, body=PE.USER_CHANGE, errors=(404, 409, 502)),
        "delete": Op("Delete a user without work in progress, never the last admin (custom:ti:users:manage)",
                     None, 204, errors=(404, 409, 502))}, {"user": PE.USER_PARAM}),
    *(Route(f"/users/{{user}}/({action})", people.UserActionHandler, {"post": Op(
        f"{action.capitalize()} a user: " + ("their login and the API are refused, never the last admin's; "
                                             "their tokens are revoked and their servers stopped"
                                             if action == "disable" else "they may log in again") +
        " (custom:ti:users:manage)", DISABLED_USER if action == "disable" else PE.USER,
        errors=(404, 409, 502))}, {"user": PE.USER_PARAM})
      for action in ("disable", "enable")),
    Route("/groups", people.GroupsHandler, {
        "get": Op("Groups with their members (custom:ti:users:manage)", PE.GROUP_PAGE, query=C.PAGE,
                  errors=(502,)),
        "post": Op("Create a group (custom:ti:users:manage)", PE.GROUP, 201, body=PE.NEW_GROUP,
                   errors=(404, 409, 502))}),
    Route("/groups/{group}", people.GroupHandler, {
        "get": Op("A group (custom:ti:users:manage)", PE.GROUP, errors=(404, 502)),
        "patch": Op("Rename a group (members, description, volume shares and team templates follow) or "
                    "describe it (custom:ti:users:manage)", PE.GROUP, body=PE.GROUP_CHANGE,
                    errors=(404, 409, 502)),
        "delete": Op("Delete a group (custom:ti:users:manage)", None, 204, errors=(404, 409, 502))},
        {"group": PE.GROUP_PARAM}),
    *(Route(f"/groups/{{group}}/({action})", people.GroupMembersHandler, {"post": Op(
        f"{'Add users to' if action == 'add' else 'Remove users from'} a group, all or nothing "
        "(custom:ti:users:manage)", PE.GROUP, body=PE.MEMBERS_BODY, errors=(404, 409, 502))},
        {"group": PE.GROUP_PARAM}) for action in ("add", "remove")),
    # TiHub's own roles and grants (the hub cannot change role assignments while it runs: ops/grants.py)
    Route("/roles", roles.RolesHandler, {
        "get": Op("Roles: the presets and custom ones, with who holds each (custom:ti:users:manage)", RO.ROLE_PAGE,
                  query=C.PAGE),
        "post": Op("Create a custom role from the seven permissions (custom:ti:users:manage)", RO.ROLE, 201,
                   body=RO.NEW_ROLE, errors=(409,))}),
    Route("/roles/{id}", roles.RoleHandler, {
        "get": Op("A role with who holds it (custom:ti:users:manage)", RO.ROLE, errors=(404,)),
        "patch": Op("Change a custom role; counts at once (custom:ti:users:manage). Presets: 409; the last system "
                    "admin's: 409", RO.ROLE, body=RO.ROLE_CHANGE, errors=(404, 409, 502)),
        "delete": Op("Delete a custom role and its grants (custom:ti:users:manage)", None, 204,
                     errors=(404, 409, 502))}, {"id": RO.ROLE_PARAM}),
    Route("/grants", roles.GrantsHandler, {
        "get": Op("Who holds which role (custom:ti:users:manage)", RO.GRANT_PAGE, query=RO.GRANT_QUERY),
        "post": Op("Grant roles to users and groups, all or nothing; counts at once (custom:ti:users:manage)",
                   RO.GRANTS, 201, body=RO.GRANT_ROWS, errors=(404, 502))}),
    Route("/grants/(revoke)", roles.GrantsRevokeHandler, {
        "post": Op("Revoke grants by role and user or group, all or nothing (custom:ti:users:manage); never the "
                   "last system admin's: 409", RO.GRANTS, body=RO.GRANT_ROWS, errors=(404, 409, 502))}),
    Route("/grants/{id}", roles.GrantHandler, {
        "delete": Op("Revoke one grant (custom:ti:users:manage); never the last system admin's: 409", None, 204,
                     errors=(404, 409, 502))}, {"id": C.ID_PARAM}),
    Route("/cluster", resources.ClusterHandler, {
        "get": Op("Nodes, devices and usage (custom:ti:cluster:view)", R.CLUSTER)}),
    Route("/cluster/usage", resources.ClusterUsageHandler, {
        "get": Op("Per VC, user and machine: devices used, free, idle (under the idle threshold) and unmeasured now; "
                  "booked and idle device-hours over the past days; machines' addresses and what runs there "
                  "(custom:ti:cluster:view; others' rows and job names: view-all)", R.CLUSTER_USAGE,
                  query=R.CLUSTER_USAGE_QUERY)}),
    Route("/workspaces/{owner}/{name}", workspaces.WorkspaceHandler, {
        "get": Op("Workspace admission state (the spawner: custom:ti:workspaces:admit); with wait, once admitted "
                  "or after that many seconds", S.WORKSPACE, query=S.WORKSPACE_QUERY, errors=(404,)),
        "post": Op("Ask to start a workspace (the spawner); with wait, answered once admitted or after that many "
                   "seconds", S.WORKSPACE, 201, body=S.ADMIT, errors=(404, 409))},
        {"owner": C.USER_PARAM, "name": Param(C.NAME, "the workspace")}),
    Route("/workspaces/{owner}/{name}/running", workspaces.WorkspaceRunningHandler, {
        "post": Op("Report a workspace running (the spawner)", J.JOB, body=S.RUNNING, errors=(409,))},
        {"owner": C.USER_PARAM, "name": Param(C.NAME, "the workspace")}),
    Route("/workspaces/{owner}/{name}/stop", workspaces.WorkspaceStopHandler, {
        "post": Op("Report a workspace stopped (the spawner)", J.JOB, body=S.STOPPED, errors=(404,))},
        {"owner": C.USER_PARAM, "name": Param(C.NAME, "the workspace")}),
    Route("/workspaces/{owner}/{name}/lease", workspaces.WorkspaceLeaseHandler, {
        "post": Op("Renew a running workspace's lease on its devices: the idle policy's clock restarts and its idle "
                   "alert closes (the owner, or custom:ti:jobs:manage-all; audited when not the owner's)", S.LEASE,
                   errors=(404, 409))},
        {"owner": C.USER_PARAM, "name": Param(C.NAME, "the workspace")}),
    Route("/workspaces/{owner}/{name}/reset", workspaces.WorkspaceResetHandler, {
        "post": Op("Reset my stopped workspace to a fresh state, keeping its configuration and volumes: removes the "
                   "state that is its alone (embedded platform: its /tmp, local scratch volumes, records and log of "
                   "past runs; never the home); audited", S.RESET, errors=(403, 404, 409))},
        {"owner": C.USER_PARAM, "name": Param(C.NAME, "the workspace")}),
    Route("/workspace-options/{owner}", workspaces.WorkspaceOptionsHandler, {
        "get": Op("Spawn form choices for a user (the spawner)", S.FORM_CHOICES, query=S.GROUPS_QUERY)},
        {"owner": C.USER_PARAM}),
    Route("/ssh/command", ssh.SSHCommandHandler, {
        "get": Op("The ssh command to copy", S.SSH_COMMAND, query=S.SSH_COMMAND_QUERY, errors=(404,))}),
    Route("/ssh/keys/{user}", ssh.SSHKeysHandler, {
        "get": Op("A user's SSH public keys (the SSH gateway: custom:ti:ssh:gateway)", S.SSH_KEYS)},
        {"user": C.USER_PARAM}),
    Route("/ssh/targets/{user}", ssh.SSHTargetsHandler, {
        "get": Op("Where a user's workspaces or a job run (the SSH gateway)", S.SSH_TARGETS,
                  query=S.TARGETS_QUERY)}, {"user": C.USER_PARAM}),
]


def handlers(prefix: str, service_prefix: str) -> list[tuple]:
    # each handler gets its route's contract; the chokepoint (api/base.py) checks requests against it
    api = [(prefix + (route_regex(r.path) if r.path != "/" else "/?"), r.handler, {"route": r}) for r in ROUTES]
    return [
        (prefix + "/openapi.json", OpenAPIHandler),
        (prefix + "/health", HealthHandler),
        (prefix + "/metrics", MetricsHandler),  # Prometheus text, not JSON: api/metrics.py
        *api,
        (service_prefix + "oauth_callback", HubOAuthCallbackHandler),
        # JOB6: a job's ports and TensorBoards (docs/api.md "Endpoints"); not in ROUTES: not JSON, any method
        (service_prefix + "endpoints/.*", EndpointHandler),
        *page_routes(service_prefix),
        (prefix + "/(.*)", NotFoundHandler),
    ]
