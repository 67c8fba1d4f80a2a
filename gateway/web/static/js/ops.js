// The operator pages: views of the gateway's own data over /api/ops/ (the
// outbox with retry of failed rows, scheduled jobs, readiness). Schedules
// and times are shown in words and in the browser's time zone; ids keep
// their machine form (a cell of class "id" may break anywhere, text only
// between words).

import { el } from "./render.js";
import { describeSchedule } from "./schedule.js";
import { localTime } from "./status.js";

// a cell that is an identifier (may wrap anywhere) rather than words
function id(text) {
  return el("span", "id", text === null || text === undefined ? "–" : String(text));
}

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
      const when = el("time", "when", localTime(r.created_at));
      when.dateTime = r.created_at || "";
      return [id(r.id), r.state, id(`${r.channel}:${r.chat_id}`), when, r.attempts, r.last_error, r.preview, action];
    });
    this.rows(this.dom.outbox, rows, 8);
  }

  jobs(jobs) {
    const rows = jobs.map((j) => [
      id(j.id),
      j.kind,
      id(j.owner),
      j.state,
      describeSchedule(j.schedule),
      j.next_run_at ? localTime(j.next_run_at, true) : null,
      j.last_run ? `${j.last_run.status}, ${localTime(j.last_run.scheduled_at, true)}` : null,
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
