"""Schemas of virtual clusters (SPEC RES2): VCs, their machines, caps and access; a user's current VC."""

from __future__ import annotations

from ...domain import validation as v
from .common import (BOOL, COUNT, FILLED, INT, NAME, STR, TEXT, answer, array, exactly_one, integer, nullable,
                     obj, page_of, string, text)

CAPS = {"type": "object", "additionalProperties": nullable(integer(0, 1 << 20)),
        "propertyNames": {"maxLength": 63, "allOf": [FILLED, {"not": {"enum": ["cpu", "*"]}}],
                          "description": "a device type (caps count devices: not cpu, nor *)"},
        "description": "device type -> the most devices of that type one user may hold in this VC at once "
                       "(MaxAvailable); null removes a cap"}
# a VC's name also labels its nodes on Kubernetes: it begins and ends with a letter or digit (ops/vcs.vc_name)
VC_NAME = string(63, 4, f"{v.NAME_RULE}, beginning and ending with a letter or digit",
                 pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{2,61}[A-Za-z0-9]$")
MACHINE = answer({"node": STR, "device_type": STR, "device": INT, "draining": BOOL, "next_vc": nullable(STR)},
                 title="VCMachine", description="a device of the local machine (embedded), or a whole node "
                                                "(Kubernetes: device_type empty, device -1)")
VC = answer({"name": STR, "description": STR, "caps": {"type": "object", "additionalProperties": COUNT},
             "draining": BOOL, "open": BOOL, "cohort": nullable(STR), "lend": BOOL,
             "access": array(answer({"kind": STR, "name": STR})), "drained_users": array(STR),
             "machines": array(MACHINE), "usable": BOOL,
             "held": {"type": "object", "additionalProperties": COUNT, "description": "devices held now, per type"},
             "moved": array({"type": "object"})},
            ["usable", "held", "moved"], title="VirtualCluster")
VC_PAGE = page_of(VC)
DRAIN = {**BOOL, "description": "apply a change that strands running work: it finishes, nothing new is admitted"}
NEW_VC = obj({"name": VC_NAME, "description": TEXT, "caps": CAPS}, ["name"], title="NewVirtualCluster")
VC_CHANGE = obj({"name": VC_NAME, "description": TEXT, "caps": CAPS,
                 "draining": {**BOOL, "description": "drain the VC (true) or reopen it (false)"},
                 "open": {**BOOL, "description": "open to all (true), or only to its grantees (false)"},
                 "drain": DRAIN,
                 "cohort": nullable(string(63, 0, "VCs of one cohort lend each other idle devices (borrowed jobs "
                                              "are preempted when the lender's own jobs need them); null or "
                                              f"empty: none, no lending; else {v.NAME_RULE}",
                                           pattern=rf"^({v.NAME_PATTERN[1:-1]})?$")),
                 "lend": {**BOOL, "description": "lend this VC's idle devices to its cohort (default true)"}},
                title="VirtualClusterChange", description="the fields to change; name renames (plans and jobs follow)")
MACHINE_CHANGE = obj({"node": text(255, True, "a machine (GET /cluster lists them)"),
                      "device_type": text(63, True, "embedded platform: the device type (default: every device of "
                                                    "the machine)"),
                      "devices": array(integer(0, 1 << 16), minItems=1,
                                       description="embedded platform: device indices of device_type (default: all "
                                                   "of the type)"),
                      "remove": {**BOOL, "description": "give them back to default"}, "drain": DRAIN},
                     ["node"], title="VCMachineChange", dependentRequired={"devices": ["device_type"]},
                     description="a whole machine (node only), or devices of one type on it (embedded platform; "
                                 "on Kubernetes a VC owns whole nodes: 409)")
ACCESS_CHANGE = obj({"user": text(255, True, "a hub user name"), "group": text(255, True, "a hub group"),
                     "remove": {**BOOL, "description": "revoke instead of grant"}, "drain": DRAIN},
                    title="VCAccessChange", description="exactly one of user or group",
                    oneOf=exactly_one("user", "group"))
CURRENT_VC = answer({"vc": STR, "usable": array(STR)}, title="CurrentVC")
USE_VC = obj({"vc": NAME}, ["vc"], title="UseVC")
