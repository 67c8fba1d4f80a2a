// Approve / Deny under an approval request (docs/approvals.md): the
// `approval_request` frame names the outbox id of the message that follows
// it; that message gets the two buttons, which answer with an `approve`
// frame. Whether the answer is taken is the gateway's decision (the person
// who asked, or an admin); the page only sends it.

import { newId } from "./conn.js";
import { t } from "./i18n.js";
import { el } from "./render.js";

export class ApprovalButtons {
  constructor(conn) {
    this.conn = conn;
    this.asks = new Map(); // outbox id of a request -> [its approval id, its button labels]
  }

  // an `approval_request` frame: its text comes next, as a `message` frame
  remember(f) {
    if (f.id === null || !Number.isInteger(f.approval_id)) return;
    const given = f.labels || {}; // in the chat's language; absent from an older gateway
    const labels = { approve: given.approve || t("approval.approve"), deny: given.deny || t("approval.deny") };
    this.asks.set(f.id, [f.approval_id, labels]);
  }

  // the buttons for the message `f` when it is a request, else nothing
  attach(f, node) {
    const ask = this.asks.get(f.id);
    if (ask === undefined) return;
    this.asks.delete(f.id);
    const [approvalId, labels] = ask;
    const row = el("div", "approval");
    const buttons = [
      [el("button", "approve", labels.approve), "approve"],
      [el("button", "danger", labels.deny), "deny"],
    ];
    for (const [button, decision] of buttons) {
      button.type = "button";
      button.addEventListener("click", () => {
        const frame = { type: "approve", id: newId("a"), approval_id: approvalId, decision };
        if (!this.conn.sendFrame(frame)) return; // offline: the buttons stay
        for (const [b] of buttons) b.disabled = true;
        button.textContent = `${labels[decision]} ✓`;
      });
      row.append(button);
    }
    node.append(row);
  }
}
