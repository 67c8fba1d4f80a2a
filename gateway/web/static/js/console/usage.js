// Usage and cost: tokens (input, output, cache read, cache write), cost and
// turns per day in the gateway's time zone, as SVG charts drawn here (no
// library), by agent, model, channel or user (the selector); the share of
// input tokens read from the prompt cache; and each budget with how much of
// it is spent. One request: GET /api/ops/usage?days=N.
//
// What a chart drew is on it as data-total-* attributes (and the period's
// totals on #usage-summary as data-*), so that what the page shows can be
// checked against the database.

import { lang } from "../i18n.js";
import { fill, id, panel, table } from "./table.js";

const SVG = "http://www.w3.org/2000/svg";
const PERIODS = [7, 30, 90, 365];
const DIMENSIONS = ["agent", "model", "channel", "user"];
const COLOURS = 6; // series s0…s5 in css/usage.css, then "other"
// the four parts of a day's tokens, stacked: together input + output
const KINDS = [
  { key: "uncached", text: "usage.kind.uncached", className: "k-uncached", attr: "uncached" },
  { key: "cache_read_tokens", text: "usage.kind.cache_read", className: "k-read", attr: "cache-read" },
  { key: "cache_write_tokens", text: "usage.kind.cache_write", className: "k-write", attr: "cache-write" },
  { key: "output_tokens", text: "usage.kind.output", className: "k-output", attr: "output" },
];

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// the smallest of 1, 2, 2.5, 5 × 10^n at or above `value`
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value * (1 - 1e-12)) return step * power;
  return 10 * power;
}

// A stacked bar chart, one bar a date, a segment per series ({name,
// className, values}); sized in CSS pixels of `width`, scaled by its viewBox.
// Returns the <svg> and what it drew of each series.
function stackedBars({ width, height, dates, series, format, title }) {
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart" });
  chart.append(svg("title", {}, title));
  const sums = dates.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] || 0), 0));
  const max = niceMax(Math.max(0, ...sums));
  const ticks = [0, 0.5, 1].map((share) => [max * share, format(max * share, true)]);
  // room for the longest value label (11 px text: about 7 px a character)
  const pad = { left: 10 + 7 * Math.max(...ticks.map(([, text]) => text.length)), right: 6, top: 10, bottom: 22 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const y = (value) => pad.top + plotH - (value / max) * plotH;
  for (const [value, text] of ticks) {
    const at = y(value);
    chart.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: at, y2: at, class: "rule" }));
    chart.append(svg("text", { x: pad.left - 6, y: at + 4, "text-anchor": "end", class: "axis" }, text));
  }
  const band = plotW / dates.length;
  const barW = Math.max(1, band * 0.72);
  const drawn = series.map(() => 0);
  dates.forEach((date, i) => {
    const bar = svg("g", { "data-day": date });
    let base = 0;
    series.forEach((s, k) => {
      const value = s.values[i] || 0;
      if (value <= 0) return;
      drawn[k] += value;
      const rect = svg("rect", {
        x: (pad.left + i * band + (band - barW) / 2).toFixed(2),
        y: y(base + value).toFixed(2),
        width: barW.toFixed(2),
        height: Math.max(0.5, y(base) - y(base + value)).toFixed(2),
        class: s.className,
      });
      rect.append(svg("title", {}, `${date} · ${s.name}: ${format(value)}`));
      bar.append(rect);
      base += value;
    });
    chart.append(bar);
  });
  // date labels (MM-DD), as many as fit, today's always
  const every = Math.max(1, Math.ceil(dates.length / Math.max(1, Math.floor(plotW / 52))));
  dates.forEach((date, i) => {
    if ((dates.length - 1 - i) % every) return;
    let x = pad.left + (i + 0.5) * band;
    let anchor = "middle";
    if (x + 18 > width) [x, anchor] = [width - 1, "end"]; // today's, at the edge: kept inside
    chart.append(svg("text", { x: x.toFixed(2), y: height - 6, "text-anchor": anchor, class: "axis" }, date.slice(5)));
  });
  return { chart, drawn };
}

function legend(series) {
  const list = document.createElement("ul");
  list.className = "legend";
  for (const s of series) {
    const item = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = `swatch ${s.className}`;
    item.append(swatch, document.createTextNode(s.name));
    list.append(item);
  }
  return list;
}

