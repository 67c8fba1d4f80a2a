// The /ws connection (docs/PROTOCOL.md): hello with the chat id and token,
// reconnect with backoff, queries answered by id, messages typed while offline
// sent after the next welcome (their ids make a resend harmless).

const CLOSE_UNAUTHORIZED = 4401;
const CLOSE_FORBIDDEN_CHAT = 4403; // the chat id is another principal's
const MAX_OFFLINE_QUEUE = 50;
const QUERY_TIMEOUT_MS = 15000;

let counter = 0;
export function newId(prefix) {
  counter += 1;
  const random = Math.random().toString(36).slice(2, 8);
  return `${prefix}-${Date.now().toString(36)}-${random}-${counter}`;
}

export class Connection extends EventTarget {
  constructor(chatId, token) {
    super();
    this.chatId = chatId;
    this.token = token;
    this.ws = null;
    this.online = false;
    this.delay = 500;
    this.timer = null;
    this.offline = [];
    this.waiting = new Map(); // query id -> {resolve, reject, timer}
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    return `${scheme}://${location.host}/ws`;
  }

  state(name, detail = {}) {
    this.dispatchEvent(new CustomEvent("state", { detail: { state: name, ...detail } }));
  }

  connect() {
    clearTimeout(this.timer);
    this.timer = null;
    this.state("connecting");
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      const hello = { type: "hello", protocol: 1, chat_id: this.chatId };
      if (this.token) hello.token = this.token;
      ws.send(JSON.stringify(hello));
    });
    ws.addEventListener("message", (event) => this.receive(event.data));
    ws.addEventListener("close", (event) => this.closed(ws, event));
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.type === "welcome") {
      this.online = true;
      this.delay = 500;
      this.state("online");
      this.dispatchEvent(new CustomEvent("welcome", { detail: frame }));
      for (const queued of this.offline.splice(0)) this.ws.send(JSON.stringify(queued));
      return;
    }
    const waiter = frame.id !== undefined ? this.waiting.get(frame.id) : undefined;
    if (waiter && (frame.type === "error" || frame.type === "sessions" || frame.type === "history")) {
      this.waiting.delete(frame.id);
      clearTimeout(waiter.timer);
      if (frame.type === "error") waiter.reject(new Error(frame.message));
      else waiter.resolve(frame);
      return;
    }
    this.dispatchEvent(new CustomEvent("frame", { detail: frame }));
  }

  closed(ws, event) {
    if (ws !== this.ws) return;
    this.online = false;
    for (const [id, waiter] of this.waiting) {
      clearTimeout(waiter.timer);
      waiter.reject(new Error("disconnected"));
      this.waiting.delete(id);
    }
    if (event.code === CLOSE_UNAUTHORIZED) {
      this.state("unauthorized");
      return; // until a new token is given
    }
    if (event.code === CLOSE_FORBIDDEN_CHAT) {
      this.state("forbidden");
      return; // retrying cannot help
    }
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, 10000);
    this.state("offline", { retryMs: wait });
    this.timer = setTimeout(() => this.connect(), wait);
  }

  reconnect(token) {
    this.token = token;
    if (this.ws) {
      const old = this.ws;
      this.ws = null;
      old.close();
    }
    this.connect();
  }

  // where files go before a message names them (docs/PROTOCOL.md "Uploads")
  uploadUrl() {
    return `${location.protocol}//${location.host}/ws/upload`;
  }

  // a chat message (with the refs of uploaded files); false when it waits for the next connection
  sendMessage(id, text, attachments = []) {
    const frame = { type: "message", id, text };
    if (attachments.length) frame.attachments = attachments;
    if (this.online) {
      this.ws.send(JSON.stringify(frame));
      return true;
    }
    if (this.offline.length < MAX_OFFLINE_QUEUE) this.offline.push(frame);
    return false;
  }

  // any other frame (an `approve`); false when offline (not queued)
  sendFrame(frame) {
    if (!this.online) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  query(type, fields = {}) {
    if (!this.online) return Promise.reject(new Error("not connected"));
    const id = newId("q");
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${type}: no answer`));
      }, QUERY_TIMEOUT_MS);
      this.waiting.set(id, { resolve, reject, timer });
      this.ws.send(JSON.stringify({ type, id, ...fields }));
    });
  }
}
