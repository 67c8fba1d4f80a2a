// The session list: each session by its title (a new session is named after
// its first message by the gateway), the current one renamed in place (click
// its name: Enter saves with /rename, Escape cancels), archive and delete
// confirmed in an in-page dialog. Every change is a chat command, as in any
// channel.

import { confirmAction } from "./dialogs.js";
import { t } from "./i18n.js";
import { localTime } from "./status.js";
import { el } from "./render.js";

// a session's name in the list: its title, else this
export const untitled = () => t("sessions.untitled");

export class SessionList {
  constructor(list, command) {
    this.list = list;
    this.command = command; // (text, name) => void
  }

  render(sessions, active) {
    this.list.replaceChildren();
    for (const s of sessions) {
      const current = s.id === active;
      const item = el("li", `${current ? "current" : ""} ${s.archived ? "archived" : ""}`.trim());
      item.dataset.sessionId = s.id;
      item.title = s.id;
      const name = el(current ? "button" : "div", "name", s.title || untitled());
      if (!s.title) name.classList.add("untitled");
      item.append(name);
      const bits = [t("sessions.count", { count: s.message_count }), localTime(s.updated_at)];
      if (s.archived) bits.push(t("sessions.archived"));
      item.append(el("div", "meta", bits.join(" · ")));
      const actions = el("div", "actions");
      const button = (label, handler, className = "") => {
        const b = el("button", className, label);
        b.type = "button";
        b.addEventListener("click", (e) => {
          e.stopPropagation();
          handler();
        });
        actions.append(b);
      };
      if (current) {
        name.type = "button";
        name.setAttribute("aria-label", t("sessions.rename_label", { title: s.title || untitled() }));
        name.addEventListener("click", (e) => {
          e.stopPropagation();
          this.edit(item, name, s.title || "");
        });
        button(t("sessions.rename"), () => this.edit(item, name, s.title || ""), "rename");
        button(t("sessions.archive"), async () => {
          const yes = await confirmAction(t("sessions.archive_title"), t("sessions.archive_text"), {
            okLabel: t("sessions.archive"),
          });
          if (yes) this.command("/archive", "archive");
        });
      } else {
        item.tabIndex = 0;
        const open = () => {
          document.body.classList.remove("sidebar-open");
          this.command(`/use ${s.id}`, "use");
        };
        item.addEventListener("click", open);
        item.addEventListener("keydown", (e) => {
          if (e.key === "Enter" && e.target === item) open();
        });
      }
      button(t("sessions.delete"), async () => {
        const title = t("sessions.delete_title", { title: s.title || untitled() });
        const yes = await confirmAction(title, t("sessions.delete_text"), {
          okLabel: t("sessions.delete"),
          danger: true,
        });
        if (yes) this.command(`/delete ${s.id}`, "delete");
      }, "delete");
      item.append(actions);
      this.list.append(item);
    }
  }

  // the current session's name becomes an input: Enter renames, Escape or leaving it cancels
  edit(item, name, title) {
    if (item.querySelector("input.rename")) return;
    const input = el("input", "rename");
    input.type = "text";
    input.value = title;
    input.maxLength = 200;
    input.setAttribute("aria-label", t("sessions.title_label"));
    name.replaceWith(input);
    input.focus();
    input.select();
    let done = false;
    const finish = (save) => {
      if (done) return;
      done = true;
      const text = input.value.replace(/\s+/g, " ").trim();
      if (save && text && text !== title) {
        name.textContent = text;
        name.classList.remove("untitled");
        this.command(`/rename ${text}`, "rename");
      }
      input.replaceWith(name);
      name.focus();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.isComposing) {
        e.preventDefault();
        finish(true);
      } else if (e.key === "Escape") {
        e.preventDefault();
        e.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener("click", (e) => e.stopPropagation());
    input.addEventListener("blur", () => finish(false));
  }
}
