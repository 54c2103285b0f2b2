"""The import graph of loopkit/ points one way: no module imports one of a higher layer,
and no modules import each other in a circle.

The graph is read from the source (ast; nothing is imported), every import counted:
at the top, inside a function, under ``TYPE_CHECKING``. ``LAYERS`` below is the declared
order, lowest first; a module belongs to the layer of the longest entry naming it or a
package above it. Run it alone: ``.venv/bin/python -m pytest -q tests/unit/test_layers.py``
(docs/architecture.md, "The layers").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "loopkit"

#: Lowest first. An entry is a module, or a package and everything below it; ``=name``
#: is that module alone (a package's own file, not its submodules).
LAYERS: tuple[tuple[str, ...], ...] = (
    # the basics every room shares
    (
        "loopkit",
        "loopkit.exitcodes",
        "loopkit.errors",
        "loopkit.text",
        "loopkit.loader",
        "loopkit.digest",
        "loopkit.values",
        "loopkit.files",
        "loopkit.background",
        "loopkit.proc",
        "loopkit.discovery",
        "loopkit.git",
        "loopkit.control",  # the tamper check: what steers git, hashed before and after
        "loopkit.gitstore",  # the objects and refs loopkit writes without starting git
        "loopkit.places",
        "loopkit.schema",
        "loopkit.sections",
        "loopkit.handling",
    ),
    ("loopkit.state",),  # the state folder: attempt folders, retention, cancellation
    ("loopkit.boundary",),  # what a run may reach
    ("loopkit.document", "loopkit.handoff"),
    ("loopkit.evidence",),
    ("loopkit.contract", "loopkit.guidance"),
    ("loopkit.workspace",),
    ("loopkit.decision",),  # the rules, the budgets, the ledger
    ("loopkit.worker",),
    ("loopkit.judge",),
    ("loopkit.attest",),  # the signed statement of what verified a landing
    ("loopkit.plan",),
    ("loopkit.ratchet",),
    ("loopkit.forge", "loopkit.eval", "loopkit.scaffold"),
    ("loopkit.views",),  # what a person reads: the report, the status
    ("loopkit.stages",),  # each stage command once its options are parsed
    ("loopkit.attempt",),  # one attempt, admission to decision: the stages in one process
    ("loopkit.cli",),  # the commands: parse, call, print, exit code
    ("loopkit.testing",),  # the model server, rehearsal, the demo
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(name: str, path: Path) -> set[str]:
    """The loopkit modules ``name`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                whole = f"{prefix}.{alias.name}"
                out.add(whole if whole in MODULES else prefix)
    # a package importing its own submodules is one concept, not an arrow
    return {
        m
        for m in out
        if m in MODULES and m != name and not (is_package and m.startswith(name + "."))
    }


GRAPH = {name: _imported(name, path) for name, path in MODULES.items()}


def layer_of(module: str) -> int:
    best, found = -1, None
    for level, entries in enumerate(LAYERS):
        for entry in entries:
            alone = entry.startswith("=")
            entry = entry.lstrip("=")
            if module == entry or (not alone and module.startswith(entry + ".")):
                if len(entry) > best:
                    best, found = len(entry), level
    if found is None:
        raise AssertionError(f"{module}: in no layer of tests/unit/test_layers.py's LAYERS")
    return found


def _circles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """The strongly connected parts of the graph with more than one module (Tarjan)."""
    graph = GRAPH if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_import_points_up() -> None:
    upward = [
        f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
        for a, deps in sorted(GRAPH.items())
        for b in sorted(deps)
        if layer_of(b) > layer_of(a)
    ]
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_circle() -> None:
    circles = _circles()
    assert not circles, "modules importing each other:\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def room(module: str) -> str:
    """The room a module stands in when each folder is read as one: ``loopkit.evidence``
    for ``loopkit.evidence.verify``, a top-level module for itself."""
    return ".".join(module.split(".")[:2])


def folders(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for a, deps in graph.items():
        rooms.setdefault(room(a), set()).update(room(b) for b in deps if room(b) != room(a))
    return rooms


def test_no_circle_between_folders() -> None:
    """Read folder by folder, as one room each, the graph points one way too: a folder
    importing a module that imports the folder back is a circle of rooms."""
    circles = _circles(folders(GRAPH))
    assert not circles, "folders importing each other:\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def test_the_folder_check_sees_a_circle_of_rooms() -> None:
    """evidence's old import of the contract, which imports evidence.globs: no circle of
    modules, a circle of rooms."""
    graph = {k: set(v) for k, v in GRAPH.items()}
    graph["loopkit.evidence.verify"].add("loopkit.contract")
    assert _circles(graph) == _circles()
    assert ["loopkit.contract", "loopkit.evidence"] in _circles(folders(graph))


@pytest.mark.parametrize(
    ("importer", "imported", "circle", "upward"),
    [
        ("loopkit.places", "loopkit.testing.server.faults", False, True),  # a basic on a test
        ("loopkit.git", "loopkit.places", True, False),  # places imports git
        ("loopkit.decision.budget", "loopkit.attempt", True, True),  # attempt reaches decision
    ],
)
def test_the_checks_see_an_arrow_added(
    importer: str, imported: str, circle: bool, upward: bool
) -> None:
    """The checks above fail on the arrows they are for: one import added to the graph."""
    before, known = GRAPH[importer], {tuple(c) for c in _circles()}
    GRAPH[importer] = before | {imported}
    try:
        assert bool({tuple(c) for c in _circles()} - known) is circle
        assert (layer_of(imported) > layer_of(importer)) is upward
    finally:
        GRAPH[importer] = before


def _missing(name: str, path: Path) -> list[str]:
    """The loopkit modules ``name`` imports by absolute name that do not exist."""
    gone = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            gone += [a.name for a in node.names if a.name.startswith("loopkit.")]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "loopkit" or node.module.startswith("loopkit."):
                gone += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    exists = [m for m in gone if m in MODULES]
    # ``from pkg import name``: either a submodule or a name defined in an existing module
    return sorted(
        {m for m in gone if m not in MODULES and m.rsplit(".", 1)[0] not in MODULES} - set(exists)
    )


def test_every_loopkit_import_names_a_module_that_exists() -> None:
    """A moved module leaves no import of its old name behind (inside functions too)."""
    stale = {name: _missing(name, path) for name, path in MODULES.items()}
    stale = {k: v for k, v in stale.items() if v}
    assert not stale, "imports of loopkit modules that do not exist:\n" + "\n".join(
        f"{k}: {', '.join(v)}" for k, v in sorted(stale.items())
    )
