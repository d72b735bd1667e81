"""Server-side SVG line charts: a pure function from time series to an SVG string.

No script and no style attribute (the pages' Content-Security-Policy forbids both): colours are SVG
presentation attributes, and the chart carries a <title> and a <desc> with the latest values for
screen readers.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence

from .html import Safe, el, join

Point = tuple[float, float]  # (epoch seconds, value)

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value`` (1 for nothing)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    base = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * base >= value - 1e-12:
            return float(step * base)
    return float(10 * base)


def downsample(points: Sequence[Point], max_points: int) -> list[Point]:
    """At most ``max_points`` points: equal time buckets keep their highest value (peaks stay visible)."""
    pts = sorted(points)
    if len(pts) <= max_points or max_points < 2:
        return list(pts)
    t0, t1 = pts[0][0], pts[-1][0]
    width = (t1 - t0) / max_points or 1.0
    buckets: dict[int, Point] = {}
    for t, y in pts:
        b = min(max_points - 1, int((t - t0) / width))
        if b not in buckets or y > buckets[b][1]:
            buckets[b] = (t, y)
    return [buckets[b] for b in sorted(buckets)]


def _time_label(t: float, span: float) -> str:
    d = dt.datetime.fromtimestamp(t, dt.timezone.utc)
    return d.strftime("%H:%M:%S" if span < 600 else "%H:%M" if span <= 86400 else "%m-%d %H:%M")


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.2g}"


def line_chart(series: Mapping[str, Sequence[Point]], *, title: str, y_label: str = "", chart_id: str = "chart",
               width: int = 640, height: int = 220, max_series: int = 8, max_points: int = 300) -> Safe:
    """One SVG with a line per series (at most ``max_series``, the largest first), a time axis in UTC,
    a y axis from 0 and a legend. Series names and the title are escaped."""
    named = {name: downsample(pts, max_points) for name, pts in series.items() if pts}
    if len(named) > max_series:  # keep the series that matter most: the highest peaks
        keep = sorted(named, key=lambda n: (-max(y for _, y in named[n]), n))[:max_series]
        named = {n: named[n] for n in sorted(keep)}
    title_id = f"{chart_id}-title"
    head = el("title", title, id=title_id)
    frame = dict(xmlns="http://www.w3.org/2000/svg", viewBox=f"0 0 {width} {height}", width=width, height=height,
                 role="img", aria_labelledby=title_id, id=chart_id, class_="ti-chart")
    if not named:
        return el("svg", head, el("desc", "no samples yet"),
                  el("text", "no samples yet", x=width // 2, y=height // 2, text_anchor="middle", fill="#555"),
                  **frame)
    left, right, top, bottom = 48, 12, 12, 40
    legend_rows = math.ceil(len(named) / 3)
    bottom += 16 * legend_rows
    plot_w, plot_h = width - left - right, height - top - bottom
    if plot_h < 40:  # a taller picture rather than a squashed plot
        height += 40 - plot_h
        plot_h = 40
        frame.update(viewBox=f"0 0 {width} {height}", height=height)
    ts = [t for pts in named.values() for t, _ in pts]
    t0, t1 = min(ts), max(ts)
    span = t1 - t0 or 60.0
    y_max = nice_ceiling(max(y for pts in named.values() for _, y in pts))

    def x(t: float) -> float:
        return left + (t - t0) / span * plot_w

    def y(v: float) -> float:
        return top + plot_h - v / y_max * plot_h

    parts = [head]
    latest = "; ".join(f"{n}: {_num(p[-1][1])}" for n, p in named.items())
    parts.append(el("desc", f"{title}, {_time_label(t0, span)} to {_time_label(t1, span)} UTC. Latest: {latest}"))
    lead = round(y_max / 10 ** math.floor(math.log10(y_max)))
    n_ticks = 4 if lead == 2 else 5  # steps of 1, 2 or 5 times a power of ten
    for i in range(n_ticks + 1):  # horizontal grid and y ticks
        v = y_max * i / n_ticks
        yy = round(y(v), 1)
        parts.append(el("line", x1=left, x2=left + plot_w, y1=yy, y2=yy, stroke="#ddd", stroke_width=1))
        parts.append(el("text", _num(v), x=left - 4, y=yy + 4, text_anchor="end", font_size=11, fill="#333"))
    for i in range(3):  # time ticks: start, middle, end
        t = t0 + span * i / 2
        parts.append(el("text", _time_label(t, span), x=round(x(t), 1), y=top + plot_h + 14,
                        text_anchor=("start", "middle", "end")[i], font_size=11, fill="#333"))
    parts.append(el("line", x1=left, x2=left, y1=top, y2=top + plot_h, stroke="#333", stroke_width=1))
    parts.append(el("line", x1=left, x2=left + plot_w, y1=top + plot_h, y2=top + plot_h, stroke="#333",
                    stroke_width=1))
    if y_label:
        parts.append(el("text", y_label, x=12, y=top + plot_h / 2, font_size=11, fill="#333", text_anchor="middle",
                        transform=f"rotate(-90 12 {top + plot_h / 2:.1f})"))
    for i, (name, pts) in enumerate(named.items()):
        color = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        parts.append(el("polyline", el("title", name), points=coords, fill="none", stroke=color, stroke_width=2,
                        class_="series", data_series=name))
        lx = left + (i % 3) * (plot_w // 3)
        ly = top + plot_h + 32 + (i // 3) * 16
        parts.append(el("rect", x=lx, y=ly - 9, width=12, height=4, fill=color))
        parts.append(el("text", name, x=lx + 16, y=ly - 4, font_size=11, fill="#333"))
    return Safe(el("svg", join(parts), **frame))


def esc_id(text: str) -> str:
    """An id made from free text (pool names, users): letters, digits and dashes only."""
    return "".join(c if c.isalnum() else "-" for c in text).strip("-") or "x"

