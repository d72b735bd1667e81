"""Dependencies inside ti_hub point one way (issue 32): no import cycle at all, type-checking imports and imports
inside functions included. A new cycle fails here with the modules that form it."""

import pytest

grimp = pytest.importorskip("grimp", reason="pip install -e '.[test]'")

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


def test_no_import_cycles():
    graph = grimp.build_graph("ti_hub", include_external_packages=False, exclude_type_checking_imports=False)
    found = cycles(graph)
    assert found == [], f"import cycles: {found}"


def test_the_application_class_is_named_only_by_the_process_shell():
    """TiService is the shell's (service/app.py); everything else sees it through the protocols of ops/context.py,
    api/context.py, endpoints/context.py, health/context.py (and the shell's own: service/loop.py, startup.py)."""
    graph = grimp.build_graph("ti_hub", include_external_packages=False, exclude_type_checking_imports=False)
    importers = graph.find_modules_that_directly_import("ti_hub.service.app")
    assert importers <= {"ti_hub.service.__main__", "ti_hub.launcher.confighelp"}, sorted(importers)


def test_the_cycles_issue_32_cut_stay_cut():
    graph = grimp.build_graph("ti_hub", include_external_packages=False, exclude_type_checking_imports=False)
    for low, high in [("ti_hub.db.monitoring", "ti_hub.db.models"), ("ti_hub.db.models", "ti_hub.db.tables"),
                      ("ti_hub.ops.vcs", "ti_hub.ops.vcdelete"), ("ti_hub.ops.revoke", "ti_hub.ops.jobs"),
                      ("ti_hub.ops.jobspec", "ti_hub.ops.templates"), ("ti_hub.spawner.names", "ti_hub.spawner.mixin"),
                      ("ti_hub.ssh.session", "ti_hub.ssh.server"), ("ti_hub.service.openapi", "ti_hub.service.web"),
                      ("ti_hub.api.base", "ti_hub.service.app"), ("ti_hub.health.monitor", "ti_hub.service.app"),
                      ("ti_hub.ops.capacity", "ti_hub.service.app"), ("ti_hub.endpoints.proxy", "ti_hub.api.base")]:
        assert not graph.chain_exists(importer=low, imported=high), f"{low} imports {high} again"
