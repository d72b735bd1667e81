"""Schemas of virtual clusters (SPEC RES2): VCs, their machines, caps and access; a user's current VC."""

from __future__ import annotations

from .common import (BOOL, COUNT, INT, NAME, STR, TEXT, USERNAME, answer, array, integer, nullable, obj, page_of,
                     string)

CAPS = {"type": "object", "additionalProperties": nullable(integer(0, 1 << 20)),
        "description": "device type -> the most devices of that type one user may hold in this VC at once "
                       "(MaxAvailable); null removes a cap"}
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
NEW_VC = obj({"name": NAME, "description": TEXT, "caps": CAPS}, ["name"], title="NewVirtualCluster")
VC_CHANGE = obj({"name": NAME, "description": TEXT, "caps": CAPS,
                 "draining": {**BOOL, "description": "drain the VC (true) or reopen it (false)"},
                 "open": {**BOOL, "description": "open to all (true), or only to its grantees (false)"},
                 "drain": DRAIN,
                 "cohort": nullable(string(63, 0, "VCs of one cohort lend each other idle devices (borrowed jobs "
                                              "are preempted when the lender's own jobs need them); null or "
                                              "empty: none, no lending")),
                 "lend": {**BOOL, "description": "lend this VC's idle devices to its cohort (default true)"}},
                title="VirtualClusterChange", description="the fields to change; name renames (plans and jobs follow)")
MACHINE_CHANGE = obj({"node": string(255, 1, "a machine (GET /cluster lists them)"),
                      "device_type": string(63, 1, "embedded platform: the device type"),
                      "devices": array(integer(0, 1 << 16), minItems=1,
                                       description="embedded platform: device indices (default: all of the type)"),
                      "remove": {**BOOL, "description": "give them back to default"}, "drain": DRAIN},
                     ["node"], title="VCMachineChange")
ACCESS_CHANGE = obj({"user": USERNAME, "group": string(255, 1, "a hub group"),
                     "remove": {**BOOL, "description": "revoke instead of grant"}, "drain": DRAIN},
                    title="VCAccessChange", description="exactly one of user or group")
CURRENT_VC = answer({"vc": STR, "usable": array(STR)}, title="CurrentVC")
USE_VC = obj({"vc": NAME}, ["vc"], title="UseVC")
