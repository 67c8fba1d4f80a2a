// The agent view's MCP panel: one card per configured server (state, last
// error, next attempt) with the tools the model gets from it and those it
// does not, and why. `ctx` is the agent view's (js/console/agent.js).

import { panel } from "./table.js";

const OPEN_UP_TO = 8; // tools: a longer list starts folded
const BADGE = { up: "ok", connecting: "wait", down: "bad", stopped: "bad", inactive: "off" };

function toolItem(ctx, tool) {
  const { el, t, word } = ctx;
  const item = el("li", tool.offered ? "tool" : "tool off");
  item.append(el("code", "id", tool.name));
  if (!tool.offered) item.append(" ", el("span", "why", t("agent.mcp.not_offered", { why: word("why", tool.why) })));
  if (tool.description) item.append(el("span", "about muted", tool.description));
  return item;
}

function serverCard(ctx, server) {
  const { el, t, word } = ctx;
  const card = el("div", "server");
  card.dataset.server = server.key;
  card.dataset.state = server.state;
  const head = el("div", "server-head");
  const state = el("span", `badge ${BADGE[server.state] || "off"}`, word("mcp.state", server.state));
  state.classList.add("state");
  const name = server.name === server.key ? server.key : `${server.name} (${server.key})`;
  head.append(el("strong", "", name), el("span", "muted", server.transport), state);
  card.append(head);
  if (server.error) {
    const error = el("p", "error", t("agent.mcp.error", { error: server.error }));
    if (server.retry_in_secs !== null && server.retry_in_secs !== undefined) {
      error.append(" ", el("span", "muted", t("agent.mcp.retry_in", { seconds: Math.ceil(server.retry_in_secs) })));
    }
    card.append(error);
  }
  if (server.state === "inactive") {
    card.append(el("p", "muted", t("agent.mcp.inactive")));
  } else if (server.tools.length) {
    const offered = server.tools.filter((tool) => tool.offered).length;
    const details = el("details", "tools");
    details.append(
      el("summary", "", t("agent.mcp.tools", { offered, total: server.tools.length })),
      el("ul", "tool-list"),
    );
    details.querySelector("ul").append(...server.tools.map((tool) => toolItem(ctx, tool)));
    ctx.keep(details, `mcp:${server.key}`, server.tools.length <= OPEN_UP_TO);
    card.append(details);
  } else {
    card.append(el("p", "muted", t(server.state === "up" ? "agent.mcp.no_tools" : "agent.mcp.tools_when_up")));
  }
  return card;
}

export function mcpPanel(ctx, data) {
  const { el, t } = ctx;
  const list = el("div", "servers");
  list.id = "mcp";
  if (!data.servers.length) list.append(el("p", "muted", t("agent.mcp.none")));
  list.append(...data.servers.map((server) => serverCard(ctx, server)));
  return panel(t("agent.mcp.title"), list);
}
