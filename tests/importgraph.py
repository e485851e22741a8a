"""The import graph of a package, built from its source with ``ast``
(``tests/packaging/test_layers.py`` holds ``django_jobs`` to its layers with it).

Every ``import`` and ``from ... import`` anywhere in a module (at the top or inside a function)
is an edge, relative imports resolved, to each module of the package a statement names.
Imports under ``if TYPE_CHECKING:`` are left out: they never run. Importing ``pkg.a.b.c`` also
runs ``pkg/a/__init__.py`` and ``pkg/a/b/__init__.py``, so such an import is an edge to those
packages too (a feature's code in the ``__init__.py`` of a package holding a model module runs
whenever the models load). Two are left out: the edge from a module inside the package (its
package ran before it), and the edge to the root package ``pkg``, which every import runs first.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from pathlib import Path

Edge = tuple[str, str]


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Each module of the package under ``root`` (migrations left out), by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if "migrations" in path.relative_to(root).parts:
            continue
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_statements(tree: ast.AST, type_checking: bool = False
                       ) -> Iterator[ast.Import | ast.ImportFrom]:
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        pending.extend(ast.iter_child_nodes(node))


def import_graph(root: Path, package: str, type_checking: bool = False) -> dict[str, set[str]]:
    """For each module of the package, the modules of the package it imports (with
    ``type_checking``, those imported under ``if TYPE_CHECKING:`` too)."""
    files = module_files(root, package)

    def nearest_module(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in _import_statements(ast.parse(path.read_text(), str(path)), type_checking):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = here
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                # ``from pkg import sub`` imports the module pkg.sub; ``from mod import name``
                # imports mod.
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                names = [name for name in submodules if name in files]
                if len(names) < len(submodules):
                    names.append(base)
            for name in names:
                if name == package or name.startswith(package + "."):
                    target = nearest_module(name)
                    if target is not None and target != module:
                        targets.add(target)
                        targets.update(_packages_run(target, module, package, files))
        graph[module] = targets
    return graph


def _packages_run(target: str, importer: str, package: str, files: dict[str, Path]) -> set[str]:
    """The packages whose ``__init__.py`` importing ``target`` runs, for ``importer``: those
    above it, but the root package and the packages ``importer`` is inside."""
    run = set()
    parent = target.rpartition(".")[0]
    while parent and parent != package:
        if parent in files and not (importer + ".").startswith(parent + "."):
            run.add(parent)
        parent = parent.rpartition(".")[0]
    return run


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that all reach one another."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def cyclic_edges(graph: dict[str, set[str]]) -> set[Edge]:
    """Every edge whose two ends lie on a common cycle."""
    group_of = {m: i for i, group in enumerate(strongly_connected(graph)) for m in group}
    return {(a, b) for a, targets in graph.items() for b in targets
            if b in group_of and group_of[a] == group_of[b]}


def cycle_through(graph: dict[str, set[str]], edge: Edge) -> list[str]:
    """A shortest cycle using ``edge``: a, b, ..., a."""
    a, b = edge
    came_from: dict[str, str | None] = {b: None}
    queue = deque([b])
    while queue:
        node = queue.popleft()
        if node == a:
            break
        for nxt in sorted(graph.get(node, ())):
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    path = [a]
    step: str | None = a
    while step is not None and step != b:
        step = came_from.get(step)
        if step is not None:
            path.append(step)
    return [a, *reversed(path)]
