"""The pages' pure builders: escaping, tables and forms, SVG charts, usage samples, the hub's nav template."""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from ti_hub.backends.base import NodeCapacity
from ti_hub.ops.history import sample_rows
from ti_hub.pages.base import PAGES
from ti_hub.pages.charts import downsample, line_chart, nice_ceiling
from ti_hub.pages.html import Safe, attrs, el, esc, field, fmt, join, post_form, table

EVIL = '<script>alert("x")</script>&\''


def test_esc_escapes_text_and_passes_safe_markup():
    assert esc(EVIL) == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#x27;"
    assert esc(None) == "" and esc(0) == "0" and esc(1.5) == "1.5"
    assert esc(Safe("<b>ok</b>")) == "<b>ok</b>"
    assert isinstance(esc("x"), Safe)
    assert esc(esc("<")) == "&lt;"  # escaping is never applied twice


def test_builders_escape_every_value():
    assert fmt("<p>{} {name}</p>", "<i>", name=EVIL) == (
        "<p>&lt;i&gt; &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#x27;</p>")
    assert el("a", EVIL, href='"><script>') == (
        '<a href="&quot;&gt;&lt;script&gt;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#x27;</a>')
    assert attrs({"class_": "x", "aria_label": "y", "checked": True, "hidden": False, "id": None}) == (
        ' class="x" aria-label="y" checked')
    assert join(["<", Safe("<br>")], sep=", ") == "&lt;, <br>"
    assert Safe("<p>") + "<" == "<p>&lt;"
    assert "<script>" not in table("t", ["<h>"], [[EVIL, Safe("<b>ok</b>")]], "none")
    assert "<td><b>ok</b></td>" in table("t", ["h"], [[Safe("<b>ok</b>")]], "none")


def test_table_and_forms_are_accessible():
    t = table("plans-table", ["name", "cpu"], [["a", 1.0], ["b", None]], "nothing", caption="Plans")
    assert t.startswith('<table id="plans-table"') and "<caption>Plans</caption>" in t
    assert '<th scope="col">name</th>' in t and "<td>a</td><td>1</td>" in t and "<td>b</td><td></td>" in t
    assert table("x", ["h"], [], "nothing <here>") == '<p id="x" class="empty"><i>nothing &lt;here&gt;</i></p>'
    f = field("Device type", "device_type", form_id="plan-form", hint="cpu <or> a GPU", required=True)
    assert '<label for="plan-form-device_type">Device type</label>' in f
    assert 'id="plan-form-device_type"' in f and 'aria-describedby="plan-form-device_type-hint"' in f
    assert "cpu &lt;or&gt; a GPU" in f and " required" in f
    form = post_form("/services/ti/plans", "tok\"en", [f], "Create", form_id="plan-form")
    assert form.startswith("<form") and 'method="post"' in form and 'id="plan-form"' in form
    assert '<input type="hidden" name="_xsrf" value="tok&quot;en">' in form
    assert '<button type="submit">Create</button>' in form


def test_nice_ceiling_and_downsample():
    assert [nice_ceiling(v) for v in (0, 0.3, 1, 1.1, 3, 7, 10, 11, 4500)] == [1, 0.5, 1, 2, 5, 10, 10, 20, 5000]
    pts = [(float(t), float(t % 7)) for t in range(1000)]
    small = downsample(pts, 50)
    assert len(small) <= 50 and small == sorted(small)
    assert max(y for _, y in small) == 6  # peaks survive
    assert downsample(pts[:10], 50) == pts[:10]


def _svg(markup: str) -> ET.Element:
    return ET.fromstring(markup)  # well-formed XML, or this raises


def test_line_chart_draws_each_series_escaped_and_well_formed():
    t0 = 1_700_000_000.0
    svg = line_chart({"default/A100": [(t0, 0), (t0 + 60, 2), (t0 + 120, 4)], EVIL: [(t0, 1), (t0 + 120, 1)]},
                     title="Devices <held>", y_label="devices", chart_id="chart-pools")
    root = _svg(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.get("role") == "img" and root.get("aria-labelledby") == "chart-pools-title"
    assert root.find(f"{ns}title").text == "Devices <held>"
    lines = root.findall(f"{ns}polyline")
    assert [p.get("data-series") for p in lines] == ["default/A100", EVIL]
    assert len(lines[0].get("points").split()) == 3
    assert "<script>" not in svg
    ys = [float(p.split(",")[1]) for p in lines[0].get("points").split()]
    assert ys[0] > ys[1] > ys[2]  # higher values are drawn higher up
    desc = root.find(f"{ns}desc").text
    assert "default/A100: 4" in desc and "UTC" in desc


def test_line_chart_without_data_says_so_and_caps_series():
    empty = _svg(line_chart({"a": []}, title="Queue length"))
    assert "no samples yet" in "".join(empty.itertext())
    many = {f"user{i}": [(0.0, float(i)), (60.0, float(i))] for i in range(20)}
    root = _svg(line_chart(many, title="Users", max_series=8))
    names = [p.get("data-series") for p in root.findall("{http://www.w3.org/2000/svg}polyline")]
    assert len(names) == 8 and "user19" in names and "user0" not in names


def test_sample_rows_cover_pools_with_zeros_and_users_with_scores():
    at = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    nodes = [NodeCapacity("n1", "default", {"A100": [0, 1]}, 8, 1024),
             NodeCapacity("n2", "train", {"A100": [0], "T4": [0]}, 8, 1024)]
    active = [("default", "alice", "A100", True, 1, 2), ("default", "bob", "A100", False, 3, 3),
              ("train", "bob", "T4", True, 1, 1), ("default", "carol", "cpu", False, 1, 0)]
    rows = sample_rows(active, {("alice", "A100"): 0.5, ("dave", "A100"): 0.0001, ("erin", "T4"): 0.2}, nodes, at)
    by = {(r["pool"], r["user"], r["device_type"]): (r["devices_held"], r["queued_jobs"], r["usage_score"])
          for r in rows}
    assert by[("default", "", "A100")] == (2, 3, None)
    assert by[("train", "", "A100")] == (0, 0, None)  # idle pools get zeros: no holes in the lines
    assert by[("train", "", "T4")] == (1, 0, None)
    assert by[("default", "", "cpu")] == (0, 1, None)
    assert by[("", "alice", "A100")] == (2, 0, 0.5)
    # no score kept for bob (issue 17, item 26: the queue page's scores table, saved from the same values,
    # has no row for him either): no line of zeros
    assert by[("", "bob", "A100")] == (0, 3, None) and by[("", "bob", "T4")] == (1, 0, None)
    assert by[("", "erin", "T4")] == (0, 0, 0.2)  # a score still decaying keeps its line
    assert ("", "dave", "A100") not in by
    assert all(r["at"] == at for r in rows)


def test_hub_nav_template_links_every_page():
    tpl = (Path(__import__("ti_hub").__file__).parent / "templates" / "page.html").read_text()
    assert '{% extends "templates/page.html" %}' in tpl
    for p in PAGES:
        if p.name:
            assert re.search(r'href="\{\{ ti \}\}' + p.name + '"', tpl), p.name
        if p.scope:
            assert f'"{p.scope}" in parsed_scopes' in tpl, p.scope
