#!/usr/bin/env python3
"""Render helm/ti-hub/values.schema.yaml (the source) into values.schema.json (what helm reads).

    python3 helm/tools/render-schema.py            write values.schema.json
    python3 helm/tools/render-schema.py --check    exit 1 if it is missing or out of date

Both first check the schema's own rules: every object has ``additionalProperties: false`` and
every property has a description. A map (``additionalProperties`` a schema, e.g. annotations:
string to string) checks every value. The only object allowed any extra property is
``jupyterhub`` (passed through to the subchart, whose own schema checks it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML is a test dependency
    sys.exit("render-schema.py needs PyYAML: python3 -m pip install pyyaml")

CHART = Path(__file__).resolve().parent.parent / "ti-hub"
SOURCE = CHART / "values.schema.yaml"
TARGET = CHART / "values.schema.json"
# property paths whose objects may take keys the schema does not list
OPEN_OBJECTS = {"jupyterhub"}


def problems(schema: dict, path: str = "") -> list[str]:
    """What breaks the schema's rules, one line each (empty: none)."""
    out: list[str] = []
    where = path or "(root)"
    if schema.get("type") == "object":
        extra = schema.get("additionalProperties")
        if path in OPEN_OBJECTS:
            if extra is not True:
                out.append(f"{where}: a pass-through object must say additionalProperties: true")
        elif isinstance(extra, dict) and not schema.get("properties"):
            out.extend(problems(extra, f"{path}.*"))  # a map: its values are checked
        elif extra is not False:
            out.append(f"{where}: objects need additionalProperties: false")
        for name, sub in (schema.get("properties") or {}).items():
            sub_path = f"{path}.{name}" if path else name
            if not isinstance(sub, dict) or not str(sub.get("description", "")).strip():
                out.append(f"{sub_path}: no description")
                continue
            out.extend(problems(sub, sub_path))
    items = schema.get("items")
    if isinstance(items, dict):
        out.extend(problems(items, f"{path}[]"))
    return out


def render(source: Path = SOURCE) -> str:
    schema = yaml.safe_load(source.read_text())
    bad = problems(schema)
    if bad:
        raise ValueError(f"{source.name} breaks the schema rules:\n  " + "\n  ".join(bad))
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that values.schema.json is up to date")
    args = parser.parse_args(argv)
    try:
        text = render()
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    if args.check:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run python3 helm/tools/render-schema.py", file=sys.stderr)
            return 1
        print(f"{TARGET.name} is up to date")
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
