"""Docs stay true: every config key is in docs/CONFIG.md, every section in the
example, every config example in the docs valid."""

from __future__ import annotations

import json
import os
import re
import subprocess
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from agent.mcp.config import McpServerConfig
from gateway.config.core import AgentConfig, Config, ModelConfig, ProviderConfig
from gateway.config.loading import parse_config

ROOT = Path(__file__).resolve().parents[1]
NAMED = {
    "providers": (ProviderConfig, "<name>"),
    "models": (ModelConfig, "<name>"),
    "agents": (AgentConfig, "<name>"),
    "mcpServers": (McpServerConfig, "<key>"),
}


def _keys(model: type[BaseModel], prefix: str) -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        spelled = field.alias or name  # as the file spells it (mcpServers, isActive, baseUrl)
        key = prefix + spelled
        if model is Config and spelled in NAMED:
            entry, placeholder = NAMED[spelled]
            keys.extend(_keys(entry, f"{spelled}.{placeholder}."))
            continue
        sub = [
            c
            for c in (field.annotation, *typing.get_args(field.annotation))
            if isinstance(c, type) and issubclass(c, BaseModel)
        ]
        keys.extend(_keys(sub[0], key + ".") if sub and key != "scheduler.jobs" else [key])
    return keys


def test_every_config_key_is_documented() -> None:
    doc = (ROOT / "docs" / "CONFIG.md").read_text()
    keys = _keys(Config, "")
    assert len(keys) > 100
    missing = [k for k in keys if f"`{k}`" not in doc]
    assert missing == []


def _config_examples() -> list[tuple[str, str]]:
    """Every code block in README*.md and docs/ that is a config (or a run of its
    top-level keys, shown without the outer braces): (where, the block)."""
    top = {f.alias or name for name, f in Config.model_fields.items()}
    found = []
    for path in sorted([*ROOT.glob("README*.md"), *(ROOT / "docs").rglob("*.md")]):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"```\w*\n(.*?)```", text, re.S):
            block = match.group(1)
            for candidate in (block, "{" + block + "}"):
                try:
                    parsed = json.loads(candidate)
                except ValueError:
                    continue
                if isinstance(parsed, dict) and parsed and set(parsed) <= top:
                    line = text.count("\n", 0, match.start()) + 1
                    found.append((f"{path.relative_to(ROOT)}:{line}", candidate))
                break
    return found


CONFIG_EXAMPLES = _config_examples()


def test_the_docs_show_config_examples() -> None:
    assert len(CONFIG_EXAMPLES) >= 10  # the scan finds them (each is checked below)


@pytest.mark.parametrize(("where", "block"), CONFIG_EXAMPLES, ids=[w for w, _ in CONFIG_EXAMPLES])
def test_each_config_example_in_the_docs_validates(where: str, block: str) -> None:
    """What a reader copies is a valid config once its `${VAR}`s are set."""
    names = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)|<([A-Z_][A-Z0-9_]*)>", block)
    # 43 characters: as long as a WeCom EncodingAESKey, the one value with a length
    env = dict.fromkeys((a or b for a, b in names), "k" * 43)
    parse_config(json.loads(block), env, source=where)  # raises ConfigError, naming the key


def test_example_config_has_every_section_and_channel() -> None:
    example = json.loads((ROOT / "config.example.json").read_text())
    assert set(example) == {f.alias or name for name, f in Config.model_fields.items()}
    assert set(example["channels"]) == {"websocket", "telegram", "feishu", "wechat", "wecom_kf"}


# each README's quick-start heading; both must give the same two commands
QUICK_STARTS = {"README.md": "## Quick start", "README.zh-CN.md": "## 快速开始"}


