"""The import graph of ``django_jobs``: no cycle, and no lower layer importing a face.

The graph is built from the source with ``ast``: every ``import`` and ``from ... import``
anywhere in a module (at the top or inside a function), relative imports resolved, with an
edge to each module of the package a statement names. Imports under ``if TYPE_CHECKING:`` are
left out: they never run. Importing ``django_jobs.a.b`` also runs ``django_jobs/a/__init__.py``,
so it is an edge to ``django_jobs.a`` too (but not from inside ``a``, nor to the root).

Layers point one way: models <- engine <- worker <- faces. The tests fail on any import
cycle; on an import, by the store or anything it imports, of a feature, a face, the worker or
the engine; on an engine module importing a worker module or a feature; on a worker module
importing a face or a feature; on a module below the faces that no layer's list names; and on
any import of a face from below that is not listed as known debt (and on a listed one that is
gone: delete it from the list, so the list only shrinks).
"""

from __future__ import annotations

from pathlib import Path

import django_jobs

from .importgraph import Edge, cycle_through, cyclic_edges, import_graph

# Faces: the admin, the JSON API, the django.tasks backend, management commands, and the admin
# pages' template tags and ModelAdmins living beside a feature (``*.admin``).
FACE_PACKAGES = (
    "django_jobs.admin",
    "django_jobs.api",
    "django_jobs.backends",
    "django_jobs.management",
    "django_jobs.templatetags",
)
# The AppConfig wires the faces up (the API token's admin, the Tasks backend's resolver): it
# sits above every layer and may import anything. So does the package root, the public API of
# every layer (``django_jobs.task`` is the Tasks backend's decorator): no module below the
# faces imports it (test_nothing_below_the_faces_imports_the_package_root).
WIRING = {"django_jobs.apps", "django_jobs"}

# Imports of a face from below still to remove: none.
KNOWN_FACE_IMPORTS: set[Edge] = set()

# The layers below the faces, as docs/explanation-architecture.md draws them. A name stands for
# the module and, if it is a package, every module in it.
# The store: the tables and their managers, and the model modules of features (their tables,
# which models.py imports so that Django's app registry finds them). The packages holding those
# are the store's too (``in_store``): importing ``limits.models`` runs ``limits/__init__.py``.
STORE = (
    "django_jobs.models",
    "django_jobs.managers",
    "django_jobs.store",
    "django_jobs.apitokens",
    "django_jobs.limits.models",
    "django_jobs.scheduling.models",
)
# The engine: every write to the tables, and the statements and hooks it writes them with.
ENGINE = (
    "django_jobs.engine",
    "django_jobs.hooks",
    "django_jobs.uniquekey",
    "django_jobs.lockedrows",
    "django_jobs.mariadb",
    "django_jobs.pgcursor",
)
# The worker: its loop and the steps the loop takes.
WORKER = (
    "django_jobs.worker", "django_jobs.turn", "django_jobs.outbox", "django_jobs.heartbeat",
    "django_jobs.shutdown", "django_jobs.claimsize", "django_jobs.deadlines", "django_jobs.solo",
    "django_jobs.threads", "django_jobs.execution", "django_jobs.isolation",
    "django_jobs.outage", "django_jobs.periodic", "django_jobs.listener",
    "django_jobs.lifecycle", "django_jobs.sdnotify", "django_jobs.worklog",
    "django_jobs.exiting", "django_jobs.unknown",
)
# Policy and base modules, and helpers any layer may use (what a job's row, its JSON and its
# errors look like; the database's connection helpers; checks and the test helpers).
POLICY_AND_BASE = (
    "django_jobs.retry", "django_jobs.registry", "django_jobs.validation",
    "django_jobs.outcomes", "django_jobs.errors", "django_jobs.jsonvalues",
    "django_jobs.jobjson", "django_jobs.jsonlog", "django_jobs.instances", "django_jobs.pooler",
    "django_jobs.schema", "django_jobs.states", "django_jobs.conf", "django_jobs.signals",
    "django_jobs.exceptions", "django_jobs.checks", "django_jobs.dbchecks",
    "django_jobs.testing", "django_jobs.pytest_plugin", "django_jobs.clock",
)
# The features, which join the engine's verbs through hooks (their model modules are the
# store's, their ModelAdmins faces).
FEATURES = (
    "django_jobs.unique", "django_jobs.enqueueing", "django_jobs.dependencies",
    "django_jobs.limits", "django_jobs.callbacks", "django_jobs.control", "django_jobs.crashes",
    "django_jobs.scheduling", "django_jobs.retention",
)


def in_layer(module: str, layer: tuple[str, ...]) -> bool:
    return module in layer or module.startswith(tuple(name + "." for name in layer))


def in_store(module: str) -> bool:
    """A store module, or a package holding one (``django_jobs.limits``): loading the models
    runs that package's ``__init__.py``, so what it imports the store imports."""
    return in_layer(module, STORE) or (
        module not in WIRING and any(name.startswith(module + ".") for name in STORE))


def is_feature(module: str) -> bool:
    return in_layer(module, FEATURES) and not in_store(module) and not is_face(module)


def is_face(module: str) -> bool:
    return (module in FACE_PACKAGES or module.startswith(tuple(p + "." for p in FACE_PACKAGES))
            or module.endswith(".admin"))


def face_imports(graph: dict[str, set[str]]) -> set[Edge]:
    """Imports of a face by a module that is neither a face nor the wiring."""
    return {(a, b) for a, targets in graph.items() for b in targets
            if is_face(b) and not is_face(a) and a not in WIRING}


def _graph() -> dict[str, set[str]]:
    return import_graph(Path(django_jobs.__file__).parent, "django_jobs")


