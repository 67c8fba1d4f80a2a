"""The English texts of the catalogue (`gateway.i18n`). Placeholders are
`{name}` fields filled by name; each must appear in every language's text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gateway.i18n.keys import Msg

__all__ = ["TEXTS"]

TEXTS: Final[Mapping[Msg, str]] = {
    # -- turns --------------------------------------------------------------------
    Msg.STOPPED: "Stopped. The running task was cancelled; send a new message to continue.",
    Msg.GENERIC_FAILURE: (
        "Sorry, something went wrong while answering. The gateway log has the details."
    ),
    Msg.EMPTY_REPLY: "(the model returned an empty reply)",
    Msg.SESSION_RESET: "New session: the previous one is archived (/sessions lists it).",
    Msg.NO_API_KEY: (
        "The gateway is not set up to answer yet: the model provider {provider!r} has no "
        "API key. Ask the operator to set {setting}."
    ),
    Msg.NOT_SET_UP: "The gateway is not set up to answer yet: {detail}",
    Msg.PROVIDER_AUTH: (
        "The model provider rejected the gateway's API key. Ask the operator to check it."
    ),
    Msg.PROVIDER_UNAVAILABLE: (
        "The model provider is unavailable right now, even after retrying. Please try again later."
    ),
    Msg.PROVIDER_FAILED: (
        "The model provider could not answer this request. The gateway log has the details."
    ),
    Msg.UNKNOWN_AGENT: "This request asks for agent {name!r}, which this gateway does not have.",
    Msg.SCHEDULED_FAILED: "Scheduled task {job} failed: {reason}",
    Msg.SCHEDULED_TIMED_OUT: (
        "Scheduled background task {job!r} failed. The operator can see the details in the logs."
    ),
    Msg.LATE_NOTE: (
        "(Sent late: this reply was written {waited} ago and could not be delivered until now.)"
    ),
    Msg.DAYS: "{n} d",
    Msg.HOURS: "{n} h",
    Msg.MINUTES: "{n} min",
    Msg.SECONDS: "{n} s",
    # -- inbound refusals ---------------------------------------------------------
    Msg.COMMANDS_QUEUED: (
        "I'm still working through {count} earlier commands in this chat. "
        "This one was not run: please send it again in a moment."
    ),
    Msg.MESSAGES_QUEUED: (
        "I'm still working on {count} earlier messages in this chat. "
        "This one was not queued: please wait for my reply and send it again."
    ),
    # -- the command registry -----------------------------------------------------
    Msg.HELP_HEADER: "Commands:",
    Msg.HELP_LINE: "/{name} — {help}",
    Msg.HELP_ADMINS_ONLY: " (admins only)",
    Msg.ADMIN_ONLY: "Only an admin can use /{name}. /whoami shows your id.",
    # -- session commands ---------------------------------------------------------
    Msg.HELP_HELP: "list the commands",
    Msg.HELP_NEW: "/new [TITLE]: start a new session and switch to it",
    Msg.HELP_SESSIONS: "list this chat's sessions",
    Msg.HELP_USE: "/use N (or an id or title): switch to another session",
    Msg.HELP_RENAME: "/rename TITLE: rename the current session",
    Msg.HELP_ARCHIVE: "archive the current session and start a new one",
    Msg.HELP_DELETE: "/delete [N or id]: delete a session (default: the current one) for good",
    Msg.HELP_STOP: "cancel the running task",
    Msg.HELP_STATUS: "show the session's size, context use and tokens",
    Msg.HELP_COMPACT: "compact the current session's history now",
    Msg.NOTHING_RUNNING: "Nothing is running.",
    Msg.TITLE: ' "{title}"',
    Msg.NO_SESSIONS: "No sessions yet in this chat. Send a message to start one.",
    Msg.SESSIONS_HEADER: "Sessions in this chat:",
    Msg.SESSIONS_LINE: "{n}. {id}{title} — {count} messages{archived}{current}",
    Msg.SESSIONS_ARCHIVED: " (archived)",
    Msg.SESSIONS_CURRENT: " ← current",
    Msg.SESSIONS_FOOTER: "Switch with /use N.",
    Msg.NEW_SESSION: "Started new session {id}{title}.",
    Msg.USE_USAGE: "Usage: /use N, or a session id or title (see /sessions).",
    Msg.NO_SUCH_SESSION: "No session {name!r} in this chat. See /sessions.",
    Msg.SWITCHED: "Switched to session {id}.",
    Msg.RENAME_USAGE: "Usage: /rename TITLE.",
    Msg.RENAMED: 'Renamed session {id} to "{title}".',
    Msg.BUSY: "A task is running in this chat; /stop it or wait, then try again.",
    Msg.BUSY_APPROVAL: (
        "A tool call in this chat is waiting for approval: answer it with /approve or /deny first."
    ),
    Msg.NOTHING_TO_ARCHIVE: "No session to archive.",
    Msg.ARCHIVED: "Archived session {old}; now in new session {new}.",
    Msg.NOTHING_TO_DELETE: "No session to delete.",
    Msg.DELETED_NOW_IN: "Deleted session {old}; now in new session {new}.",
    Msg.DELETED: "Deleted session {old}.",
    Msg.STATUS_NO_SESSION: "No session yet in this chat. Send a message to start one.",
    Msg.STATUS_SESSION: "Session {id}{title}",
    Msg.STATUS_MESSAGES: "Messages in the active history: {count} (segment {segment})",
    Msg.STATUS_TURNS: "User turns: {turns}; state: {state}",
    Msg.STATE_RUNNING: "running a task",
    Msg.STATE_IDLE: "idle",
    Msg.STATUS_COMPACTED: "Last compaction: {when}",
    Msg.NEVER: "never",
    Msg.STATUS_CONTEXT: (
        "Estimated context: {tokens:,} tokens, {share:.1%} of the {window:,}-token window "
        "(compaction above {trigger:,})"
    ),
    Msg.USAGE_NONE: "Tokens in this session: none reported yet",
    Msg.USAGE_TOKENS: (
        "Tokens in this session: {input:,} in, {output:,} out; {share:.1%} of the input read "
        "from the prompt cache ({read:,} read, {written:,} written)"
    ),
    Msg.USAGE_COST: "Estimated cost: {cost:,.4f} {currency} (at the prices of {model})",
    Msg.USAGE_FALLBACK: (
        "Last reply by the fallback model {model} ({primary} was unavailable; "
        "it is tried again first on later turns)"
    ),
    Msg.USAGE_TRACE: "Last turn's trace: {trace_id}",
    # -- /compact -----------------------------------------------------------------
    Msg.COMPACT_UNAVAILABLE: "Compaction is not available in this gateway.",
    Msg.NOTHING_TO_COMPACT: "Nothing to compact yet.",
    Msg.COMPACT_BUSY: "Compaction is busy right now; try again in a minute.",
    Msg.COMPACT_FAILED: (
        "Compaction failed; the history is unchanged. The gateway log has the details."
    ),
    Msg.COMPACT_TOO_SHORT: "Nothing to compact: the history has no more than {keep} user turns.",
    Msg.COMPACT_NO_GAIN: "Compaction would not make the history smaller; it was left as it is.",
    Msg.COMPACT_CONFLICT: "The history changed while compacting; nothing was changed. Try again.",
    Msg.COMPACTED_SUMMARISED: (
        "Compacted: about {before:,} → {after:,} tokens; older turns summarised, "
        "the last {keep} kept whole."
    ),
    Msg.COMPACTED_TRUNCATED: (
        "Compacted: about {before:,} → {after:,} tokens; older turns truncated (the summary "
        "call failed), the last {keep} kept whole."
    ),
    # -- access -------------------------------------------------------------------
    Msg.HELP_WHOAMI: "your id here, whether you are an admin, your access",
    Msg.HELP_PAIR: "/pair list | approve CODE | revoke CHANNEL:ID: let people in",
    Msg.YES: "yes",
    Msg.NO: "no",
    Msg.CHAT_DIRECT: "direct",
    Msg.CHAT_GROUP: "group",
    Msg.WHOAMI_YOU: "You are {who}",
    Msg.WHOAMI_ALIASES: "Also known as: {aliases}",
    Msg.WHOAMI_CHAT: "Chat: {chat} ({kind})",
    Msg.WHOAMI_ADMIN: "Admin: {admin}",
    Msg.WHOAMI_ACCESS: "Access: {access}",
    Msg.WHOAMI_PAIRING: "Pairing: {state}",
    Msg.ACCESS_INTERNAL: "yes",
    Msg.ACCESS_ADMIN: "yes (admin)",
    Msg.ACCESS_ALLOW_FROM: "yes (allow_from)",
    Msg.ACCESS_PAIRED: "yes (paired)",
    Msg.ACCESS_GROUP_NOT_SERVED: "no: this group is not served",
    Msg.ACCESS_NOT_ADDRESSED: "only when you mention me in this group",
    Msg.ACCESS_UNKNOWN_SENDER: "no: ask an admin to add you",
    Msg.PAIR_NONE: "No pairings and no pending codes.",
    Msg.PAIR_HEADER: "Pairings:",
    Msg.PAIR_USAGE: "Usage: /pair list | /pair approve CODE | /pair revoke CHANNEL:SENDER_ID",
    Msg.PAIR_APPROVE_USAGE: (
        "Usage: /pair approve CODE (the XXXX-XXXX code the new user was given)."
    ),
    Msg.PAIR_REVOKE_USAGE: "Usage: /pair revoke CHANNEL:SENDER_ID (as /pair list shows it).",
    Msg.REVOKED: "Revoked {who}.",
    Msg.NOTHING_TO_REVOKE: "{who} has no pairing to revoke.",
    Msg.APPROVED_NOTICE: (
        "An admin approved your access. You can talk to me now: send your message again."
    ),
    Msg.APPROVAL_APPROVED: "Approved {who} (code {code}); they have been told.",
    Msg.APPROVAL_ALREADY: "{who} is approved already; code {code} is spent.",
    Msg.THAT_SENDER: "that sender",
    Msg.APPROVAL_EXPIRED: (
        "Code {code} has expired. They get a new one when they write to the bot again "
        "(at most one an hour)."
    ),
    Msg.APPROVAL_UNKNOWN: (
        "No pending pairing code {code}. Check the code (`/pair list` shows them)."
    ),
    Msg.PAIRING_APPROVED_BY: "approved by {by} on {when}",
    Msg.PAIRING_PENDING: "code {code}, pending until {until}",
    Msg.REFUSAL_EXPLAIN: "Sorry, I only answer people the admin has let in. Your id is {who}: {ask}.",
    Msg.ASK_FOR_PAIRING_CODE: ("send me a private message to get a pairing code for the admin"),
    Msg.ASK_THE_ADMIN: "send it to the bot's admin if you need access",
    Msg.PAIRING_CODE: (
        "I don't know you yet. To get access, ask the bot's admin to approve pairing code "
        "{code} (valid for {minutes} minutes): they send /pair approve {code}"
    ),
    Msg.APPROVED_MEANWHILE: (
        "An admin approved your access in the meantime: send your message again."
    ),
    Msg.RATE_LIMITED: (
        "You are sending messages faster than I take them (at most {limit} {per}), "
        "so I did not answer this one. Send it again in {wait} s."
    ),
    Msg.RATE_LATER: (
        "You are sending messages faster than I take them (at most {limit} {per}); "
        "I will answer this one in about {wait} s."
    ),
    Msg.PER_MINUTE: "a minute",
    Msg.PER_HOUR: "an hour",
    # -- memory commands ----------------------------------------------------------
    Msg.HELP_MEMORY: "what I remember about you",
    Msg.HELP_FORGET: "/forget NAMESPACE/KEY | all: delete it",
    Msg.MEMORY_NONE: "I keep no memories about you.",
    Msg.MEMORY_HEADER: "I remember {count} thing(s) about you:",
    Msg.MEMORY_MORE: "… and {count} more",
    Msg.MEMORY_SUMMARY: "Summary:",
    Msg.MEMORY_FOOTER: "/forget NAMESPACE/KEY deletes one, /forget all deletes everything.",
    Msg.FORGOT_ALL: "Forgot everything about you ({count} memories and the summary).",
    Msg.FORGET_USAGE: "Usage: /forget NAMESPACE/KEY (as /memory shows it) or /forget all",
    Msg.FORGOT: "Forgot {name}.",
    Msg.FORGET_UNKNOWN: "I have no memory {name} about you.",
    # -- tool approval and steer -------------------------------------------------
    Msg.HELP_APPROVE: "/approve [N]: run the tool calls waiting for approval",
    Msg.HELP_DENY: "/deny [N] [REASON]: refuse the tool calls waiting for approval",
    Msg.HELP_STEER: "/steer TEXT: redirect the running task with TEXT",
    Msg.STEER_USAGE: "Usage: /steer TEXT — what the running task should do instead.",
    Msg.TOOL_APPROVAL_NONE: "Nothing is waiting for approval in this chat.",
    Msg.TOOL_APPROVAL_NOT_WAITING: ("Approval #{id} is not waiting for an answer in this chat."),
    Msg.TOOL_APPROVAL_ANSWERED: "Approval #{id} was already answered.",
    Msg.TOOL_APPROVAL_NOT_YOURS: (
        "Only the person who asked, or an admin, can answer this approval."
    ),
    Msg.TOOL_APPROVAL_ASK: "Approval needed (#{id}): I want to run",
    Msg.TOOL_APPROVAL_HOW: (
        "Reply /approve {id} to run it, or /deny {id} [reason] to refuse. "
        "No answer within {timeout} refuses it."
    ),
    Msg.TOOL_APPROVAL_APPROVE_BUTTON: "Approve",
    Msg.TOOL_APPROVAL_DENY_BUTTON: "Deny",
    # -- budgets ------------------------------------------------------------------------
    Msg.BUDGET_EXCEEDED: (
        "I did not pass this on to the model: {whose} {period} budget of {amount} is used "
        "up ({spent} so far). It starts afresh at {resets}. If you need more before then, "
        "ask the bot's admin (they can raise it with /limits); /usage shows your spending."
    ),
    Msg.BUDGET_NEAR: (
        "Heads-up: {pct}% of {whose} {period} budget of {amount} is used ({spent}). "
        "It starts afresh at {resets}."
    ),
    Msg.BUDGET_ADMIN: (
        "Budget used up: {scope} {key} reached its {period} budget of {amount} ({spent}); "
        "its requests get no answer from the model until {resets}. To raise it: "
        "/limits set {scope} {key} {field} VALUE"
    ),
    Msg.WHOSE_SENDER: "your",
    Msg.WHOSE_CHAT: "this chat's",
    Msg.WHOSE_AGENT: "this assistant's",
    Msg.WHOSE_TOTAL: "the bot's",
    Msg.PERIOD_DAILY: "daily",
    Msg.PERIOD_MONTHLY: "monthly",
    Msg.AMOUNT_TOKENS: "{n:,} tokens",
    Msg.AMOUNT_COST: "{cost} in cost",
    Msg.HELP_USAGE: "what you have spent today and this month, against your budgets",
    Msg.HELP_LIMITS: "the budgets that apply here; admins: /limits set|clear",
    Msg.USAGE_HEADER: "Spending of {who} (today is {date}):",
    Msg.USAGE_SCOPE: "{scope}: today {day_tokens:,} tokens, {day_cost} cost; this month {month_tokens:,} tokens, {month_cost} cost",
    Msg.USAGE_BUDGET: "  {period} budget of {whose}: {spent} of {amount} ({pct}%)",
    Msg.USAGE_NO_BUDGETS: "No budgets apply.",
    Msg.USAGE_ONLY_ADMINS: "Only admins can see someone else's spending.",
    Msg.LIMITS_HEADER: "Budgets that apply here:",
    Msg.LIMITS_LINE: "{scope} {key}: {field} = {value}",
    Msg.LIMITS_NONE: "No budgets apply here.",
    Msg.LIMITS_USAGE: (
        "Usage: /limits — the budgets that apply here. Admins: /limits set SCOPE KEY FIELD "
        "VALUE|none, /limits clear SCOPE KEY [FIELD]; SCOPE is sender, chat, agent or "
        "total; KEY is channel:id, an agent's name, or * for the scope's default; FIELD is "
        "daily_tokens, monthly_tokens, daily_cost or monthly_cost."
    ),
    Msg.LIMITS_SET: "Set: {scope} {key} {field} = {value}.",
    Msg.LIMITS_CLEARED: "Cleared {count} budget(s) of {scope} {key}; the configured ones apply.",
    Msg.LIMITS_NOTHING_TO_CLEAR: "No budget of {scope} {key} was set at run time.",
    Msg.LIMITS_ONLY_ADMINS: "Only admins can change budgets.",
}
