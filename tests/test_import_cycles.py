"""No import cycles among the project's own modules.

A static import graph over ``libs/`` and ``services/`` (every ``import`` and ``from ... import`` in a
module, those inside functions included: a deferred import is how a cycle hides; only imports under
``if TYPE_CHECKING:`` are left out, since they never run), each edge to the most specific module of
the project it names. Any strongly connected set of two or more modules is a cycle, and fails with
the modules and the lines that import each other. The generated ``court_proto`` is not looked at.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {"court_proto"}


def project_modules() -> dict[str, Path]:
    """Module name -> file, for every package under libs/ and services/<name>/."""
    out: dict[str, Path] = {}
    bases = [ROOT / "libs", *sorted(p for p in (ROOT / "services").iterdir() if p.is_dir())]
    for base in bases:
        for f in base.rglob("*.py"):
            parts = list(f.relative_to(base).with_suffix("").parts)
            if parts[0] in SKIP or ".venv" in parts:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            if parts:
                out[".".join(parts)] = f
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, except those under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The most specific project module ``name`` (dotted) names, or None when none does."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def import_graph(known: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first import of it}."""
    graph: dict[str, dict[str, int]] = {m: {} for m in known}
    for mod, path in known.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    here = mod.split(".") if is_package else mod.split(".")[:-1]
                    up = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    base = ".".join(up + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from pkg import name``: the submodule pkg.name when there is one, else pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for t in targets:
                r = _resolve(t, known)
                if r is not None and r != mod:
                    graph[mod].setdefault(r, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _describe(scc: list[str], graph: dict[str, dict[str, int]], known: dict[str, Path]) -> str:
    inside = set(scc)
    lines = [
        f"  {known[a].relative_to(ROOT)}:{line} imports {b}"
        for a in scc
        for b, line in sorted(graph[a].items())
        if b in inside
    ]
    return " <-> ".join(scc) + "\n" + "\n".join(lines)


def test_the_graph_sees_the_project() -> None:
    """The graph is over the real modules (a broken walk would find no cycle in nothing)."""
    known = project_modules()
    graph = import_graph(known)
    assert {"court_kit.settings", "court_kit.tokens", "court_rules.app", "court_cli.main"} <= set(known)
    assert (
        "court_kit.settings" in graph["court_kit.tokens"] or "court_kit.settings" in graph["court_kit.server"]
    )
    assert "court_rules.store" in graph["court_rules.app"]  # ``from .store import GameStore``


def test_a_cycle_is_found() -> None:
    """The search itself: a deferred import back is a cycle; a TYPE_CHECKING one is not."""
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("if TYPE_CHECKING:\n    import x\ndef f():\n    import y\n")
    assert [a.name for n in _imports(tree) if isinstance(n, ast.Import) for a in n.names] == ["y"]


def test_no_import_cycles() -> None:
    known = project_modules()
    graph = import_graph(known)
    found = cycles(graph)
    assert not found, "import cycles among the project's modules:\n" + "\n".join(
        _describe(c, graph, known) for c in found
    )


# The layers of the libraries, bottom up: each package's own modules may import only the packages
# named here (``court_proto`` is generated, its imports are protobuf's own). ``court_base`` is the
# floor; the engines (``court_games``) know no wire format and no service; the plumbing
# (``court_kit``) knows no game; the contract (``court_contract``: typed views, records, actions)
# sits above the engines and the generated messages and may use the plumbing.
NOT_IMPORTED: dict[str, frozenset[str]] = {
    "court_base": frozenset({"court_games", "court_kit", "court_contract", "court_proto"}),
    "court_games": frozenset({"court_kit", "court_contract", "court_proto"}),
    "court_kit": frozenset({"court_contract", "court_games"}),
}
CONTRACT_MAY_IMPORT = frozenset({"court_base", "court_games", "court_proto", "court_kit", "court_contract"})


def _top(module: str) -> str:
    return module.split(".")[0]


def _raw_imports(path: Path, mod: str) -> Iterator[tuple[str, int]]:
    """Every absolute name a module imports (relative ones resolved), with its line; court_proto
    included, which ``project_modules`` leaves out."""
    is_package = path.name == "__init__.py"
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif node.level:
            here = mod.split(".") if is_package else mod.split(".")[:-1]
            up = here[: len(here) - (node.level - 1)] if node.level > 1 else here
            yield ".".join(up + ([node.module] if node.module else [])), node.lineno
        else:
            yield node.module or "", node.lineno


def layer_violations(known: dict[str, Path]) -> list[tuple[Path, int, str, str]]:
    """(file, line, imported name, rule broken) for every import against the layers."""
    out = []
    for mod, path in sorted(known.items()):
        top = _top(mod)
        for name, line in _raw_imports(path, mod):
            target = _top(name)
            if target in NOT_IMPORTED.get(top, ()) or (
                top == "court_contract" and target.startswith("court_") and target not in CONTRACT_MAY_IMPORT
            ):
                out.append((path, line, name, f"{top} may not import {target}"))
    return out


def test_the_layers_hold() -> None:
    """court_games imports neither court_kit nor court_contract nor court_proto; court_kit imports
    neither court_contract nor court_games; court_contract imports only the layers below it."""
    known = project_modules()
    assert {"court_games.core", "court_games.registry", "court_kit.errors", "court_kit.checks"} <= set(known)
    found = layer_violations(known)
    assert not found, "imports against the layers:\n" + "\n".join(
        f"  {path.relative_to(ROOT)}:{line} imports {name} ({rule})" for path, line, name, rule in found
    )


def test_a_layer_violation_is_found(tmp_path: Path) -> None:
    """The check itself: a deferred import by an engine, a plain one by the plumbing, a relative one
    staying inside its package (allowed) and the contract reaching above itself are told apart."""
    files = {
        "court_games.x": "from . import core\ndef f():\n    from court_kit.checks import clip\n",
        "court_kit.y": "from court_contract import typed\nimport court_games.core\nfrom . import checks\n",
        "court_contract.z": "from court_games import core\nfrom court_proto import x\nimport court_client\n",
        "court_base": "if TYPE_CHECKING:\n    import court_games\n",
    }
    known = {}
    for mod, text in files.items():
        known[mod] = tmp_path / f"{mod}.py"
        known[mod].write_text(text)
    found = sorted((name, rule) for _, _, name, rule in layer_violations(known))
    assert found == [
        ("court_client", "court_contract may not import court_client"),
        ("court_contract", "court_kit may not import court_contract"),
        ("court_games.core", "court_kit may not import court_games"),
        ("court_kit.checks", "court_games may not import court_kit"),
    ], found
