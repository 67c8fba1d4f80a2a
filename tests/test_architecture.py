"""DESIGN §3: the dependency rules, checked by parsing every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "channels", "agent", "storage", "scheduler", "skills")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def _under(target: str, *prefixes: str) -> bool:
    return any(target == p or target.startswith(p + ".") for p in prefixes)


def _allowed(module: str, target: str) -> bool:
    top = module.split(".")[0]
    if target == module or target.startswith(module + "."):
        return True
    if module == "gateway.bus":
        return False  # a leaf
    if _under(module, "gateway.app", "gateway.cli"):  # the composition root, the operator CLI
        return True
    if top == "channels":
        return _under(target, "gateway.bus", "channels")
    if top == "agent":
        return _under(target, "agent")
    if top == "storage":
        return _under(target, "storage", "gateway.bus", "agent.messages")
    if top == "scheduler":
        return _under(target, "scheduler", "storage", "gateway.bus")
    if top == "skills":
        return _under(target, "skills", "agent.tools")
    return True  # the rest of gateway may use the layers below it


def edges() -> list[tuple[str, str]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = _module_name(path)
            found.extend((module, target) for target in sorted(_imports(path)))
    return found


def test_dependency_rules_hold() -> None:
    forbidden = [f"{m} imports {t}" for m, t in edges() if not _allowed(m, t)]
    assert forbidden == []


# SQL and sqlite3 live in storage/. These runtime modules still name
# sqlite3.Connection in the transaction functions they hand to Database; they
# are being rewritten, and drop off this list then. Nothing may join it.
_SQLITE3_NOT_YET_IN_STORAGE = {
    "gateway.commands",
    "gateway.context",
    "gateway.execution",
    "gateway.inbound",
    "gateway.outbound",
    "gateway.turns",
    "scheduler.admin",
    "scheduler.claims",
}


def _imports_sqlite3(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] == "sqlite3" for alias in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            return True
    return False


def test_only_storage_imports_sqlite3() -> None:
    found = {
        _module_name(path)
        for package in PACKAGES
        if package != "storage"
        for path in sorted((ROOT / package).rglob("*.py"))
        if _imports_sqlite3(path)
    }
    assert found <= _SQLITE3_NOT_YET_IN_STORAGE
    assert _imports_sqlite3(ROOT / "storage" / "db.py")  # the scan really looks


def test_the_checker_catches_forbidden_edges() -> None:
    assert not _allowed("channels.telegram.channel", "storage.db")
    assert not _allowed("channels.websocket", "gateway.config")
    assert not _allowed("agent.loop", "gateway.bus")
    assert not _allowed("storage.outbox", "gateway.config")
    assert not _allowed("gateway.bus", "agent.messages")
    assert not _allowed("channels.base", "gateway.busy")
    assert not _allowed("scheduler.service", "agent.loop")
    assert _allowed("channels.websocket", "gateway.bus")
    assert _allowed("gateway.app", "channels.telegram")
    assert len(edges()) > 50  # the scan really found the code
