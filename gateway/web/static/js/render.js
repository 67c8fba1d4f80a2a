// Rendering: Markdown through marked, always sanitised by DOMPurify before it
// touches the DOM; everything else goes in as text, never as HTML.

/* global marked, DOMPurify */

import { t } from "./i18n.js";

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option"],
  FORBID_ATTR: ["style"],
};

export function markdown(text) {
  const html = marked.parse(text, { gfm: true, breaks: true, async: false });
  return DOMPurify.sanitize(html, PURIFY);
}

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function setMarkdown(node, text) {
  node.innerHTML = markdown(text);
}

function preview(args) {
  const flat = args.replace(/\s+/g, " ");
  return flat.length > 80 ? `${flat.slice(0, 80)}…` : flat;
}

function pretty(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

// one tool call, collapsed: name and arguments in the summary, result inside
export function toolCall(call) {
  const details = el("details", "tool");
  details.dataset.callId = call.id;
  const summary = el("summary");
  summary.append(el("span", "tool-badge", t("chat.tool.badge")), ` ${call.name}(${preview(call.arguments)})`);
  details.append(summary);
  const body = el("div", "body");
  body.append(el("div", "muted", t("chat.tool.arguments")), el("pre", "args", pretty(call.arguments)));
  const result = el("pre", "result", "…");
  body.append(el("div", "muted", t("chat.tool.result")), result);
  details.append(body);
  return details;
}

export function fillResult(details, entry) {
  const result = details.querySelector(".result");
  result.textContent = entry.text + (entry.truncated ? `\n${t("chat.tool.cut")}` : "");
}

// a block of tool calls and their results, from history entries
export function toolBlock(entries) {
  const block = el("div", "tools");
  const byId = new Map();
  for (const entry of entries) {
    if (entry.role === "assistant") {
      for (const call of entry.tool_calls || []) {
        const node = toolCall(call);
        byId.set(call.id, node);
        block.append(node);
      }
    } else if (entry.role === "tool") {
      let node = byId.get(entry.tool_call_id);
      if (!node) {
        node = toolCall({ id: entry.tool_call_id, name: entry.name || "tool", arguments: "" });
        block.append(node);
      }
      fillResult(node, entry);
    }
  }
  return block.childElementCount ? block : null;
}