export default class Usage {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.days = 30;
    this.dimension = "agent";
    this.data = null;
  }

  async load() {
    this.data = await this.ctx.api(`/api/ops/usage?days=${this.days}`);
    this.render();
  }

  // -- formatting, in the page's language ---------------------------------------------
  count(value, compact = false) {
    const options = compact ? { notation: "compact", maximumFractionDigits: 1 } : { maximumFractionDigits: 0 };
    return new Intl.NumberFormat(lang(), options).format(value);
  }

  // a cost: an axis's in three significant digits, else cents, or four places below 1
  money(value, compact = false) {
    let options = { minimumFractionDigits: 2, maximumFractionDigits: value >= 1 ? 2 : 4 };
    if (compact) options = { maximumSignificantDigits: 3 };
    const currency = this.data && this.data.currency;
    if (currency) {
      try {
        return new Intl.NumberFormat(lang(), { ...options, style: "currency", currency }).format(value);
      } catch {
        return `${new Intl.NumberFormat(lang(), options).format(value)} ${currency}`;
      }
    }
    return new Intl.NumberFormat(lang(), options).format(value);
  }

  percent(share) {
    return new Intl.NumberFormat(lang(), { style: "percent", maximumFractionDigits: 1 }).format(share);
  }

  keyName(key) {
    const { t } = this.ctx;
    if (key === null) return t("usage.other");
    return key === "" ? t("usage.unknown") : key;
  }

  // the charts' width in CSS pixels: the view's, less a panel's padding
  chartWidth() {
    return Math.max(280, Math.round((this.root.clientWidth || 640) - 28));
  }

  // -- the page ---------------------------------------------------------------------
  render() {
    const { t } = this.ctx;
    const data = this.data;
    const empty = !data.totals.calls;
    const toolbar = this.toolbar();
    const summary = this.summary();
    const note = this.ctx.el("p", "muted", t("usage.no_calls"));
    note.hidden = !empty;
    this.root.replaceChildren(
      panel(t("usage.title"), toolbar, summary, note),
      panel(t("usage.tokens_per_day"), ...this.tokenChart()),
      panel(t("usage.per_day_by", { dimension: t(`usage.dimension.${this.dimension}`) }), ...this.dimensionCharts()),
      panel(t("usage.breakdown_by", { dimension: t(`usage.dimension.${this.dimension}`) }), this.breakdown()),
      panel(t("usage.budgets"), ...this.budgets()),
    );
  }

  toolbar() {
    const { t, el } = this.ctx;
    const bar = el("div", "toolbar");
    const period = el("select");
    period.id = "usage-days";
    period.setAttribute("aria-label", t("usage.period"));
    for (const days of PERIODS) {
      const option = el("option", "", t("usage.last_days", { days }));
      option.value = String(days);
      option.selected = days === this.days;
      period.append(option);
    }
    period.addEventListener("change", () => {
      this.days = Number(period.value);
      this.load().catch((err) => {
        const failed = el("p", "error", t("console.load_failed", { error: err.message }));
        this.root.prepend(failed);
      });
    });
    const dimension = el("select");
    dimension.id = "usage-dimension";
    dimension.setAttribute("aria-label", t("usage.group_by"));
    for (const name of DIMENSIONS) {
      const option = el("option", "", t(`usage.dimension.${name}`));
      option.value = name;
      option.selected = name === this.dimension;
      dimension.append(option);
    }
    dimension.addEventListener("change", () => {
      this.dimension = dimension.value;
      this.render();
      this.root.querySelector("#usage-dimension").focus();
    });
    const label = el("label", "", t("usage.group_by"));
    label.htmlFor = "usage-dimension";
    bar.append(period, label, dimension);
    return bar;
  }

  summary() {
    const { t, el } = this.ctx;
    const { totals } = this.data;
    const text = t("usage.summary", {
      first: this.data.first_day,
      last: this.data.last_day,
      timezone: this.data.timezone,
      tokens: this.count(totals.input_tokens + totals.output_tokens),
      cost: this.money(totals.cost),
      turns: this.count(totals.turns),
      calls: this.count(totals.calls),
    });
    const share = totals.cache_share === null ? t("usage.cache_none") : t("usage.cache_share", { share: this.percent(totals.cache_share) });
    const line = el("p", "summary", t("usage.summary_line", { summary: text, share }));
    line.id = "usage-summary";
    line.dataset.input = totals.input_tokens;
    line.dataset.output = totals.output_tokens;
    line.dataset.cacheRead = totals.cache_read_tokens;
    line.dataset.cacheWrite = totals.cache_write_tokens;
    line.dataset.cost = totals.cost;
    line.dataset.turns = totals.turns;
    line.dataset.calls = totals.calls;
    line.dataset.cacheShare = totals.cache_share === null ? "" : totals.cache_share;
    const kv = el("dl", "kv");
    for (const [key, value] of [
      ["usage.kind.input", totals.input_tokens],
      ["usage.kind.output", totals.output_tokens],
      ["usage.kind.cache_read", totals.cache_read_tokens],
      ["usage.kind.cache_write", totals.cache_write_tokens],
    ]) kv.append(el("dt", "", t(key)), el("dd", "", this.count(value)));
    const block = el("div");
    block.append(line, kv);
    return block;
  }

  tokenChart() {
    const { t } = this.ctx;
    const { series } = this.data;
    const dates = series.map((d) => d.day);
    const stacks = KINDS.map((kind) => ({
      name: t(kind.text),
      className: kind.className,
      values: series.map((d) =>
        kind.key === "uncached" ? Math.max(0, d.input_tokens - d.cache_read_tokens - d.cache_write_tokens) : d[kind.key],
      ),
    }));
    const { chart, drawn } = stackedBars({
      width: this.chartWidth(),
      height: 200,
      dates,
      series: stacks,
      format: (v, compact) => this.count(v, compact),
      title: t("usage.tokens_per_day"),
    });
    chart.id = "usage-tokens-chart";
    KINDS.forEach((kind, k) => chart.setAttribute(`data-total-${kind.attr}`, String(drawn[k])));
    const turns = this.ctx.el("p", "muted", t("usage.kinds_note"));
    return [chart, legend(stacks), turns];
  }

  // the selected dimension's keys, the first COLOURS of them by tokens, the rest as one
  keyed() {
    const entries = this.data.breakdowns[this.dimension];
    const shown = entries.filter((e) => e.key !== null).slice(0, COLOURS);
    const rest = entries.filter((e) => !shown.includes(e));
    const stacks = shown.map((e, i) => ({ name: this.keyName(e.key), className: `s${i}`, days: e.days }));
    if (rest.length) {
      const days = { cost: [], turns: [], tokens: [] };
      for (const name of Object.keys(days)) {
        days[name] = this.data.series.map((_, i) => rest.reduce((sum, e) => sum + e.days[name][i], 0));
      }
      stacks.push({ name: this.ctx.t("usage.other"), className: "s-other", days });
    }
    return stacks;
  }

  dimensionCharts() {
    const { t, el } = this.ctx;
    const dates = this.data.series.map((d) => d.day);
    const keyed = this.keyed();
    const charts = [];
    for (const [name, chartId, format] of [
      ["cost", "usage-cost-chart", (v, compact) => this.money(v, compact)],
      ["turns", "usage-turns-chart", (v, compact) => this.count(v, compact)],
    ]) {
      const series = keyed.map((k) => ({ name: k.name, className: k.className, values: k.days[name] }));
      const { chart, drawn } = stackedBars({
        width: this.chartWidth(),
        height: 170,
        dates,
        series,
        format,
        title: t(`usage.${name}_per_day`),
      });
      chart.id = chartId;
      chart.dataset.total = String(drawn.reduce((a, b) => a + b, 0));
      charts.push(el("h3", "", t(`usage.${name}_per_day`)), chart);
    }
    return [...charts, legend(keyed)];
  }

  breakdown() {
    const { t } = this.ctx;
    const grid = table("usage-breakdown", [
      t(`usage.dimension.${this.dimension}`), t("usage.tokens"), t("usage.kind.input"), t("usage.kind.output"),
      t("usage.kind.cache_read"), t("usage.kind.cache_write"), t("usage.cost"), t("usage.turns"), t("usage.calls"),
    ]);
    const rows = this.data.breakdowns[this.dimension].map((e) => {
      const key = id(this.keyName(e.key));
      key.dataset.key = e.key === null ? "" : e.key;
      return [
        key, this.count(e.input_tokens + e.output_tokens), this.count(e.input_tokens), this.count(e.output_tokens),
        this.count(e.cache_read_tokens), this.count(e.cache_write_tokens), this.money(e.cost), this.count(e.turns),
        this.count(e.calls),
      ];
    });
    fill(grid.table, rows, t("usage.no_calls"));
    grid.table.dataset.dimension = this.dimension;
    return grid.wrap;
  }

  budgets() {
    const { t, el } = this.ctx;
    const grid = table("usage-budgets", [
      t("usage.budget.scope"), t("usage.budget.key"), t("usage.budget.period"), t("usage.budget.limit"),
      t("usage.budget.spent"), t("usage.budget.percent"),
    ]);
    const amount = (b, value) => (b.unit === "tokens" ? t("usage.tokens_n", { n: this.count(value) }) : this.money(value));
    const rows = this.data.budgets.map((b) => {
      let percent = "–";
      if (b.percent !== null) {
        percent = el("span", "meter");
        const meter = el("meter");
        meter.min = 0;
        meter.max = 100;
        meter.low = 80;
        meter.high = 99.99;
        meter.optimum = 0;
        meter.value = Math.min(100, b.percent);
        percent.append(meter, ` ${this.percent(b.percent / 100)}`);
      }
      let key = b.key;
      if (b.default) key = t(`usage.budget.default_${b.scope}`);
      else if (b.scope === "total") key = t("usage.budget.all_calls");
      return [
        t(`usage.scope.${b.scope}`), id(key), t(`usage.budget.per_${b.period}`), amount(b, b.limit),
        b.spent === null ? "–" : amount(b, b.spent), percent,
      ];
    });
    fill(grid.table, rows, t("usage.budget.none"));
    return [grid.wrap, el("p", "muted", t("usage.budget.note"))];
  }
}
