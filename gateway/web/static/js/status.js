// The Status panel, kept live from what the page sees: the connection, the
// session, whether a turn is running (and which tool), the last reply and the
// last error. The gateway's own /status figures sit under "Details", asked
// for when the panel is opened and again after each turn while it is open.

import { el } from "./render.js";

export function localTime(iso, withDate = false) {
  if (!iso) return "–";
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  const sameDay = when.toDateString() === new Date().toDateString();
  const options = { hour: "2-digit", minute: "2-digit" };
  if (withDate || !sameDay) Object.assign(options, { year: "numeric", month: "short", day: "numeric" });
  return when.toLocaleString(undefined, options);
}

const FIELDS = [
  ["connection", "Connection"],
  ["session", "Session"],
  ["messages", "Messages"],
  ["state", "Now"],
  ["reply", "Last reply"],
  ["error", "Last error"],
];

export class StatusPanel {
  constructor(dom, onDetails) {
    this.dom = dom; // {fields: <dl>, details: <details>, text: <pre>}
    this.values = new Map();
    this.since = 0;
    this.tick = null;
    this.tools = new Map(); // call id -> tool name, of the running turn
    for (const [key, label] of FIELDS) {
      const dt = el("dt", "", label);
      const dd = el("dd", "", "–");
      dd.dataset.field = key;
      this.values.set(key, dd);
      dom.fields.append(dt, dd);
    }
    this.onDetails = onDetails;
    dom.details.addEventListener("toggle", () => {
      if (dom.details.open) onDetails();
    });
  }

  set(key, text, kind = "") {
    const dd = this.values.get(key);
    dd.textContent = text;
    dd.className = kind;
  }

  connection(state, retryMs) {
    const text = {
      connecting: "connecting…",
      online: "connected",
      offline: `offline, retrying in ${Math.round((retryMs || 0) / 1000)}s`,
      unauthorized: "token needed",
      forbidden: "another user's chat",
    }[state];
    this.set("connection", text, state === "online" ? "ok" : state === "connecting" ? "" : "bad");
  }

  session(info) {
    if (!info) {
      this.set("session", "none yet");
      this.set("messages", "0");
      return;
    }
    this.set("session", info.title || "Untitled session");
    this.values.get("session").title = info.id;
    this.set("messages", String(info.message_count));
  }

  frame(f) {
    if (f.type === "working") {
      this.tools.clear();
      this.since = Date.now();
      clearInterval(this.tick);
      this.tick = setInterval(() => this.showState(), 1000);
      this.showState();
    } else if (f.type === "idle") {
      clearInterval(this.tick);
      this.tick = null;
      this.tools.clear();
      this.set("state", "idle");
      if (this.dom.details.open) this.onDetails();
    } else if (f.type === "tool") {
      if (f.status === "running") this.tools.set(f.id, f.name);
      else this.tools.delete(f.id);
      if (this.tick) this.showState();
    } else if (f.type === "message") {
      this.set("reply", localTime(f.created_at));
    } else if (f.type === "error") {
      this.set("error", `${f.code}: ${f.message}`, "bad");
    }
  }

  failed(text) {
    this.set("error", `${localTime(new Date().toISOString())}: ${text}`, "bad");
  }

  showState() {
    const secs = Math.round((Date.now() - this.since) / 1000);
    const tools = [...new Set(this.tools.values())];
    this.set("state", tools.length ? `running ${tools.join(", ")} · ${secs}s` : `working · ${secs}s`, "busy");
  }

  details(text) {
    this.dom.text.textContent = text;
  }
}
