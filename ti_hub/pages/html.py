"""Building HTML that is safe by construction: every value is escaped unless it is ``Safe`` markup we built.

The pages never put a value into markup with a plain f-string: they go through ``esc``, ``fmt``, ``el``
or the table and form helpers below, all of which escape whatever is not already ``Safe``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class Safe(str):
    """Markup built by these helpers (or a literal in our code): inserted as is, never escaped again."""

    __slots__ = ()

    def __add__(self, other: Any) -> Safe:
        return Safe(str.__add__(self, esc(other)))


def esc(value: Any) -> Safe:
    """The one escape: None is empty, Safe passes, anything else is text (quotes included, for attributes)."""
    if value is None:
        return Safe("")
    if isinstance(value, Safe):
        return value
    return Safe(html.escape(str(value), quote=True))


def join(parts: Iterable[Any], sep: str = "") -> Safe:
    return Safe(esc(sep).join(esc(p) for p in parts))


def fmt(template: str, *args: Any, **kwargs: Any) -> Safe:
    """``str.format`` on a template of our own with every argument escaped (format numbers before)."""
    return Safe(template.format(*(esc(a) for a in args), **{k: esc(v) for k, v in kwargs.items()}))


def attrs(values: Mapping[str, Any]) -> Safe:
    """` name="value"` pairs: a trailing underscore is dropped (class_), True is a bare attribute,
    False and None leave the attribute out."""
    out = []
    for k, v in values.items():
        name = k.rstrip("_").replace("_", "-")
        if v is None or v is False:
            continue
        out.append(f" {name}" if v is True else f' {name}="{esc(v)}"')
    return Safe("".join(out))


VOID = frozenset({"input", "br", "hr", "img", "meta", "link"})


def el(tag: str, *children: Any, **attributes: Any) -> Safe:
    """One element; children are escaped unless Safe."""
    if tag in VOID:
        return Safe(f"<{tag}{attrs(attributes)}>")
    return Safe(f"<{tag}{attrs(attributes)}>{join(children)}</{tag}>")


def cell(value: Any) -> Any:
    """Table cells: None shows empty, floats without noise."""
    if isinstance(value, float):
        return f"{value:g}"
    return value


def table(table_id: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str,
          caption: str | None = None) -> Safe:
    """A readable table: header cells with scope, a caption for screen readers, a plain note when empty.

    Cells are plain ``<td>`` elements (tests and scrapers match on them)."""
    if not rows:
        return el("p", el("i", empty), id=table_id, class_="empty")
    head = join(el("th", h, scope="col") for h in headers)
    body = join(Safe("<tr>") + join(el("td", cell(c)) for c in r) + Safe("</tr>") for r in rows)
    cap = el("caption", caption) if caption else Safe("")
    return Safe(f'<table id="{esc(table_id)}" class="ti-table">{cap}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")


def hidden(name: str, value: Any) -> Safe:
    return el("input", type="hidden", name=name, value=value)


def field(label: str, name: str, *, type: str = "text", value: Any = None, required: bool = False,
          form_id: str = "", hint: str | None = None, **extra: Any) -> Safe:
    """A labelled input; ids are unique per form so that several forms may share field names."""
    fid = f"{form_id}-{name}" if form_id else name
    hint_id = f"{fid}-hint" if hint else None
    parts = [el("label", label, for_=fid),
             el("input", type=type, name=name, id=fid, value=value, required=required,
                aria_describedby=hint_id, **extra)]
    if hint:
        parts.append(el("small", hint, id=hint_id))
    return el("div", *parts, class_="field")


def checkbox(label: str, name: str, *, checked: bool = False, value: str = "1", form_id: str = "") -> Safe:
    fid = f"{form_id}-{name}-{value}" if form_id else f"{name}-{value}"
    return el("div", el("input", type="checkbox", name=name, id=fid, value=value, checked=checked),
              el("label", label, for_=fid), class_="field check")


def select(label: str, name: str, options: Sequence[tuple[str, str]], *, selected: str | None = None,
           form_id: str = "") -> Safe:
    fid = f"{form_id}-{name}" if form_id else name
    opts = join(el("option", text, value=val, selected=val == selected) for val, text in options)
    return el("div", el("label", label, for_=fid), Safe(f'<select name="{esc(name)}" id="{esc(fid)}">{opts}</select>'),
              class_="field")


def post_form(action: str, xsrf: str, fields: Iterable[Any], button: str, *, form_id: str | None = None,
              inline: bool = False, button_class: str | None = None, label: str | None = None) -> Safe:
    """A POST form carrying the XSRF token the hub's OAuth cookie requires (see base.PageHandler)."""
    return el("form", hidden("_xsrf", xsrf), *fields,
              el("button", button, type="submit", class_=button_class),
              method="post", action=action, id=form_id, class_="inline" if inline else "stacked",
              aria_label=label)
