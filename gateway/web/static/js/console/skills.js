// The agent view's skills panel: the skills loaded and the ones disabled, each
// with its switch (disable writes $PICOBOT_HOME/skill-state.json, enable takes
// the name out of every skill-state.json: the server's SkillRuntime.switch),
// the SKILL.md files skipped and why, and the latest skill events. `ctx` is
// the agent view's (js/console/agent.js); `act(button, label, path)` runs an
// action and reloads the view.

import { localTime } from "../status.js";
import { fill, id, table } from "./table.js";

function skillRows(ctx, data, act) {
  const { t, word, button } = ctx;
  const rows = [];
  const path = (name, verb) => `/api/ops/skills/${encodeURIComponent(name)}/${verb}`;
  for (const skill of data.loaded) {
    const label = t("agent.skills.disable");
    rows.push([
      id(skill.name),
      word("source", skill.source),
      skill.warning ? `${skill.description} (${skill.warning})` : skill.description,
      t("agent.skills.loaded"),
      button(label, "disable", (node) => act(node, label, path(skill.name, "disable"))),
    ]);
  }
  for (const skill of data.disabled) {
    const label = t("agent.skills.enable");
    rows.push([
      id(skill.name),
      word("source", skill.source),
      skill.source ? skill.description : t("agent.skills.not_found"),
      t("agent.skills.disabled"),
      button(label, "enable", (node) => act(node, label, path(skill.name, "enable"))),
    ]);
  }
  return rows;
}

function problems(ctx, data) {
  const { el, t } = ctx;
  const list = el("ul", "skipped");
  list.id = "skills-skipped";
  for (const item of data.skipped) {
    const li = el("li", "bad");
    li.append(el("span", "id", item.path), " ", el("span", "", t("agent.skills.skipped_because", { reason: item.reason })));
    list.append(li);
  }
  for (const item of data.warnings) {
    const li = el("li", "warn");
    li.append(el("span", "id", item.path), " ", el("span", "", t("agent.skills.loaded_with", { reason: item.reason })));
    list.append(li);
  }
  for (const text of data.problems) list.append(el("li", "bad", text));
  return list;
}

function eventsTable(ctx, events) {
  const { el, t, word, keep, labelCells } = ctx;
  const grid = table("skill-events", [
    t("agent.skills.when"), t("agent.skills.event"), t("agent.skills.name"), t("agent.skills.where"), t("agent.skills.detail"),
  ]);
  const rows = events.map((e) => {
    const when = el("time", "when", localTime(e.at, true));
    when.dateTime = e.at || "";
    return [when, word("event", e.event), id(e.skill), e.where ? id(e.where) : null, e.detail];
  });
  fill(grid.table, rows, t("console.nothing"));
  labelCells(grid.table);
  const details = el("details", "events");
  details.append(el("summary", "", t("agent.skills.events", { n: events.length })), grid.wrap);
  keep(details, "skill-events", false);
  return details;
}

export function skillsPanel(ctx, data, act) {
  const { el, t } = ctx;
  const node = el("div", "panel");
  node.id = "skills-panel";
  node.append(el("h2", "", t("agent.skills.title")));
  if (!data.enabled) {
    node.append(el("p", "muted", t("agent.skills.off")), eventsTable(ctx, data.events));
    return node;
  }
  const grid = table("skills", [
    t("agent.skills.name"), t("agent.skills.source"), t("agent.skills.description"), t("agent.skills.state"), "",
  ]);
  fill(grid.table, skillRows(ctx, data, act), t("console.nothing"));
  ctx.labelCells(grid.table);
  const rows = grid.table.querySelectorAll("tbody tr");
  [...data.loaded, ...data.disabled].forEach((skill, i) => {
    rows[i].dataset.skill = skill.name;
    rows[i].classList.toggle("off", i >= data.loaded.length);
  });
  node.append(grid.wrap);
  if (data.skipped.length || data.warnings.length || data.problems.length) {
    node.append(el("h3", "", t("agent.skills.skipped")), problems(ctx, data));
  }
  node.append(eventsTable(ctx, data.events));
  return node;
}
