// The operator pages: views of the gateway's own data over /api/ops/ (the
// outbox with retry of failed rows, scheduled jobs, readiness).

import { el } from "./render.js";

export class Unauthorized extends Error {}

export class Ops {
  constructor(dom, token, onUnauthorized) {
    this.dom = dom;
    this.token = token;
    this.onUnauthorized = onUnauthorized;
    dom.refresh.addEventListener("click", () => this.load());
  }

  async api(path, method = "GET") {
    const headers = this.token ? { Authorization: `Bearer ${this.token}` } : {};
    const response = await fetch(path, { method, headers, cache: "no-store" });
    if (response.status === 401) throw new Unauthorized();
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  async load() {
    this.dom.error.hidden = true;
    try {
      const [outbox, jobs, channels] = await Promise.all([
        this.api("/api/ops/outbox"),
        this.api("/api/ops/jobs"),
        this.api("/api/ops/channels"),
      ]);
      this.outbox(outbox);
      this.jobs(jobs.jobs);
      this.checks(channels);
    } catch (err) {
      if (err instanceof Unauthorized) {
        this.onUnauthorized();
        return;
      }
      this.dom.error.textContent = `Could not load: ${err.message}`;
      this.dom.error.hidden = false;
    }
  }

  rows(table, rows, columns) {
    const body = table.querySelector("tbody");
    body.replaceChildren();
    if (!rows.length) {
      const tr = el("tr");
      const td = el("td", "empty", "nothing here");
      td.colSpan = columns;
      tr.append(td);
      body.append(tr);
    }
    for (const cells of rows) {
      const tr = el("tr");
      for (const cell of cells) {
        if (cell instanceof Node) {
          const td = el("td");
          td.append(cell);
          tr.append(td);
        } else {
          tr.append(el("td", "text", cell === null || cell === undefined ? "–" : String(cell)));
        }
      }
      body.append(tr);
    }
  }

  outbox(data) {
    const counts = Object.entries(data.counts).map(([state, n]) => `${state}: ${n}`);
    this.dom.counts.textContent = counts.length ? counts.join(" · ") : "empty";
    const rows = data.rows.map((r) => {
      let action = "";
      if (r.state === "failed" || r.state === "parked") {
        action = el("button", "", "Retry");
        action.type = "button";
        action.dataset.rowId = r.id;
        action.addEventListener("click", async () => {
          action.disabled = true;
          try {
            await this.api(`/api/ops/outbox/${r.id}/retry`, "POST");
          } catch (err) {
            if (err instanceof Unauthorized) this.onUnauthorized();
          }
          this.load();
        });
      }
      return [r.id, r.state, `${r.channel}:${r.chat_id}`, r.attempts, r.last_error, r.preview, action];
    });
    this.rows(this.dom.outbox, rows, 7);
  }

  jobs(jobs) {
    const rows = jobs.map((j) => [
      j.id,
      j.kind,
      j.owner,
      j.state,
      j.schedule ? JSON.stringify(j.schedule) : null,
      j.next_run_at,
      j.last_run ? `${j.last_run.status} ${j.last_run.scheduled_at}` : null,
    ]);
    this.rows(this.dom.jobs, rows, 7);
  }

  checks(data) {
    this.dom.ready.textContent = data.ready ? "ready" : "not ready";
    this.dom.ready.className = `badge ${data.ready ? "ok" : "bad"}`;
    this.dom.checks.replaceChildren(
      ...data.checks.map((c) => el("li", c.ok ? "ok" : "bad", c.ok ? c.name : `${c.name}: ${c.reason}`)),
    );
  }
}
