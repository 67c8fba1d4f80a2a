"""DESIGN §3: the dependency rules, checked by parsing every module's imports.

`scan` reads a source tree (the repo, or a planted one in the self-test) into a
graph of module -> imported project modules. Every import counts: module level,
inside functions, under `if TYPE_CHECKING:`, relative, and `importlib.import_module`
/ `__import__` with a literal name. Edges resolve to real module files:
`from gateway.bus import Message` is an edge to `gateway.bus`, and `from gateway
import bus` one to `gateway.bus` alone (like `import gateway.bus`, it does not
count the package `__init__` that Python runs on the way).
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "channels", "agent", "storage", "scheduler", "skills")


@dataclass
class Graph:
    imports: dict[str, dict[str, str]] = field(default_factory=dict)  # module -> {target: where}
    external: dict[str, dict[str, str]] = field(default_factory=dict)  # non-project imports
    problems: list[str] = field(default_factory=list)  # imports the scan could not resolve

    def edges(self) -> list[tuple[str, str, str]]:
        return [(m, t, w) for m, ts in sorted(self.imports.items()) for t, w in sorted(ts.items())]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(package: list[str], level: int, name: str | None) -> str | None:
    """`from <level dots><name>` seen from `package`; None if it climbs above the root."""
    if level - 1 > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


class _Visitor(ast.NodeVisitor):
    """Collects (base, names or None, line, type_checking) for every import it sees."""

    def __init__(self, package: list[str]) -> None:
        self.package = package
        self.found: list[tuple[str | None, list[str] | None, int, bool]] = []
        self._type_checking = False

    def _add(self, base: str | None, names: list[str] | None, line: int) -> None:
        self.found.append((base, names, line, self._type_checking))

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            return self.generic_visit(node)
        self._type_checking, outer = True, self._type_checking
        for child in node.body:
            self.visit(child)
        self._type_checking = outer
        for child in node.orelse:
            self.visit(child)
        return None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, None, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _absolute(self.package, node.level, node.module) if node.level else node.module
        self._add(base, [alias.name for alias in node.names], node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        arg = node.args[0] if node.args else None
        if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
            literal = str(arg.value)
            level = len(literal) - len(literal.lstrip("."))
            pkg = node.args[1] if len(node.args) > 1 and name == "import_module" else None
            pkg = next((k.value for k in node.keywords if k.arg == "package"), pkg)
            if level and isinstance(pkg, ast.Constant):
                self._add(
                    _absolute(str(pkg.value).split("."), level, literal[level:]), None, node.lineno
                )
            elif level and isinstance(pkg, ast.Name) and pkg.id == "__package__":
                self._add(_absolute(self.package, level, literal[level:]), None, node.lineno)
            else:
                self._add(None if level else literal, None, node.lineno)
        self.generic_visit(node)


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def scan(root: Path, packages: tuple[str, ...] = PACKAGES) -> Graph:
    files = {
        _module_name(root, path): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }

    def project_module(name: str) -> str:  # the longest prefix that is a real module
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in files:
                return ".".join(parts[:end])
        return name  # not in the tree: keep the name so the rules still apply

    graph = Graph()
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        package = module.split(".") if is_package else module.split(".")[:-1]
        visitor = _Visitor(package)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for base, names, line, type_checking in visitor.found:
            where = f"{path.relative_to(root)}:{line}" + (
                " (TYPE_CHECKING)" if type_checking else ""
            )
            if base is None:
                graph.problems.append(f"cannot resolve an import  [{where}]")
                continue
            targets = set() if names else {base}
            for name in names or []:  # `from pkg import sub` is an edge to the module pkg.sub
                sub = f"{base}.{name}".lstrip(".")
                targets.add(sub if sub in files or not base else base)
            for target in sorted(t for t in targets if t):
                if target.split(".")[0] in packages:
                    resolved = project_module(target)
                    if resolved != module:
                        graph.imports.setdefault(module, {}).setdefault(resolved, where)
                else:
                    graph.external.setdefault(module, {}).setdefault(target, where)
    return graph


def _under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _is_cli(name: str) -> bool:
    return _under(name, "gateway.cli")


def allowed(module: str, target: str) -> bool:
    top = module.split(".")[0]
    if module in ("gateway.app",) or _is_cli(module):
        return True  # the composition root and the CLI wire everything
    if target == "gateway.app" or _is_cli(target):
        return False  # nothing at run time reaches up into the root or the CLI
    if module == "gateway.bus":
        return False  # a leaf
    if module == "gateway.delivery.registry":
        return True  # builds the concrete channels for the root
    if module == "gateway.tools.skills":  # wires the skill runtime to the context and storage
        return _under(target, "gateway", "agent", "storage", "skills")
    if top == "channels":
        return _under(target, "gateway.bus", "channels")
    if top == "agent":
        return _under(target, "agent")
    if top == "storage":
        return _under(target, "storage", "gateway.bus", "agent.messages")
    if top == "scheduler":
        return _under(target, "scheduler", "storage", "gateway.bus")
    if top == "skills":  # the tool protocol, and the front-matter parser shared with agent/
        return _under(target, "skills", "agent.tools", "agent.front_matter")
    if top == "gateway":
        if module == "gateway.config.core" and (
            target == "channels.websocket" or re.fullmatch(r"channels\.[^.]+\.config", target)
        ):
            return True  # the config model embeds each channel's config class
        return _under(target, "gateway", "agent", "storage", "channels.base", "scheduler.config")
    return False  # a package with no rule


def forbidden_edges(graph: Graph) -> list[str]:
    bad = [f"{m} imports {t}  [{w}]" for m, t, w in graph.edges() if not allowed(m, t)]
    return bad + graph.problems


def sqlite3_outside_storage(graph: Graph) -> list[str]:
    return [
        f"{module} imports {name}  [{where}]"
        for module, names in sorted(graph.external.items())
        for name, where in sorted(names.items())
        if name.split(".")[0] in ("sqlite3", "_sqlite3") and not _under(module, "storage")
    ]


def cycles(graph: Graph) -> list[set[str]]:
    """Strongly connected components of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.imports.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph.imports):
        if node not in index:
            visit(node)
    return found


