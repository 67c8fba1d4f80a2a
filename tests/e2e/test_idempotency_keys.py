"""Idempotency keys unique forever: after `picobot restore` of an old backup the
outbox row ids start again, yet no new reply may carry a key the platform has
seen (the fakes drop a repeat silently, as Feishu and iLink do)."""

from __future__ import annotations

import io
from pathlib import Path

from channels.feishu.webhook import WEBHOOK_PATH
from gateway.cli.backup import run_backup, run_restore
from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_feishu import feishu_config, webhook_overrides
from tests.e2e.test_wechat import ALICE, wechat_config
from tests.fakes.feishu_server import ENCRYPT_KEY, EventSender, FakeFeishu, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wechat_server import FakeWechat
from tests.support import running_gateway


async def test_wechat_replies_after_a_restore_carry_new_client_ids(
    home: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    backup = tmp_path / "old-backup.db"
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake)
        async with running_gateway(loaded):
            await fake.add_message(ALICE, "before the backup")
            await fake.wait_for(lambda: len(fake.sent) >= 1, timeout=10)
        assert await run_backup(loaded.storage_path, backup, out=io.StringIO()) == 0
        async with running_gateway(loaded):
            await fake.add_message(ALICE, "after the backup")
            await fake.wait_for(lambda: len(fake.sent) >= 2, timeout=10)
        assert run_restore(backup, loaded.storage_path, force=False, out=io.StringIO()) == 0
        async with running_gateway(loaded):
            await fake.add_message(ALICE, "after the restore")
            await fake.wait_for(
                lambda: (
                    any(m.text == "echo: after the restore" for m in fake.sent)
                    or bool(fake.duplicates)
                ),
                timeout=10,
            )
        assert fake.duplicates == []
        assert "echo: after the restore" in [m.text for m in fake.sent]
        client_ids = [m.client_id for m in fake.sent]
        assert len(client_ids) == len(set(client_ids))


async def test_feishu_replies_after_a_restore_carry_new_uuids(
    home: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    backup = tmp_path / "old-backup.db"
    async with FakeFeishu() as fs:
        loaded = feishu_config(home, llm, fs, **webhook_overrides())

        async def ask(text: str, message_id: str) -> None:
            async with running_gateway(loaded) as gw:
                sender = EventSender(gw.base_url + WEBHOOK_PATH, ENCRYPT_KEY)
                await sender.post(message_event(text, message_id=message_id, chat_id="oc_dm"))
                await fs.wait_until(
                    lambda: any(s.text == f"echo: {text}" for s in fs.sent) or bool(fs.duplicates),
                    10,
                )

        await ask("before the backup", "om_1")
        assert await run_backup(loaded.storage_path, backup, out=io.StringIO()) == 0
        await ask("after the backup", "om_2")
        assert run_restore(backup, loaded.storage_path, force=False, out=io.StringIO()) == 0
        await ask("after the restore", "om_3")
    assert fs.duplicates == []
    assert [s.text for s in fs.sent] == [
        "echo: before the backup",
        "echo: after the backup",
        "echo: after the restore",
    ]
    uuids = [s.uuid for s in fs.sent]
    assert len(uuids) == len(set(uuids))
