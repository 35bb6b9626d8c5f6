"""The layers of docs/design.md ("Dependencies point one way"), read from every import in the package.

Every ``import`` and ``from ... import`` of every module counts, those inside functions and under
``TYPE_CHECKING`` too: a layer imports only the layers below it, and no modules import each other
in a circle. The wiring (the CLI, the cluster, ``argym check``, ``argym doctor``) is the top layer:
it may import every other, and none imports it.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LAYERS = {
    "core": ("argym",),
    "rewards": ("argym.rewards",),
    "envs": ("argym.envs",),
    "agents": ("argym.agents",),
    "algorithms": ("argym.algorithms",),
    "leaderboards": ("argym.leaderboards",),
    "wiring": ("argym.cli", "argym.cluster", "argym.check", "argym.doctor"),
}
"""Each layer's modules: a module belongs to the layer with the longest prefix of its name."""

BELOW = {
    "core": set(),
    "rewards": {"core"},
    "envs": {"core", "rewards"},
    "agents": {"core", "rewards", "envs"},
    "algorithms": {"core", "rewards", "envs", "agents"},
    "leaderboards": {"core"},
    "wiring": {"core", "rewards", "envs", "agents", "algorithms", "leaderboards"},
}
"""What each layer may import besides itself: core ← rewards ← envs ← agents ← algorithms ← wiring,
and core ← leaderboards ← wiring."""


def modules() -> dict[str, Path]:
    """Every module of the package by its installed name (pyproject's package-dir maps envs/ to argym.envs)."""
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out = {}
    for package, folder in dirs.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


MODULES = modules()


def layer_of(module: str) -> str:
    prefixes = [
        (p, name) for name, ps in LAYERS.items() for p in ps if module == p or module.startswith(p + ".")
    ]
    return max(prefixes, key=lambda pair: len(pair[0]))[1]


def imported(module: str) -> dict[str, int]:
    """The package's modules that `module` imports, each with the line of its first import."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        while name and name not in MODULES:  # `from pkg.mod import name`: the module that defines it
            name = name.rpartition(".")[0]
        if name and name != module:
            found.setdefault(name, line)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
            submodules = [n for n in names if n in MODULES]  # `from pkg import mod` imports mod
            for name in submodules:
                add(name, node.lineno)
            if len(submodules) < len(names):
                add(base, node.lineno)
    return found


GRAPH = {module: imported(module) for module in MODULES}


def upward(layer: str) -> dict[str, int]:
    """``"FILE imports MODULE"`` → line, for each import of `layer` from a layer it may not import."""
    return {
        f"{MODULES[m].relative_to(REPO)} imports {target}": line
        for m in MODULES
        if layer_of(m) == layer
        for target, line in GRAPH[m].items()
        if layer_of(target) not in BELOW[layer] | {layer}
    }


def circles() -> set[str]:
    """Each set of modules that import each other in a circle, as ``"a, b, c"``."""
    components = strongly_connected({m: set(t) for m, t in GRAPH.items()})
    return {", ".join(sorted(c)) for c in components if len(c) > 1}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    found = [f"{where} (line {line})" for where, line in upward(layer).items()]
    assert not found, f"the {layer} layer imports only {sorted(BELOW[layer])}:\n" + "\n".join(found)


def test_no_modules_import_each_other_in_a_circle() -> None:
    found = sorted(circles())
    assert not found, "modules that import each other:\n" + "\n".join(found)


def test_the_learner_imports_no_rollout_strategy() -> None:
    """The learner's step order is every preset's: a strategy (R³L, the Decomposer) may use its parts
    (credit, off-policy correction), never the other way round."""
    learner_side = ("argym.algorithms.learner", "argym.algorithms.credit", "argym.algorithms.off_policy")
    strategies = ("argym.algorithms.r3l", "argym.algorithms.decomposer")
    found = [f"{m} imports {t}" for m in learner_side for t in GRAPH[m] if t.startswith(strategies)]
    assert not found, "\n".join(found)


def test_every_module_is_read() -> None:
    """The map covers the package: each top-level folder's modules, the wiring at the top."""
    assert {"argym.envs.base", "argym.cli.app", "argym.leaderboards.store", "argym.rewards.compose"} <= set(
        MODULES
    )
    assert {
        layer_of(m) for m in ("argym.cli", "argym.cluster.envs", "argym.check.runner", "argym.doctor")
    } == {"wiring"}
    assert layer_of("argym.registry") == "core" and layer_of("argym.envs.math.env") == "envs"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (the graph is a few hundred modules deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next((e for e in edges if e not in index or e in on_stack), None)
            if nxt is not None and nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
                continue
            if nxt is not None:
                low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
    return out
