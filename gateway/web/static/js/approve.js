// Approve / Deny under an approval request (docs/approvals.md): the
// `approval_request` frame names the outbox id of the message that follows
// it; that message gets the two buttons, which answer with an `approve`
// frame. Whether the answer is taken is the gateway's decision (the person
// who asked, or an admin); the page only sends it.

import { newId } from "./conn.js";
import { el } from "./render.js";

export class ApprovalButtons {
  constructor(conn) {
    this.conn = conn;
    this.asks = new Map(); // outbox id of a request -> its approval id
  }

  // an `approval_request` frame: its text comes next, as a `message` frame
  remember(f) {
    if (f.id !== null && Number.isInteger(f.approval_id)) this.asks.set(f.id, f.approval_id);
  }

  // the buttons for the message `f` when it is a request, else nothing
  attach(f, node) {
    const approvalId = this.asks.get(f.id);
    if (approvalId === undefined) return;
    this.asks.delete(f.id);
    const row = el("div", "approval");
    const buttons = [
      [el("button", "approve", "Approve"), "approve"],
      [el("button", "danger", "Deny"), "deny"],
    ];
    for (const [button, decision] of buttons) {
      button.type = "button";
      button.addEventListener("click", () => {
        const frame = { type: "approve", id: newId("a"), approval_id: approvalId, decision };
        if (!this.conn.sendFrame(frame)) return; // offline: the buttons stay
        for (const [b] of buttons) b.disabled = true;
        button.textContent = decision === "approve" ? "Approve ✓" : "Deny ✓";
      });
      row.append(button);
    }
    node.append(row);
  }
}
