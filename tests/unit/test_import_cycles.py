"""Dependencies inside ti_hub point one way (issue 32): no import cycle, type-checking imports and imports inside
functions included, except the circle around TiService (api/, service/, health/, endpoints/), which is another
step. A new cycle fails here with the modules that form it."""

import pytest

grimp = pytest.importorskip("grimp", reason="pip install -e '.[test]'")

# the one circle still allowed: every module in it reaches TiService's app and back
TI_SERVICE_CIRCLE = "ti_hub.service.app"


def cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative: the graph is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_but_the_ti_service_circle():
    graph = grimp.build_graph("ti_hub", include_external_packages=False, exclude_type_checking_imports=False)
    found = [c for c in cycles(graph) if TI_SERVICE_CIRCLE not in c]
    assert found == [], f"import cycles: {found}"


def test_the_cycles_issue_32_cut_stay_cut():
    graph = grimp.build_graph("ti_hub", include_external_packages=False, exclude_type_checking_imports=False)
    for low, high in [("ti_hub.db.monitoring", "ti_hub.db.models"), ("ti_hub.db.models", "ti_hub.db.tables"),
                      ("ti_hub.ops.vcs", "ti_hub.ops.vcdelete"), ("ti_hub.ops.revoke", "ti_hub.ops.jobs"),
                      ("ti_hub.ops.jobspec", "ti_hub.ops.templates"), ("ti_hub.spawner.names", "ti_hub.spawner.mixin"),
                      ("ti_hub.ssh.session", "ti_hub.ssh.server"), ("ti_hub.service.openapi", "ti_hub.service.web")]:
        assert not graph.chain_exists(importer=low, imported=high), f"{low} imports {high} again"
