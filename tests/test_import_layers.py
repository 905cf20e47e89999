"""Layers that import one way (README, "Architecture"), read from the source with ``ast``.

Every module of every package that pyproject.toml installs is parsed; every import statement counts, at the
top of a module and inside functions alike. The test fails on:

- an import that goes up a layer, or sideways between layers that stand side by side (perception, planning,
  control; envs);
- an import cycle between modules (function-local imports included, so no cycle can hide in a function);
- a function-local import that is not a marked lazy import of a heavy optional dependency: the line carries
  ``# lazy: <why>``, and what it imports is one of :data:`LAZY_DEPENDENCIES`, or a module of this package
  whose own top-level imports load one of them;
- a layer below the harness (envs and the baselines aside) that imports a simulator.

Dynamic imports (``importlib.import_module``) are not statements and are not in the graph: planning's lazy
attributes (its own modules), plug-ins named by entry points and user solvers (code outside this package).
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The layers, bottom to top (one package each), and the layers each may import: those below it. Perception,
# planning and control stand side by side above the shared types, and envs beside them: none imports another.
LAYER_OF_PACKAGE = {
    "handleit": "shared",  # shared types, the robot interface, pose conversions, the Drake plant loader
    "handleit.perception": "perception",
    "handleit.planning": "planning",
    "handleit.control": "control",
    "handleit.envs": "envs",
    "handleit.behaviors": "behaviors",
    "handleit.baselines": "baselines",
    "handleit.harness": "harness",
}
LOWER = {
    "shared": set(),
    "perception": {"shared"},
    "planning": {"shared"},
    "control": {"shared"},
    "envs": {"shared"},
    "behaviors": {"shared", "perception", "planning", "control"},
    "baselines": {"shared", "perception", "planning", "control", "behaviors", "envs"},
    "harness": {"shared", "perception", "planning", "control", "behaviors", "envs", "baselines"},
}
# Heavy dependencies that a function may import on first use, and why that is worth it.
LAZY_DEPENDENCIES = {
    "torch": "~2 s to import; only the learned grasp scorer and the learned baselines need it",
    "mani_skill": "~3 s to import; only ManiSkill3 tasks and the robot meshes' lookup need it",
    "mplib": "~1 s; only trees that plan arm paths (and the SRDF writer, once per machine) need it",
    "open3d": "~1 s; a few point-cloud functions use it",
    "coacd": "optional: convex decomposition of user meshes, when installed",
    "matplotlib": "only the comparison chart",
    "ray": "optional: the executor's cluster back end (handleit eval --ray), ~1 s to import",
    "rospy": "optional system package (Debian's ROS 1), importable after harness.ros_env.add_ros_to_path",
    "rosgraph": "ROS 1, as rospy",
    "geometry_msgs": "ROS 1, as rospy",
    "nav_msgs": "ROS 1, as rospy",
    "rosgraph_msgs": "ROS 1, as rospy",
    "sensor_msgs": "ROS 1, as rospy",
    "std_msgs": "ROS 1, as rospy",
}
LAZY_MARKER = "lazy:"
SIMULATORS = {"sapien", "mani_skill"}
NO_SIMULATOR = {"shared", "perception", "planning", "control", "behaviors"}  # the sim-real boundary


@dataclass
class Module:
    name: str  # dotted, e.g. handleit.harness.evaluation
    path: Path
    source: str
    is_package: bool = False


@dataclass
class Import:
    importer: str
    targets: list[str]  # first-party modules this statement loads (ancestor packages included)
    externals: set[str]  # top-level names of other distributions it imports
    line: int
    local: bool  # inside a function
    marked: bool  # carries the lazy marker


@dataclass
class Graph:
    modules: dict[str, Module]
    imports: list[Import] = field(default_factory=list)

    def edges(self, local: bool | None = None) -> set[tuple[str, str]]:
        return {(i.importer, t) for i in self.imports if local is None or i.local == local for t in i.targets
                if t != i.importer}


# ----------------------------------------------------------------------------------------------------
# Reading the source
# ----------------------------------------------------------------------------------------------------
def package_modules(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the packages pyproject.toml installs (its setuptools ``package-dir``)."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    modules = {}
    for package in config["packages"]:
        folder = root / config["package-dir"][package]
        for path in sorted(folder.glob("*.py")):
            is_package = path.stem == "__init__"
            name = package if is_package else f"{package}.{path.stem}"
            modules[name] = Module(name, path, path.read_text(), is_package)
    return modules


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module name of a ``from`` import (relative ones resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _targets(importer: str, names: list[str], modules: dict[str, Module]) -> list[str]:
    """The first-party modules that importing ``names`` executes: each name's longest prefix that is a module,
    and the packages above it that do not contain the importer (their ``__init__`` runs first)."""
    out = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if not name:
            continue
        out.append(name)
        parent = name.rpartition(".")[0]
        while parent:
            if parent in modules and not (importer == parent or importer.startswith(parent + ".")):
                out.append(parent)
            parent = parent.rpartition(".")[0]
    return list(dict.fromkeys(out))


class _ImportVisitor(ast.NodeVisitor):
    def __init__(self, module: Module, modules: dict[str, Module], graph: Graph):
        self.module, self.modules, self.graph = module, modules, graph
        self.lines = module.source.splitlines()
        self.depth = 0  # enclosing functions

    def _function(self, node) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _record(self, node, names: list[str]) -> None:
        first_party = [n for n in names if n.split(".")[0] == "handleit"]
        externals = {n.split(".")[0] for n in names if n and n.split(".")[0] != "handleit"}
        comments = [line.split("#", 1)[1] for line in self.lines[node.lineno - 1: node.end_lineno] if "#" in line]
        self.graph.imports.append(Import(
            self.module.name, _targets(self.module.name, first_party, self.modules), externals, node.lineno,
            local=self.depth > 0, marked=any(LAZY_MARKER in c for c in comments)))

    def visit_Import(self, node: ast.Import) -> None:
        self._record(node, [a.name for a in node.names])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _resolve(self.module, node)
        # ``from package import module`` imports the module; ``from module import name`` the module.
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in self.modules else base for a in node.names]
        self._record(node, names)


def read_graph(modules: dict[str, Module]) -> Graph:
    graph = Graph(modules)
    for module in modules.values():
        _ImportVisitor(module, modules, graph).visit(ast.parse(module.source, str(module.path)))
    return graph


# ----------------------------------------------------------------------------------------------------
# The rules
# ----------------------------------------------------------------------------------------------------
def layer_of(module: str) -> str:
    package = max((p for p in LAYER_OF_PACKAGE if module == p or module.startswith(p + ".")), key=len)
    return LAYER_OF_PACKAGE[package]


def package_of(module: str) -> str:
    return max((p for p in LAYER_OF_PACKAGE if module == p or module.startswith(p + ".")), key=len)


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    successors: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        successors.setdefault(a, []).append(b)
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(v: str) -> None:  # recursion depth is the longest import chain: tens of modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in successors.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted({a for a, _ in edges} | {b for _, b in edges}):
        if v not in index:
            visit(v)
    return found


def loads_lazy_dependency(graph: Graph) -> dict[str, set[str]]:
    """Module -> the lazy dependencies its top-level imports load, directly or through other modules."""
    direct = {m: set() for m in graph.modules}
    successors = {m: set() for m in graph.modules}
    for i in graph.imports:
        if not i.local:
            direct[i.importer] |= i.externals & set(LAZY_DEPENDENCIES)
            successors[i.importer].update(i.targets)
    loaded = {}
    for m in graph.modules:
        seen, todo, deps = {m}, [m], set()
        while todo:
            v = todo.pop()
            deps |= direct[v]
            for w in successors[v] - seen:
                seen.add(w)
                todo.append(w)
        loaded[m] = deps
    return loaded


def problems(graph: Graph) -> list[str]:
    """Every breach of the rules, in words."""
    out = []
    for i in graph.imports:
        where = f"{i.importer}:{i.line}"
        here = layer_of(i.importer)
        up = [t for t in i.targets if layer_of(t) != here and layer_of(t) not in LOWER[here]]
        if up:  # one line per statement: its module, not also the packages above it
            out.append(f"{where}: {i.importer} ({here}) imports {up[0]} ({layer_of(up[0])}), which is not below it")
        if here in NO_SIMULATOR and i.externals & SIMULATORS:
            out.append(f"{where}: {i.importer} ({here}) imports the simulator {sorted(i.externals & SIMULATORS)}")
    lazy = loads_lazy_dependency(graph)
    for i in graph.imports:
        if not i.local:
            continue
        where = f"{i.importer}:{i.line}"
        heavy = (i.externals & set(LAZY_DEPENDENCIES)) | set().union(*(lazy[t] for t in i.targets))
        other = i.externals - set(LAZY_DEPENDENCIES)
        if not i.marked:
            out.append(f"{where}: a function-local import without '# {LAZY_MARKER} <why>'; import it at the top "
                       "of the module")
        elif other or not heavy:
            out.append(f"{where}: marked lazy, but it imports {sorted(other) or i.targets}, none of the heavy "
                       f"optional dependencies that may load lazily ({', '.join(LAZY_DEPENDENCIES)})")
    for component in cycles(graph.edges()):
        out.append(f"import cycle: {' <-> '.join(component)}")
    return out


# ----------------------------------------------------------------------------------------------------
# The package
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph() -> Graph:
    return read_graph(package_modules())


def test_every_package_has_a_layer_and_the_graph_is_read(graph):
    packages = {package_of(m) for m in graph.modules}
    assert packages == set(LAYER_OF_PACKAGE), "a package pyproject.toml installs has no layer here, or vice versa"
    by_layer = {layer: [m for m in graph.modules if layer_of(m) == layer] for layer in LOWER}
    assert all(by_layer.values()), {k: len(v) for k, v in by_layer.items()}
    assert len(graph.modules) >= 100, len(graph.modules)
    edges = graph.edges()
    assert len(edges) >= 300, len(edges)
    # Imports of every form are resolved: absolute, relative, "from package import module", function-local.
    for edge in [("handleit.harness.evaluation", "handleit.harness.solvers"),  # from handleit.harness.solvers import
                 ("handleit.harness.evaluation", "handleit.envs"),  # import handleit.envs
                 ("handleit.envs.base_env", "handleit.envs.cameras"),  # from .cameras import
                 ("handleit.harness.ros_robot", "handleit.harness.ros_messages"),  # from handleit.harness import rm
                 ("handleit.behaviors.tree_solver", "handleit.perception"),  # the package __init__ runs first
                 ("handleit.harness.solvers", "handleit.baselines.policy")]:  # function-local (torch)
        assert edge in edges, edge
    assert ("handleit.harness.solvers", "handleit.baselines.policy") in graph.edges(local=True)


def test_imports_go_one_way_without_cycles_or_hidden_imports(graph):
    found = problems(graph)
    assert not found, "\n".join(found)


def test_the_function_local_imports_left_are_few_and_marked(graph):
    local = [i for i in graph.imports if i.local]
    assert all(i.marked for i in local)
    assert len(local) <= 40, [f"{i.importer}:{i.line}" for i in local]


# ----------------------------------------------------------------------------------------------------
# The checker itself, on small made-up packages
# ----------------------------------------------------------------------------------------------------
def _fake(sources: dict[str, str]) -> Graph:
    modules = {name: Module(name, Path("/x/y") / f"{name}.py", text, name in LAYER_OF_PACKAGE)
               for name, text in sources.items()}
    return read_graph(modules)


def test_the_checker_finds_an_upward_import():
    found = problems(_fake({"handleit": "", "handleit.perception": "", "handleit.harness": "",
                            "handleit.perception.a": "from handleit.harness import b\n",
                            "handleit.harness.b": ""}))
    assert len(found) == 1 and "not below it" in found[0]


def test_the_checker_finds_a_sideways_import_and_a_simulator():
    found = problems(_fake({"handleit": "", "handleit.perception": "", "handleit.planning": "",
                            "handleit.planning.a": "import sapien\nfrom handleit.perception import b\n",
                            "handleit.perception.b": ""}))
    assert len(found) == 2
    assert any("imports handleit.perception.b (perception), which is not below" in f for f in found)
    assert any("simulator ['sapien']" in f for f in found)


def test_the_checker_finds_a_cycle_hidden_in_a_function():
    found = problems(_fake({"handleit": "", "handleit.harness": "",
                            "handleit.harness.a": "from handleit.harness.b import f\n",
                            "handleit.harness.b": "def f():\n    from handleit.harness.a import g  # lazy: torch\n"}))
    assert any(f.startswith("import cycle") for f in found)
    assert any("marked lazy, but" in f for f in found)  # b.f's import loads no heavy dependency


def test_the_checker_allows_a_marked_lazy_heavy_import_only():
    fine = _fake({"handleit": "", "handleit.harness": "", "handleit.baselines": "",
                  "handleit.baselines.net": "import torch\n",
                  "handleit.harness.a": "def f():\n    from handleit.baselines.net import x  # lazy: torch\n"
                                        "    import rospy  # noqa: PLC0415  lazy: ROS\n"})
    assert problems(fine) == []
    unmarked = _fake({"handleit": "", "handleit.harness": "",
                      "handleit.harness.a": "def f():\n    import json\n    import torch\n"})
    found = problems(unmarked)
    assert len(found) == 2 and all("without '# lazy:" in f for f in found)
