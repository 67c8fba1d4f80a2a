// Agent parts: the scheduled jobs (schedules and times in words, in the
// browser's time zone).

import { describeSchedule } from "../schedule.js";
import { localTime } from "../status.js";
import { fill, id, panel, table } from "./table.js";

export default class Agent {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
  }

  async load() {
    const jobs = await this.ctx.api("/api/ops/jobs");
    this.render(jobs.jobs);
  }

  render(jobs) {
    const { t } = this.ctx;
    const grid = table("jobs", [
      t("agent.jobs.id"), t("agent.jobs.kind"), t("agent.jobs.owner"), t("agent.jobs.state"),
      t("agent.jobs.schedule"), t("agent.jobs.next_run"), t("agent.jobs.last_run"),
    ]);
    const rows = jobs.map((j) => [
      id(j.id),
      j.kind,
      id(j.owner),
      j.state,
      describeSchedule(j.schedule),
      j.next_run_at ? localTime(j.next_run_at, true) : null,
      j.last_run ? `${j.last_run.status}, ${localTime(j.last_run.scheduled_at, true)}` : null,
    ]);
    fill(grid.table, rows, t("console.nothing"));
    this.root.replaceChildren(panel(t("agent.jobs.title"), grid.wrap));
  }
}
