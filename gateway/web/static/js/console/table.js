// Tables for the console's views: cells are text (never HTML) or nodes;
// an identifier cell (class "id") may wrap anywhere, words only between words.

import { el } from "../render.js";

export function id(text) {
  return el("span", "id", text === null || text === undefined ? "–" : String(text));
}

// a <table class="grid"> with a head of `columns` (texts) and an empty body
export function table(tableId, columns) {
  const node = el("table", "grid");
  if (tableId) node.id = tableId;
  const head = el("tr");
  for (const column of columns) head.append(el("th", "", column));
  const thead = el("thead");
  thead.append(head);
  node.append(thead, el("tbody"));
  const wrap = el("div", "scroll");
  wrap.append(node);
  return { wrap, table: node };
}

// fills `tableNode`'s body with `rows` (arrays of cells); `empty` when none
export function fill(tableNode, rows, empty) {
  const body = tableNode.querySelector("tbody");
  body.replaceChildren();
  const columns = tableNode.querySelectorAll("thead th").length;
  if (!rows.length) {
    const tr = el("tr");
    const td = el("td", "empty", empty);
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

// a panel: <div class="panel"><h2>title</h2>…</div>
export function panel(title, ...children) {
  const node = el("div", "panel");
  node.append(el("h2", "", title), ...children);
  return node;
}
