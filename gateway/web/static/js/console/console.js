// The operator's console at /ops/<view>: a tab per view, each view a module
// of its own (js/console/<view>.js) loaded the first time it is shown.
//
// A view module's default export is a class (its styles: css/<view>.css):
//   constructor(root, ctx)  root: the view's empty <section>; ctx below
//   async load()            fill or refresh root (on show, on ↻, on a language switch)
//   stop()                  optional: the view is hidden (stop timers, streams)
// ctx: { api(path, {method, body}) → JSON (throws ApiError; 401 asks for the
//        token), t(key, params), confirm(title, text, {danger}) → bool,
//        el(tag, className, text) }
//
// The console is for admins: the server refuses every /api/ops/ call of
// anyone else with 403; the page then shows the console to nobody (no tab,
// no nav link, a note in place of the views).

import { confirmAction } from "../dialogs.js";
import { t } from "../i18n.js";
import { el } from "../render.js";

export const VIEWS = ["usage", "conversations", "delivery", "agent", "people", "logs", "config"];
const DEFAULT_VIEW = "usage";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Console {
  constructor(dom, token, onUnauthorized) {
    this.dom = dom; // { root, tabs, error, refresh, navLink }
    this.token = token;
    this.onUnauthorized = onUnauthorized;
    this.views = new Map(); // name → instance
    this.current = null;
    this.admin = null; // unknown until whoami answers
    this.ctx = {
      api: (path, options) => this.api(path, options),
      t,
      el,
      confirm: (title, text, options) => confirmAction(title, text, { okLabel: t("console.confirm"), ...options }),
    };
    dom.refresh.addEventListener("click", () => this.reload());
    this.tabs();
  }

  async api(path, { method = "GET", body } = {}) {
    const headers = this.token ? { Authorization: `Bearer ${this.token}` } : {};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401) {
      this.onUnauthorized();
      throw new ApiError(401, t("conn.unauthorized"));
    }
    let data = {};
    try {
      data = await response.json();
    } catch {
      data = {};
    }
    if (response.status === 403 && data.error === "the console is for admins only") this.refused();
    if (!response.ok) throw new ApiError(response.status, data.error || response.statusText);
    return data;
  }

  tabs() {
    this.dom.tabs.replaceChildren(
      ...VIEWS.map((name) => {
        const link = el("a", "tab", t(`console.view.${name}`));
        link.href = `/ops/${name}`;
        link.dataset.route = "";
        link.dataset.view = name;
        link.dataset.i18n = `console.view.${name}`;
        if (name === this.current) link.setAttribute("aria-current", "page");
        return link;
      }),
    );
  }

  // whether this token may use the console; hides it from anyone else
  async check() {
    try {
      await this.api("/api/ops/whoami");
      this.admin = true;
    } catch (err) {
      this.admin = err.status === 401 ? null : false;
    }
    this.dom.navLink.hidden = this.admin === false;
    return this.admin;
  }

  refused() {
    this.admin = false;
    this.dom.navLink.hidden = true;
    this.dom.tabs.hidden = true;
    for (const section of this.dom.root.querySelectorAll("section[data-view]")) section.hidden = true;
    this.dom.error.textContent = t("console.admins_only");
    this.dom.error.hidden = false;
  }

  section(name) {
    let section = this.dom.root.querySelector(`section[data-view="${name}"]`);
    if (!section) {
      section = el("section", `view view-${name}`);
      section.dataset.view = name;
      this.dom.root.append(section);
    }
    return section;
  }

  async show(path) {
    const match = /^\/ops\/?([a-z]*)/.exec(path);
    const name = match && VIEWS.includes(match[1]) ? match[1] : DEFAULT_VIEW;
    if (this.current && this.current !== name) this.views.get(this.current)?.stop?.();
    this.current = name;
    for (const link of this.dom.tabs.querySelectorAll("a.tab")) {
      link.toggleAttribute("aria-current", link.dataset.view === name);
      if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    }
    if ((await this.check()) === false) {
      this.refused();
      return;
    }
    this.dom.tabs.hidden = false;
    for (const section of this.dom.root.querySelectorAll("section[data-view]")) section.hidden = section.dataset.view !== name;
    this.section(name).hidden = false;
    await this.reload();
  }

  async reload() {
    const name = this.current;
    if (!name || this.admin === false) return;
    this.dom.error.hidden = true;
    try {
      let view = this.views.get(name);
      if (!view) {
        const style = el("link");
        style.rel = "stylesheet";
        style.href = `/css/${name}.css`;
        document.head.append(style);
        const module = await import(`./${name}.js`);
        view = new module.default(this.section(name), this.ctx);
        this.views.set(name, view);
      }
      await view.load();
    } catch (err) {
      if (err.status === 401 || err.status === 403) return;
      this.dom.error.textContent = t("console.load_failed", { error: err.message });
      this.dom.error.hidden = false;
    }
  }

  hide() {
    if (this.current) this.views.get(this.current)?.stop?.();
    this.current = null;
  }
}
