// Delivery: the outbox by state (retry or discard a failed or parked row),
// inbound dead letters (the payload with its secrets masked; retry or
// discard), each channel's health and the gateway's readiness. The server
// acts as `picobot outbox retry|discard` and `picobot dead-letters
// retry|discard` do (gateway/console/delivery.py); this page only asks it to.

import { localTime } from "../status.js";
import { fill as fillTable, id, panel, table } from "./table.js";

const STATES = ["pending", "parked", "failed", "sent", "discarded"];
const OPEN = new Set(["failed", "parked"]); // what may be retried or discarded

// `fill`, each cell labelled with its column: on a phone a row is a card
// (css/delivery.css), each value under its name
function fill(tableNode, rows, empty) {
  fillTable(tableNode, rows, empty);
  const labels = [...tableNode.querySelectorAll("thead th")].map((th) => th.textContent);
  for (const tr of tableNode.tBodies[0].rows) {
    for (const [i, td] of [...tr.cells].entries()) if (labels[i] && !td.classList.contains("empty")) td.dataset.label = labels[i];
  }
}

export default class Delivery {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.state = ""; // the outbox filter: "" = not yet sent
    this.note = null; // the outcome of the last action, shown until the next one
    this.letter = null; // the dead letter whose payload is shown
  }

  // `keepNote`: after an action, whose outcome stays shown
  async load(keepNote = false) {
    if (!keepNote) this.note = null;
    const { api } = this.ctx;
    const query = this.state ? `?state=${encodeURIComponent(this.state)}` : "";
    const [outbox, letters, channels] = await Promise.all([
      api(`/api/ops/outbox${query}`),
      api("/api/ops/dead-letters"),
      api("/api/ops/channels"),
    ]);
    if (this.letter && !letters.letters.some((d) => d.id === this.letter.id)) this.letter = null;
    this.render(outbox, letters.letters, channels);
  }

  // `load` from a button or the filter: a failure is said in the note
  // (401 and 403 the console itself handles: token dialog, admins-only note)
  async refresh(keepNote = false) {
    try {
      await this.load(keepNote);
    } catch (err) {
      if (err.status === 401 || err.status === 403) return;
      const note = this.root.querySelector("#delivery-note");
      if (!note) return;
      note.textContent = this.ctx.t("console.load_failed", { error: err.message });
      note.className = "delivery-note error";
      note.hidden = false;
    }
  }

  // runs an action, then shows its outcome (or why it was refused) and reloads
  async act(button, action, done) {
    const { t } = this.ctx;
    button.disabled = true;
    try {
      const answer = await action();
      this.note = { text: done(answer), bad: false };
    } catch (err) {
      if (err.status === 401 || err.status === 403) return;
      this.note = { text: t("delivery.failed", { error: err.message }), bad: true };
    }
    await this.refresh(true);
  }

  button(label, className, onClick) {
    const node = this.ctx.el("button", className, label);
    node.type = "button";
    node.addEventListener("click", () => onClick(node));
    return node;
  }

  when(iso) {
    const node = this.ctx.el("time", "when", localTime(iso, true));
    node.dateTime = iso || "";
    return node;
  }

  render(outbox, letters, channels) {
    const { el } = this.ctx;
    const note = el("p", `delivery-note${this.note?.bad ? " error" : ""}`, this.note?.text || "");
    note.id = "delivery-note";
    note.setAttribute("role", "status");
    note.hidden = !this.note;
    this.root.replaceChildren(
      note,
      this.outboxPanel(outbox),
      this.lettersPanel(letters),
      this.channelsPanel(channels),
      this.readinessPanel(channels),
    );
  }

  outboxPanel(outbox) {
    const { t, el, api, confirm } = this.ctx;
    const filter = el("select");
    filter.id = "outbox-state";
    filter.setAttribute("aria-label", t("delivery.filter"));
    for (const value of ["", ...STATES]) {
      const option = el("option", "", value ? t(`delivery.state.${value}`) : t("delivery.unsent"));
      option.value = value;
      filter.append(option);
    }
    filter.value = this.state;
    filter.addEventListener("change", () => {
      this.state = filter.value;
      this.refresh();
    });
    const label = el("label", "", t("delivery.filter"));
    label.append(" ", filter);
    const counts = el("p", "muted");
    counts.id = "outbox-counts";
    const entries = Object.entries(outbox.counts).map(([state, n]) => `${t(`delivery.state.${state}`)}: ${n}`);
    counts.textContent = entries.length ? entries.join(" · ") : t("console.nothing");
    const toolbar = el("div", "toolbar");
    toolbar.append(label, counts);

    const grid = table("outbox", [
      t("delivery.id"), t("delivery.state"), t("delivery.chat"), t("delivery.written"),
      t("delivery.attempts"), t("delivery.last_error"), t("delivery.text"), "",
    ]);
    const rows = outbox.rows.map((r) => {
      const actions = el("div", "row-actions");
      if (OPEN.has(r.state)) {
        const retry = this.button(t("delivery.retry"), "", (node) =>
          this.act(node, () => api(`/api/ops/outbox/${r.id}/retry`, { method: "POST" }), () => t("delivery.retried", { id: r.id })),
        );
        retry.dataset.action = "retry";
        const discard = this.button(t("delivery.discard"), "danger", async (node) => {
          const chat = `${r.channel}:${r.chat_id}`;
          if (!(await confirm(t("delivery.discard_title", { id: r.id }), t("delivery.discard_text", { chat }), { danger: true }))) return;
          await this.act(node, () => api(`/api/ops/outbox/${r.id}/discard`, { method: "POST" }), () => t("delivery.discarded", { id: r.id }));
        });
        discard.dataset.action = "discard";
        actions.append(retry, discard);
      }
      return [id(r.id), t(`delivery.state.${r.state}`), id(`${r.channel}:${r.chat_id}`), this.when(r.created_at),
        r.attempts, r.last_error, r.preview, actions];
    });
    fill(grid.table, rows, t("console.nothing"));
    for (const [i, r] of outbox.rows.entries()) grid.table.tBodies[0].rows[i].dataset.rowId = r.id;
    return panel(t("delivery.outbox"), toolbar, grid.wrap);
  }

  lettersPanel(letters) {
    const { t, el, api, confirm } = this.ctx;
    const grid = table("dead-letters", [
      t("delivery.id"), t("delivery.letters.channel"), t("delivery.letters.received"),
      t("delivery.letters.platform_id"), t("delivery.letters.reason"), t("delivery.letters.payload"), "",
    ]);
    const rows = letters.map((d) => {
      const show = this.button(t("delivery.letters.show"), "link", (node) => this.show(node, d.id));
      show.dataset.action = "show";
      const payload = el("div", "payload-preview");
      payload.append(el("code", "", d.preview), show);
      const actions = el("div", "row-actions");
      if (d.retryable) {
        const retry = this.button(t("delivery.retry"), "", (node) =>
          this.act(node, () => api(`/api/ops/dead-letters/${d.id}/retry`, { method: "POST" }), (answer) =>
            t(answer.duplicate ? "delivery.letters.duplicate" : "delivery.letters.retried", { id: d.id })),
        );
        retry.dataset.action = "retry";
        actions.append(retry);
      } else {
        actions.append(el("span", "muted", t("delivery.letters.raw")));
      }
      const discard = this.button(t("delivery.discard"), "danger", async (node) => {
        if (!(await confirm(t("delivery.letters.discard_title", { id: d.id }), t("delivery.letters.discard_text", { channel: d.channel }), { danger: true }))) return;
        await this.act(node, () => api(`/api/ops/dead-letters/${d.id}/discard`, { method: "POST" }), () => t("delivery.letters.discarded", { id: d.id }));
      });
      discard.dataset.action = "discard";
      actions.append(discard);
      return [id(d.id), d.channel, this.when(d.created_at), id(d.platform_id), d.reason, payload, actions];
    });
    fill(grid.table, rows, t("console.nothing"));
    for (const [i, d] of letters.entries()) grid.table.tBodies[0].rows[i].dataset.letterId = d.id;
    const node = panel(t("delivery.letters"), el("p", "muted", t("delivery.letters.about")), grid.wrap);
    node.id = "dead-letters-panel";
    if (this.letter) node.append(this.payloadBox(this.letter));
    return node;
  }

  // the whole payload of one dead letter (secrets masked by the server), under the table
  async show(button, letterId) {
    const { t, api } = this.ctx;
    button.disabled = true;
    try {
      this.letter = await api(`/api/ops/dead-letters/${letterId}`);
    } catch (err) {
      if (err.status === 401 || err.status === 403) return;
      this.note = { text: t("delivery.failed", { error: err.message }), bad: true };
      await this.refresh(true);
      return;
    } finally {
      button.disabled = false;
    }
    const box = this.payloadBox(this.letter);
    const old = this.root.querySelector("#dead-letter-payload");
    if (old) old.replaceWith(box);
    else this.root.querySelector("#dead-letters-panel").append(box);
    box.scrollIntoView({ block: "nearest" });
  }

  payloadBox(letter) {
    const { t, el } = this.ctx;
    const box = el("div", "payload");
    box.id = "dead-letter-payload";
    box.dataset.letterId = letter.id;
    const head = el("div", "toolbar");
    head.append(el("strong", "", t("delivery.letters.payload_title", { id: letter.id })));
    if (letter.truncated) head.append(el("span", "muted", t("delivery.letters.truncated")));
    head.append(this.button(t("delivery.letters.hide"), "link", () => {
      this.letter = null;
      box.remove();
    }));
    box.append(head, el("pre", "", letter.payload));
    return box;
  }

  channelsPanel(data) {
    const { t, el } = this.ctx;
    const grid = table("channels", [
      t("delivery.channel.name"), t("delivery.channel.connection"), t("delivery.channel.sending"),
      t("delivery.channel.last_error"), t("delivery.channel.last_sent"),
    ]);
    const badge = (ok, text, reason) => {
      const cell = el("div", "health");
      cell.append(el("span", `badge ${ok ? "ok" : "bad"}`, text));
      if (reason) cell.append(el("span", "reason", reason));
      return cell;
    };
    const rows = (data.channels || []).map((c) => {
      const lastError = el("div", "health");
      if (c.last_error) lastError.append(this.when(c.last_error_at), el("span", "reason", c.last_error));
      else lastError.append(el("span", "muted", t("delivery.channel.none")));
      const lastSent = c.last_sent_at ? this.when(c.last_sent_at) : el("span", "muted", t("delivery.channel.none"));
      return [
        id(c.name),
        badge(c.connected, t(c.connected ? "delivery.connected" : "delivery.disconnected"), c.reason),
        badge(!c.degraded, t(c.degraded ? "delivery.degraded" : "delivery.sending_ok"), c.degraded),
        lastError,
        lastSent,
      ];
    });
    fill(grid.table, rows, t("console.nothing"));
    for (const [i, c] of (data.channels || []).entries()) grid.table.tBodies[0].rows[i].dataset.channel = c.name;
    return panel(t("delivery.channels"), grid.wrap);
  }

  readinessPanel(channels) {
    const { t, el } = this.ctx;
    const ready = el("span", `badge ${channels.ready ? "ok" : "bad"}`, t(channels.ready ? "delivery.ready" : "delivery.not_ready"));
    ready.id = "ready";
    const checks = el("ul", "checks");
    checks.id = "checks";
    checks.replaceChildren(
      ...channels.checks.map((c) => el("li", c.ok ? "ok" : "bad", c.ok ? c.name : `${c.name}: ${c.reason}`)),
    );
    const node = panel(t("delivery.readiness"), checks);
    node.querySelector("h2").append(" ", ready);
    return node;
  }
}
