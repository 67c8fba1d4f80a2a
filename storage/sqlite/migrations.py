"""Versioned schema migrations: MIGRATIONS[n-1] brings the schema to version n.

Append only. Never edit a migration that has shipped; add a new one. The
database refuses to open when its version is newer than len(MIGRATIONS).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_V1_CORE = """
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    channel       TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    title         TEXT,
    status        TEXT NOT NULL DEFAULT 'active',   -- active | archived
    segment       INTEGER NOT NULL DEFAULT 0,       -- current (active) history segment
    next_seq      INTEGER NOT NULL DEFAULT 1,
    user_turns    INTEGER NOT NULL DEFAULT 0,
    prompt_turn   INTEGER,                          -- user_turns at the last AGENT.md injection
    compacted_at  TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX sessions_by_chat ON sessions (channel, chat_id, updated_at);

CREATE TABLE chat_bindings (
    channel     TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (channel, chat_id)
);

CREATE TABLE messages (
    id                 INTEGER PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq                INTEGER NOT NULL,
    segment            INTEGER NOT NULL,
    role               TEXT NOT NULL,
    content            TEXT NOT NULL DEFAULT '',
    tool_calls         TEXT,
    tool_call_id       TEXT,
    name               TEXT,
    reasoning_content  TEXT,
    media              TEXT,
    marker             TEXT,
    usage              TEXT,
    run_id             TEXT,
    created_at         TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX messages_by_segment ON messages (session_id, segment, seq);

CREATE TABLE inbox (
    id           INTEGER PRIMARY KEY,
    channel      TEXT NOT NULL,
    platform_id  TEXT NOT NULL,
    chat_id      TEXT NOT NULL,
    sender_id    TEXT NOT NULL,
    payload      TEXT NOT NULL,                     -- the InboundMessage as JSON
    state        TEXT NOT NULL DEFAULT 'received',  -- received | started | done
    session_id   TEXT,
    received_at  TEXT NOT NULL,
    finished_at  TEXT,
    UNIQUE (channel, platform_id)
);
CREATE INDEX inbox_unfinished ON inbox (state) WHERE state != 'done';

CREATE TABLE outbox (
    id                   INTEGER PRIMARY KEY,
    channel              TEXT NOT NULL,
    chat_id              TEXT NOT NULL,
    text                 TEXT NOT NULL,
    reply_to_message_id  TEXT,
    session_id           TEXT,
    inbox_id             INTEGER,
    metadata             TEXT,
    state                TEXT NOT NULL DEFAULT 'pending',  -- pending | parked | sent | failed
    attempts             INTEGER NOT NULL DEFAULT 0,
    next_attempt_at      TEXT,
    last_error           TEXT,
    created_at           TEXT NOT NULL,
    sent_at              TEXT
);
CREATE INDEX outbox_due ON outbox (channel, id) WHERE state = 'pending';
CREATE INDEX outbox_open ON outbox (channel, chat_id, id) WHERE state IN ('pending', 'parked');

CREATE TABLE channel_state (
    channel     TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (channel, key)
);
"""

_V2_SCHEDULER = """
CREATE TABLE scheduler_jobs (
    id                TEXT PRIMARY KEY,
    source            TEXT NOT NULL,                 -- config | builtin | runtime
    kind              TEXT NOT NULL,
    definition        TEXT NOT NULL,                 -- the validated job as JSON
    enabled           INTEGER NOT NULL DEFAULT 1,    -- from the definition
    paused            INTEGER NOT NULL DEFAULT 0,    -- runtime state (tool, CLI)
    overlap_policy    TEXT NOT NULL DEFAULT 'skip',  -- skip | allow
    next_run_at       TEXT,                          -- UTC ISO, NULL once a one-shot is done
    run_requested_at  TEXT,                          -- a manual run waiting to be claimed
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
CREATE INDEX scheduler_jobs_due ON scheduler_jobs (next_run_at) WHERE enabled = 1 AND paused = 0;

CREATE TABLE job_runs (
    id            INTEGER PRIMARY KEY,
    job_id        TEXT NOT NULL REFERENCES scheduler_jobs (id) ON DELETE CASCADE,
    scheduled_at  TEXT NOT NULL,
    cause         TEXT NOT NULL,   -- schedule | catch_up | manual
    status        TEXT NOT NULL,   -- claimed | running | succeeded | failed | timed_out | skipped | missed | interrupted
    claimed_at    TEXT NOT NULL,
    started_at    TEXT,
    finished_at   TEXT,
    duration_ms   INTEGER,
    error         TEXT,
    UNIQUE (job_id, scheduled_at)
);
CREATE INDEX job_runs_unfinished ON job_runs (job_id, status) WHERE status IN ('claimed', 'running');
"""

_V3_PAIRINGS = """
CREATE TABLE pairings (
    id           INTEGER PRIMARY KEY,
    channel      TEXT NOT NULL,
    sender_id    TEXT NOT NULL,
    chat_id      TEXT NOT NULL,       -- the private chat the code was sent to
    code         TEXT NOT NULL,       -- XXXX-XXXX
    state        TEXT NOT NULL,       -- pending | approved | revoked | expired
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,       -- end of the code's validity
    approved_by  TEXT,                -- "channel:sender_id" of the admin, or "host"
    approved_at  TEXT,
    revoked_at   TEXT
);
CREATE UNIQUE INDEX pairings_pending_code ON pairings (code) WHERE state = 'pending';
CREATE UNIQUE INDEX pairings_approved ON pairings (channel, sender_id) WHERE state = 'approved';
CREATE INDEX pairings_by_sender ON pairings (channel, sender_id, created_at);
"""


# When `picobot outbox retry` put a row back: its give-up clock starts there
# (NULL: at created_at, which stays the age the late-reply note reports).
_V4_OUTBOX_REQUEUED = """
ALTER TABLE outbox ADD COLUMN requeued_at TEXT;
"""


# Inbound events that could not be parsed or recorded (storage/sql/delivery/dead_letters.py);
# and the inbox dedup key becomes (channel, chat_id, platform_id): a platform
# id that embeds the chat (the WebSocket's "chat/client-id") can no longer
# collide across chats whose ids contain the separator. SQLite cannot drop a
# UNIQUE constraint, so the inbox table is rebuilt with its rows and ids.
_V5_DEAD_LETTERS_INBOX_KEY = """
CREATE TABLE dead_letters (
    id           INTEGER PRIMARY KEY,
    channel      TEXT NOT NULL,
    platform_id  TEXT,                 -- the platform's id for the event, when it had one
    payload      TEXT NOT NULL,        -- the raw event, capped (storage/sql/delivery/dead_letters.py)
    truncated    INTEGER NOT NULL DEFAULT 0,
    reason       TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX dead_letters_by_channel ON dead_letters (channel, id);

CREATE TABLE inbox_v5 (
    id           INTEGER PRIMARY KEY,
    channel      TEXT NOT NULL,
    platform_id  TEXT NOT NULL,
    chat_id      TEXT NOT NULL,
    sender_id    TEXT NOT NULL,
    payload      TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'received',
    session_id   TEXT,
    received_at  TEXT NOT NULL,
    finished_at  TEXT,
    UNIQUE (channel, chat_id, platform_id)
);
INSERT INTO inbox_v5 (id, channel, platform_id, chat_id, sender_id, payload, state,
                      session_id, received_at, finished_at)
    SELECT id, channel, platform_id, chat_id, sender_id, payload, state,
           session_id, received_at, finished_at FROM inbox;
DROP TABLE inbox;
ALTER TABLE inbox_v5 RENAME TO inbox;
CREATE INDEX inbox_unfinished ON inbox (state) WHERE state != 'done';
"""


# Long-term memory (docs/memory.md). `memories_fts` is an external-content
# FTS5 index over `memories`, kept in step by storage.sql.memory.memories (no triggers:
# the migration runner splits scripts on semicolons). `memory_scopes` holds a
# scope's change counter, what maintenance last saw, and its summary;
# `memory_audit` keeps what maintenance merged away, superseded or dropped.
_V6_MEMORIES = """
CREATE TABLE memories (
    id                  INTEGER PRIMARY KEY,
    scope_kind          TEXT NOT NULL,              -- user
    scope_key           TEXT NOT NULL,              -- channel:sender_id
    namespace           TEXT NOT NULL,
    memory_key          TEXT NOT NULL,
    content             TEXT NOT NULL,
    category            TEXT,                       -- fact | preference | behaviour | other
    source_type         TEXT NOT NULL,              -- agent | memory_maintenance
    source_session_id   TEXT,
    source_message_id   TEXT,
    source_message_seq  INTEGER,
    source_channel      TEXT,
    source_chat_id      TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    UNIQUE (scope_kind, scope_key, namespace, memory_key)
);
CREATE INDEX memories_recent ON memories (scope_kind, scope_key, updated_at);
CREATE VIRTUAL TABLE memories_fts USING fts5(
    namespace, memory_key, content, content='memories', content_rowid='id', tokenize='trigram'
);
CREATE TABLE memory_scopes (
    scope_kind           TEXT NOT NULL,
    scope_key            TEXT NOT NULL,
    revision             INTEGER NOT NULL DEFAULT 0,  -- bumped by every change
    maintained_revision  INTEGER NOT NULL DEFAULT 0,  -- the revision maintenance last left
    summary              TEXT,
    maintained_at        TEXT,
    PRIMARY KEY (scope_kind, scope_key)
);
CREATE TABLE memory_audit (
    id           INTEGER PRIMARY KEY,
    scope_kind   TEXT NOT NULL,
    scope_key    TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    memory_key   TEXT NOT NULL,
    content      TEXT NOT NULL,
    action       TEXT NOT NULL,   -- merged | superseded | dropped
    reason       TEXT,
    replaced_by  TEXT,            -- namespace/key of the entry that took its place
    source_type  TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    recorded_at  TEXT NOT NULL
);
CREATE INDEX memory_audit_by_scope ON memory_audit (scope_kind, scope_key, recorded_at);
"""


# Skill discovery and usage events (storage/sql/skill_events.py, docs/skills.md).
_V7_SKILL_EVENTS = """
CREATE TABLE skill_events (
    id          INTEGER PRIMARY KEY,
    event       TEXT NOT NULL,   -- discovered | invalid | activated | created | updated | deleted | disabled | enabled
    skill       TEXT NOT NULL,
    source      TEXT,            -- builtin | user | user_agent | ... | project_openclaw
    path        TEXT,            -- the SKILL.md (or state file) concerned
    session_id  TEXT,            -- set for what a tool call did
    channel     TEXT,
    chat_id     TEXT,
    detail      TEXT,            -- e.g. why a SKILL.md is invalid
    created_at  TEXT NOT NULL
);
CREATE INDEX skill_events_by_skill ON skill_events (skill, id);
"""


# Memory search moved to an inverted index in the process (storage.sql.memory.index):
# ranking every FTS5 match by BM25 cost 5-35 ms a search at 10,000 entries.
_V8_NO_MEMORY_FTS = """
DROP TABLE memories_fts;
"""


# A random idempotency key per outbox row (Feishu `uuid`, WeChat `client_id`):
# keys derived from the row id repeat after a restore, on a fresh database or
# with two gateways on one bot, and the platform then drops a new reply as a
# duplicate. Rows already written get a random key of their own here. `media`:
# the files an outbound message carries (OutboundMessage.media).
_V9_OUTBOX_IDEMPOTENCY_KEY = """
ALTER TABLE outbox ADD COLUMN idempotency_key TEXT;
ALTER TABLE outbox ADD COLUMN media TEXT;        -- JSON list of files sent with the text
UPDATE outbox SET idempotency_key = lower(hex(randomblob(16))) WHERE idempotency_key IS NULL;
CREATE UNIQUE INDEX outbox_idempotency_key ON outbox (idempotency_key);
"""


# Tool calls held for a person's approval (storage/sql/approvals.py, docs/approvals.md).
_V10_APPROVALS = """
CREATE TABLE approvals (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL,
    channel     TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    requester   TEXT NOT NULL,   -- the sender whose turn asked for the calls
    message     TEXT NOT NULL,   -- that turn's inbound message (inbox JSON), to resume it
    inbox_ids   TEXT NOT NULL,   -- JSON list: the turn's inbox rows (closed at the pause)
    calls       TEXT NOT NULL,   -- JSON list of the batch's calls {id, name, arguments}
    held        TEXT NOT NULL,   -- JSON list of the ids of the calls that need approval
    state       TEXT NOT NULL,   -- pending | approved | denied | executing | settled | done
    decision    TEXT,            -- approve | deny, once decided
    reason      TEXT,            -- a denial's reason
    decided_by  TEXT,            -- channel:sender_id, or "timeout"
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    run_id      TEXT             -- the paused turn's: the batch's results are stored in it
);
CREATE INDEX approvals_open ON approvals (channel, chat_id) WHERE state != 'done';
"""


# The latest agent prompt and compaction summary before a window's cut
# (storage/sql/conversations/history_window.py), found without scanning the rows between: only
# marked rows are in it (prompts, summaries, session messages, failed turns).
_V11_MESSAGE_MARKERS = """
CREATE INDEX messages_by_marker ON messages (session_id, segment, marker, seq)
    WHERE marker IS NOT NULL;
"""


# A chat's sessions are looked up by (channel, chat_id) and listed by
# created_at; `updated_at` in the index made every turn's update of the
# session row (its next_seq and activity time) move an index entry too: one
# more page written to the WAL per turn, for a column no query sorts by.
_V12_SESSIONS_BY_CHAT = """
DROP INDEX sessions_by_chat;
CREATE INDEX sessions_by_chat ON sessions (channel, chat_id);
"""


# Failed outbox rows, counted by every metrics scrape (outbox.unsent_counts)
# without scanning the delivered rows kept for the retention period. A row
# enters it only when it fails: a reply's insert and its marking as sent
# write nothing to it.
_V13_OUTBOX_FAILED = """
CREATE INDEX outbox_failed ON outbox (id) WHERE state = 'failed';
"""


# Who owns a chat of a channel whose clients authenticate as principals (the
# WebSocket channel; storage/sql/access/chat_owners.py): the first principal that used
# the id. History, live frames and parked replies go only to the owner.
_V14_CHAT_OWNERS = """
CREATE TABLE chat_owners (
    channel     TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    owner       TEXT NOT NULL,   -- a principal, e.g. "operator" or "token:alice"
    claimed_at  TEXT NOT NULL,
    PRIMARY KEY (channel, chat_id)
) WITHOUT ROWID;
"""


# Scheduler jobs have owners (scheduler/admin.py): who created a runtime job
# (channel, sender). NULL for config and built-in jobs, and for runtime jobs
# stored before this version: only admins may manage those.
_V15_JOB_OWNERS = """
ALTER TABLE scheduler_jobs ADD COLUMN owner_channel TEXT;
ALTER TABLE scheduler_jobs ADD COLUMN owner_sender_id TEXT;
"""


# Rate limits that hold across sessions, sub-agents and restarts
# (storage/sql/access/rate_events.py): one row per counted act, pruned as the window passes.
_V16_RATE_EVENTS = """
CREATE TABLE rate_events (
    id   INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,   -- what is limited: session_message | refusal_reply
    key  TEXT NOT NULL,   -- whom it is counted against, e.g. from:telegram:42
    at   TEXT NOT NULL
);
CREATE INDEX rate_events_by_key ON rate_events (kind, key, at);
CREATE INDEX rate_events_by_age ON rate_events (kind, at);
"""


# Budgets and usage reports (storage/sql/spend.py): running totals per scope,
# key and period; one log row per model call; budgets set at run time.
_V17_SPEND = """
CREATE TABLE spend_totals (
    scope       TEXT NOT NULL,   -- sender | chat | agent | total
    key         TEXT NOT NULL,   -- telegram:42 | feishu:oc_x | default | *
    period      TEXT NOT NULL,   -- day:2026-12-07 | month:2026-12 (time.timezone)
    tokens      INTEGER NOT NULL,
    cost        REAL NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (scope, key, period)
) WITHOUT ROWID;
CREATE TABLE usage_log (
    id                  INTEGER PRIMARY KEY,
    at                  TEXT NOT NULL,
    day                 TEXT NOT NULL,   -- the local date
    channel             TEXT NOT NULL,
    chat_id             TEXT NOT NULL,
    sender_id           TEXT NOT NULL,
    agent               TEXT NOT NULL,
    model               TEXT NOT NULL,
    kind                TEXT NOT NULL,   -- turn | compaction | memory
    run_id              TEXT,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cache_read_tokens   INTEGER NOT NULL,
    cache_write_tokens  INTEGER NOT NULL,
    cost                REAL              -- NULL: the model has no prices
);
CREATE INDEX usage_log_by_day ON usage_log (day, channel, sender_id);
CREATE INDEX usage_log_by_run ON usage_log (run_id);
CREATE TABLE limit_overrides (
    scope   TEXT NOT NULL,
    key     TEXT NOT NULL,
    field   TEXT NOT NULL,   -- daily_tokens | monthly_tokens | daily_cost | monthly_cost
    value   REAL,            -- NULL: no limit
    set_by  TEXT NOT NULL,
    set_at  TEXT NOT NULL,
    PRIMARY KEY (scope, key, field)
) WITHOUT ROWID;
"""


# The outbox rows the operator discarded (the console's Delivery view, `picobot
# outbox discard`), counted and listed through their own partial index: never
# a walk past the delivered rows kept for storage.retention_days.
_V18_OUTBOX_DISCARDED = """
CREATE INDEX outbox_discarded ON outbox (id) WHERE state = 'discarded';
"""


# Several gateways on one database (docs/scale-out.md): the live workers and the
# leases they hold (a chat's turns, a channel's connection and sends), each valid
# while its owner's row is unexpired; `job_runs.worker` is the claimer of a run.
# Only PostgreSQL runs several workers; SQLite keeps the tables so that both
# schemas stay one.
_V19_WORKERS = """
CREATE TABLE workers (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    address       TEXT NOT NULL,
    started_at    REAL NOT NULL,
    heartbeat_at  REAL NOT NULL,
    expires_at    REAL NOT NULL
);
CREATE TABLE leases (
    key       TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    token     INTEGER NOT NULL,
    taken_at  REAL NOT NULL
);
CREATE INDEX leases_by_owner ON leases (owner);
ALTER TABLE job_runs ADD COLUMN worker TEXT;
"""


# A chat's unfinished inbox rows, read by the worker that holds the chat each
# time it is handed the chat (docs/scale-out.md): never a walk of the chat's
# finished rows.
_V20_INBOX_UNFINISHED_BY_CHAT = """
CREATE INDEX inbox_unfinished_by_chat ON inbox (channel, chat_id, id) WHERE state != 'done';
"""


MIGRATIONS: list[str] = [
    _V1_CORE,
    _V2_SCHEDULER,
    _V3_PAIRINGS,
    _V4_OUTBOX_REQUEUED,
    _V5_DEAD_LETTERS_INBOX_KEY,
    _V6_MEMORIES,
    _V7_SKILL_EVENTS,
    _V8_NO_MEMORY_FTS,
    _V9_OUTBOX_IDEMPOTENCY_KEY,
    _V10_APPROVALS,
    _V11_MESSAGE_MARKERS,
    _V12_SESSIONS_BY_CHAT,
    _V13_OUTBOX_FAILED,
    _V14_CHAT_OWNERS,
    _V15_JOB_OWNERS,
    _V16_RATE_EVENTS,
    _V17_SPEND,
    _V18_OUTBOX_DISCARDED,
    _V19_WORKERS,
    _V20_INBOX_UNFINISHED_BY_CHAT,
]
