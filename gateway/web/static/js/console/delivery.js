// Delivery: the outbox by state with retry of a failed or parked row, and
// each channel's readiness.

import { localTime } from "../status.js";
import { fill, id, panel, table } from "./table.js";

export default class Delivery {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
  }

  async load() {
    const { api } = this.ctx;
    const [outbox, channels] = await Promise.all([api("/api/ops/outbox"), api("/api/ops/channels")]);
    this.render(outbox, channels);
  }

  render(outbox, channels) {
    const { t, el, api } = this.ctx;
    const counts = el("p", "muted");
    counts.id = "outbox-counts";
    const entries = Object.entries(outbox.counts).map(([state, n]) => `${state}: ${n}`);
    counts.textContent = entries.length ? entries.join(" · ") : t("console.nothing");
    const grid = table("outbox", [
      t("delivery.id"), t("delivery.state"), t("delivery.chat"), t("delivery.written"),
      t("delivery.attempts"), t("delivery.last_error"), t("delivery.text"), "",
    ]);
    const rows = outbox.rows.map((r) => {
      let action = "";
      if (r.state === "failed" || r.state === "parked") {
        action = el("button", "", t("delivery.retry"));
        action.type = "button";
        action.dataset.rowId = r.id;
        action.addEventListener("click", async () => {
          action.disabled = true;
          try {
            await api(`/api/ops/outbox/${r.id}/retry`, { method: "POST" });
          } finally {
            await this.load();
          }
        });
      }
      const when = el("time", "when", localTime(r.created_at));
      when.dateTime = r.created_at || "";
      return [id(r.id), r.state, id(`${r.channel}:${r.chat_id}`), when, r.attempts, r.last_error, r.preview, action];
    });
    fill(grid.table, rows, t("console.nothing"));

    const ready = el("span", `badge ${channels.ready ? "ok" : "bad"}`, t(channels.ready ? "delivery.ready" : "delivery.not_ready"));
    ready.id = "ready";
    const checks = el("ul", "checks");
    checks.id = "checks";
    checks.replaceChildren(
      ...channels.checks.map((c) => el("li", c.ok ? "ok" : "bad", c.ok ? c.name : `${c.name}: ${c.reason}`)),
    );
    const readiness = panel(t("delivery.readiness"), checks);
    readiness.querySelector("h2").append(" ", ready);
    this.root.replaceChildren(panel(t("delivery.outbox"), counts, grid.wrap), readiness);
  }
}
