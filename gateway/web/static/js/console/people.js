// People: tool calls waiting for a yes (approve, deny), pairings (a pending
// code approved, an approved sender revoked) and one user's memories (search,
// delete one, forget all). The server acts as /approve, /deny, /pair and
// /forget do (gateway/console/people.py); this page only asks it to.

import { localTime } from "../status.js";
import { fill, id, panel, table } from "./table.js";

const part = encodeURIComponent;

export default class People {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.user = null; // whose memories are shown (kept across reloads)
    this.query = "";
    this.note = null; // the outcome of the last action, shown until the next one
    this.loads = 0; // only the newest of overlapping loads is shown
  }

  // `keepNote`: after an action, whose outcome stays shown
  async load(keepNote = false) {
    if (!keepNote) this.note = null;
    const ticket = ++this.loads;
    const { api } = this.ctx;
    const [approvals, pairings, users] = await Promise.all([
      api("/api/ops/approvals"),
      api("/api/ops/pairings"),
      api("/api/ops/memories"),
    ]);
    if (!users.users.some((u) => u.user === this.user)) {
      this.user = users.users.length ? users.users[0].user : null;
      this.query = "";
    }
    const memories = this.user ? await api(this.memoriesPath()) : null;
    if (ticket === this.loads) this.render(approvals, pairings, users.users, memories);
  }

  memoriesPath() {
    const query = this.query ? `?q=${part(this.query)}` : "";
    return `/api/ops/memories/${part(this.user)}${query}`;
  }

  // runs an action, then shows its outcome (or why it was refused) and reloads
  async act(button, action, done) {
    const { t } = this.ctx;
    button.disabled = true;
    try {
      await action();
      this.note = { text: done, bad: false };
    } catch (err) {
      if (err.status === 401 || err.status === 403) return; // the console asks for a token or hides
      this.note = { text: t("people.failed", { error: err.message }), bad: true };
    }
    await this.refresh(true);
  }

  // load() from a click or a form: a failure is shown in the view, not thrown
  async refresh(keepNote = false) {
    try {
      await this.load(keepNote);
    } catch (err) {
      if (err.status === 401 || err.status === 403) return;
      const note = this.root.querySelector("#people-note");
      if (!note) return;
      note.textContent = this.ctx.t("console.load_failed", { error: err.message });
      note.className = "people-note error";
      note.hidden = false;
    }
  }

  button(label, className, onClick) {
    const node = this.ctx.el("button", className, label);
    node.type = "button";
    node.addEventListener("click", () => onClick(node));
    return node;
  }

  render(approvals, pairings, users, memories) {
    const { el } = this.ctx;
    const note = el("p", `people-note${this.note?.bad ? " error" : ""}`, this.note?.text || "");
    note.id = "people-note";
    note.setAttribute("role", "status");
    note.hidden = !this.note;
    this.root.replaceChildren(
      note,
      this.approvalsPanel(approvals),
      this.pairingsPanel(pairings),
      this.memoriesPanel(users, memories),
    );
  }

  // a card per approval (a few at most): the held calls as the chat shows them
  approvalsPanel(data) {
    const { t, el, api, confirm } = this.ctx;
    const list = el("div", "approvals");
    list.id = "approvals";
    for (const a of data.approvals) {
      const card = el("article", "approval");
      card.dataset.approvalId = a.id;
      const head = el("h3");
      head.append(id(`#${a.id}`), " ", id(a.chat));
      const calls = el("ul", "calls");
      calls.setAttribute("aria-label", t("people.approvals.calls"));
      for (const call of a.calls) {
        const item = el("li");
        item.append(el("span", "call-name", `${call.name}: `), el("code", "", call.shown));
        calls.append(item);
      }
      const facts = el("dl", "kv");
      for (const [label, value] of [
        [t("people.approvals.asked_by"), id(a.asked_by)],
        [t("people.approvals.asked"), when(el, a.created_at)],
        [t("people.approvals.expires"), when(el, a.expires_at)],
      ]) {
        const dd = el("dd");
        dd.append(value ?? "–");
        facts.append(el("dt", "", label), dd);
      }
      const path = `/api/ops/approvals/${a.id}`;
      const actions = el("div", "actions");
      actions.append(
        this.button(t("people.approve"), "approve", (b) =>
          this.act(b, () => api(`${path}/approve`, { method: "POST" }), t("people.approvals.approved", { id: a.id })),
        ),
        this.button(t("people.deny"), "danger", async (b) => {
          if (!(await confirm(t("people.approvals.deny_title", { id: a.id }), t("people.approvals.deny_text"), { danger: true }))) return;
          await this.act(b, () => api(`${path}/deny`, { method: "POST", body: {} }), t("people.approvals.denied", { id: a.id }));
        }),
      );
      card.append(head, calls, facts, actions);
      list.append(card);
    }
    if (!data.approvals.length) list.append(el("p", "empty muted", t("people.approvals.none")));
    return panel(t("people.approvals.title"), list);
  }

  pairingsPanel(data) {
    const { t, el, api, confirm } = this.ctx;
    const approveCode = (button, code) =>
      this.act(button, () => api(`/api/ops/pairings/${part(code)}/approve`, { method: "POST" }), t("people.pairings.approved", { code }));

    const form = el("form", "toolbar");
    const input = el("input");
    input.id = "pairing-code";
    input.placeholder = "XXXX-XXXX";
    input.maxLength = 20;
    input.autocomplete = "off";
    input.setAttribute("aria-label", t("people.pairings.code"));
    const submit = el("button", "", t("people.pairings.approve_code"));
    submit.type = "submit";
    form.append(input, submit);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (input.value.trim()) approveCode(submit, input.value.trim());
    });

    const pending = table("pairing-codes", [
      t("people.pairings.code"), t("people.pairings.who"), t("people.pairings.expires"), "",
    ]);
    fill(
      pending.table,
      data.pending.map((p) => [
        id(p.code), id(p.who), when(el, p.expires_at),
        this.button(t("people.approve"), "approve", (b) => approveCode(b, p.code)),
      ]),
      t("people.pairings.no_codes"),
    );
    const approved = table("paired", [
      t("people.pairings.who"), t("people.pairings.approved_by"), t("people.pairings.approved_at"), "",
    ]);
    fill(
      approved.table,
      data.approved.map((p) => [
        id(p.who), id(p.approved_by), when(el, p.approved_at),
        this.button(t("people.pairings.revoke"), "danger", async (b) => {
          if (!(await confirm(t("people.pairings.revoke_title", { who: p.who }), t("people.pairings.revoke_text"), { danger: true }))) return;
          const path = `/api/ops/pairings/${part(p.channel)}/${part(p.sender_id)}/revoke`;
          await this.act(b, () => api(path, { method: "POST" }), t("people.pairings.revoked", { who: p.who }));
        }),
      ]),
      t("people.pairings.none"),
    );
    return panel(
      t("people.pairings.title"), form,
      el("h3", "", t("people.pairings.pending")), pending.wrap,
      el("h3", "", t("people.pairings.approved_list")), approved.wrap,
    );
  }

  memoriesPanel(users, data) {
    const { t, el, api, confirm } = this.ctx;
    if (!users.length) {
      return panel(t("people.memories.title"), el("p", "muted", t("people.memories.no_users")));
    }
    const form = el("form", "toolbar");
    const select = el("select");
    select.id = "memory-user";
    select.setAttribute("aria-label", t("people.memories.user"));
    for (const u of users) {
      const option = el("option", "", t("people.memories.user_option", { user: u.user, count: u.entries }));
      option.value = u.user;
      select.append(option);
    }
    if (this.user) select.value = this.user;
    select.addEventListener("change", async () => {
      if (select.value === this.user) return;
      this.user = select.value;
      this.query = "";
      await this.refresh();
    });
    const search = el("input");
    search.id = "memory-search";
    search.type = "search";
    search.maxLength = 200;
    search.value = this.query;
    search.placeholder = t("people.memories.search_hint");
    search.setAttribute("aria-label", t("people.memories.search"));
    const go = el("button", "", t("people.memories.search"));
    go.type = "submit";
    const forget = this.button(t("people.memories.forget_all"), "danger", async (b) => {
      const user = this.user;
      if (!(await confirm(t("people.memories.forget_title", { user }), t("people.memories.forget_text"), { danger: true }))) return;
      await this.act(b, () => api(`/api/ops/memories/${part(user)}`, { method: "DELETE" }), t("people.memories.forgotten", { user }));
    });
    forget.id = "memory-forget";
    form.append(select, search, go, forget);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      this.query = search.value.trim();
      await this.refresh();
    });

    const grid = table("memories", [t("people.memories.entry"), t("people.memories.updated"), ""]);
    const rows = data.entries.map((m) => {
      const name = `${m.namespace}/${m.key}`;
      const remove = this.button(t("people.memories.delete"), "danger", async (b) => {
        if (!(await confirm(t("people.memories.delete_title", { name }), t("people.memories.delete_text", { user: this.user }), { danger: true }))) return;
        const path = `/api/ops/memories/${part(this.user)}/${part(m.namespace)}/${part(m.key)}`;
        await this.act(b, () => api(path, { method: "DELETE" }), t("people.memories.deleted", { name }));
      });
      remove.dataset.entry = name;
      const entry = el("div", "entry");
      entry.append(id(name), el("p", "entry-content", m.content));
      const meta = el("div", "entry-meta");
      const source = m.category ? `${m.source}, ${m.category}` : m.source;
      meta.append(when(el, m.updated_at) || "–", el("div", "muted", t("people.memories.source_is", { source })));
      return [entry, meta, remove];
    });
    fill(grid.table, rows, data.query ? t("people.memories.no_match") : t("console.nothing"));
    const shown = el("p", "muted");
    shown.id = "memory-shown";
    shown.textContent = data.query
      ? t("people.memories.found", { count: data.entries.length, query: data.query })
      : t("people.memories.listed", { count: data.entries.length, limit: data.limit });
    const parts = [form, shown, grid.wrap];
    if (data.summary) {
      const summary = el("details", "summary");
      summary.append(el("summary", "", t("people.memories.summary")), el("p", "", data.summary));
      parts.push(summary);
    }
    return panel(t("people.memories.title"), ...parts);
  }
}

function when(el, iso) {
  if (!iso) return null;
  const node = el("time", "when", localTime(iso));
  node.dateTime = iso;
  return node;
}
