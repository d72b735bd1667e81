"""Device types on Kubernetes (SPEC RES1, RES4): what each TiHub device type is on the cluster.

An admin maps a device type (the value of the node's device-type label, what plans name: "nvidia-a100",
"ascend910") to the extended resource its device plugin advertises, the node selector and tolerations of its
nodes, the device counts one instance may take and the devices per node. Types not listed use the backend's
single ``device_resource`` and no extra selector (the behaviour before device types were configurable).

Pure: the config is checked once, at start, into frozen ``DeviceType`` values; every error names the type and the
key, so that a wrong map never reaches a pod.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEYS = ("resource", "node_selector", "tolerations", "counts", "per_node")
TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")
# an extended resource: a domain prefix and a name (kubernetes.io/... ones are not device plugins')
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
MAX_COUNT = 64  # the most devices one instance may ask for (domain.validation.device_count's bound)

HELP = """Per device type, how its devices appear on the cluster (SPEC RES1, RES4):
{TYPE: {"resource": EXTENDED RESOURCE, "node_selector": {LABEL: VALUE}, "tolerations": [TOLERATION],
"counts": [ALLOWED DEVICES PER INSTANCE], "per_node": DEVICES PER NODE}}, every key but resource optional. TYPE is
the node's device-type label value, as plans name it. Example:
{"nvidia-a100": {"resource": "nvidia.com/gpu", "node_selector": {"kubernetes.io/arch": "amd64"}},
 "ascend910": {"resource": "huawei.com/Ascend910", "node_selector": {"kubernetes.io/arch": "arm64"},
 "tolerations": [{"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}],
 "counts": [0, 1, 2, 4, 8], "per_node": 8}}.
Pods of a type request its resource, carry its node selector (with TiHub's pool and node pinning) and tolerations
(plus one for the resource itself); a node's devices are its allocatable of its type's resource. counts joins
TiService.device_count_rules (plans and submissions are refused otherwise); per_node makes a distributed job of
the type take whole nodes: each instance per_node devices, nodes x per_node in all. Types not listed use
device_resource and the device-type label alone."""


@dataclass(frozen=True)
class DeviceType:
    resource: str
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()
    counts: tuple[int, ...] | None = None  # None: any count
    per_node: int = 0  # 0: distributed jobs of the type need not take whole nodes

    @property
    def selector(self) -> dict[str, str]:
        return dict(self.node_selector)


def _err(dtype: str, key: str, why: str) -> ValueError:
    return ValueError(f"device_types[{dtype!r}].{key}: {why}")


def parse_one(dtype: Any, raw: Any) -> DeviceType:
    if not isinstance(dtype, str) or not dtype or not _LABEL_VALUE.match(dtype):
        raise ValueError(f"device_types: {dtype!r} is not a device type (a node label value: letters, digits, "
                         "'-', '_', '.', at most 63)")
    if dtype == "cpu":
        raise ValueError("device_types['cpu']: 'cpu' means no devices; it has no resource")
    if not isinstance(raw, Mapping):
        raise ValueError(f"device_types[{dtype!r}]: must be a mapping with keys {', '.join(KEYS)}")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise _err(dtype, unknown[0], f"unknown key (known: {', '.join(KEYS)})")
    resource = raw.get("resource")
    if not isinstance(resource, str) or not _RESOURCE.match(resource):
        raise _err(dtype, "resource", f"{resource!r} is not an extended resource name such as nvidia.com/gpu")
    selector = raw.get("node_selector") or {}
    if not isinstance(selector, Mapping):
        raise _err(dtype, "node_selector", "must be a mapping of node label to value")
    for k, val in selector.items():
        if not isinstance(k, str) or not _LABEL_KEY.match(k):
            raise _err(dtype, "node_selector", f"{k!r} is not a label key")
        if not isinstance(val, str) or not _LABEL_VALUE.match(val):
            raise _err(dtype, "node_selector", f"{val!r} (for {k}) is not a label value")
    tolerations = raw.get("tolerations") or []
    if not isinstance(tolerations, list):
        raise _err(dtype, "tolerations", "must be a list of tolerations")
    for i, t in enumerate(tolerations):
        if not isinstance(t, Mapping) or set(t) - set(TOLERATION_KEYS):
            raise _err(dtype, f"tolerations[{i}]", f"a toleration has only the keys {', '.join(TOLERATION_KEYS)}")
        if t.get("operator", "Equal") not in ("Equal", "Exists"):
            raise _err(dtype, f"tolerations[{i}].operator", "must be Equal or Exists")
        if t.get("effect", "") not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise _err(dtype, f"tolerations[{i}].effect", "must be NoSchedule, PreferNoSchedule or NoExecute")
    counts = raw.get("counts")
    if counts is not None:
        if (not isinstance(counts, list) or not counts
                or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_COUNT for n in counts)):
            raise _err(dtype, "counts",
                       f"must be a non-empty list of device counts 0-{MAX_COUNT}, e.g. [0, 1, 2, 4, 8]")
        counts = tuple(sorted(set(counts)))
    per_node = raw.get("per_node", 0)
    if not isinstance(per_node, int) or isinstance(per_node, bool) or not 0 <= per_node <= MAX_COUNT:
        raise _err(dtype, "per_node", f"must be a device count 0-{MAX_COUNT} (0: no whole-node rule)")
    if per_node and counts is not None and per_node not in counts:
        raise _err(dtype, "per_node", f"{per_node} is not one of counts {list(counts)}: a whole node could not be "
                                      "asked for")
    return DeviceType(resource, tuple(sorted(selector.items())), tuple(dict(t) for t in tolerations), counts,
                      per_node)


def parse(raw: Mapping[str, Any]) -> dict[str, DeviceType]:
    """The checked map; ValueError naming the type and key of the first problem."""
    if not isinstance(raw, Mapping):
        raise ValueError("device_types: must be a mapping of device type to its settings")
    return {dtype: parse_one(dtype, cfg) for dtype, cfg in raw.items()}


def checked(raw: Any, owner: str) -> Any:
    """A traitlets validator's body for ``device_types`` (KubernetesBackend, TiKubeSpawner): the map as given, or
    a TraitError naming ``owner``'s trait -- at config load, never found later by a pod that does not schedule."""
    from traitlets import TraitError

    try:
        parse(raw)
    except ValueError as e:
        raise TraitError(f"{owner}.{e}") from None
    return raw


def count_rules(types: Mapping[str, DeviceType]) -> dict[str, list[int]]:
    """RES4: the types' allowed counts, in TiService.device_count_rules' shape."""
    return {t: list(d.counts) for t, d in types.items() if d.counts is not None}


def per_node_rules(types: Mapping[str, DeviceType]) -> dict[str, int]:
    return {t: d.per_node for t, d in types.items() if d.per_node}


def resource_of(types: Mapping[str, DeviceType], default: str, device_type: str) -> str:
    d = types.get(device_type)
    return d.resource if d is not None else default


def node_type(labels: Mapping[str, str], allocatable: Mapping[str, Any], types: Mapping[str, DeviceType],
              type_label: str, has) -> str:
    """A node's device type: its device-type label; without one, the single configured type whose resource the
    node offers (``has(allocatable, resource)``) and whose node selector its labels match; '' when none or
    several do (then the node offers no devices: label it)."""
    if labels.get(type_label):
        return labels[type_label]
    found = [t for t, d in types.items()
             if has(allocatable, d.resource) and all(labels.get(k) == val for k, val in d.node_selector)]
    return found[0] if len(found) == 1 else ""
