"""The Alerts page (MON2, ADM3; custom:ti:vc:manage): the machine alert rules with forms to change, enable,
disable and delete them and where each fires now; the built-in rules about jobs and workspaces (job-overrun,
job-wait, workspace-idle: ops/jobrules.py) with forms to change and enable them; the cordoned machines with an
Uncordon button."""

from __future__ import annotations

from tornado import web

from ..health.alerting import platform_cordon
from ..domain.healthrules import METRICS, OPS
from ..ops import alertrules, cordons, jobrules
from ..ops.alerts import SEVERITIES
from .base import PAGE, PageHandler
from .html import Safe, checkbox, el, field, join, post_form, select, table


def _hidden(name: str, value) -> Safe:
    return el("input", type="hidden", name=name, value=value)


class AlertsPageHandler(PageHandler):
    page = PAGE["alerts"]
    actions = {"create": "do_create", "change": "do_change", "enable": "do_enable", "disable": "do_disable",
               "delete": "do_delete", "cordon": "do_cordon", "uncordon": "do_uncordon"}

    @web.authenticated
    async def get(self):
        rules = await self.ti.db(alertrules.list_rules, self.actor, readonly=True)
        cordoned = await self.ti.db(cordons.list_cordons, self.actor, readonly=True)
        url = self.url("alerts")
        rows = []
        for r in (r for r in rules["items"] if not r["builtin"]):
            fid = f"rule-{r['id']}"
            firing = [el("li", f["machine"], " since ", f["fired_at"], ": ", f["subject"],
                         f" ({f['figures']['cordon']})" if f["figures"].get("cordon") else "")
                      for f in r["firing"]]
            change = post_form(url, self.xsrf, [
                _hidden("action", "change"), _hidden("rule", r["id"]),
                field("Threshold", "threshold", type="number", value=f"{r['threshold']:g}", step="any",
                      form_id=fid),
                field("Percent", "percent", type="number", value=f"{r['percent']:g}", step="any", form_id=fid),
                field("Step (s)", "step", type="number", value=r["step"], min=1, form_id=fid),
                field("Interval (s)", "interval", type="number", value=r["interval"], min=1, form_id=fid),
                checkbox("Alert job owners", "notify_owners", checked=r["notify_owners"], form_id=fid),
                checkbox("Cordon", "cordon", checked=r["cordon"], form_id=fid),
            ], "Change", form_id=f"{fid}-change", inline=True, label=f"change rule {r['name']}")
            toggle = post_form(url, self.xsrf, [_hidden("action", "disable" if r["enabled"] else "enable"),
                                                _hidden("rule", r["id"])],
                               "Disable" if r["enabled"] else "Enable", form_id=f"{fid}-toggle", inline=True,
                               label=f"{'disable' if r['enabled'] else 'enable'} rule {r['name']}")
            delete = post_form(url, self.xsrf, [_hidden("action", "delete"), _hidden("rule", r["id"])], "Delete",
                               form_id=f"{fid}-delete", inline=True, button_class="danger",
                               label=f"delete rule {r['name']}")
            rows.append([el("span", r["name"], title=r["description"]), r["metric"],
                         f"{r['op']} {r['threshold']:g}", f"{r['step']} s", f"{r['interval']} s",
                         f"{r['percent']:g} %", r["severity"], "yes" if r["enabled"] else "no",
                         el("ul", *firing, class_="firing") if firing else "nowhere",
                         join([change, toggle, delete])])
        crows = [[c["machine"], c["at"], c["by"], c["rule"] or "-", c["reason"],
                  post_form(url, self.xsrf, [_hidden("action", "uncordon"), _hidden("machine", c["machine"])],
                            "Uncordon", form_id=f"uncordon-{i}", inline=True,
                            label=f"uncordon machine {c['machine']}")]
                 for i, c in enumerate(cordoned["items"])]
        dry = self.ti.alert_rules.cordon_dry_run
        body = [
            el("p", "Each rule is evaluated every step seconds over the last interval seconds of health samples, "
                    "per machine; it fires when at least percent % of that machine's samples match. Alerts go to "
                    "the admins, and to the owners of the jobs on the machine where the rule says so."),
            el("p", "Automatic cordoning: ",
               el("b", "dry run" if dry else "on"),
               " (AlertRules.cordon_dry_run = ", str(dry), "): " +
               ("a cordon rule that fires only says the machine would be cordoned." if dry else
                "a cordon rule that fires takes the machine out of scheduling until an admin uncordons it."),
               id="cordon-mode"),
            table("alert-rules-table", ["rule", "metric", "condition", "step", "interval", "percent", "severity",
                                        "enabled", "fires now on", "change"], rows, "No alert rules.",
                  caption="Alert rules"),
            el("h2", "Jobs and workspaces"),
            el("p", "Built-in rules: each exists once and cannot be deleted; disable it instead. Their alerts go "
                    "to the admins, and to the job's or workspace's owner where the rule says so. A job whose "
                    "on_overrun is 'stop' is stopped at its declared duration whatever job-overrun says."),
            table("job-rules-table", ["rule", "what", "threshold", "idle time", "grace", "severity", "enabled",
                                      "alerts owners", "fires now on", "change"],
                  [self.builtin_row(url, r) for r in rules["items"] if r["builtin"]], "No built-in rules.",
                  caption="Jobs and workspaces"),
            el("h2", "Define a rule"), self.create_form(url),
            el("h2", "Cordoned machines"),
            el("p", "A cordoned machine takes no new work; what runs there keeps running."),
            table("cordoned-table", ["machine", "since (UTC)", "by", "rule", "reason", "action"], crows,
                  "No machine is cordoned.", caption="Cordoned machines"),
            self.cordon_form(url),
        ]
        self.show(join(body))

    def builtin_row(self, url: str, r: dict) -> list:
        """A built-in rule's row: its values and a form with what may change (ops/jobrules.py CHANGEABLE)."""
        fid = f"rule-{r['id']}"
        idle = r["metric"] == jobrules.IDLE
        unit = "% GPU utilization" if idle else "s late"
        fields = [_hidden("action", "change"), _hidden("rule", r["id"]), _hidden("builtin", "1"),
                  field(f"Threshold ({'%' if idle else 's'})", "threshold", type="number",
                        value=f"{r['threshold']:g}", step="any", min=0, form_id=fid)]
        if idle:
            fields += [field("Idle time (s)", "interval", type="number", value=r["interval"], min=1, form_id=fid),
                       field("Grace (s)", "grace", type="number", value=r["grace"] or 0, min=0, form_id=fid),
                       field("CPU threshold (% of the plan's CPUs)", "cpu_threshold", type="number",
                             value=f"{r['cpu_threshold'] or 0:g}", step="any", min=0, max=100, form_id=fid)]
        fields += [select("Severity", "severity", [(s, s) for s in SEVERITIES], selected=r["severity"],
                          form_id=fid),
                   checkbox("Alert owners", "notify_owners", checked=r["notify_owners"], form_id=fid)]
        change = post_form(url, self.xsrf, fields, "Change", form_id=f"{fid}-change", inline=True,
                           label=f"change rule {r['name']}")
        toggle = post_form(url, self.xsrf, [_hidden("action", "disable" if r["enabled"] else "enable"),
                                            _hidden("rule", r["id"])],
                           "Disable" if r["enabled"] else "Enable", form_id=f"{fid}-toggle", inline=True,
                           label=f"{'disable' if r['enabled'] else 'enable'} rule {r['name']}")
        firing = [el("li", f["fired_at"], ": ", f["subject"]) for f in r["firing"]]
        return [el("span", r["name"], title=r["description"]), jobrules.METRICS[r["metric"]],
                f"{r['threshold']:g} {unit}" + (f", CPU {r['cpu_threshold']:g} %" if idle and r["cpu_threshold"]
                                                  is not None else ""), f"{r['interval']} s" if idle else "-",
                f"{r['grace']} s" if idle and r["grace"] is not None else "-", r["severity"],
                "yes" if r["enabled"] else "no", "yes" if r["notify_owners"] else "no",
                el("ul", *firing, class_="firing") if firing else "nowhere", join([change, toggle])]

    def create_form(self, url: str) -> Safe:
        f = "rule-form"
        return post_form(url, self.xsrf, [
            _hidden("action", "create"),
            field("Name", "name", required=True, form_id=f, hint="4-63 letters, digits, - and _"),
            field("Description", "description", form_id=f),
            select("Metric", "metric", [(k, f"{k}: {d}") for k, d in METRICS.items()], form_id=f),
            select("Operator", "op", [(o, o) for o in OPS], form_id=f),
            field("Threshold", "threshold", type="number", step="any", required=True, form_id=f),
            field("Step (s)", "step", type="number", value=60, min=1, form_id=f),
            field("Interval (s)", "interval", type="number", value=300, min=1, form_id=f),
            field("Percent", "percent", type="number", value=100, step="any", form_id=f),
            select("Severity", "severity", [(s, s) for s in SEVERITIES], selected="warning", form_id=f),
            checkbox("Alert job owners", "notify_owners", form_id=f),
            checkbox("Cordon the machine", "cordon", form_id=f),
        ], "Create rule", form_id=f)

    def cordon_form(self, url: str) -> Safe:
        f = "cordon-form"
        machines = sorted(cordons.known_machines(self.ti.ops_settings.nodes or []))
        return post_form(url, self.xsrf, [
            _hidden("action", "cordon"),
            select("Machine", "machine", [(m, m) for m in machines], form_id=f),
            field("Reason", "reason", form_id=f),
        ], "Cordon", form_id=f, label="cordon a machine")

    def _numbers(self, data: dict, ints=("step", "interval", "grace"), floats=("threshold", "percent", "cpu_threshold")) -> dict:
        for k in ints:
            val = self.form_int(k, False)
            if val is not None:
                data[k] = val
        for k in floats:
            val = self.form_float(k, False)
            if val is not None:
                data[k] = val
        return data

    async def do_create(self) -> str:
        data = self._numbers({
            "name": self.form_text("name"), "description": self.form_text("description"),
            "metric": self.form_text("metric"), "op": self.form_text("op"), "severity": self.form_text("severity"),
            "notify_owners": bool(self.get_body_argument("notify_owners", "")),
            "cordon": bool(self.get_body_argument("cordon", ""))})
        out = await self.ti.db(alertrules.create, self.actor, data, self.ti.health.window)
        return f"Alert rule {out['name']} created."

    async def _change(self, data: dict) -> str:
        out = await self.ti.db(alertrules.update, self.actor, self.form_int("rule"), data, self.ti.health.window)
        if out["builtin"]:  # the leader re-reads it within AlertRules.builtin_ttl; at once if it is this process
            self.ti.alert_rules.builtin_cache.invalidate()
        return f"Alert rule {out['name']} " + ({True: "enabled.", False: "disabled."}.get(data.get("enabled"))
                                               if set(data) == {"enabled"} else "changed.")

    async def do_change(self) -> str:
        if self.get_body_argument("builtin", ""):  # a built-in rule: no cordon, percent nor step to send
            return await self._change(self._numbers({
                "severity": self.form_text("severity"),
                "notify_owners": bool(self.get_body_argument("notify_owners", ""))}, floats=("threshold",)))
        return await self._change(self._numbers({
            "notify_owners": bool(self.get_body_argument("notify_owners", "")),
            "cordon": bool(self.get_body_argument("cordon", ""))}))

    async def do_enable(self) -> str:
        return await self._change({"enabled": True})

    async def do_disable(self) -> str:
        return await self._change({"enabled": False})

    async def do_delete(self) -> str:
        await self.ti.db(alertrules.delete, self.actor, self.form_int("rule"))
        return "Alert rule deleted; its open alerts are closed."

    async def do_cordon(self) -> str:
        row, changed = await self.ti.db(cordons.cordon, self.actor, self.form_text("machine"),
                                        {"reason": self.form_text("reason")}, list(self.ti.ops_settings.nodes or []))
        if changed:
            await platform_cordon(self.ti, row["machine"], False)
        return f"Machine {row['machine']} cordoned: no new work is placed there."

    async def do_uncordon(self) -> str:
        row, changed = await self.ti.db(cordons.uncordon, self.actor, self.form_text("machine"),
                                        list(self.ti.ops_settings.nodes or []))
        if changed:
            await platform_cordon(self.ti, row["machine"], True)
        return f"Machine {row['machine']} is back in scheduling."
