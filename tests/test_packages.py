"""The house (issue 52): gateway/ as feature packages, each holding to the
rules its `__init__` docstring states.

Every package of gateway/ (but `cli`, which wires like the composition root)
says in its docstring

    Public: gateway.turns.execution, gateway.turns.run_slots, ...
    May import: agent, gateway.bus, gateway.config, storage, ...

Another package of gateway/ may import only its public modules (or the package
itself); the package may import only what `May import` lists (besides itself
and the module rules of tests/test_architecture.py, which still apply); the
packages import each other without a cycle. `gateway.app` and `gateway.cli`
wire everything and are exempt. The shape is held too: a few modules at the
top of gateway/, no package past ~15 modules, no family of same-prefix
siblings (`access_*`, `memory_*`) in gateway/ or storage/.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_architecture import REPO, ROOT, Graph, _under, cycles, scan

WIRING = ("gateway.app", "gateway.cli")  # the composition root and the operator CLI
MAX_TOP_MODULES = 12  # in gateway/ besides its packages
MAX_PACKAGE_MODULES = 15


@dataclass(frozen=True)
class PackageRule:
    public: frozenset[str]
    may_import: tuple[str, ...]


def _listed(doc: str, label: str) -> list[str] | None:
    found = re.search(rf"^{label}: (.+)$", doc, re.MULTILINE)
    return None if found is None else [x.strip() for x in found.group(1).split(",") if x.strip()]


def package_rules(root: Path) -> tuple[dict[str, PackageRule], list[str]]:
    """Each gateway package's rule, read from its docstring; and the packages
    whose docstring states none (a finding)."""
    rules: dict[str, PackageRule] = {}
    missing: list[str] = []
    for init in sorted((root / "gateway").glob("*/__init__.py")):
        name = f"gateway.{init.parent.name}"
        if _under(name, *WIRING):
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        public, may = _listed(doc, "Public"), _listed(doc, "May import")
        if public is None or may is None:
            missing.append(f"{init.relative_to(root)} states no 'Public:' and 'May import:' line")
            continue
        rules[name] = PackageRule(frozenset(public), tuple(may))
    return rules, missing


def _package(module: str, packages: set[str]) -> str | None:
    parts = module.split(".")
    name = ".".join(parts[:2])
    return name if len(parts) > 1 and name in packages else None


def package_findings(graph: Graph, rules: dict[str, PackageRule]) -> list[str]:
    packages = set(rules) | set(WIRING)
    found: list[str] = []
    between: Graph = Graph()
    for module, target, where in graph.edges():
        own, other = _package(module, packages), _package(target, packages)
        if own == other or _under(module, *WIRING):
            continue
        if own in rules and not _under(target, own, *rules[own].may_import):
            found.append(f"{module} imports {target}, not in {own}'s 'May import'  [{where}]")
        if other in rules and target != other and target not in rules[other].public:
            found.append(f"{module} imports {target}, not public in {other}  [{where}]")
        if own in rules and other in rules:
            between.imports.setdefault(own, {}).setdefault(other, where)
    found += [f"packages import each other in a circle: {sorted(c)}" for c in cycles(between)]
    return found


def shape_findings(root: Path) -> list[str]:
    found: list[str] = []
    top = [p for p in (root / "gateway").glob("*.py") if p.name != "__init__.py"]
    if len(top) > MAX_TOP_MODULES:
        found.append(f"gateway/ holds {len(top)} modules besides its packages")
    for folder in sorted(
        {p.parent for base in ("gateway", "storage") for p in (root / base).rglob("__init__.py")}
    ):
        modules = [p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")]
        if len(modules) > MAX_PACKAGE_MODULES:
            found.append(f"{folder.relative_to(root)}/ holds {len(modules)} modules")
        words = Counter(m.split("_")[0].removesuffix("s") for m in modules if "_" in m)
        for m in modules:  # `sessions` beside `session_reset` is a family too
            if "_" not in m and words[m.removesuffix("s")]:
                words[m.removesuffix("s")] += 1
        found += [
            f"{folder.relative_to(root)}/: a family of {n} '{word}…' modules: make it a package"
            for word, n in sorted(words.items())
            if n > 1
        ]
    return found


RULES, MISSING = package_rules(ROOT)


def test_every_gateway_package_states_its_rules() -> None:
    assert not MISSING, "\n".join(MISSING)
    assert {"gateway.config", "gateway.turns", "gateway.delivery", "gateway.access"} <= set(RULES)


def test_packages_hold_to_their_rules() -> None:
    bad = package_findings(REPO, RULES)
    assert not bad, "package rules (each package's __init__ docstring):\n" + "\n".join(bad)


def test_the_house_keeps_its_shape() -> None:
    bad = shape_findings(ROOT)
    assert not bad, "\n".join(bad)


def test_public_modules_named_in_the_rules_exist() -> None:
    files = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts) for p in ROOT.glob("gateway/**/*.py")
    }
    named = {m for rule in RULES.values() for m in rule.public}
    assert named - files - {n for n in named if f"{n}.__init__" in files} == set()


def entries_of_the_root(root: Path) -> dict[str, list[str]]:
    """The names gateway/app.py imports at run time from each gateway
    package (imports under `if TYPE_CHECKING:` only annotate)."""
    tree = ast.parse((root / "gateway" / "app.py").read_text(encoding="utf-8"))
    packages = {f"gateway.{p.parent.name}" for p in (root / "gateway").glob("*/__init__.py")}
    names: dict[str, list[str]] = {}
    for node in tree.body:  # module level: a TYPE_CHECKING block is an `if`, skipped
        if isinstance(node, ast.ImportFrom) and node.module:
            package = _package(node.module, packages)
            if package is not None and package != "gateway.cli":
                names.setdefault(package, []).extend(a.name for a in node.names)
    return names


def test_the_root_wires_one_entry_per_feature_package() -> None:
    entries = entries_of_the_root(ROOT)
    assert len(entries) >= 10
    assert {p: n for p, n in entries.items() if len(n) > 1} == {}


# --- self-test: the checks fail on a planted tree ----------------------------------------

PLANTED = {
    "gateway/__init__.py": "",
    "gateway/bus.py": "",
    "gateway/app.py": "from gateway.a.inner import X\nfrom gateway.b.api import Y\n",
    "gateway/a/__init__.py": '"""A.\n\nPublic: gateway.a.api\nMay import: gateway.bus\n"""\n',
    "gateway/a/api.py": "from gateway.a.inner import X\nfrom gateway.bus import M\n",
    "gateway/a/inner.py": "",
    "gateway/b/__init__.py": '"""B.\n\nPublic: gateway.b.api\nMay import: gateway.a, gateway.bus\n"""\n',
    "gateway/b/api.py": "from gateway.a.api import X\n",
}


def _planted(root: Path, extra: dict[str, str]) -> list[str]:
    for name, source in {**PLANTED, **extra}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source, encoding="utf-8")
    rules, missing = package_rules(root)
    return missing + package_findings(scan(root, ("gateway",)), rules) + shape_findings(root)


def test_a_planted_tree_that_keeps_the_rules_passes(tmp_path: Path) -> None:
    assert _planted(tmp_path, {}) == []


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (  # a package reaching into another's inside
            {"gateway/b/api.py": "from gateway.a.inner import X\n"},
            "gateway.b.api imports gateway.a.inner, not public in gateway.a",
        ),
        (  # an import the package does not declare, and a circle
            {"gateway/a/api.py": "from gateway.b.api import Y\n"},
            "gateway.a.api imports gateway.b.api, not in gateway.a's 'May import'",
        ),
        (
            {
                "gateway/a/__init__.py": '"""A.\n\nPublic: gateway.a.api\nMay import: gateway.b, gateway.bus\n"""\n',
                "gateway/a/api.py": "from gateway.b.api import Y\n",
            },
            "packages import each other in a circle: ['gateway.a', 'gateway.b']",
        ),
        ({"gateway/c/__init__.py": '"""C, with no rules."""\n'}, "gateway/c/__init__.py states no"),
        (
            {"gateway/memory_plan.py": "", "gateway/memory_setup.py": ""},
            "gateway/: a family of 2 'memory…' modules",
        ),
        (
            {f"gateway/a/m{n}.py": "" for n in range(16)},
            "gateway/a/ holds 18 modules",
        ),
    ],
)
def test_a_planted_violation_is_reported(
    tmp_path: Path, extra: dict[str, str], expected: str
) -> None:
    found = _planted(tmp_path, extra)
    assert any(expected in line for line in found), found
