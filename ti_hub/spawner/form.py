"""The spawn form (pure): offers only the plans, images, volumes and registry credentials this user may use."""

from __future__ import annotations

from html import escape
from typing import Any

from ..domain.errors import ValidationError
from . import names


def name_problem(name: str) -> str | None:
    """A plain sentence when ``name`` cannot name a workspace (the server name is the workspace's name; a server
    the hub stored before the rule was checked up front may still have such a name)."""
    return names.problem(name)


def render_form(options: dict[str, Any], name: str = "default", home_url: str = "/hub/home",
                without_jupyter: bool = False) -> str:
    """``without_jupyter``: the spawner can start SSH-only workspaces (offer to leave Jupyter out)."""
    problem = name_problem(name)
    rows = [f'<p id="ti-ws-name">Workspace name: <strong>{escape(name)}</strong></p>']
    if problem:
        # said before Start, and Start is disabled: the name is the server's, chosen on the home page
        rows.append(f'<p class="alert alert-danger" id="ti-name-error" role="alert">{escape(problem)} '
                    f'<a href="{escape(home_url)}">Back to the home page</a> to add one with another name.</p>'
                    "<script>document.addEventListener('DOMContentLoaded', () => document.querySelectorAll("
                    "'#spawn_form [type=submit]').forEach(b => { b.disabled = true; }));</script>")
    plans = options.get("plans", [])
    if not plans:
        rows.append('<p class="alert alert-warning">No plan can run a workspace right now. '
                    'Ask an administrator to define a plan for workspaces.</p>')
        return "\n".join(rows)
    rows.append('<div class="form-group mb-3"><label class="form-label" for="ti-desc">Description</label>'
                '<input class="form-control" id="ti-desc" name="display_name" '
                'placeholder="what this workspace is for"></div>')
    # RES2: the virtual cluster to work in (the owner's current one first); plans are grouped by VC below
    vc = options.get("vc") or {}
    usable, current = vc.get("usable") or [], vc.get("vc")
    if len(usable) > 1:
        rows.append('<div class="form-group mb-3"><label class="form-label" for="ti-vc">Virtual cluster</label>'
                    '<select class="form-select" id="ti-vc" name="vc">')
        for name in usable:
            sel = " selected" if name == current else ""
            rows.append(f'<option value="{escape(name)}"{sel}>{escape(name)}</option>')
        rows.append('</select><p class="form-text">It becomes your current VC; pick a plan of it below.</p></div>')
    # form-select, not form-control: Bootstrap 5 draws a form-control select as a text box (no arrow)
    rows.append('<div class="form-group mb-3"><label class="form-label" for="ti-plan">Plan</label>'
                '<select class="form-select" id="ti-plan" name="plan">')
    pools = sorted({p.get("pool", "default") for p in plans}, key=lambda x: (x != current, x))
    for pool in pools:
        if len(pools) > 1:
            rows.append(f'<optgroup label="{escape(pool)}">')
        for p in plans:
            if p.get("pool", "default") != pool:
                continue
            label = f"{p['name']}: {p['device_count']} x {p['device_type']}, {p['cpu']:g} CPU, " \
                    f"{p['memory_mib']} MiB" if p["device_count"] else \
                f"{p['name']}: CPU only, {p['cpu']:g} CPU, {p['memory_mib']} MiB"
            rows.append(f'<option value="{escape(p["name"])}">{escape(label)}</option>')
        if len(pools) > 1:
            rows.append("</optgroup>")
    rows.append("</select></div>")
    rows.append('<div class="form-group mb-3"><label class="form-label" for="ti-image">Image</label>'
                '<select class="form-select" id="ti-image" name="image"><option value="">(default)</option>')
    for img in options.get("images", []):
        rows.append(f'<option value="{escape(img["name"])}">{escape(img["name"])} ({escape(img["address"])})'
                    "</option>")
    rows.append("</select>")
    if options.get("image_note"):
        rows.append(f'<p class="form-text" id="ti-image-note">{escape(options["image_note"])}</p>')
    rows.append("</div>")
    creds = options.get("credentials", [])
    if creds:  # the image's registry login (a private image); "none" pulls it anonymously
        rows.append('<div class="form-group mb-3"><label class="form-label" for="ti-credential">Registry '
                    'credential</label><select class="form-select" id="ti-credential" name="credential">'
                    '<option value="">(none)</option>')
        for c in creds:
            rows.append(f'<option value="{escape(c["name"])}">{escape(c["name"])} ({escape(c["registry"])})'
                        "</option>")
        rows.append("</select></div>")
    rows.append('<fieldset class="mb-3" id="ti-volumes"><legend>Volumes (mounted at /mnt/NAME)</legend>')
    vols = options.get("volumes", [])
    for vol in vols:
        ident = escape(f"{vol['owner']}/{vol['name']}")
        ro = " (read-only)" if vol.get("access") == "ro" else ""
        rows.append(f'<div class="checkbox"><label><input type="checkbox" name="volumes" value="{ident}"> '
                    f'{ident} [{escape(vol["kind"])}, {vol["capacity_gib"]} GiB]{ro}</label></div>')
    if not vols:
        rows.append('<p class="form-text" id="ti-volumes-empty">You have no volumes yet, and none is shared with '
                    "you. Create one in JupyterLab's Storage panel (in any running workspace) or with "
                    "<code>ti volume create NAME --kind filesystem --size 10</code>; it is offered here "
                    "the next time you start a workspace.</p>")
    rows.append("</fieldset>")
    rows.append('<div class="form-group"><label for="ti-env">Environment (NAME=value, one per line)</label>'
                '<textarea class="form-control" id="ti-env" name="env" rows="3"></textarea></div>')
    # a hidden "off" first: an unticked checkbox sends nothing, and nothing must not mean "no SSH" for API starts
    rows.append('<input type="hidden" name="ssh" value="off"><div class="checkbox"><label><input type="checkbox" '
                'name="ssh" value="on" checked> SSH access (with your keys from the account page)</label></div>')
    if without_jupyter:
        rows.append('<input type="hidden" name="jupyter" value="off"><div class="checkbox"><label><input '
                    'type="checkbox" name="jupyter" value="on" checked> Jupyter server (untick for a workspace '
                    'reached by SSH only)</label></div>')
    rows.append('<p class="help-block">Files outside mounted volumes and your home directory are ephemeral: '
                'they are gone when the workspace stops.</p>')
    return "\n".join(rows)


def options_from_form(formdata: dict[str, list[str]]) -> dict[str, Any]:
    def one(key: str) -> str:
        return (formdata.get(key) or [""])[0].strip()

    out: dict[str, Any] = {"plan": one("plan")}
    for key in ("image", "credential", "vc"):
        if one(key):
            out[key] = one(key)
    if one("display_name"):
        out["display_name"] = one("display_name")
    vols = []
    for ref in formdata.get("volumes", []):
        name = ref.split("/", 1)[-1]
        vols.append({"volume": ref, "mount_path": f"/mnt/{name}"})
    if vols:
        out["volumes"] = vols
    env = {}
    for i, line in enumerate(one("env").splitlines(), 1):
        if not line.strip():
            continue
        if "=" not in line:
            raise ValidationError(f"environment line {i} must look like NAME=value", field="env")
        k, _, val = line.partition("=")
        env[k.strip()] = val
    if env:
        out["env"] = env
    # the form sends "off" (hidden) and "on" when ticked; an API start without the field gets the default (on)
    for key in ("ssh", "jupyter"):
        if formdata.get(key):
            out[key] = "on" in formdata[key]
    return out
