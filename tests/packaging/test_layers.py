"""The layers of ``django_jobs`` are its folders, and imports go down only.

::

    core | handlers <- models <- engine <- worker | features <- checks <- faces <- wiring

A module's layer is the first folder under ``django_jobs/`` it sits in (``core/`` and
``handlers/``, a handler's typed arguments, are the base together;
``models/``, ``engine/``, ``worker/``, ``features/``, ``checks/``; the faces ``admin/``,
``api/``, ``backends/``, ``management/``, ``templatetags/``); the root holds only the public
surface. One rule covers them all: a module imports only modules of its own folder or of a
lower layer. ``worker/`` and ``features/`` share a rank and never import each other; the faces
neither (``templatetags/`` is the admin's). The root's ``signals`` and ``exceptions`` are base
(any layer raises and sends them); the root package, ``apps`` (the wiring), ``testing`` and
``pytest_plugin`` sit above everything and nothing below imports them. A face may run the
checks: ``runworker`` refuses a database that fails them.

The graph is built from the source with ``ast`` (``importgraph.py``): every ``import`` and
``from ... import`` anywhere in a module, relative ones resolved, and the ``__init__.py`` an
import runs. Imports under ``if TYPE_CHECKING:`` count for the worker (a step that names the
loop's types is bound to the loop as surely as one that imports it) and are left out elsewhere:
they never run.

Inside the engine one more rule holds: the code of one database stays in its folder. No module
outside ``engine/postgres/`` and ``engine/mariadb/`` imports theirs, under ``TYPE_CHECKING``
neither, but the factory that picks the engine (``engine/__init__.py``); the rest reach what they
need of a database through ``core/contract.py`` (the verbs) and ``core/database_parts.py``.

Inside the worker one more rule holds: no module of ``worker/`` but the loop itself imports
``worker/loop.py``, under ``TYPE_CHECKING`` neither. The steps see the worker as a
``WorkerState`` (``worker/state.py``), which the loop's ``Worker`` is; ``runworker``, a face,
starts the loop. And the modules of ``worker/`` import one another in no cycle, type-only imports
included: the parts (producer, executor) import no step and not ``state.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import django_jobs
from tests.importgraph import cycle_through, cyclic_edges, import_graph

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite

ROOT = Path(django_jobs.__file__).parent

# Rank of each layer; a module may import a module of a lower rank, or of its own folder.
RANKS = {
    "base": 0,      # core/, handlers/, and the root's signals and exceptions
    "models": 1,
    "engine": 2,
    "worker": 3,
    "features": 3,
    "checks": 4,
    "faces": 5,     # a face may run the checks (runworker refuses a database that fails them)
    "wiring": 6,    # the root package, apps, testing, pytest_plugin
}
LOOP = "django_jobs.worker.loop"  # no other module of worker/ imports it
# The folders of one database's code, and the one module outside them that imports them.
DATABASE_FOLDERS = ("django_jobs.engine.postgres", "django_jobs.engine.mariadb")
FACTORY = "django_jobs.engine"
FACES = ("admin", "api", "backends", "management", "templatetags")
BASE_AT_ROOT = ("signals", "exceptions")
BASE_FOLDERS = ("core", "handlers")  # one layer: core/validation finds the handler of a job
WIRING_AT_ROOT = ("apps", "testing", "pytest_plugin")
# What may sit at the root: the public surface and the layers' folders (and Django's own).
ROOT_ENTRIES = {
    "__init__.py", "apps.py", "signals.py", "exceptions.py", "testing.py", "pytest_plugin.py",
    "py.typed", "core", "handlers", "models", "engine", "worker", "features", "checks", *FACES,
    "migrations", "static", "templates",
}


def folder(module: str) -> str:
    """The layer's folder a module belongs to (``faces`` folders keep their own name)."""
    parts = module.split(".")[1:]
    if not parts:
        return "wiring"
    top = parts[0]
    if top == "templatetags":
        return "admin"  # the admin's template tags
    if top in BASE_FOLDERS:
        return "core"
    if len(parts) == 1 and top in BASE_AT_ROOT:
        return "core"
    if len(parts) == 1 and top in WIRING_AT_ROOT:
        return "wiring"
    return top


