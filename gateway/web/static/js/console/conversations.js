// Conversations: every chat across channels, found by channel, user and
// text a page at a time; a session's transcript (tool calls folded with
// their results, a sub-agent's transcript inside the call that ran it,
// compactions marked), older messages a page at a time; archive and delete
// of a session, each confirmed. Texts go in as text; an assistant's Markdown
// only through render.js markdown(), which sanitises.

import { markdown } from "../render.js";
import { localTime } from "../status.js";
import { fill, id, panel, table } from "./table.js";

const API = "/api/ops/conversations";
const PREVIEW = 80; // characters of a tool call's arguments in its summary

function sessionUrl(sessionId) {
  return `${API}/${encodeURIComponent(sessionId)}`;
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function flat(text, most) {
  const one = text.replace(/\s+/g, " ");
  return one.length > most ? `${one.slice(0, most)}…` : one;
}

export default class Conversations {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.filters = { channel: "", user: "", q: "" };
    this.sessions = []; // the pages of the list shown so far
    this.cursor = null; // where the next page of the list starts
    this.open = null; // { session, entries, before, children } of the transcript shown
    this.problem = null; // the last action's refusal, shown in the transcript's panel
  }

  async load() {
    await this.search();
    if (this.open) await this.show(this.open.session.id);
    else this.render();
  }

  async search(more = false) {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(this.filters)) if (value) query.set(key, value);
    if (more && this.cursor) query.set("cursor", this.cursor);
    const page = await this.ctx.api(`${API}?${query}`);
    this.sessions = more ? this.sessions.concat(page.sessions) : page.sessions;
    this.cursor = page.cursor;
  }

  async show(sessionId) {
    if (this.open && this.open.session.id !== sessionId) this.problem = null;
    try {
      const found = await this.ctx.api(sessionUrl(sessionId));
      this.open = { session: found.session, entries: found.entries, before: found.before, children: found.children };
    } catch (err) {
      if (err.status !== 404) throw err;
      this.open = null; // gone meanwhile (deleted elsewhere)
    }
    this.render();
  }

  async older() {
    const { session, before } = this.open;
    const page = await this.ctx.api(`${sessionUrl(session.id)}?before=${before}`);
    this.open = { ...this.open, entries: page.entries.concat(this.open.entries), before: page.before };
    this.render();
  }

  // a click's work; a failure is said in the view (not left unhandled)
  async safely(work) {
    try {
      await work();
    } catch (err) {
      if (err.status === 401 || err.status === 403) return;
      this.problem = this.ctx.t("conversations.failed", { error: err.message });
      this.render();
    }
  }

  problemNote() {
    const note = this.ctx.el("p", "error", this.problem);
    note.id = "conversation-error";
    return note;
  }

  render() {
    const parts = [this.listPanel()];
    if (this.open) parts.push(this.transcriptPanel());
    this.root.replaceChildren(...parts);
  }

  // -- the list -------------------------------------------------------------
  listPanel() {
    const { t, el } = this.ctx;
    const form = el("form", "toolbar");
    form.id = "conversation-search";
    const fields = [
      ["channel", t("conversations.filter.channel")],
      ["user", t("conversations.filter.user")],
      ["q", t("conversations.filter.text")],
    ];
    for (const [name, label] of fields) {
      const input = el("input");
      input.name = name;
      input.type = name === "q" ? "search" : "text";
      input.value = this.filters[name];
      input.placeholder = label;
      input.maxLength = 200;
      input.setAttribute("aria-label", label);
      form.append(input);
    }
    const submit = el("button", "", t("conversations.search"));
    submit.type = "submit";
    form.append(submit);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const data = new FormData(form);
      for (const [name] of fields) this.filters[name] = String(data.get(name) || "").trim();
      this.safely(async () => {
        await this.search();
        this.render();
      });
    });

    const grid = table("conversations", [
      t("conversations.col.active"), t("conversations.col.session"), t("conversations.col.chat"),
      t("conversations.col.status"), t("conversations.col.messages"), t("conversations.col.last"),
    ]);
    const rows = this.sessions.map((s) => {
      const open = el("button", "link", s.title || s.id);
      open.type = "button";
      open.dataset.session = s.id;
      open.addEventListener("click", () => this.safely(() => this.show(s.id)));
      const name = el("div", "session");
      name.append(open);
      if (s.title) name.append(id(s.id));
      const when = el("time", "when", localTime(s.updated_at));
      when.dateTime = s.updated_at;
      return [when, name, id(`${s.channel}:${s.chat_id}`), this.status(s), s.message_count, s.preview];
    });
    fill(grid.table, rows, t("conversations.none"));
    for (const [n, tr] of [...grid.table.querySelectorAll("tbody tr")].entries()) {
      const s = this.sessions[n];
      if (!s) continue;
      tr.dataset.session = s.id;
      if (this.open && this.open.session.id === s.id) tr.classList.add("selected");
    }
    const children = [form];
    if (this.problem && !this.open) children.push(this.problemNote());
    children.push(grid.wrap);
    if (this.cursor) {
      const more = el("button", "more", t("conversations.more"));
      more.type = "button";
      more.id = "conversations-more";
      more.addEventListener("click", () =>
        this.safely(async () => {
          await this.search(true);
          this.render();
        }),
      );
      children.push(more);
    }
    const node = panel(t("conversations.title"), ...children);
    node.classList.add("conversation-list");
    return node;
  }

  status(s) {
    const { t, el } = this.ctx;
    const node = el("span", "state");
    node.append(el("span", `badge ${s.status === "active" ? "ok" : ""}`, t(`conversations.status.${s.status}`)));
    if (s.current) node.append(" ", el("span", "badge current", t("conversations.current")));
    return node;
  }

  // -- one transcript -------------------------------------------------------
  transcriptPanel() {
    const { t, el } = this.ctx;
    const { session: s, entries, before, children } = this.open;
    const facts = el("dl", "kv");
    facts.id = "transcript-facts";
    const fact = (label, value) => facts.append(el("dt", "", label), el("dd", "", value === null || value === undefined ? "–" : String(value)));
    fact(t("conversations.col.session"), s.id);
    fact(t("conversations.col.chat"), `${s.channel}:${s.chat_id}`);
    if (s.owner) fact(t("conversations.owner"), s.owner);
    if (s.title) fact(t("conversations.session_title"), s.title);
    fact(t("conversations.col.status"), t(`conversations.status.${s.status}`));
    fact(t("conversations.col.messages"), s.message_count);
    fact(t("conversations.created"), localTime(s.created_at, true));
    fact(t("conversations.col.active"), localTime(s.updated_at, true));
    fact(t("conversations.compacted"), s.compacted_at ? localTime(s.compacted_at, true) : t("conversations.never"));
    if (children.length) fact(t("conversations.subagents"), children.length);

    const actions = el("div", "toolbar actions");
    if (s.channel !== "subagent") {
      if (s.status !== "archived") actions.append(this.action("archive", s));
      actions.append(this.action("delete", s));
    }
    const close = el("button", "", t("conversations.close"));
    close.type = "button";
    close.addEventListener("click", () => {
      this.open = null;
      this.problem = null;
      this.render();
    });
    actions.append(close);

    const parts = [facts, actions];
    if (this.problem) parts.push(this.problemNote());
    if (before !== null) {
      const older = el("button", "more", t("conversations.older"));
      older.type = "button";
      older.id = "transcript-older";
      older.addEventListener("click", () => this.safely(() => this.older()));
      parts.push(older);
    }
    const log = this.entries(entries);
    log.id = "transcript";
    parts.push(log);
    const node = panel(t("conversations.transcript", { id: s.id }), ...parts);
    node.classList.add("transcript-panel");
    return node;
  }

  action(kind, s) {
    const { t, el, api, confirm } = this.ctx;
    const button = el("button", kind === "delete" ? "danger" : "", t(`conversations.${kind}`));
    button.type = "button";
    button.id = `conversation-${kind}`;
    button.addEventListener("click", async () => {
      const sure = await confirm(t(`conversations.${kind}_title`), t(`conversations.${kind}_text`, { id: s.id }), { danger: true });
      if (!sure) return;
      button.disabled = true;
      this.problem = null;
      try {
        if (kind === "archive") await api(`${sessionUrl(s.id)}/archive`, { method: "POST" });
        else await api(sessionUrl(s.id), { method: "DELETE" });
        if (kind === "delete") this.open = null;
      } catch (err) {
        if (err.status === 401 || err.status === 403) return;
        this.problem = err.status === 409 ? t("conversations.busy") : t("conversations.failed", { error: err.message });
      }
      await this.safely(() => this.load()); // a refusal stays shown: the same session is open
    });
    return button;
  }

  // the entries of a transcript: each tool result goes into its call's fold
  entries(list) {
    const { el } = this.ctx;
    const log = el("div", "transcript");
    const calls = new Map();
    for (const entry of list) {
      if (entry.kind === "tool") {
        const fold = calls.get(entry.tool_call_id);
        if (fold) this.result(fold, entry);
        else log.append(this.orphan(entry));
        continue;
      }
      const node = this.entry(entry, calls);
      if (node) log.append(node);
    }
    return log;
  }

  entry(entry, calls) {
    const { t, el } = this.ctx;
    if (entry.kind === "compaction") {
      const mark = el("div", "compaction");
      mark.dataset.seq = entry.seq;
      const fold = el("details");
      fold.append(el("summary", "", t("conversations.compaction", { when: localTime(entry.at, true) })));
      fold.append(el("pre", "summary", entry.text));
      mark.append(fold);
      return mark;
    }
    if (entry.kind === "system") {
      const fold = el("details", "system");
      fold.dataset.seq = entry.seq;
      fold.append(el("summary", "", t("conversations.system", { marker: entry.marker || "–" })));
      fold.append(el("pre", "", entry.text));
      return fold;
    }
    const wrap = el("div", `entry ${entry.kind}`);
    wrap.dataset.seq = entry.seq;
    wrap.dataset.kind = entry.kind;
    const toolCalls = entry.tool_calls || [];
    if (entry.text || entry.kind === "user" || !toolCalls.length) {
      const bubble = el("div", `msg ${entry.kind}${entry.failed ? " failed" : ""}`);
      const label = el("span", "label", `${t(`conversations.role.${entry.kind}`)} · ${localTime(entry.at)}`);
      if (entry.failed) label.append(` · ${t("conversations.failed_turn")}`);
      bubble.append(label);
      if (entry.kind === "assistant") {
        const body = el("div", "md");
        body.innerHTML = markdown(entry.text); // sanitised by DOMPurify
        bubble.append(body);
      } else {
        bubble.append(el("div", "text", entry.text));
      }
      if (entry.media.length) bubble.append(el("div", "muted files", t("conversations.files", { names: entry.media.join(", ") })));
      if (entry.cut) bubble.append(el("div", "muted", t("conversations.cut")));
      wrap.append(bubble);
    }
    if (entry.reasoning) {
      const thought = el("details", "reasoning");
      thought.append(el("summary", "", t("conversations.reasoning")), el("pre", "", entry.reasoning));
      wrap.append(thought);
    }
    if (toolCalls.length) {
      const tools = el("div", "tools");
      for (const call of toolCalls) {
        const fold = this.call(call);
        calls.set(call.id, fold);
        tools.append(fold);
      }
      wrap.append(tools);
    }
    return wrap;
  }

  call(call) {
    const { t, el } = this.ctx;
    const fold = el("details", "tool");
    fold.dataset.callId = call.id;
    const summary = el("summary");
    summary.append(el("span", "tool-badge", t("conversations.tool")), ` ${call.name}(${flat(call.arguments, PREVIEW)})`);
    fold.append(summary);
    const body = el("div", "body");
    body.append(el("div", "muted", t("conversations.arguments")), el("pre", "args", pretty(call.arguments)));
    if (call.cut) body.append(el("div", "muted", t("conversations.cut")));
    body.append(el("div", "muted", t("conversations.result")), el("pre", "result", "–"));
    if (call.subagent) body.append(this.subagent(call.subagent));
    fold.append(body);
    return fold;
  }

  result(fold, entry) {
    const { t } = this.ctx;
    fold.querySelector(".result").textContent = entry.text + (entry.cut ? `\n${t("conversations.cut")}` : "");
    fold.classList.toggle("failed", entry.failed);
  }

  // a tool result whose call is on an older page
  orphan(entry) {
    const fold = this.call({ id: entry.tool_call_id, name: entry.name || "?", arguments: "", cut: false, subagent: null });
    this.result(fold, entry);
    fold.dataset.seq = entry.seq;
    return fold;
  }

  // a sub-agent's transcript, read when its fold is first opened
  subagent(childId) {
    const { t, el, api } = this.ctx;
    const fold = el("details", "subagent");
    fold.dataset.session = childId;
    fold.append(el("summary", "", t("conversations.subagent", { id: childId })));
    let loaded = false;
    fold.addEventListener("toggle", async () => {
      if (!fold.open || loaded) return;
      loaded = true;
      try {
        const child = await api(sessionUrl(childId));
        if (child.before !== null) fold.append(el("p", "muted", t("conversations.older_not_shown")));
        fold.append(this.entries(child.entries));
      } catch (err) {
        loaded = false;
        fold.append(el("p", "error", t("conversations.failed", { error: err.message })));
      }
    });
    return fold;
  }
}
