// Configuration: what `picobot doctor` finds (the same checks, run by the
// gateway on the configuration it loaded; "Probe" also calls each provider
// and channel API once, as `doctor --probe`), and the configuration in
// effect, a section each, secrets masked by the server. Read-only.

const STATUSES = { ok: "ok", warn: "warn", problem: "bad" };

export default class Config {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.probed = false;
  }

  async load() {
    const { api } = this.ctx;
    const [config, doctor] = await Promise.all([
      api("/api/ops/config"),
      api(`/api/ops/doctor${this.probed ? "?probe=1" : ""}`),
    ]);
    this.root.replaceChildren(this.doctorPanel(doctor), this.configPanel(config));
  }

  doctorPanel(doctor) {
    const { t, el, api } = this.ctx;
    const summary = el("p", "doctor-summary");
    summary.id = "doctor-summary";
    const list = el("ul", "findings");
    list.id = "findings";
    const show = (data) => {
      summary.textContent = data.problems || data.warnings
        ? t("config.doctor.summary", { problems: data.problems, warnings: data.warnings })
        : t("config.doctor.clean");
      summary.className = `doctor-summary ${data.problems ? "bad" : data.warnings ? "warn" : "ok"}`;
      summary.dataset.problems = data.problems;
      summary.dataset.warnings = data.warnings;
      list.replaceChildren(...data.findings.map((f) => this.finding(f)));
      list.dataset.probed = String(data.probed);
    };
    show(doctor);

    const probe = el("button", "", t("config.doctor.probe"));
    probe.id = "doctor-probe";
    probe.type = "button";
    probe.title = t("config.doctor.probe_hint");
    const failed = el("p", "error");
    failed.hidden = true;
    probe.addEventListener("click", async () => {
      probe.disabled = true;
      probe.textContent = t("config.doctor.probing");
      failed.hidden = true;
      try {
        show(await api("/api/ops/doctor?probe=1"));
        this.probed = true;
      } catch (err) {
        failed.textContent = t("console.load_failed", { error: err.message });
        failed.hidden = false;
      } finally {
        probe.disabled = false;
        probe.textContent = t("config.doctor.probe");
      }
    });
    const toolbar = el("div", "toolbar");
    toolbar.append(probe, el("span", "muted", t("config.doctor.about")));
    const node = el("div", "panel");
    node.append(el("h2", "", t("config.doctor.title")), summary, toolbar, failed, list);
    return node;
  }

  finding(f) {
    const { t, el } = this.ctx;
    const li = el("li", `finding status-${f.status}`);
    li.dataset.status = f.status;
    li.dataset.check = f.check;
    const badge = el("span", `badge ${STATUSES[f.status] || ""}`, t(`config.status.${f.status}`));
    const head = el("div", "finding-head");
    head.append(badge, " ", el("strong", "check", f.check));
    li.append(head, el("div", "message", f.message));
    if (f.fix) {
      const fix = el("div", "fix");
      fix.append(el("span", "muted", t("config.doctor.fix")), " ", el("code", "", f.fix));
      li.append(fix);
    }
    return li;
  }

  configPanel(data) {
    const { t, el } = this.ctx;
    const facts = el("dl", "kv");
    facts.id = "config-facts";
    const fact = (label, value) => facts.append(el("dt", "", label), el("dd", "", value));
    fact(t("config.file"), data.path || t("config.defaults"));
    fact(t("config.home"), data.home);
    if (data.env_admins.length) fact(t("config.env_admins"), data.env_admins.join(", "));
    const unset = Object.entries(data.missing_env);
    if (unset.length) fact(t("config.unset"), unset.map(([where, name]) => `${where}: $${name}`).join("\n"));

    const sections = el("div", "config-sections");
    sections.id = "config-sections";
    for (const [name, value] of Object.entries(data.config)) {
      const details = el("details", "config-section");
      details.dataset.section = name;
      const summary = el("summary");
      summary.append(el("code", "", name));
      const size = value && typeof value === "object" ? Object.keys(value).length : null;
      if (size !== null) summary.append(" ", el("span", "muted", t("config.keys", { count: size })));
      const pre = el("pre", "json", JSON.stringify(value, null, 2));
      details.append(summary, pre);
      sections.append(details);
    }
    const all = el("button", "", t("config.expand"));
    all.id = "config-expand";
    all.type = "button";
    all.addEventListener("click", () => {
      const open = ![...sections.children].every((d) => d.open);
      for (const d of sections.children) d.open = open;
      all.textContent = t(open ? "config.collapse" : "config.expand");
    });
    const toolbar = el("div", "toolbar");
    toolbar.append(all, el("span", "muted", t("config.masked")));
    const node = el("div", "panel");
    node.append(el("h2", "", t("config.title")), facts, toolbar, sections);
    return node;
  }
}