def quick_start_commands(readme: str, heading: str) -> list[str]:
    """The commands of the first ```sh block under `heading`, comments dropped."""
    section = readme.split(f"\n{heading}\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository as `git clone` gives it: committed files only, no .venv."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    clone = tmp_path_factory.mktemp("clone") / "picobot"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    return clone


@pytest.mark.parametrize(("name", "heading"), QUICK_STARTS.items())
def test_readme_quick_start_works_on_a_fresh_clone(
    name: str, heading: str, fresh_clone: Path
) -> None:
    """The README's two commands (English, and the Chinese README's) are
    `make run` and `make test`, and on a fresh clone make has a plan for each
    that bootstraps .venv from the lock and then runs the gateway / the tests
    (`make -n`: what it would run; the real run is the quick-start e2e test)."""
    readme = (ROOT / name).read_text(encoding="utf-8")
    assert quick_start_commands(readme, heading) == ["make run", "make test"]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    for command, runs in (("make run", "picobot gateway"), ("make test", "-m pytest")):
        plan = subprocess.run(
            [*command.split(), "-n"], cwd=fresh_clone, env=env, capture_output=True, text=True
        )
        assert plan.returncode == 0, plan.stderr
        assert "-m venv .venv" in plan.stdout
        assert "--require-hashes -r requirements.lock" in plan.stdout
        assert runs in plan.stdout.splitlines()[-1]
    for needed in ("config.example.json", "requirements.lock", "pyproject.toml"):
        assert (fresh_clone / needed).is_file(), needed


def test_the_readme_links_the_chinese_readme_at_the_top() -> None:
    top = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "(README.zh-CN.md)" in top
    zh = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    for page in ("README.md", "docs/channels/feishu.md", "docs/channels/wechat.md"):
        assert f"({page})" in zh
    assert "(docs/channels/wecom_kf.md)" in zh


def _trust_table() -> str:
    doc = (ROOT / "docs" / "access.md").read_text()
    start = doc.index("## Trust model: who may reach what")
    return doc[start : doc.index("\n## ", start + 1)]


def test_the_trust_model_table_names_tests_that_exist() -> None:
    """Every test the table cites is a file (and function) in the repo, and
    OPERATIONS.md and PROTOCOL.md point to the table instead of a copy."""
    table = _trust_table()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 15
    cited = re.findall(r"`(tests/[\w/]+\.py)(?:::([\w…]+))?`", table)
    assert len(cited) > 15
    for path, name in cited:
        source = (ROOT / path).read_text()
        if name:
            stem = name.removesuffix("…").removeprefix("…")
            assert f"def {stem}" in source or stem in source, (path, name)
    for page in ("OPERATIONS.md", "PROTOCOL.md"):
        assert "access.md#trust-model-who-may-reach-what" in (ROOT / "docs" / page).read_text()


def test_the_trust_model_table_covers_every_http_surface() -> None:
    table = _trust_table()
    for surface in ("`/ws`", "`/api/*`", "`/webhooks/*`", "`/health`", "`/ready`", "`/metrics`"):
        assert surface in table, surface


def test_the_architecture_map_is_linked_and_names_every_package() -> None:
    """docs/ARCHITECTURE.md is the newcomer's map: the README links it, and it
    names every package that exists (as `gateway/turns/`), so a package added
    without a line there fails here."""
    assert "(docs/ARCHITECTURE.md)" in (ROOT / "README.md").read_text()
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    packages = sorted(
        init.parent.relative_to(ROOT).as_posix() + "/"
        for top in ("gateway", "channels", "agent", "storage", "scheduler", "skills")
        for init in (ROOT / top).rglob("__init__.py")
    )
    assert len(packages) > 25
    assert [p for p in packages if f"`{p}`" not in doc] == []


def test_webui_shows_every_console_view_and_its_images_exist() -> None:
    """docs/WEBUI.md shows a screenshot of each console view (the views the
    page offers, read from js/console/console.js), and every image it links
    is in docs/webui/ (`make screenshots` writes them)."""
    page = (ROOT / "docs" / "WEBUI.md").read_text()
    script = (ROOT / "gateway" / "web" / "static" / "js" / "console" / "console.js").read_text()
    found = re.search(r"export const VIEWS = \[([^\]]*)\]", script)
    assert found is not None
    views = re.findall(r'"(\w+)"', found.group(1))
    assert len(views) >= 7
    for view in views:
        assert f"](webui/console-{view}-desktop-en.png)" in page, view
        assert f"(webui/console-{view}-phone-zh.png)" in page, view
    linked = re.findall(r"\]\((webui/[\w.-]+\.png)\)", page)
    assert [image for image in linked if not (ROOT / "docs" / image).is_file()] == []