def test_the_import_graph_has_no_cycle():
    """No module of django_jobs reaches itself through imports: the store does not import the
    engine (it finds it through ``store.py``), and features join the engine through hooks."""
    graph = _graph()
    cyclic = sorted(cyclic_edges(graph))
    report = "\n".join(f"  {a} -> {b}: cycle {' -> '.join(cycle_through(graph, (a, b)))}"
                       for a, b in cyclic)
    assert not cyclic, f"import edges inside a cycle:\n{report}"


def test_the_store_imports_no_engine_module():
    """models.py, managers.py and store.py reach the engine only through ``store.engine``."""
    graph = _graph()
    store = ("django_jobs.models", "django_jobs.managers", "django_jobs.store")
    found = sorted((a, b) for a in store for b in graph[a]
                   if b == "django_jobs.engine" or b.startswith("django_jobs.engine."))
    assert not found, f"the store imports the engine: {found}"


def above_the_store(module: str) -> bool:
    return (is_feature(module) or is_face(module) or in_layer(module, WORKER)
            or in_layer(module, ENGINE) or module in WIRING)


def edges_out_of_the_store(graph: dict[str, set[str]]) -> list[Edge]:
    """From models.py, managers.py and store.py, through every module they import (at the top
    or in a function), the imports that reach a module above the store."""
    seen: set[str] = set()
    out: set[Edge] = set()
    pending = ["django_jobs.models", "django_jobs.managers", "django_jobs.store"]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        for target in graph.get(module, ()):
            if above_the_store(target):
                out.add((module, target))
            else:
                pending.append(target)
    return sorted(out)


def test_the_store_imports_no_feature_and_no_face():
    """The store, and what it imports, imports no feature, face, worker or engine module: a
    feature's table lives in the store (``JobDependency`` in models.py), and the feature
    imports it."""
    found = edges_out_of_the_store(_graph())
    assert not found, "the store reaches above itself:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in found)


def test_the_engine_imports_no_worker_module_and_no_feature():
    """The engine is below the worker, and calls the features only through ``hooks.py``."""
    graph = _graph()
    found = sorted((a, b) for a, targets in graph.items() if in_layer(a, ENGINE)
                   for b in targets if in_layer(b, WORKER) or is_feature(b))
    assert not found, "the engine imports the worker or a feature:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in found)


def test_the_worker_imports_no_face():
    """The worker runs jobs; the faces (admin, API, Tasks backend, commands) sit above it."""
    graph = _graph()
    found = sorted((a, b) for a, targets in graph.items() if in_layer(a, WORKER)
                   for b in targets if is_face(b) or b in WIRING)
    assert not found, "the worker imports a face:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in found)


def test_the_worker_imports_no_feature():
    """The worker runs the features' work on its heartbeat through ``hooks.periodic_steps``:
    recurring jobs and pruning are registered by the app, not imported by ``periodic.py``."""
    graph = _graph()
    found = sorted((a, b) for a, targets in graph.items() if in_layer(a, WORKER)
                   for b in targets if is_feature(b))
    assert not found, "the worker imports a feature:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in found)


def test_every_module_below_the_faces_is_in_a_named_layer():
    """A new module is placed in a layer (or is policy or base, imported from anywhere), so the
    tests above see it."""
    known = STORE + ENGINE + WORKER + FEATURES + POLICY_AND_BASE
    unplaced = sorted(m for m in _graph() if not in_layer(m, known) and not is_face(m)
                      and m not in WIRING)
    assert not unplaced, f"modules in no layer (add each to its list above): {unplaced}"


def test_lower_layers_import_no_face():
    """Nothing below the faces imports admin, API, Tasks backend or command code."""
    new = sorted(face_imports(_graph()) - KNOWN_FACE_IMPORTS)
    assert not new, "imports of a face from a lower layer:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in new)


def test_known_face_imports_are_still_there():
    gone = sorted(KNOWN_FACE_IMPORTS - face_imports(_graph()))
    assert not gone, f"no longer imported, delete from KNOWN_FACE_IMPORTS: {gone}"


def test_nothing_below_the_faces_imports_the_package_root():
    """The root re-exports every layer's public names, faces included: a module below the
    faces that imported it would reach the faces through it."""
    importers = sorted(a for a, targets in _graph().items()
                       if "django_jobs" in targets and not is_face(a) and a not in WIRING)
    assert not importers, f"import the package root from below the faces: {importers}"


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """Module-level, function-level, relative and ``from pkg import module`` imports are
    edges, and so is the ``__init__.py`` of a package an import runs (but the root's, and from
    inside the package); imports under TYPE_CHECKING and of other packages are not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from .b import thing\nimport json\n",
        "b.py": "def f():\n    from .c import other\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n",
        "d.py": "from . import a, missing\nimport pkg.sub.e\n",
        "sub/__init__.py": "",
        "sub/e.py": "from ..a import thing\nfrom .. import b\n",
        "sub/f.py": "from .e import thing\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(pkg, "pkg")
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.c"},
        "pkg.c": set(),
        "pkg.d": {"pkg.a", "pkg", "pkg.sub.e", "pkg.sub"},
        "pkg.sub": set(),
        "pkg.sub.e": {"pkg.a", "pkg.b"},
        "pkg.sub.f": {"pkg.sub.e"},
    }
    assert cyclic_edges(graph) == set()
    graph["pkg.c"].add("pkg.a")
    assert cyclic_edges(graph) == {("pkg.a", "pkg.b"), ("pkg.b", "pkg.c"), ("pkg.c", "pkg.a")}
    assert cycle_through(graph, ("pkg.c", "pkg.a")) == ["pkg.c", "pkg.a", "pkg.b", "pkg.c"]
