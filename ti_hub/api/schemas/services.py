"""Schemas of the routes the hub's own services call: workspace admission (the spawner, WS1-WS5) and the SSH
gateway's look-ups (DEV4), and the ssh command users copy."""

from __future__ import annotations

from ..contract import Param
from .account import FORM_IMAGE, IMAGE_NOTE
from .common import (BOOL, COUNT, ID, INT, NAME, STR, TEXT, answer, array, integer, items_of, nullable, obj,
                     string, text)
from .jobs import DETAIL_ONLY, ENV, IMAGE_REF, JOB_FIELDS, PORTS, SPEC_FIELDS, VOLUMES
from .resources import PLAN, VOLUME

IMAGE_OR_NONE = {**IMAGE_REF, "minLength": 0, "pattern": IMAGE_REF["pattern"][:-1] + "?$",
                 "description": IMAGE_REF["description"] + "; empty: the platform's default"}
WORKSPACE_OPTIONS = obj({"name": NAME, "display_name": nullable(text(255)), "description": nullable(TEXT),
                         "plan": SPEC_FIELDS["plan"], "image": nullable(IMAGE_OR_NONE),
                         "volumes": VOLUMES, "env": nullable(ENV), "jupyter": BOOL, "ssh": BOOL, "ports": PORTS,
                         "credential": SPEC_FIELDS["credential"],
                         "vc": {**NAME, "description": "the virtual cluster chosen in the form (it becomes the "
                                                       "owner's current VC; the plan must be one of its plans)"}},
                        title="WorkspaceOptions", description="what the spawn form chose (WS1)")
# the owner's hub scopes, as the spawner reads them: honoured only from the spawner (ops/workspaces.owner_actor)
OWNER_SCOPES = array(string(1024), maxItems=4096, description="the owner's hub scopes (sent by the spawner)")
ADMISSION_WAIT = integer(0, 60, "whole seconds to hold the answer while the workspace is queued: it comes as "
                                "soon as the workspace leaves the queue (a long poll); 0, the default: at once")
ADMIT = obj({"groups": nullable(array(string(255))), "options": nullable(WORKSPACE_OPTIONS),
             "scopes": nullable(OWNER_SCOPES), "wait": nullable(ADMISSION_WAIT)},
            description="the owner's groups and hub scopes, the options of the spawn form, and how long to wait "
                        "for the admission")
WORKSPACE_QUERY = {"wait": Param(ADMISSION_WAIT, "seconds to wait for the admission of a queued workspace")}
RUNNING = obj({"state": nullable({"type": "object", "description": "where the workspace runs (backend state)"})})
STOPPED = obj({"reason": nullable(string(500))})
MOUNT_SOURCE = answer({"source": STR, "kind": STR, "mount_path": STR, "read_only": BOOL, "claim": STR})
WORKSPACE = answer({**JOB_FIELDS, "jupyter": BOOL, "rdma": BOOL, "unix_uid": nullable(INT),
                    "mounts": array(MOUNT_SOURCE)},
                   DETAIL_ONLY, title="Workspace")
# WS6: a renewed lease, with the idle alert it closed (ops/idle.py renew; ops/alerts.py render)
LEASE = answer({"id": ID, "owner": STR, "name": STR, "status": STR, "renewed_at": STR, "devices": array(STR),
                "cleared_alert": nullable({"type": "object", "description": "the idle alert this renewal closed"})},
               title="Lease")
RESET = answer({"id": ID, "owner": STR, "name": STR, "status": STR, "reset_at": STR,
                "removed": array(STR, description="what was removed, in words (empty: nothing of the workspace's "
                                 "own was left)")}, title="WorkspaceReset")
# the owner's registry credentials, to pull the image with: no username, never a password
FORM_CREDENTIAL = answer({"id": ID, "name": STR, "registry": STR}, title="FormCredential")
FORM_CHOICES = answer({"plans": array(PLAN), "images": array(FORM_IMAGE), "volumes": array(VOLUME),
                       "credentials": array(FORM_CREDENTIAL), "image_note": IMAGE_NOTE,
                       "vc": answer({"vc": STR, "usable": array(STR)})}, title="FormChoices")
GROUPS_QUERY = {"groups": Param(string(4096), "the owner's groups, comma-separated"),
                "scopes": Param(string(4096), "the owner's hub scopes, comma-separated (sent by the spawner)")}

SSH_COMMAND = answer({"command": STR, "login": STR, "host": STR, "port": integer(1, 65535)}, title="SSHCommand")
SSH_COMMAND_QUERY = {"name": Param(NAME, "a workspace or job of mine"),
                     "instance": Param(integer(0, 99_999), "a job's instance")}
SSH_KEYS = items_of(answer({"name": STR, "key": STR, "fingerprint": STR}))
SSH_TARGET = answer({"id": ID, "owner": STR, "name": STR, "kind": STR, "status": STR, "reason": STR, "ssh": BOOL,
                     "instances": COUNT, "backend_state": nullable({"type": "object"})}, title="SSHTarget")
SSH_TARGETS = items_of(SSH_TARGET)
TARGETS_QUERY = {"name": Param(NAME, "one workspace or job (default: every workspace)")}