def _show(graph: Graph, component: set[str]) -> str:
    """One shortest cycle through the component's first module, edge by edge."""
    start = min(component)
    paths, queue = {start: [start]}, [start]
    for node in queue:  # BFS: the queue grows while we walk it
        for nxt in sorted(graph.imports.get(node, {})):
            if nxt == start:
                cycle = [*paths[node], start]
                lines = [
                    f"{a} -> {b}  [{graph.imports[a][b]}]" for a, b in itertools.pairwise(cycle)
                ]
                rest = sorted(component - set(cycle))
                more = [f"(same cycle group: {', '.join(rest)})"] if rest else []
                return "\n    ".join([" -> ".join(cycle), *lines, *more])
            if nxt in component and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")  # cannot happen in a component


def findings(graph: Graph) -> list[str]:
    """Everything the checks below report, in one list (used by the self-test)."""
    found = [_show(graph, c) for c in cycles(graph)]
    return forbidden_edges(graph) + found + sqlite3_outside_storage(graph)


# --- the real repo --------------------------------------------------------------------

REPO = scan(ROOT)


def test_the_scan_found_the_code() -> None:
    assert len(REPO.edges()) > 50


def test_dependency_rules_hold() -> None:
    bad = forbidden_edges(REPO)
    assert not bad, "forbidden imports (DESIGN §3):\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    found = cycles(REPO)
    assert not found, "import cycles:\n" + "\n".join(_show(REPO, c) for c in found)


def test_no_sqlite3_outside_storage() -> None:
    bad = sqlite3_outside_storage(REPO)
    assert not bad, "sqlite3 outside storage/ (use storage's API):\n" + "\n".join(bad)


# --- self-test: the checker on a planted tree -----------------------------------------

CLEAN_TREE = {
    "gateway/__init__.py": "",
    "gateway/bus.py": "import asyncio\n",
    "gateway/app.py": "import channels.tg.bot\nimport scheduler.jobs\n",
    "gateway/cli.py": "from gateway.app import main\n",
    "gateway/config/core.py": "from channels.tg.config import C\nfrom scheduler.config import S\n",
    "gateway/turns.py": (
        "from typing import TYPE_CHECKING\nfrom gateway.bus import Message\n"
        "from storage import db\nfrom channels.base import Channel\n"
        "if TYPE_CHECKING:\n    from agent.a import A\n"
    ),
    "channels/__init__.py": "",
    "channels/base.py": "from gateway.bus import Message\n",
    "channels/tg/__init__.py": "",
    "channels/tg/config.py": "",
    "channels/tg/bot.py": "from . import config\nfrom ..base import Channel\nfrom gateway import bus\n",
    "agent/__init__.py": "",
    "agent/messages.py": "",
    "agent/a.py": "from . import b\n",
    "agent/b.py": "import json\n",
    "storage/__init__.py": "",
    "storage/db.py": "import sqlite3\nfrom ..agent.messages import ChatMessage\nfrom .rows import Row\n",
    "storage/rows.py": "from sqlite3 import Row\n",
    "scheduler/__init__.py": "",
    "scheduler/config.py": "",
    "scheduler/jobs.py": "import importlib\nfrom storage.db import Db\ncfg = importlib.import_module('scheduler.config')\n",
}


