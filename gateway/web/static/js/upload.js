// Files for the next message: chosen with the 📎 button, pasted or dropped
// on the composer. Each goes at once to `POST /ws/upload` (the token of the
// WebSocket, as a Bearer header) and comes back as a ref the `message` frame
// names in `attachments` (docs/PROTOCOL.md "Uploads"). The gateway checks
// size and type again; the page checks first so a user hears at once.

import { t } from "./i18n.js";
import { el } from "./render.js";

export const MAX_BYTES = 10 * 1024 * 1024; // as channels/ws_input.py MAX_UPLOAD_BYTES
export const MAX_FILES = 4;
const MB = MAX_BYTES / 1024 / 1024;
const TYPES = new Set([
  "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf",
  "text/plain", "text/markdown", "text/csv", "application/json",
]);
const BY_SUFFIX = { md: "text/markdown", csv: "text/csv", json: "application/json", txt: "text/plain" };

function typeOf(file) {
  if (TYPES.has(file.type)) return file.type;
  const suffix = /\.([a-z]+)$/i.exec(file.name)?.[1]?.toLowerCase();
  return BY_SUFFIX[suffix] || file.type || "application/octet-stream";
}

function readDataUrl(file) {
  return new Promise((resolve) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => resolve(null);
    reader.readAsDataURL(file);
  });
}

export class Attachments {
  constructor(conn, dom, onError) {
    this.conn = conn;
    this.dom = dom; // {button, file, tray, drop}
    this.onError = onError;
    this.items = []; // {file, name, type, preview, done: Promise<ref|null>, chip}
    dom.button.addEventListener("click", () => dom.file.click());
    dom.file.addEventListener("change", () => {
      this.add([...dom.file.files]);
      dom.file.value = "";
    });
    dom.input.addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files || [])];
      if (files.length) {
        e.preventDefault();
        this.add(files);
      }
    });
    dom.drop.addEventListener("dragover", (e) => {
      if ([...e.dataTransfer.types].includes("Files")) {
        e.preventDefault();
        dom.drop.classList.add("dropping");
      }
    });
    dom.drop.addEventListener("dragleave", () => dom.drop.classList.remove("dropping"));
    dom.drop.addEventListener("drop", (e) => {
      dom.drop.classList.remove("dropping");
      if (!e.dataTransfer.files.length) return;
      e.preventDefault();
      this.add([...e.dataTransfer.files]);
    });
  }

  get pending() {
    return this.items.length;
  }

  add(files) {
    for (const file of files) {
      const type = typeOf(file);
      if (this.items.length >= MAX_FILES) {
        this.onError(t("upload.too_many", { max: MAX_FILES }));
        return;
      }
      if (!TYPES.has(type)) {
        this.onError(t("upload.bad_type", { name: file.name }));
        continue;
      }
      if (file.size > MAX_BYTES) {
        this.onError(t("upload.too_large", { name: file.name, mb: MB }));
        continue;
      }
      const item = { file, name: file.name || t("upload.pasted"), type, preview: null };
      item.chip = this.chip(item);
      item.done = this.upload(item);
      this.items.push(item);
    }
  }

  chip(item) {
    const chip = el("span", "attachment uploading");
    const label = el("span", "attachment-name", item.name);
    const remove = el("button", "icon remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", t("upload.remove", { name: item.name }));
    remove.addEventListener("click", () => {
      this.items = this.items.filter((i) => i !== item);
      chip.remove();
    });
    chip.append(label, remove);
    this.dom.tray.append(chip);
    this.dom.tray.hidden = false;
    if (item.type.startsWith("image/")) {
      readDataUrl(item.file).then((url) => {
        if (!url) return;
        item.preview = url;
        const img = el("img", "thumb");
        img.src = url;
        img.alt = "";
        chip.prepend(img);
      });
    }
    return chip;
  }

  async upload(item) {
    const headers = { "Content-Type": item.type };
    if (this.conn.token) headers.Authorization = `Bearer ${this.conn.token}`;
    let response;
    try {
      response = await fetch(this.conn.uploadUrl(), { method: "POST", headers, body: item.file });
    } catch {
      return this.failed(item, t("upload.offline", { name: item.name }));
    }
    if (response.status === 201) {
      const body = await response.json();
      item.chip.classList.remove("uploading");
      return body.ref;
    }
    const known = [401, 413, 415].includes(response.status);
    const reason = t(known ? `upload.reason.${response.status}` : "upload.reason.http", {
      mb: MB,
      status: response.status,
    });
    return this.failed(item, t("upload.failed", { name: item.name, reason }));
  }

  failed(item, text) {
    item.chip.classList.remove("uploading");
    item.chip.classList.add("failed");
    this.onError(text);
    return null;
  }

  // the files for the message being sent, once uploaded: [{ref, name, type, preview}]
  async take() {
    const items = this.items;
    this.items = [];
    const refs = await Promise.all(items.map((i) => i.done));
    this.dom.tray.replaceChildren();
    this.dom.tray.hidden = true;
    return items
      .map((i, n) => ({ ref: refs[n], name: i.name, type: i.type, preview: i.preview }))
      .filter((i) => i.ref);
  }
}