def rank(module: str) -> int:
    top = folder(module)
    if top == "core":
        return RANKS["base"]
    if top in FACES:
        return RANKS["faces"]
    if top not in RANKS:
        raise AssertionError(f"{module}: its folder {top!r} has no rank in RANKS")
    return RANKS[top]


def allowed(importer: str, imported: str) -> bool:
    a, b = folder(importer), folder(imported)
    return a == b or rank(imported) < rank(importer)


def violations(graph: dict[str, set[str]], only: str | None = None) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if (only is None or folder(a) == only) and not allowed(a, b))


def into_the_loop(graph: dict[str, set[str]], loop: str = LOOP) -> list[str]:
    """The modules of the loop's package (``worker/``), but the loop, that import the loop."""
    package = loop.rpartition(".")[0]
    return sorted(a for a, targets in graph.items()
                  if loop in targets and a != loop
                  and (a == package or a.startswith(package + ".")))


def in_folder(module: str, folders: tuple[str, ...]) -> bool:
    return any(module == f or module.startswith(f + ".") for f in folders)


def into_a_database(graph: dict[str, set[str]], folders: tuple[str, ...] = DATABASE_FOLDERS,
                    factory: str = FACTORY) -> list[tuple[str, str]]:
    """The imports of a database's folder from a module outside them all, but the factory."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if in_folder(b, folders) and not in_folder(a, folders) and a != factory)


def report(found: list[tuple[str, str]]) -> str:
    return "\n".join(f"  {a} ({folder(a)}) -> {b} ({folder(b)})" for a, b in found)


def test_imports_go_down_the_layers_only():
    """Every import of the package, the run-time ones, keeps to the rule above."""
    found = violations(import_graph(ROOT, "django_jobs"))
    assert not found, "imports that go up or across the layers:\n" + report(found)


def test_the_worker_keeps_to_the_rule_with_its_type_only_imports():
    """The worker's ``TYPE_CHECKING`` imports count too: it names no feature's or face's type."""
    found = violations(import_graph(ROOT, "django_jobs", type_checking=True), only="worker")
    assert not found, "the worker names a type of a layer beside or above it:\n" + report(found)


def test_no_step_of_the_worker_imports_the_loop():
    """The steps, and every other module of ``worker/``, see the worker through
    ``worker/state.py``: none names the loop, not even for a type."""
    found = into_the_loop(import_graph(ROOT, "django_jobs", type_checking=True))
    assert not found, (f"modules of worker/ that import {LOOP} (type them against "
                       f"django_jobs.worker.state.WorkerState instead): {found}")


def test_only_the_factory_imports_a_database_folder():
    """The PostgreSQL and MariaDB modules are imported from their own folders and from the
    factory only, type-only imports included: the worker, the admin, the API, the features and
    the engine's portable modules use the interfaces of ``core/``."""
    found = into_a_database(import_graph(ROOT, "django_jobs", type_checking=True))
    assert not found, ("imports of engine/postgres/ or engine/mariadb/ from outside them (use "
                       "core/database_parts.py, or core/contract.py):\n" + report(found))


def test_the_database_rule_refuses_an_import_from_outside(tmp_path):
    """A module outside the database folders that imports one, at the top, in a function or
    only for a type, is refused; the folders among themselves and the factory are not."""
    pkg = tmp_path / "pkg"
    (pkg / "engine" / "postgres").mkdir(parents=True)
    (pkg / "worker").mkdir()
    files = {
        "__init__.py": "",
        "engine/__init__.py": "def pick():\n    from pkg.engine.postgres import parts\n",
        "engine/postgres/__init__.py": "",
        "engine/postgres/parts.py": "from .listener import Listener\n",
        "engine/postgres/listener.py": "from pkg.engine import hooks\n",
        "engine/hooks.py": "",
        "engine/writes.py": "def clamp():\n    from pkg.engine.postgres import parts\n",
        "worker/__init__.py": "",
        "worker/loop.py": "from pkg.engine.postgres.listener import Listener\n",
        "worker/state.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from pkg.engine.postgres.listener import Listener\n"),
        "worker/turn.py": "from pkg.engine import hooks\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    folders = ("pkg.engine.postgres",)
    graph = import_graph(pkg, "pkg", type_checking=True)
    assert into_a_database(graph, folders, "pkg.engine") == [
        ("pkg.engine.writes", "pkg.engine.postgres"),
        ("pkg.engine.writes", "pkg.engine.postgres.parts"),
        ("pkg.worker.loop", "pkg.engine.postgres"),
        ("pkg.worker.loop", "pkg.engine.postgres.listener"),
        ("pkg.worker.state", "pkg.engine.postgres"),
        ("pkg.worker.state", "pkg.engine.postgres.listener"),
    ]


