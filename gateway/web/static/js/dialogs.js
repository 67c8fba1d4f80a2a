// In-page dialogs instead of window.prompt()/confirm(): a <dialog> opened
// modal (the rest of the page is inert), Tab kept inside it, Escape or
// Cancel answers null/false. One question at a time; each dialog is removed
// from the page once answered.

import { t } from "./i18n.js";
import { el } from "./render.js";

let counter = 0;

function trapTab(dialog, e) {
  if (e.key !== "Tab") return;
  const focusable = [...dialog.querySelectorAll("input, button, textarea, select")].filter((n) => !n.disabled);
  if (!focusable.length) return;
  const first = focusable[0];
  const last = focusable[focusable.length - 1];
  if (e.shiftKey && document.activeElement === first) {
    e.preventDefault();
    last.focus();
  } else if (!e.shiftKey && document.activeElement === last) {
    e.preventDefault();
    first.focus();
  }
}

// resolves with the text typed (a field), true (no field), or null when cancelled
function open({ title, text, field, okLabel, cancelLabel, danger }) {
  return new Promise((resolve) => {
    counter += 1;
    const dialog = el("dialog", "ask");
    const heading = el("h2", "", title);
    heading.id = `ask-title-${counter}`;
    dialog.setAttribute("aria-labelledby", heading.id);
    const form = el("form");
    form.append(heading);
    if (text) form.append(el("p", "ask-text", text));
    let input = null;
    if (field) {
      input = el("input");
      input.type = "text";
      input.value = field.value || "";
      input.placeholder = field.placeholder || "";
      input.maxLength = 200;
      input.setAttribute("aria-label", field.label || title);
      form.append(input);
    }
    const actions = el("div", "actions");
    const cancel = el("button", "", cancelLabel || t("dialog.cancel"));
    cancel.type = "button";
    cancel.value = "cancel";
    const ok = el("button", danger ? "danger" : "primary", okLabel || t("dialog.ok"));
    ok.type = "submit";
    ok.value = "ok";
    actions.append(cancel, ok);
    form.append(actions);
    dialog.append(form);
    let answer = null;
    cancel.addEventListener("click", () => dialog.close());
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      answer = input ? input.value.trim() : true;
      dialog.close();
    });
    dialog.addEventListener("keydown", (e) => trapTab(dialog, e));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal(); // Escape closes it (answer stays null)
    if (input) {
      input.focus();
      input.select();
    } else {
      (danger ? cancel : ok).focus(); // a destructive answer is never the default
    }
  });
}

export function askText(title, { label, value, placeholder, okLabel } = {}) {
  return open({ title, field: { label, value, placeholder }, okLabel });
}

export async function confirmAction(title, text, { okLabel, danger = false } = {}) {
  return (await open({ title, text, okLabel, danger })) === true;
}
