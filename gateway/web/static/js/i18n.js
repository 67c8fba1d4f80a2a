// The page's own texts in the browser's language (zh* → 中文, else English),
// switchable and remembered in this browser. The texts come from the
// gateway (/i18n/<lang>.json, made from gateway/i18n/web/*.json): `t(key,
// {name})` fills `{name}` fields; elements carrying `data-i18n` (text),
// `data-i18n-label` (aria-label), `data-i18n-title`, `data-i18n-placeholder`
// are filled by `translate()`.

const LANG_KEY = "picobot.lang";
export const LANGS = { en: "English", "zh-CN": "中文" };

let texts = {};
let current = "en";

export function browserLang() {
  const saved = localStorage.getItem(LANG_KEY);
  if (saved && saved in LANGS) return saved;
  const wanted = (navigator.languages && navigator.languages[0]) || navigator.language || "en";
  return wanted.toLowerCase().startsWith("zh") ? "zh-CN" : "en";
}

export function lang() {
  return current;
}

export function t(key, params = {}) {
  const text = key in texts ? texts[key] : key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
}

export function translate(root = document) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const node of root.querySelectorAll("[data-i18n-label]")) node.setAttribute("aria-label", t(node.dataset.i18nLabel));
  for (const node of root.querySelectorAll("[data-i18n-title]")) node.title = t(node.dataset.i18nTitle);
  for (const node of root.querySelectorAll("[data-i18n-placeholder]")) node.placeholder = t(node.dataset.i18nPlaceholder);
}

// loads `code`'s texts and fills the page with them; remembered when `save`
export async function useLang(code, save = false) {
  const response = await fetch(`/i18n/${code}.json`, { cache: "no-store" });
  if (!response.ok) throw new Error(`no texts for ${code}`);
  texts = await response.json();
  current = code;
  if (save) localStorage.setItem(LANG_KEY, code);
  document.documentElement.lang = code;
  translate();
  document.dispatchEvent(new CustomEvent("picobot:lang", { detail: { lang: code } }));
}