def test_the_root_holds_only_the_public_surface_and_the_layers():
    """A module added at the root belongs in a layer's folder."""
    extra = sorted(p.name for p in ROOT.iterdir()
                   if p.name not in ROOT_ENTRIES and p.name != "__pycache__")
    assert not extra, f"at the root of django_jobs/, put each in its layer's folder: {extra}"


def test_every_module_is_in_a_layer():
    """No folder the rule does not know (a new top-level package must be given a rank)."""
    unknown = sorted(m for m in import_graph(ROOT, "django_jobs")
                     if folder(m) not in RANKS and folder(m) not in FACES
                     and folder(m) != "core")
    assert not unknown, f"modules in a folder with no rank in RANKS: {unknown}"


def test_the_import_graph_has_no_cycle():
    """No module reaches itself through imports: the models find the engine through
    ``core/contract.py``, and features join the engine through hooks."""
    graph = import_graph(ROOT, "django_jobs")
    cyclic = sorted(cyclic_edges(graph))
    lines = "\n".join(f"  {a} -> {b}: cycle {' -> '.join(cycle_through(graph, (a, b)))}"
                      for a, b in cyclic)
    assert not cyclic, f"import edges inside a cycle:\n{lines}"


def inside(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The graph of the modules of ``package`` among themselves."""
    def within(module: str) -> bool:
        return module == package or module.startswith(package + ".")
    return {a: {b for b in targets if within(b)} for a, targets in graph.items() if within(a)}


def test_the_worker_has_no_import_cycle_with_its_type_only_imports():
    """Inside ``worker/`` imports go one way, ``TYPE_CHECKING`` ones included: the parts (the
    executor and what it holds) import no step and not ``state.py``; the steps see the worker
    through ``state.py``; only the loop composes them."""
    graph = inside(import_graph(ROOT, "django_jobs", type_checking=True), "django_jobs.worker")
    cyclic = sorted(cyclic_edges(graph))
    lines = "\n".join(f"  {a} -> {b}: cycle {' -> '.join(cycle_through(graph, (a, b)))}"
                      for a, b in cyclic)
    assert not cyclic, f"import edges of worker/ inside a cycle:\n{lines}"


def test_the_worker_cycle_rule_sees_a_type_only_cycle(tmp_path):
    """A cycle closed only by an import under TYPE_CHECKING is found inside the package, and
    one through a module outside it is not its concern."""
    pkg = tmp_path / "pkg"
    (pkg / "worker").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "other.py": "from pkg.worker import part\n",
        "worker/__init__.py": "",
        "worker/part.py": "from pkg import other\n",
        "worker/state.py": "from pkg.worker.part import Part\n",
        "worker/step.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from pkg.worker.state import State\n"),
        "worker/size.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from pkg.worker.state import State\n"),
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = inside(import_graph(pkg, "pkg", type_checking=True), "pkg.worker")
    assert cyclic_edges(graph) == set()
    (pkg / "worker" / "part.py").write_text("from pkg.worker.size import ClaimSize\n")
    graph = inside(import_graph(pkg, "pkg", type_checking=True), "pkg.worker")
    assert cyclic_edges(graph) == {("pkg.worker.part", "pkg.worker.size"),
                                   ("pkg.worker.size", "pkg.worker.state"),
                                   ("pkg.worker.state", "pkg.worker.part")}
    assert cyclic_edges(inside(import_graph(pkg, "pkg"), "pkg.worker")) == set()


def test_the_rule_sees_an_import_that_goes_up():
    """The rule itself: down is allowed, up and across (worker and features) are not."""
    assert allowed("django_jobs.engine.verbs", "django_jobs.models.jobs")
    assert allowed("django_jobs.engine.postgres.engine", "django_jobs.engine.hooks")
    assert allowed("django_jobs.worker.turn", "django_jobs.exceptions")
    assert allowed("django_jobs.apps", "django_jobs.features.unique")
    assert not allowed("django_jobs.models.jobs", "django_jobs.engine.verbs")
    assert allowed("django_jobs.core.states", "django_jobs.signals")
    assert allowed("django_jobs.handlers.registry", "django_jobs.core.retry")
    assert allowed("django_jobs.handlers.handler_arguments", "django_jobs.core.json_rules")
    assert not allowed("django_jobs.handlers.argument_checks", "django_jobs.models.jobs")
    assert not allowed("django_jobs.worker.turn", "django_jobs.features.unique")
    assert not allowed("django_jobs.features.unique", "django_jobs.worker.execution")
    assert not allowed("django_jobs.engine.verbs", "django_jobs.api.views_jobs")
    assert not allowed("django_jobs.checks.databases", "django_jobs.admin.views")
    assert not allowed("django_jobs.api.views_jobs", "django_jobs.admin.views")
    assert allowed("django_jobs.templatetags.jobs_admin", "django_jobs.admin.display")
    assert not allowed("django_jobs.worker.loop", "django_jobs")
    graph = {"django_jobs.core.states": {"django_jobs.worker.loop"},
             "django_jobs.worker.loop": {"django_jobs.core.states"}}
    assert violations(graph) == [("django_jobs.core.states", "django_jobs.worker.loop")]


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """Module-level, function-level, relative and ``from pkg import module`` imports are
    edges, and so is the ``__init__.py`` of a package an import runs (but the root's, and from
    inside the package); imports under TYPE_CHECKING count only when asked for, and imports of
    other packages never."""
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
    assert import_graph(pkg, "pkg", type_checking=True)["pkg.c"] == {"pkg.a"}
    assert cyclic_edges(graph) == set()
    graph["pkg.c"].add("pkg.a")
    assert cyclic_edges(graph) == {("pkg.a", "pkg.b"), ("pkg.b", "pkg.c"), ("pkg.c", "pkg.a")}
    assert cycle_through(graph, ("pkg.c", "pkg.a")) == ["pkg.c", "pkg.a", "pkg.b", "pkg.c"]


def test_the_loop_rule_refuses_a_step_that_imports_the_loop(tmp_path):
    """A worker module that imports the loop, at the top, in a function, relatively or only
    under TYPE_CHECKING, is refused; the loop itself, a module typed against the state, and
    a face that starts the loop are not."""
    pkg = tmp_path / "pkg"
    (pkg / "worker").mkdir(parents=True)
    (pkg / "management").mkdir()
    files = {
        "__init__.py": "",
        "worker/__init__.py": "",
        "worker/loop.py": "from pkg.worker import turn\nfrom .state import WorkerState\n",
        "worker/state.py": "from typing import Protocol\nclass WorkerState(Protocol): ...\n",
        "worker/turn.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from pkg.worker.loop import Worker\n"),
        "worker/heartbeat.py": "def beat():\n    from . import loop\n",
        "worker/slots.py": "import pkg.worker.loop\n",
        "worker/shutdown.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from .state import WorkerState\n"),
        "management/__init__.py": "",
        "management/runworker.py": "from pkg.worker.loop import Worker\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    loop = "pkg.worker.loop"
    assert into_the_loop(import_graph(pkg, "pkg", type_checking=True), loop) == [
        "pkg.worker.heartbeat", "pkg.worker.slots", "pkg.worker.turn"]
    # Without the TYPE_CHECKING imports the step that names the loop's type would pass.
    assert into_the_loop(import_graph(pkg, "pkg"), loop) == [
        "pkg.worker.heartbeat", "pkg.worker.slots"]
