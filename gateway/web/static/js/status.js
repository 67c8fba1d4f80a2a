// The Status panel, kept live from what the page sees: the connection, the
// session, whether a turn is running (and which tool), the last reply and the
// last error. The gateway's own /status figures sit under "Details", asked
// for when the panel is opened and again after each turn while it is open.
// Its labels and words follow the page's language, again on a switch.

import { lang, t } from "./i18n.js";
import { el } from "./render.js";

// the browser's own formats when they are in the page's language, else the page's
function timeLocale() {
  const page = lang();
  const browser = (navigator.language || "").toLowerCase();
  return browser.startsWith(page.slice(0, 2).toLowerCase()) ? undefined : page;
}

export function localTime(iso, withDate = false) {
  if (!iso) return "–";
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  const sameDay = when.toDateString() === new Date().toDateString();
  const options = { hour: "2-digit", minute: "2-digit" };
  if (withDate || !sameDay) Object.assign(options, { year: "numeric", month: "short", day: "numeric" });
  return when.toLocaleString(timeLocale(), options);
}

const FIELDS = ["connection", "session", "messages", "state", "reply", "error"];

export class StatusPanel {
  constructor(dom, onDetails) {
    this.dom = dom; // {fields: <dl>, details: <details>, text: <pre>}
    this.values = new Map();
    this.since = 0;
    this.tick = null;
    this.tools = new Map(); // call id -> tool name, of the running turn
    this.labels = new Map();
    this.shown = { connection: null, session: undefined, state: null, reply: null }; // said again on a switch
    for (const key of FIELDS) {
      const dt = el("dt", "", t(`status.field.${key}`));
      const dd = el("dd", "", "–");
      dd.dataset.field = key;
      this.labels.set(key, dt);
      this.values.set(key, dd);
      dom.fields.append(dt, dd);
    }
    document.addEventListener("picobot:lang", () => this.relabel());
    this.onDetails = onDetails;
    dom.details.addEventListener("toggle", () => {
      if (dom.details.open) onDetails();
    });
  }

  // the page's language changed: the labels, and the words of the fields the page wrote
  relabel() {
    for (const [key, dt] of this.labels) dt.textContent = t(`status.field.${key}`);
    const { connection, session, state, reply } = this.shown;
    if (connection) this.connection(...connection);
    if (session !== undefined) this.session(session);
    if (this.tick) this.showState();
    else if (state) this.setState(state);
    if (reply) this.set("reply", localTime(reply));
  }

  set(key, text, kind = "") {
    const dd = this.values.get(key);
    dd.textContent = text;
    dd.className = kind;
  }

  connection(state, retryMs) {
    this.shown.connection = [state, retryMs];
    const text = t(`status.conn.${state}`, { seconds: Math.round((retryMs || 0) / 1000) });
    this.set("connection", text, state === "online" ? "ok" : state === "connecting" ? "" : "bad");
  }

  // "idle" or "working" (the words of the Now field when no turn is timed)
  setState(word) {
    this.shown.state = word;
    this.set("state", t(`status.${word}`));
  }

  session(info) {
    this.shown.session = info || null;
    if (!info) {
      this.set("session", t("status.no_session"));
      this.set("messages", "0");
      return;
    }
    this.set("session", info.title || t("sessions.untitled"));
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
      this.setState("idle");
      if (this.dom.details.open) this.onDetails();
    } else if (f.type === "tool") {
      if (f.status === "running") this.tools.set(f.id, f.name);
      else this.tools.delete(f.id);
      if (this.tick) this.showState();
    } else if (f.type === "message") {
      this.shown.reply = f.created_at;
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
    const text = tools.length
      ? t("status.running_for", { tools: tools.join(", "), secs })
      : t("status.working_for", { secs });
    this.set("state", text, "busy");
  }

  details(text) {
    this.dom.text.textContent = text;
  }
}
