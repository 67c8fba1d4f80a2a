// Logs: the log's last lines as the gateway wrote them (secrets masked),
// live: every 2 s while the view is shown it asks GET /api/ops/logs for the
// lines after the last one it has (stop() ends that). A level and a text
// filter (asked of the server: a change reloads the newest matching lines),
// a pause button, and the list follows the newest line unless the reader has
// scrolled up (then a button jumps back down).

import { lang } from "../i18n.js";

const POLL_MS = 2000;
const LIMIT = 200; // lines per request
const MAX_SHOWN = 1000; // lines kept in the page; older ones are dropped
const TYPING_MS = 300; // the text filter is asked for once typing pauses
const LEVELS = ["debug", "info", "warning", "error"];
const NEAR_BOTTOM_PX = 24;

function clock(iso) {
  const when = new Date(iso || "");
  if (Number.isNaN(when.getTime())) return iso || "–";
  return when.toLocaleTimeString(lang(), { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

function shown(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

export default class Logs {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.timer = null;
    this.typing = null;
    this.chain = Promise.resolve();
    this.polling = false;
    this.paused = false;
    this.level = "debug"; // all the log writes
    this.text = "";
    this.cursor = 0; // the newest line number the server had when last asked
    this.generation = 0; // a reply meant for older filters (or a stopped view) is dropped
  }

  async load() {
    this.stop();
    this.render();
    await this.refill();
    this.timer = setInterval(() => this.poll(), POLL_MS);
  }

  stop() {
    clearInterval(this.timer);
    clearTimeout(this.typing);
    this.timer = this.typing = null;
    this.generation += 1;
  }

  render() {
    const { t, el } = this.ctx;
    const level = el("select");
    level.id = "log-level";
    level.setAttribute("aria-label", t("logs.level"));
    for (const name of LEVELS) {
      const option = el("option", "", t(`logs.level.${name}`));
      option.value = name;
      level.append(option);
    }
    level.value = this.level;
    level.addEventListener("change", () => {
      this.level = level.value;
      this.refilter();
    });

    const text = el("input");
    text.id = "log-filter";
    text.type = "search";
    text.value = this.text;
    text.placeholder = t("logs.filter");
    text.setAttribute("aria-label", t("logs.filter"));
    text.addEventListener("input", () => {
      clearTimeout(this.typing);
      this.typing = setTimeout(() => {
        this.text = text.value.trim();
        this.refilter();
      }, TYPING_MS);
    });

    this.pause = el("button", "", "");
    this.pause.id = "log-pause";
    this.pause.type = "button";
    this.pause.addEventListener("click", () => {
      this.paused = !this.paused;
      this.showPaused();
      if (!this.paused) this.poll();
    });

    this.state = el("span", "muted log-state");
    this.state.id = "log-state";
    this.state.setAttribute("aria-live", "polite");

    this.lines = el("ol", "log-lines");
    this.lines.id = "log-lines";
    this.scroller = el("div", "log-scroll");
    this.scroller.tabIndex = 0;
    this.scroller.setAttribute("aria-label", t("logs.title"));
    this.scroller.append(this.lines);
    this.scroller.addEventListener("scroll", () => {
      if (this.atBottom()) this.newer.hidden = true;
    });

    this.newer = el("button", "log-newer", t("logs.newer"));
    this.newer.id = "log-newer";
    this.newer.type = "button";
    this.newer.hidden = true;
    this.newer.addEventListener("click", () => this.toBottom());

    const toolbar = el("div", "toolbar");
    toolbar.append(level, text, this.pause, this.state);
    const panel = el("div", "panel log-panel");
    panel.append(el("h2", "", t("logs.title")), el("p", "muted", t("logs.about")), toolbar, this.scroller, this.newer);
    this.root.replaceChildren(panel);
    this.showPaused();
  }

  showPaused() {
    const { t } = this.ctx;
    this.pause.textContent = t(this.paused ? "logs.resume" : "logs.pause");
    this.pause.setAttribute("aria-pressed", String(this.paused));
    this.root.dataset.paused = String(this.paused);
    this.showState();
  }

  showState(error) {
    const { t } = this.ctx;
    const count = this.lines.querySelectorAll("li.line").length;
    let text = t(this.paused ? "logs.state.paused" : "logs.state.live", { count });
    if (error) text = t("logs.state.failed", { error });
    this.state.textContent = text;
  }

  query(after) {
    const params = new URLSearchParams({ after: String(after), level: this.level, limit: String(LIMIT) });
    if (this.text) params.set("q", this.text);
    return this.ctx.api(`/api/ops/logs?${params}`);
  }

  // requests one after another, so that replies come in the order asked
  serial(task) {
    const next = this.chain.then(task);
    this.chain = next.catch(() => {});
    return next;
  }

  // the newest lines that match the filters, in place of what is shown
  refill() {
    const generation = ++this.generation;
    return this.serial(async () => {
      const data = await this.query(0);
      if (generation !== this.generation) return;
      this.lines.replaceChildren();
      this.add(data, true);
    });
  }

  async refilter() {
    try {
      await this.refill();
    } catch (err) {
      this.showState(err.message);
    }
  }

  poll() {
    if (this.paused || this.polling || document.hidden) return;
    const generation = this.generation;
    this.polling = true;
    this.serial(async () => {
      const data = await this.query(this.cursor);
      if (generation !== this.generation) return;
      if (data.last < this.cursor) {
        this.refill().catch((err) => this.showState(err.message)); // the gateway started again
        return;
      }
      this.add(data, false);
    })
      .catch((err) => {
        if (err.status === 401 || err.status === 403) this.stop(); // no token, or no admin's
        else if (generation === this.generation) this.showState(err.message);
      })
      .finally(() => {
        this.polling = false;
      });
  }

  add(data, first) {
    const { t, el } = this.ctx;
    const follow = first || this.atBottom();
    if (data.gap && !first) this.lines.append(el("li", "gap", t("logs.gap")));
    for (const event of data.events) this.lines.append(this.line(event));
    while (this.lines.childElementCount > MAX_SHOWN) this.lines.firstElementChild.remove();
    if (!this.lines.childElementCount) this.lines.append(el("li", "empty muted", t("logs.empty")));
    else if (data.events.length) this.lines.querySelector("li.empty")?.remove();
    this.cursor = data.last;
    if (follow) this.toBottom();
    else if (data.events.length) this.newer.hidden = false;
    this.showState();
  }

  line(event) {
    const { el } = this.ctx;
    const li = el("li", `line level-${event.level}`);
    li.dataset.seq = event.seq;
    li.dataset.level = event.level;
    const time = el("time", "when", clock(event.time));
    time.dateTime = event.time || "";
    time.title = event.time || "";
    const name = el("span", "event", event.event);
    if (event.logger) name.title = event.logger;
    li.append(time, " ", el("span", "level", event.level), " ", name);
    for (const [key, value] of Object.entries(event.fields || {})) {
      const field = el("span", key === "exception" ? "field block" : "field");
      field.append(el("span", "key", key), "=", el("span", "value", shown(value)));
      li.append(" ", field);
    }
    if (event.cut) li.append(" ", el("span", "cut", this.ctx.t("logs.cut")));
    return li;
  }

  atBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < NEAR_BOTTOM_PX;
  }

  toBottom() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
    this.newer.hidden = true;
  }
}
