// Boot: the page's language, the token (asked once, kept in this browser),
// this browser's chat id, routing between the chat ("/", "/chat/<id>") and
// the operator's console ("/ops/<view>", admins only).

import { Chat } from "./chat.js";
import { Connection } from "./conn.js";
import { Console } from "./console/console.js";
import { LANGS, browserLang, t, useLang } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "picobot.token";
const CHAT_KEY = "picobot.chat";

// 128 random bits: a chat id nobody can guess (a saved shorter one keeps working)
function newChatId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  const id = `web-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
  localStorage.setItem(CHAT_KEY, id);
  return id;
}

const deepLink = /^\/chat\/([A-Za-z0-9._:@/-]{1,128})$/.exec(decodeURIComponent(location.pathname));

function chatId() {
  if (deepLink) return deepLink[1];
  return localStorage.getItem(CHAT_KEY) || newChatId();
}

let token = localStorage.getItem(TOKEN_KEY) || "";
const conn = new Connection(chatId(), token);
const dialog = $("token-dialog");

function askToken(refused) {
  $("token-error").hidden = !refused;
  if (!dialog.open) dialog.showModal();
  $("token-input").focus();
}

$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("token-input").value.trim();
  if (!token) return;
  localStorage.setItem(TOKEN_KEY, token);
  dialog.close();
  ops.token = token;
  conn.reconnect(token);
  if (location.pathname.startsWith("/ops")) ops.show(location.pathname);
  else ops.check();
});

const chat = new Chat(conn, {
  messages: $("messages"),
  composer: $("composer"),
  input: $("input"),
  stop: $("stop"),
  working: $("working"),
  workingText: $("working-text"),
  sessions: $("sessions"),
  newSession: $("new-session"),
  status: { fields: $("status-fields"), details: $("status-details"), text: $("status") },
  attach: { button: $("attach"), file: $("file"), tray: $("attachments"), input: $("input"), drop: $("chat-view") },
  sessionTitle: $("session-title"),
});
window.picobot = { chat, conn }; // for the browser console and tests

const ops = new Console(
  { root: $("ops-view"), tabs: $("console-tabs"), error: $("ops-error"), refresh: $("ops-refresh"), navLink: $("nav-ops") },
  token,
  () => askToken(Boolean(token)),
);

const badge = $("conn");
let lastState = { state: "connecting" };
function showState() {
  const { state, retryMs } = lastState;
  badge.dataset.state = state;
  badge.textContent = t(`conn.${state}`, { seconds: Math.round((retryMs || 0) / 1000) });
  badge.title = badge.textContent;
}
conn.addEventListener("state", (e) => {
  lastState = e.detail;
  showState();
  const { state } = e.detail;
  if (state === "unauthorized") askToken(Boolean(token));
  // the saved chat is another token's (a shared browser): start a chat of this one's
  if (state === "forbidden" && !deepLink) {
    conn.chatId = newChatId();
    conn.connect();
  }
});

function route() {
  const onOps = location.pathname.startsWith("/ops");
  $("chat-view").hidden = onOps;
  $("ops-view").hidden = !onOps;
  $("nav-chat").toggleAttribute("aria-current", !onOps);
  $("nav-ops").toggleAttribute("aria-current", onOps);
  if (!onOps) $("nav-chat").setAttribute("aria-current", "page");
  else $("nav-ops").setAttribute("aria-current", "page");
  if (onOps) ops.show(location.pathname);
  else ops.hide();
}

document.addEventListener("click", (e) => {
  const link = e.target.closest("a[data-route]");
  if (!link || e.metaKey || e.ctrlKey) return;
  e.preventDefault();
  history.pushState(null, "", link.getAttribute("href"));
  route();
});
window.addEventListener("popstate", route);
$("menu").addEventListener("click", (e) => {
  e.stopPropagation();
  document.body.classList.toggle("sidebar-open");
});
document.addEventListener("click", (e) => {
  // the drawer (phone) closes on a tap outside it
  if (!e.target.closest("#sidebar")) document.body.classList.remove("sidebar-open");
});

const langSelect = $("lang");
langSelect.replaceChildren(
  ...Object.entries(LANGS).map(([code, name]) => {
    const option = document.createElement("option");
    option.value = code;
    option.textContent = name;
    return option;
  }),
);
langSelect.addEventListener("change", async () => {
  await useLang(langSelect.value, true);
  showState();
  ops.tabs();
  if (location.pathname.startsWith("/ops")) ops.reload();
});

const wanted = browserLang();
langSelect.value = wanted;
useLang(wanted)
  .catch(() => useLang("en"))
  .finally(() => {
    showState();
    ops.tabs();
    route();
    // a saved token may be a non-admin's: then the console is not offered
    if (token && !location.pathname.startsWith("/ops")) ops.check();
    conn.connect();
  });