def _plant(root: Path, extra: dict[str, str]) -> Graph:
    for name, source in {**CLEAN_TREE, **extra}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source, encoding="utf-8")
    return scan(root)


def test_a_clean_planted_tree_passes_and_resolves_real_modules(tmp_path: Path) -> None:
    graph = _plant(tmp_path, {})
    assert findings(graph) == []
    assert graph.imports["channels.tg.bot"] == {
        "channels.tg.config": "channels/tg/bot.py:1",
        "channels.base": "channels/tg/bot.py:2",
        "gateway.bus": "channels/tg/bot.py:3",
    }
    assert set(graph.imports["storage.db"]) == {"agent.messages", "storage.rows"}
    assert graph.imports["gateway.turns"]["agent.a"] == "gateway/turns.py:6 (TYPE_CHECKING)"
    assert set(graph.imports["scheduler.jobs"]) == {"storage.db", "scheduler.config"}
    assert "gateway.bus" not in graph.imports
    assert "sqlite3" in graph.external["storage.rows"]  # allowed there, flagged elsewhere


TC = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
PLANTED = [  # (files added to or replacing the clean tree, a line the checker must report)
    (
        {"channels/x.py": "from storage.db import Db\n"},
        "channels.x imports storage.db  [channels/x.py:1]",
    ),
    (
        {"channels/y.py": "from ..storage import db\n"},
        "channels.y imports storage.db  [channels/y.py:1]",
    ),
    (
        {"channels/z.py": "import importlib\nimportlib.import_module('storage.db')\n"},
        "channels.z imports storage.db  [channels/z.py:2]",
    ),
    ({"channels/w.py": "def f():\n    __import__('agent.a')\n"}, "channels.w imports agent.a"),
    ({"agent/b.py": "from agent import a\n"}, "agent.a -> agent.b -> agent.a"),
    (
        {"agent/b.py": TC + "    from .a import A\n"},
        "agent.b -> agent.a  [agent/b.py:3 (TYPE_CHECKING)]",
    ),
    (
        {"agent/b.py": "import agent.c\nimport agent.a\n", "agent/c.py": "import agent.b\n"},
        "(same cycle group: agent.c)",
    ),
    ({"gateway/x.py": "import sqlite3\n"}, "gateway.x imports sqlite3  [gateway/x.py:1]"),
    ({"gateway/x.py": "from sqlite3 import connect\n"}, "gateway.x imports sqlite3"),
    (
        {"gateway/x.py": "import importlib\nimportlib.import_module('sqlite3')\n"},
        "gateway.x imports sqlite3",
    ),
    ({"gateway/bus.py": "from agent.messages import M\n"}, "gateway.bus imports agent.messages"),
    ({"gateway/x.py": "from channels.tg import bot\n"}, "gateway.x imports channels.tg.bot"),
    (
        {"gateway/x.py": "from channels.tg.config import C\n"},
        "gateway.x imports channels.tg.config",
    ),
    ({"gateway/x.py": "import scheduler.jobs\n"}, "gateway.x imports scheduler.jobs"),
    ({"gateway/x.py": "from gateway.app import run\n"}, "gateway.x imports gateway.app"),
    ({"storage/x.py": "from gateway.turns import T\n"}, "storage.x imports gateway.turns"),
    ({"scheduler/x.py": "import agent.a\n"}, "scheduler.x imports agent.a"),
    ({"agent/x.py": "from ... import gateway\n"}, "cannot resolve an import  [agent/x.py:1]"),
]


@pytest.mark.parametrize(("planted", "expected"), PLANTED)
def test_the_checker_flags_a_planted_violation(
    tmp_path: Path, planted: dict[str, str], expected: str
) -> None:
    found = findings(_plant(tmp_path, planted))
    assert any(expected in line for line in found), found


@pytest.mark.parametrize(
    ("module", "target", "ok"),
    [
        ("gateway.config.core", "channels.websocket", True),
        ("gateway.config.core", "channels.base", True),
        ("gateway.config.core", "channels.feishu.channel", False),
        ("gateway.delivery.outbound", "channels.websocket", False),
        ("gateway.delivery.outbound", "scheduler.config", True),
        ("gateway.delivery.outbound", "gateway.cli.jobs", False),
        ("gateway.cli.doctor.main", "channels.telegram.channel", True),
        ("gateway.delivery.registry", "channels.wechat.channel", True),
        ("gateway.delivery.registry", "gateway.app", False),
        ("channels.base", "gateway.busy", False),
        ("skills.x", "agent.tools.base", True),
        ("skills.x", "agent.loop", False),
    ],
)
def test_rule_table(module: str, target: str, ok: bool) -> None:
    assert allowed(module, target) is ok
