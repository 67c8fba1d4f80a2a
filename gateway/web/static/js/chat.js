// The chat view: the session list, the conversation (history, streamed
// replies, tool calls, files sent), the working state, stop, and the status
// panel. Sessions are changed with the chat commands sent as messages, as in
// every channel. A reply whose turn failed (`failed: true` on its `message`
// frame, docs/PROTOCOL.md) is shown as an error. The page's own words are
// in its language (js/i18n.js); a switch re-says the session list and the
// working time, while messages already shown stay as they were.

import { ApprovalButtons } from "./approve.js";
import { newId } from "./conn.js";
import { askText } from "./dialogs.js";
import { decorateCode } from "./highlight.js";
import { t } from "./i18n.js";
import { el, setMarkdown, toolBlock, toolCall } from "./render.js";
import { SessionList, untitled } from "./sessions.js";
import { StatusPanel } from "./status.js";
import { Attachments } from "./upload.js";

const COMMAND = /^\/([A-Za-z][\w-]*)(?:@\S+)?(?:\s|$)/;
const RELOADING = new Set(["new", "use", "archive", "delete"]); // the active session changes

export class Chat {
  constructor(conn, dom) {
    this.conn = conn;
    this.dom = dom;
    this.commandNames = null; // from the welcome frame; null: unknown, send as typed
    this.sessions = { sessions: [], active: null };
    this.viewSession = null;
    this.historyRuns = new Set(); // runs whose messages the history showed
    this.streams = new Map(); // run id -> {node, text, frame}
    this.liveTools = new Map(); // run id -> the block of its `tool` frames so far
    this.pending = new Map(); // client message id -> {node, text, answered}
    this.commands = new Map(); // client message id of a command -> its name
    this.seen = new Set(); // outbox ids of replies shown
    this.approvals = new ApprovalButtons(conn);
    this.sessionList = new SessionList(dom.sessions, (text, name) => this.command(text, name));
    this.status = new StatusPanel(dom.status, () => this.command("/status", "status"));
    this.attachments = new Attachments(conn, dom.attach, (text) => this.notice(text, "error"));
    this.busy = false;
    this.workingSince = 0;
    this.tick = null;
    conn.addEventListener("welcome", (e) => this.welcome(e.detail));
    conn.addEventListener("frame", (e) => this.frame(e.detail));
    conn.addEventListener("state", (e) => this.status.connection(e.detail.state, e.detail.retryMs));
    dom.composer.addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    dom.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit();
      }
    });
    dom.stop.addEventListener("click", () => this.command("/stop", "stop"));
    dom.newSession.addEventListener("click", async () => {
      const title = await askText(t("chat.new.title"), {
        label: t("chat.new.label"),
        placeholder: t("chat.new.placeholder"),
        okLabel: t("chat.new.start"),
      });
      if (title !== null) this.command(`/new ${title}`.trim(), "new");
    });
    document.addEventListener("picobot:lang", () => this.relabel());
  }

  // the page's language changed: what the page wrote and keeps up to date
  relabel() {
    this.sessionList.render(this.sessions.sessions, this.sessions.active);
    const active = this.sessions.sessions.find((s) => s.id === this.sessions.active);
    if (active && !active.title) this.dom.sessionTitle.textContent = untitled();
    if (this.busy) this.showWorking();
    const empty = this.dom.messages.querySelector(":scope > .empty");
    if (empty) empty.textContent = t("chat.empty");
  }

  // -- connection ------------------------------------------------------------
  async welcome(frame) {
    if (Array.isArray(frame.commands)) {
      this.commandNames = new Set(frame.commands.map((c) => c.name));
    }
    this.sessions = { sessions: [], active: null }; // so the list asks for /status once
    this.status.setState(this.busy ? "working" : "idle");
    await Promise.all([this.loadSessions(), this.loadHistory(null)]);
  }

  async loadSessions() {
    const before = this.sessions.active;
    try {
      this.sessions = await this.conn.query("sessions");
    } catch (err) {
      return;
    }
    this.sessionList.render(this.sessions.sessions, this.sessions.active);
    const active = this.sessions.sessions.find((s) => s.id === this.sessions.active);
    if (active) this.dom.sessionTitle.textContent = active.title || untitled();
    this.status.session(active);
    if (!before && this.sessions.active && this.conn.online) this.command("/status", "status"); // the chat's first session
  }

  async loadHistory(sessionId) {
    let history;
    try {
      history = await this.conn.query("history", sessionId ? { session_id: sessionId } : {});
    } catch (err) {
      return;
    }
    this.renderHistory(history);
  }

  frame(f) {
    this.status.frame(f);
    switch (f.type) {
      case "ack": return this.acked(f);
      case "working": return this.working(true);
      case "idle": return this.working(false);
      case "delta": return this.delta(f);
      case "tool": return this.toolFrame(f);
      case "message": return this.reply(f);
      case "approval_request": return this.approvals.remember(f);
      case "error": return this.error(f);
      default: return undefined; // frames this page does not know yet
    }
  }

  // -- sending ---------------------------------------------------------------
  async submit() {
    const text = this.dom.input.value.trim();
    const withFiles = this.attachments.pending > 0;
    if (!text && !withFiles) return;
    this.dom.input.value = "";
    const match = withFiles ? null : COMMAND.exec(text);
    if (match) {
      const name = match[1].toLowerCase();
      if (this.commandNames && !this.commandNames.has(name)) {
        this.notice(t("chat.unknown_command", { name }), "error");
        return;
      }
      this.command(text, name);
      return;
    }
    const id = newId("m");
    const node = this.userBubble(text);
    this.pending.set(id, { node, text, answered: false });
    this.dom.messages.append(node);
    this.scroll();
    let files = [];
    if (withFiles) {
      this.label(node, t("chat.uploading"));
      files = await this.attachments.take();
      this.showFiles(node, files);
      if (!files.length && !text) {
        this.label(node, t("chat.no_file_uploaded"));
        return;
      }
    }
    const refs = files.map((f) => f.ref);
    if (!this.conn.sendMessage(id, text, refs)) this.label(node, t("chat.waiting_connection"));
    else if (withFiles) this.label(node, "");
  }

  // the files a message carried: image thumbnails, other files by name
  showFiles(node, files) {
    if (!files.length) return;
    const box = el("div", "files");
    for (const file of files) {
      if (file.preview) {
        const img = el("img", "sent-image");
        img.src = file.preview;
        img.alt = file.name;
        box.append(img);
      } else {
        box.append(el("span", "attachment", file.name));
      }
    }
    node.querySelector(".text").before(box);
  }

  command(text, name) {
    const id = newId("c");
    this.commands.set(id, name);
    if (!this.conn.sendMessage(id, text) && name === "status") this.commands.delete(id);
  }

  acked(f) {
    const mine = this.pending.get(f.id);
    if (mine) this.label(mine.node, this.busy ? t("chat.queued") : "✓");
  }

  error(f) {
    const mine = this.pending.get(f.id);
    if (mine) {
      this.label(mine.node, t("chat.not_sent", { reason: f.message }));
      mine.node.classList.add("refused");
    } else this.notice(`${f.code}: ${f.message}`, "error");
  }

  // -- the running turn ------------------------------------------------------
  working(on) {
    this.busy = on;
    this.dom.working.hidden = !on;
    this.dom.stop.disabled = !on;
    clearInterval(this.tick);
    if (on) {
      this.workingSince = Date.now();
      this.showWorking();
      this.tick = setInterval(() => this.showWorking(), 1000);
    }
  }

  showWorking() {
    const secs = ((Date.now() - this.workingSince) / 1000).toFixed(0);
    this.dom.workingText.textContent = t("chat.working_for", { secs });
  }

  delta(f) {
    let stream = this.streams.get(f.run_id);
    if (!stream) {
      const node = this.assistantBubble("");
      node.classList.add("streaming");
      this.dom.messages.append(node);
      stream = { node, text: "", frame: 0 };
      this.streams.set(f.run_id, stream);
    }
    stream.text += f.text;
    if (!stream.frame) {
      stream.frame = requestAnimationFrame(() => {
        stream.frame = 0;
        setMarkdown(stream.node.querySelector(".md"), stream.text);
        this.scroll();
      });
    }
  }

  // a tool call of the running turn (`tool` frames: running, then ok/error);
  // replaced by the calls with their results once the reply is in
  toolFrame(f) {
    let block = this.liveTools.get(f.run_id);
    if (!block) {
      block = el("div", "tools live");
      this.liveTools.set(f.run_id, block);
      const stream = this.streams.get(f.run_id);
      if (stream) stream.node.before(block);
      else this.dom.messages.append(block);
    }
    let node = [...block.children].find((n) => n.dataset.callId === f.id);
    if (!node) {
      node = toolCall({ id: f.id, name: f.name, arguments: f.summary || "" });
      block.append(node);
    }
    const status = ["ok", "error"].includes(f.status) ? t(`chat.tool.status.${f.status}`) : f.status;
    const done = typeof f.secs === "number" ? t("chat.tool.took", { status, secs: f.secs.toFixed(1) }) : status;
    node.querySelector(".result").textContent = f.status === "running" ? t("chat.tool.running") : done;
    this.scroll();
  }

  reply(f) {
    if (f.id !== null && this.seen.has(f.id)) return;
    this.seen.add(f.id);
    const command = this.commands.get(f.reply_to);
    if (command) {
      this.commands.delete(f.reply_to);
      this.commandReply(command, f.text);
      return;
    }
    const mine = this.pending.get(f.reply_to);
    if (mine) mine.answered = true;
    const stream = f.run_id ? this.streams.get(f.run_id) : null;
    let node;
    if (stream) {
      this.streams.delete(f.run_id);
      cancelAnimationFrame(stream.frame);
      node = stream.node;
      node.classList.remove("streaming");
      this.renderMarkdown(node.querySelector(".md"), f.text); // the whole, stored text
    } else if (f.run_id && this.historyRuns.has(f.run_id)) {
      return; // the history already showed it
    } else {
      node = this.assistantBubble(f.text);
      if (f.earlier) this.label(node, t("chat.earlier"));
      this.dom.messages.append(node);
    }
    if (f.session_id && this.viewSession && f.session_id !== this.viewSession) {
      this.label(node, t("chat.in_session", { id: f.session_id }));
    }
    this.approvals.attach(f, node);
    if (f.failed) this.markFailed(node);
    this.scroll();
    if (f.run_id) this.attachTools(f.run_id, f.session_id, node);
    this.loadSessions(); // message counts, and the first session of a new chat
  }

  // the turn's tool calls and their results, collapsed, before its reply
  async attachTools(runId, sessionId, node) {
    let history;
    try {
      history = await this.conn.query("history", sessionId ? { session_id: sessionId, limit: 200 } : { limit: 200 });
    } catch (err) {
      return;
    }
    const entries = history.messages.filter((m) => m.run_id === runId);
    const block = toolBlock(entries);
    if (!block || !node.isConnected) return;
    this.liveTools.get(runId)?.remove();
    this.liveTools.delete(runId);
    node.before(block);
  }

  markFailed(node) {
    node.classList.add("failed");
    node.setAttribute("role", "alert");
    this.label(node, t("chat.reply_failed"));
    this.status.failed(node.querySelector(".md").textContent.trim().slice(0, 120));
  }

  commandReply(name, text) {
    if (name === "status") {
      this.status.details(text);
      return;
    }
    this.notice(text);
    if (RELOADING.has(name) || name === "rename") this.loadSessions();
    if (RELOADING.has(name)) this.loadHistory(null);
    if (RELOADING.has(name)) this.command("/status", "status");
  }

  // -- rendering -------------------------------------------------------------
  renderHistory(history) {
    const box = this.dom.messages;
    box.replaceChildren();
    this.viewSession = history.session_id;
    this.historyRuns = new Set();
    if (history.more) box.append(el("div", "msg notice", t("chat.older_hidden")));
    let tools = [];
    const flush = () => {
      const block = tools.length ? toolBlock(tools) : null;
      if (block) box.append(block);
      tools = [];
    };
    const asked = new Set();
    for (const entry of history.messages) {
      if (entry.run_id) this.historyRuns.add(entry.run_id);
      if (entry.role === "user") {
        flush();
        asked.add(entry.text);
        box.append(this.userBubble(entry.text));
      } else if (entry.role === "assistant") {
        if (entry.text) {
          flush();
          box.append(this.assistantBubble(entry.text));
        }
        if (entry.tool_calls) tools.push(entry);
      } else if (entry.role === "tool") {
        tools.push(entry);
      } else if (entry.role === "summary") {
        flush();
        box.append(el("div", "msg notice", t("chat.summary", { text: entry.text })));
      }
    }
    flush();
    for (const mine of this.pending.values()) {
      if (!mine.answered && !asked.has(mine.text)) box.append(mine.node); // queued, not yet in a turn
    }
    if (!history.messages.length && !box.childElementCount) {
      box.append(el("div", "msg notice empty", t("chat.empty")));
    }
    this.dom.sessionTitle.textContent = history.title || (history.session_id ? untitled() : "");
    this.scroll();
  }

  userBubble(text) {
    const node = el("div", "msg user");
    node.append(el("span", "text", text));
    return node;
  }

  assistantBubble(text) {
    const node = el("div", "msg assistant");
    const body = el("div", "md");
    this.renderMarkdown(body, text);
    node.append(body);
    return node;
  }

  renderMarkdown(body, text) {
    setMarkdown(body, text);
    decorateCode(body);
  }

  label(node, text) {
    let label = node.querySelector(":scope > .label, :scope > .tick");
    if (!label) {
      label = el("span", node.classList.contains("user") ? "tick" : "label");
      if (node.classList.contains("user")) node.append(label);
      else node.prepend(label);
    }
    label.textContent = text;
  }

  notice(text, kind = "notice") {
    this.dom.messages.append(el("div", `msg ${kind}`, text));
    this.scroll();
  }

  scroll() {
    const box = this.dom.messages;
    if (box.childElementCount > 1) box.querySelector(":scope > .empty")?.remove();
    box.scrollTop = box.scrollHeight;
  }
}
