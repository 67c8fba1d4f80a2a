// Code blocks: a small syntax highlighter for common languages and a copy
// button. It only ever sets textContent and class names: a reply's code
// cannot become markup here (the block was sanitised before, by render.js).

import { t } from "./i18n.js";
import { el } from "./render.js";

const C_LIKE = { line: "//", block: true };
const LANGS = {
  python: { ...{ line: "#" }, triple: true,
    kw: "and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case",
    lit: "True False None self" },
  javascript: { ...C_LIKE, tick: true,
    kw: "async await break case catch class const continue default delete do else export extends finally for from function if import in instanceof let new of return static super switch this throw try typeof var void while yield",
    lit: "true false null undefined NaN" },
  typescript: { ...C_LIKE, tick: true,
    kw: "abstract as async await break case catch class const continue default delete do else enum export extends finally for from function if implements import in instanceof interface let new of private protected public readonly return static super switch this throw try type typeof var void while yield",
    lit: "true false null undefined string number boolean any unknown never" },
  json: { kw: "", lit: "true false null" },
  bash: { line: "#",
    kw: "if then else elif fi for while until do done case esac in function return local export set unset echo cd exit source",
    lit: "true false" },
  go: { ...C_LIKE, tick: true,
    kw: "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var",
    lit: "true false nil iota" },
  rust: { ...C_LIKE,
    kw: "as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait type unsafe use where while",
    lit: "true false None Some Ok Err" },
  c: { ...C_LIKE,
    kw: "auto break case char const continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class public private protected new delete namespace template typename using virtual override final package import extends implements interface throws throw try catch finally this super",
    lit: "true false null nullptr NULL" },
  sql: { line: "--", block: true, nocase: true,
    kw: "select from where and or not insert into values update set delete create table index drop alter add join left right inner outer on as group by order having limit offset distinct union all primary key foreign references default unique if exists begin commit rollback returning with case when then else end",
    lit: "null true false" },
  yaml: { line: "#", kw: "", lit: "true false null yes no on off" },
};
const ALIASES = {
  py: "python", python3: "python", js: "javascript", mjs: "javascript", jsx: "javascript", node: "javascript",
  ts: "typescript", tsx: "typescript", sh: "bash", shell: "bash", zsh: "bash", console: "bash",
  golang: "go", rs: "rust", cpp: "c", "c++": "c", h: "c", hpp: "c", java: "c", cs: "c", csharp: "c",
  kotlin: "c", swift: "c", yml: "yaml", toml: "yaml", jsonc: "json", postgres: "sql", sqlite: "sql",
};

function grammar(name) {
  const key = ALIASES[name] || name;
  const lang = LANGS[key];
  if (!lang) return null;
  if (!lang.re) {
    const parts = [];
    if (lang.line) parts.push(`(?<comment>${lang.line.replace(/[/-]/g, "\\$&")}.*$${lang.block ? "|\\/\\*[\\s\\S]*?\\*\\/" : ""})`);
    else if (lang.block) parts.push("(?<comment>\\/\\*[\\s\\S]*?\\*\\/)");
    const strings = [];
    if (lang.triple) strings.push('"""[\\s\\S]*?"""', "'''[\\s\\S]*?'''");
    strings.push('"(?:[^"\\\\\\n]|\\\\.)*"', "'(?:[^'\\\\\\n]|\\\\.)*'");
    if (lang.tick) strings.push("`(?:[^`\\\\]|\\\\.)*`");
    parts.push(`(?<string>${strings.join("|")})`);
    parts.push("(?<number>\\b(?:0x[\\da-fA-F]+|\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?)\\b)");
    parts.push("(?<word>[A-Za-z_$][\\w$]*)");
    lang.re = new RegExp(parts.join("|"), "gm");
    const fold = (s) => (lang.nocase ? s.toLowerCase() : s);
    lang.kwSet = new Set(lang.kw.split(" ").filter(Boolean).map(fold));
    lang.litSet = new Set(lang.lit.split(" ").filter(Boolean).map(fold));
    lang.fold = fold;
  }
  return lang;
}

// the code's text as text nodes and <span class="tok-…"> tokens
export function highlight(code, name) {
  const lang = grammar((name || "").toLowerCase());
  if (!lang) return false;
  const text = code.textContent;
  const out = document.createDocumentFragment();
  let last = 0;
  for (const match of text.matchAll(lang.re)) {
    const groups = match.groups;
    let kind = null;
    if (groups.comment !== undefined) kind = "comment";
    else if (groups.string !== undefined) kind = "string";
    else if (groups.number !== undefined) kind = "number";
    else if (lang.kwSet.has(lang.fold(groups.word))) kind = "keyword";
    else if (lang.litSet.has(lang.fold(groups.word))) kind = "literal";
    if (!kind) continue;
    if (match.index > last) out.append(text.slice(last, match.index));
    out.append(el("span", `tok-${kind}`, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) out.append(text.slice(last));
  code.replaceChildren(out);
  code.classList.add("highlighted");
  return true;
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = el("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
  }
}

// every <pre><code> under `root`: highlighted, with a header naming the
// language and a Copy button
export function decorateCode(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const code = pre.querySelector(":scope > code");
    if (!code || pre.parentElement?.classList.contains("codeblock")) continue;
    const name = /(?:^|\s)language-([\w+#-]+)/.exec(code.className)?.[1] || "";
    highlight(code, name);
    const box = el("div", "codeblock");
    const head = el("div", "code-head");
    head.append(el("span", "code-lang", name || t("code.plain")));
    const button = el("button", "copy", t("code.copy"));
    button.type = "button";
    button.setAttribute("aria-label", t("code.copy_label"));
    button.addEventListener("click", async () => {
      const ok = await copyText(code.textContent);
      button.textContent = ok ? t("code.copied") : t("code.copy_failed");
      setTimeout(() => { button.textContent = t("code.copy"); }, 1500);
    });
    head.append(button);
    pre.replaceWith(box);
    box.append(head, pre);
  }
}
