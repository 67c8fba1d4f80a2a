// Agent parts: the MCP servers (js/console/mcp.js), the skills
// (js/console/skills.js) and the scheduled jobs: schedules and times in words,
// in the browser's time zone, with pause, resume, run now and delete (the
// server applies `picobot jobs`' rules: a config or built-in job is never
// deleted, so the page offers delete only for jobs made at run time).
// While the view is shown the MCP panel is fetched again every few seconds,
// so a server that goes down or comes back shows without a reload.

import { describeSchedule } from "../schedule.js";
import { localTime } from "../status.js";
import { mcpPanel } from "./mcp.js";
import { skillsPanel } from "./skills.js";
import { fill, id, panel, table } from "./table.js";

const MCP_EVERY_MS = 4000;

// `value` in the page's words when it has some (agent.<group>.<value>), else as is
function word(t, group, value) {
  if (value === null || value === undefined) return null;
  const key = `agent.${group}.${value}`;
  const text = t(key);
  return text === key ? String(value) : text;
}

// each cell names its column (data-label): a phone shows a row as a card
function labelCells(tableNode) {
  const heads = [...tableNode.querySelectorAll("thead th")].map((th) => th.textContent);
  for (const row of tableNode.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => {
      if (heads[i] && !cell.classList.contains("empty")) cell.dataset.label = heads[i];
    });
  }
}

function button(el, label, action, onClick, className = "") {
  const node = el("button", className, label);
  node.type = "button";
  node.dataset.action = action;
  node.addEventListener("click", () => onClick(node));
  return node;
}

export default class Agent {
  constructor(root, ctx) {
    this.root = root;
    // the panels' kit: the console's ctx, word(), button(), labelCells() and
    // keep(details, key, open): a <details> stays as the operator left it
    // when the panel is drawn again
    const kept = new Map();
    this.ctx = {
      ...ctx,
      word: (group, value) => word(ctx.t, group, value),
      button: (label, action, onClick, className) => button(ctx.el, label, action, onClick, className),
      labelCells,
      keep: (details, key, open) => {
        details.open = kept.has(key) ? kept.get(key) : open;
        details.addEventListener("toggle", () => kept.set(key, details.open));
      },
    };
    this.timer = null;
    this.mcp = null; // the MCP panel shown now
    this.note = ctx.el("p", "agent-note");
    this.note.id = "agent-note";
    this.note.setAttribute("role", "status");
    this.note.hidden = true;
  }

  async load() {
    const { api } = this.ctx;
    const [mcp, skills, jobs] = await Promise.all([
      api("/api/ops/mcp"),
      api("/api/ops/skills"),
      api("/api/ops/jobs"),
    ]);
    this.render(mcp, skills, jobs);
    this.poll();
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  poll() {
    this.stop();
    this.timer = setTimeout(async () => {
      try {
        const data = await this.ctx.api("/api/ops/mcp");
        if (this.timer === null || !this.mcp) return; // hidden meanwhile
        const fresh = mcpPanel(this.ctx, data);
        this.mcp.replaceWith(fresh);
        this.mcp = fresh;
      } catch (err) {
        // a token no longer let in: no more looks (the console asks for one);
        // anything else: the next look, or ↻, says what is wrong
        if (err.status === 401 || err.status === 403) {
          this.stop();
          return;
        }
      }
      if (this.timer !== null) this.poll();
    }, MCP_EVERY_MS);
  }

  say(text) {
    this.note.textContent = text || "";
    this.note.hidden = !text;
  }

  // one action of the page: the server's refusal is shown, the view reloaded
  async act(node, label, path, method = "POST") {
    const { t, api } = this.ctx;
    node.disabled = true;
    try {
      await api(path, { method });
      this.say("");
    } catch (err) {
      this.say(t("agent.failed", { action: label, error: err.message }));
    }
    try {
      await this.load();
    } catch (err) {
      this.say(t("console.load_failed", { error: err.message }));
    }
  }

  render(mcp, skills, jobs) {
    this.mcp = mcpPanel(this.ctx, mcp);
    const skillsNode = skillsPanel(this.ctx, skills, (node, label, path) => this.act(node, label, path));
    this.root.replaceChildren(this.note, this.mcp, skillsNode, this.jobsPanel(jobs));
  }

  jobsPanel(data) {
    const { t, el, word } = this.ctx;
    const grid = table("jobs", [
      t("agent.jobs.id"), t("agent.jobs.kind"), t("agent.jobs.source"), t("agent.jobs.owner"),
      t("agent.jobs.state"), t("agent.jobs.schedule"), t("agent.jobs.next_run"), t("agent.jobs.last_run"), "",
    ]);
    const live = data.scheduler === "running";
    const rows = data.jobs.map((j) => [
      id(j.id),
      word("kind", j.kind),
      word("source", j.source),
      id(j.owner),
      word("jobs.state", j.state),
      describeSchedule(j.schedule),
      j.next_run_at ? localTime(j.next_run_at, true) : null,
      this.lastRun(j.last_run),
      live ? this.jobActions(j) : "",
    ]);
    fill(grid.table, rows, t("console.nothing"));
    labelCells(grid.table);
    const body = [grid.wrap];
    if (!live) {
      const off = el("p", "muted", t(data.scheduler === "off" ? "agent.jobs.off" : "agent.jobs.stopped"));
      off.id = "jobs-off";
      body.unshift(off);
    }
    return panel(t("agent.jobs.title"), ...body);
  }

  lastRun(run) {
    if (!run) return null;
    const { word } = this.ctx;
    const text = `${word("run", run.status)}, ${localTime(run.scheduled_at, true)}`;
    return run.error ? `${text}: ${run.error}` : text;
  }

  jobActions(job) {
    const { t, el, confirm, button } = this.ctx;
    const path = `/api/ops/jobs/${job.id.split("/").map(encodeURIComponent).join("/")}`;
    const cell = el("div", "actions");
    const paused = job.state === "paused";
    const toggle = paused ? "resume" : "pause";
    const toggleLabel = t(`agent.jobs.${toggle}`);
    cell.append(
      button(toggleLabel, toggle, (node) => this.act(node, toggleLabel, `${path}/${toggle}`)),
      button(t("agent.jobs.run"), "run", (node) => this.act(node, t("agent.jobs.run"), `${path}/run`)),
    );
    if (job.source === "runtime") {
      const label = t("agent.jobs.delete");
      const remove = async (node) => {
        const sure = await confirm(
          t("agent.jobs.delete_title", { id: job.id }),
          t("agent.jobs.delete_text"),
          { danger: true },
        );
        if (sure) await this.act(node, label, path, "DELETE");
      };
      cell.append(button(label, "delete", remove, "delete"));
    }
    return cell;
  }
}
