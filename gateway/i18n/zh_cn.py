"""The Simplified Chinese texts of the catalogue (`gateway.i18n`): the same
keys and the same `{name}` placeholders as `gateway.i18n.en`. Command names
and config keys stay as they are (/help, gateway.admins): they are typed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gateway.i18n.keys import Msg

__all__ = ["TEXTS"]

TEXTS: Final[Mapping[Msg, str]] = {
    # -- turns --------------------------------------------------------------------
    Msg.STOPPED: "已停止：正在运行的任务已取消。发送新消息即可继续。",
    Msg.GENERIC_FAILURE: "抱歉，回答时出了问题。详细信息见网关日志。",
    Msg.EMPTY_REPLY: "（模型返回了空回复）",
    Msg.SESSION_RESET: "已开始新会话：上一个会话已归档（/sessions 可查看）。",
    Msg.NO_API_KEY: (
        "网关尚未配置好，暂时无法回答：模型服务 {provider!r} 没有 API 密钥。"
        "请让管理员设置 {setting}。"
    ),
    Msg.NOT_SET_UP: "网关尚未配置好，暂时无法回答：{detail}",
    Msg.PROVIDER_AUTH: "模型服务拒绝了网关的 API 密钥。请让管理员检查一下。",
    Msg.PROVIDER_UNAVAILABLE: "模型服务暂时不可用（已重试）。请稍后再试。",
    Msg.PROVIDER_FAILED: "模型服务未能回答这个请求。详细信息见网关日志。",
    Msg.UNKNOWN_AGENT: "这个请求要求使用智能体 {name!r}，但本网关没有这个智能体。",
    Msg.SCHEDULED_FAILED: "定时任务 {job} 失败：{reason}",
    Msg.SCHEDULED_TIMED_OUT: "后台定时任务 {job!r} 失败。管理员可以在日志中查看详情。",
    Msg.LATE_NOTE: "（延迟送达：这条回复写于 {waited}前，直到现在才送达。）",
    Msg.DAYS: "{n} 天",
    Msg.HOURS: "{n} 小时",
    Msg.MINUTES: "{n} 分钟",
    Msg.SECONDS: "{n} 秒",
    # -- inbound refusals ---------------------------------------------------------
    Msg.COMMANDS_QUEUED: (
        "本聊天中还有 {count} 条更早的命令正在处理，这条命令没有执行：请稍后重新发送。"
    ),
    Msg.MESSAGES_QUEUED: (
        "本聊天中还有 {count} 条更早的消息正在处理，这条消息没有排队：请等我回复后重新发送。"
    ),
    # -- the command registry -----------------------------------------------------
    Msg.HELP_HEADER: "命令：",
    Msg.HELP_LINE: "/{name} — {help}",
    Msg.HELP_ADMINS_ONLY: "（仅管理员）",
    Msg.ADMIN_ONLY: "只有管理员可以使用 /{name}。/whoami 可查看你的 ID。",
    # -- session commands ---------------------------------------------------------
    Msg.HELP_HELP: "列出所有命令",
    Msg.HELP_NEW: "/new [标题]：新建一个会话并切换过去",
    Msg.HELP_SESSIONS: "列出本聊天的会话",
    Msg.HELP_USE: "/use 序号（或 ID、标题）：切换到另一个会话",
    Msg.HELP_RENAME: "/rename 标题：重命名当前会话",
    Msg.HELP_ARCHIVE: "归档当前会话并新建一个",
    Msg.HELP_DELETE: "/delete [序号或 ID]：永久删除一个会话（默认当前会话）",
    Msg.HELP_STOP: "取消正在运行的任务",
    Msg.HELP_STATUS: "查看会话的大小、上下文占用和 token 用量",
    Msg.HELP_COMPACT: "立即压缩当前会话的历史",
    Msg.NOTHING_RUNNING: "当前没有正在运行的任务。",
    Msg.TITLE: "“{title}”",
    Msg.NO_SESSIONS: "本聊天还没有会话。发送一条消息即可开始。",
    Msg.SESSIONS_HEADER: "本聊天的会话：",
    Msg.SESSIONS_LINE: "{n}. {id}{title} — {count} 条消息{archived}{current}",
    Msg.SESSIONS_ARCHIVED: "（已归档）",
    Msg.SESSIONS_CURRENT: " ← 当前",
    Msg.SESSIONS_FOOTER: "用 /use 序号 切换。",
    Msg.NEW_SESSION: "已新建会话 {id}{title}。",
    Msg.USE_USAGE: "用法：/use 序号，或会话 ID、标题（见 /sessions）。",
    Msg.NO_SUCH_SESSION: "本聊天没有会话 {name!r}。见 /sessions。",
    Msg.SWITCHED: "已切换到会话 {id}。",
    Msg.RENAME_USAGE: "用法：/rename 标题。",
    Msg.RENAMED: "已将会话 {id} 重命名为“{title}”。",
    Msg.BUSY: "本聊天有任务正在运行；请先 /stop 或等它结束，然后再试。",
    Msg.BUSY_APPROVAL: "本聊天有等待审批的工具调用：请先用 /approve 或 /deny 答复。",
    Msg.NOTHING_TO_ARCHIVE: "没有可归档的会话。",
    Msg.ARCHIVED: "已归档会话 {old}；现在位于新会话 {new}。",
    Msg.NOTHING_TO_DELETE: "没有可删除的会话。",
    Msg.DELETED_NOW_IN: "已删除会话 {old}；现在位于新会话 {new}。",
    Msg.DELETED: "已删除会话 {old}。",
    Msg.STATUS_NO_SESSION: "本聊天还没有会话。发送一条消息即可开始。",
    Msg.STATUS_SESSION: "会话 {id}{title}",
    Msg.STATUS_MESSAGES: "当前历史中的消息：{count} 条（第 {segment} 段）",
    Msg.STATUS_TURNS: "用户轮次：{turns}；状态：{state}",
    Msg.STATE_RUNNING: "正在运行任务",
    Msg.STATE_IDLE: "空闲",
    Msg.STATUS_COMPACTED: "上次压缩：{when}",
    Msg.NEVER: "从未",
    Msg.STATUS_CONTEXT: (
        "估计上下文：{tokens:,} 个 token，占 {window:,} token 窗口的 {share:.1%}"
        "（超过 {trigger:,} 时压缩）"
    ),
    Msg.USAGE_NONE: "本会话的 token 用量：尚无记录",
    Msg.USAGE_TOKENS: (
        "本会话的 token 用量：输入 {input:,}，输出 {output:,}；输入中 {share:.1%} 来自提示缓存"
        "（读取 {read:,}，写入 {written:,}）"
    ),
    Msg.USAGE_COST: "估计费用：{cost:,.4f} {currency}（按 {model} 的价格）",
    Msg.USAGE_FALLBACK: "上一条回复由备用模型 {model} 生成（{primary} 暂不可用；之后的回合会先重试它）",
    Msg.USAGE_TRACE: "上一回合的追踪（trace）：{trace_id}",
    # -- /compact -----------------------------------------------------------------
    Msg.COMPACT_UNAVAILABLE: "本网关不支持压缩。",
    Msg.NOTHING_TO_COMPACT: "还没有可压缩的内容。",
    Msg.COMPACT_BUSY: "压缩任务正忙，请一分钟后再试。",
    Msg.COMPACT_FAILED: "压缩失败，历史没有改动。详细信息见网关日志。",
    Msg.COMPACT_TOO_SHORT: "无需压缩：历史不超过 {keep} 个用户轮次。",
    Msg.COMPACT_NO_GAIN: "压缩不会让历史变小，保持原样。",
    Msg.COMPACT_CONFLICT: "压缩期间历史发生了变化，没有做任何改动。请再试一次。",
    Msg.COMPACTED_SUMMARISED: (
        "已压缩：约 {before:,} → {after:,} 个 token；较早的轮次已总结，最近 {keep} 轮完整保留。"
    ),
    Msg.COMPACTED_TRUNCATED: (
        "已压缩：约 {before:,} → {after:,} 个 token；较早的轮次已截断（总结调用失败），"
        "最近 {keep} 轮完整保留。"
    ),
    # -- access -------------------------------------------------------------------
    Msg.HELP_WHOAMI: "你在这里的 ID、是否是管理员、你的访问权限",
    Msg.HELP_PAIR: "/pair list | approve 配对码 | revoke 渠道:ID：允许他人使用",
    Msg.YES: "是",
    Msg.NO: "否",
    Msg.CHAT_DIRECT: "私聊",
    Msg.CHAT_GROUP: "群聊",
    Msg.WHOAMI_YOU: "你是 {who}",
    Msg.WHOAMI_ALIASES: "其他 ID：{aliases}",
    Msg.WHOAMI_CHAT: "聊天：{chat}（{kind}）",
    Msg.WHOAMI_ADMIN: "管理员：{admin}",
    Msg.WHOAMI_ACCESS: "访问权限：{access}",
    Msg.WHOAMI_PAIRING: "配对：{state}",
    Msg.ACCESS_INTERNAL: "有",
    Msg.ACCESS_ADMIN: "有（管理员）",
    Msg.ACCESS_ALLOW_FROM: "有（allow_from）",
    Msg.ACCESS_PAIRED: "有（已配对）",
    Msg.ACCESS_GROUP_NOT_SERVED: "无：不服务这个群",
    Msg.ACCESS_NOT_ADDRESSED: "仅在你在这个群里 @ 我时",
    Msg.ACCESS_UNKNOWN_SENDER: "无：请让管理员添加你",
    Msg.PAIR_NONE: "没有配对，也没有待批准的配对码。",
    Msg.PAIR_HEADER: "配对：",
    Msg.PAIR_USAGE: "用法：/pair list | /pair approve 配对码 | /pair revoke 渠道:发送者ID",
    Msg.PAIR_APPROVE_USAGE: "用法：/pair approve 配对码（新用户收到的 XXXX-XXXX 码）。",
    Msg.PAIR_REVOKE_USAGE: "用法：/pair revoke 渠道:发送者ID（与 /pair list 显示的一致）。",
    Msg.REVOKED: "已撤销 {who}。",
    Msg.NOTHING_TO_REVOKE: "{who} 没有可撤销的配对。",
    Msg.APPROVED_NOTICE: "管理员已批准你的访问。现在可以和我对话了：请重新发送你的消息。",
    Msg.APPROVAL_APPROVED: "已批准 {who}（配对码 {code}），并已通知对方。",
    Msg.APPROVAL_ALREADY: "{who} 已经获批；配对码 {code} 已用过。",
    Msg.THAT_SENDER: "该发送者",
    Msg.APPROVAL_EXPIRED: "配对码 {code} 已过期。对方再次给机器人发消息时会收到新的配对码（每小时最多一个）。",
    Msg.APPROVAL_UNKNOWN: "没有待批准的配对码 {code}。请检查配对码（`/pair list` 会列出）。",
    Msg.PAIRING_APPROVED_BY: "由 {by} 于 {when} 批准",
    Msg.PAIRING_PENDING: "配对码 {code}，待批准，有效至 {until}",
    Msg.REFUSAL_EXPLAIN: "抱歉，我只回答管理员允许的人。你的 ID 是 {who}：{ask}。",
    Msg.ASK_FOR_PAIRING_CODE: "私聊我即可获得一个给管理员的配对码",
    Msg.ASK_THE_ADMIN: "如需使用，请把它发给机器人的管理员",
    Msg.PAIRING_CODE: (
        "我还不认识你。要获得访问权限，请让机器人的管理员批准配对码 {code}"
        "（{minutes} 分钟内有效）：管理员发送 /pair approve {code}"
    ),
    Msg.APPROVED_MEANWHILE: "管理员刚刚批准了你的访问：请重新发送你的消息。",
    Msg.RATE_LIMITED: "你发消息太快了（{per}最多 {limit} 条），这条我没有处理。请 {wait} 秒后再发。",
    Msg.RATE_LATER: "你发消息太快了（{per}最多 {limit} 条），这条我会在大约 {wait} 秒后回复。",
    Msg.PER_MINUTE: "每分钟",
    Msg.PER_HOUR: "每小时",
    # -- memory commands ----------------------------------------------------------
    Msg.HELP_MEMORY: "我记得的关于你的事",
    Msg.HELP_FORGET: "/forget 命名空间/键 | all：删除记忆",
    Msg.MEMORY_NONE: "我没有保存关于你的记忆。",
    Msg.MEMORY_HEADER: "我记得关于你的 {count} 件事：",
    Msg.MEMORY_MORE: "… 还有 {count} 条",
    Msg.MEMORY_SUMMARY: "摘要：",
    Msg.MEMORY_FOOTER: "/forget 命名空间/键 删除一条，/forget all 删除全部。",
    Msg.FORGOT_ALL: "已忘记关于你的一切（{count} 条记忆和摘要）。",
    Msg.FORGET_USAGE: "用法：/forget 命名空间/键（与 /memory 显示的一致）或 /forget all",
    Msg.FORGOT: "已忘记 {name}。",
    Msg.FORGET_UNKNOWN: "我没有关于你的记忆 {name}。",
    # -- 工具审批与转向 ----------------------------------------------------------
    Msg.HELP_APPROVE: "/approve [N]：执行等待审批的工具调用",
    Msg.HELP_DENY: "/deny [N] [理由]：拒绝等待审批的工具调用",
    Msg.HELP_STEER: "/steer 文本：用这段文本改变正在运行的任务",
    Msg.STEER_USAGE: "用法：/steer 文本 —— 正在运行的任务改做什么。",
    Msg.TOOL_APPROVAL_NONE: "本聊天没有等待审批的操作。",
    Msg.TOOL_APPROVAL_NOT_WAITING: "审批 #{id} 不在本聊天的等待列表中。",
    Msg.TOOL_APPROVAL_ANSWERED: "审批 #{id} 已经有人答复过了。",
    Msg.TOOL_APPROVAL_NOT_YOURS: "只有发起请求的人或管理员可以答复这个审批。",
    Msg.TOOL_APPROVAL_ASK: "需要审批（#{id}）：我想执行",
    Msg.TOOL_APPROVAL_HOW: (
        "回复 /approve {id} 执行，或 /deny {id} [理由] 拒绝。{timeout} 内无人答复则视为拒绝。"
    ),
    Msg.TOOL_APPROVAL_APPROVE_BUTTON: "批准",
    Msg.TOOL_APPROVAL_DENY_BUTTON: "拒绝",
    # -- 额度 ----------------------------------------------------------------------------
    Msg.BUDGET_EXCEEDED: (
        "这条消息没有交给模型处理：{whose}{period}额度（{amount}）已用完（已用 {spent}），"
        "将于 {resets} 重置。如需更多，请联系机器人管理员（可用 /limits 调整）；"
        "发送 /usage 查看用量。"
    ),
    Msg.BUDGET_NEAR: "提醒：{whose}{period}额度（{amount}）已用 {pct}%（{spent}），将于 {resets} 重置。",
    Msg.BUDGET_ADMIN: (
        "额度已用完：{scope} {key} 的{period}额度（{amount}）已用完（{spent}），"
        "在 {resets} 之前其请求不会交给模型。提高额度：/limits set {scope} {key} {field} 数值"
    ),
    Msg.WHOSE_SENDER: "你的",
    Msg.WHOSE_CHAT: "本会话的",
    Msg.WHOSE_AGENT: "这个助手的",
    Msg.WHOSE_TOTAL: "机器人的",
    Msg.PERIOD_DAILY: "每日",
    Msg.PERIOD_MONTHLY: "每月",
    Msg.AMOUNT_TOKENS: "{n:,} 个 token",
    Msg.AMOUNT_COST: "费用 {cost}",
    Msg.HELP_USAGE: "你今天和本月的用量，以及对应的额度",
    Msg.HELP_LIMITS: "这里适用的额度；管理员：/limits set|clear",
    Msg.USAGE_HEADER: "{who} 的用量（今天是 {date}）：",
    Msg.USAGE_SCOPE: "{scope}：今天 {day_tokens:,} 个 token，费用 {day_cost}；本月 {month_tokens:,} 个 token，费用 {month_cost}",
    Msg.USAGE_BUDGET: "  {whose}{period}额度：已用 {spent}，共 {amount}（{pct}%）",
    Msg.USAGE_NO_BUDGETS: "没有适用的额度。",
    Msg.USAGE_ONLY_ADMINS: "只有管理员可以查看别人的用量。",
    Msg.LIMITS_HEADER: "这里适用的额度：",
    Msg.LIMITS_LINE: "{scope} {key}：{field} = {value}",
    Msg.LIMITS_NONE: "这里没有适用的额度。",
    Msg.LIMITS_USAGE: (
        "用法：/limits 查看这里适用的额度。管理员：/limits set 范围 键 字段 数值|none，"
        "/limits clear 范围 键 [字段]；范围为 sender、chat、agent 或 total；键为 channel:id、"
        "助手名称，或 * 表示该范围的默认值；字段为 daily_tokens、monthly_tokens、daily_cost "
        "或 monthly_cost。"
    ),
    Msg.LIMITS_SET: "已设置：{scope} {key} {field} = {value}。",
    Msg.LIMITS_CLEARED: "已清除 {scope} {key} 的 {count} 项运行时额度，恢复配置中的额度。",
    Msg.LIMITS_NOTHING_TO_CLEAR: "{scope} {key} 没有运行时设置的额度。",
    Msg.LIMITS_ONLY_ADMINS: "只有管理员可以修改额度。",
}
