// Admin page of the RAG knowledge service: plain JavaScript on the public HTTP API, no build step,
// no external resources. Everything shown from the server goes through textContent (never
// innerHTML): filenames, errors and chunk text are user data.
"use strict";

const API = "/api/v1";
const $ = (sel) => document.querySelector(sel);
const state = {
  token: sessionStorage.getItem("rag-token") || "", kb: null, docs: new Map(), stream: null,
  formats: null, // extension → registry entry (GET /formats); null until loaded: everything is sent
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

// ------------------------------------------------------------------ HTTP

class HttpError extends Error {
  constructor(status, detail) {
    super(`${status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    this.status = status;
    this.detail = detail;
  }
}

async function api(path, { method = "GET", json, body, signal } = {}) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  const r = await fetch(API + path, { method, headers, body, signal });
  if (r.status === 204) return null;
  const data = await r.json().catch(() => null);
  if (!r.ok) throw new HttpError(r.status, data && data.detail !== undefined ? data.detail : r.statusText);
  return data;
}

function detailText(err) {
  if (!(err instanceof HttpError)) return String(err);
  const d = err.detail;
  if (typeof d === "string") return `${err.status}: ${d}`;
  if (Array.isArray(d)) return `${err.status}: ${d.map((x) => x.msg || JSON.stringify(x)).join("; ")}`;
  if (d && d.reason) return `${err.status}: ${d.reason}${d.status ? ` (task ${d.status})` : ""}`;
  return err.message;
}

// Server-Sent Events over fetch (EventSource cannot send the Authorization header).
async function readEvents(path, onEvent, signal, onOpen = () => {}) {
  const r = await fetch(API + path, {
    headers: { Authorization: `Bearer ${state.token}`, Accept: "text/event-stream" }, signal,
  });
  if (!r.ok) throw new HttpError(r.status, r.statusText);
  onOpen();
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf = (buf + value).replace(/\r\n/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? "" : line.slice(colon + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "event") event = v;
        else if (field === "data") data.push(v);
      }
      if (data.length) onEvent(event, JSON.parse(data.join("\n")));
    }
  }
}

// ------------------------------------------------------------------ sign in, knowledge bases

async function signIn(token) {
  state.token = token;
  const kbs = await api("/knowledge-bases"); // 401 for a wrong token
  sessionStorage.setItem("rag-token", token);
  $("#signin-panel").hidden = true;
  $("#app").hidden = false;
  $("#signout").hidden = false;
  $("#who").textContent = "signed in";
  fillKbs(kbs.items);
  api("/formats").then(showFormats).catch(() => {}); // the picker then accepts anything; the server decides
  const saved = Number(sessionStorage.getItem("rag-kb"));
  const pick = kbs.items.find((k) => k.kb_id === saved) || kbs.items[0];
  if (pick) selectKb(pick.kb_id);
}

// The format registry: the file picker's accept=, the hint, and which files of a folder to skip.
function showFormats(body) {
  state.formats = new Map(body.items.flatMap((f) => f.extensions.map((e) => [e, f])));
  $("#file-input").setAttribute("accept", body.accept);
  $("#formats-hint").textContent = body.items.filter((f) => f.accepted)
    .map((f) => f.extensions.join("/")).join(", ");
}

// Why a file is not sent (an extension the registry does not accept), or null to send it. A name
// without an extension is sent: the server types it by content.
function skipReason(name) {
  const dot = name.lastIndexOf(".");
  if (!state.formats || dot <= 0) return null;
  const ext = name.slice(dot + 1).toLowerCase();
  if (!/^[a-z0-9]{0,9}[a-z][a-z0-9]{0,9}$/.test(ext)) return null;
  const f = state.formats.get(ext);
  if (!f) return `skipped: .${ext} is not a supported type`;
  return f.accepted ? null : `skipped: ${f.refusal}`;
}

function fillKbs(items, selected) {
  const sel = $("#kb-select");
  sel.replaceChildren(...items.map((k) => el("option", { value: k.kb_id }, `${k.name} (#${k.kb_id})`)));
  if (selected) sel.value = String(selected);
}

// Rename or delete the selected knowledge base (the API's PATCH / DELETE /knowledge-bases/{id}).
async function renameKb() {
  const name = $("#kb-new-name").value;
  const kb = await api(`/knowledge-bases/${state.kb}`, { method: "PATCH", json: { name } });
  $("#kb-new-name").value = "";
  fillKbs((await api("/knowledge-bases")).items, kb.kb_id);
}

async function deleteKb() {
  const sel = $("#kb-select");
  const label = sel.options[sel.selectedIndex] ? sel.options[sel.selectedIndex].textContent : `#${state.kb}`;
  if (!confirm(`Delete the knowledge base ${label} with every document, chunk and file in it?`)) return;
  await api(`/knowledge-bases/${state.kb}`, { method: "DELETE" });
  const left = (await api("/knowledge-bases")).items;
  fillKbs(left);
  if (left.length) selectKb(left[0].kb_id);
  else clearKb();
}

function clearKb() {
  if (state.stream) state.stream.abort();
  state.kb = null;
  sessionStorage.removeItem("rag-kb");
  state.docs.clear();
  $("#docs tbody").replaceChildren();
  $("#doc-count").textContent = "(0)";
  $("#live").classList.remove("on");
}

function selectKb(kbId) {
  state.kb = kbId;
  sessionStorage.setItem("rag-kb", String(kbId));
  $("#kb-select").value = String(kbId);
  state.docs.clear();
  $("#docs tbody").replaceChildren();
  $("#chunks-panel").hidden = true;
  $("#results").replaceChildren();
  follow(kbId);
}

// One event stream per knowledge base: every document and each change of it. Reconnects after a drop.
function follow(kbId) {
  if (state.stream) state.stream.abort();
  const ctrl = new AbortController();
  state.stream = ctrl;
  (async () => {
    while (!ctrl.signal.aborted) {
      try {
        await readEvents(`/knowledge-bases/${kbId}/events`, (event, data) => {
          if (event === "document") upsertDoc(data);
          else if (event === "removed") removeDoc(data.document_id);
        }, ctrl.signal, () => $("#live").classList.add("on"));
      } catch (err) {
        if (ctrl.signal.aborted) return;
        if (err instanceof HttpError && err.status === 401) return signOut();
        if (err instanceof HttpError && err.status === 404) return; // the knowledge base is gone
      }
      $("#live").classList.remove("on");
      await sleep(2000);
    }
  })();
}

function signOut() {
  if (state.stream) state.stream.abort();
  sessionStorage.removeItem("rag-token");
  state.token = "";
  $("#app").hidden = true;
  $("#signout").hidden = true;
  $("#signin-panel").hidden = false;
  $("#who").textContent = "";
}

// ------------------------------------------------------------------ documents table

function fmtTime(iso) {
  return iso ? new Date(iso).toLocaleTimeString() : "";
}

function timesText(d) {
  const t = d.task || {};
  const parts = [`uploaded ${fmtTime(d.create_time)}`];
  if (t.start_time) parts.push(`started ${fmtTime(t.start_time)}`);
  if (t.start_time && t.end_time) {
    parts.push(`took ${((new Date(t.end_time) - new Date(t.start_time)) / 1000).toFixed(1)} s`);
  }
  return parts.join(" · ");
}

function stageText(d) {
  const t = d.task;
  if (!t) return "";
  if (t.status === "WAITING" || t.status === "RETRYING") {
    return t.queue_position ? `${t.status.toLowerCase()} (#${t.queue_position} in queue)` : t.status.toLowerCase();
  }
  if (t.status === "RUNNING") {
    const stage = (t.stage || "claimed").toLowerCase().replace("_", " ");
    // a big document embedded in parts by any worker (issue 31): "embedding · 40/79 parts"
    return t.parts ? `${stage} · ${t.parts.done}/${t.parts.total} parts` : stage;
  }
  if (t.status === "SUCCESS") return "done";
  return `${t.status.toLowerCase()}${t.stage ? ` in ${t.stage.toLowerCase()}` : ""}`;
}

// The progress shown for a task: 1 once it succeeded, else its own (null: none yet).
function taskProgress(t) {
  if (t.status === "SUCCESS") return 1;
  return t.progress === null || t.progress === undefined ? null : t.progress;
}

function progressCell(p) {
  const progress = el("progress", { max: "1" });
  if (p !== null) progress.value = p;
  return el("td", { class: "progress" }, progress, el("span", { class: "pct" }, p === null ? "" : `${Math.round(p * 100)}%`));
}

function errorCell(code, message) {
  const cell = el("td", { class: "err" });
  if (code) cell.append(el("code", {}, code), " ");
  if (message) cell.append(el("span", { class: "msg" }, message));
  return cell;
}

const isRetryable = (t) => t.status === "FAILED" || t.status === "TIMEOUT";

// One row per document: its served version. With new content pending, the task is the pending
// version's: its status, stage, progress, error and Retry go on a line of their own below.
function upsertDoc(d) {
  state.docs.set(d.document_id, d);
  let row = document.querySelector(`#docs tr.doc[data-doc-id="${d.document_id}"]`);
  if (!row) {
    row = el("tr", { class: "doc", "data-doc-id": d.document_id });
    $("#docs tbody").append(row);
  }
  const t = d.task || {};
  const p = d.pending ? (d.status === "INDEXED" ? 1 : null) : taskProgress(t);
  row.dataset.status = d.status;
  row.dataset.progress = p === null ? "" : String(p);
  const warnCell = el("td", { class: "warn" });
  for (const w of d.warnings || []) warnCell.append(el("div", {}, w));
  row.replaceChildren(
    el("td", {}, d.document_id),
    el("td", { class: "file" }, d.filename,
      d.origin ? el("div", { class: "origin" }, `from ${d.origin.filename} (#${d.origin.document_id})`) : null,
      d.members ? el("div", { class: "members" }, `archive: ${d.members} member documents`) : null),
    el("td", { class: "status" }, el("span", { class: `badge ${d.status}` }, d.status)),
    el("td", { class: "stage" }, d.pending ? (d.status === "INDEXED" ? "served" : "") : stageText(d)),
    progressCell(p),
    d.pending ? errorCell(null, d.error_message) : errorCell(t.error_code, d.error_message || t.error_message),
    warnCell,
    el("td", { class: "chunks" }, d.chunk_count),
    el("td", { class: "times" }, d.pending ? `uploaded ${fmtTime(d.create_time)}` : timesText(d)),
    el("td", { class: "actions" },
      !d.pending && isRetryable(t) ? el("button", { class: "retry", onclick: () => act(retry, d) }, "Retry") : null,
      el("button", { class: "reindex", onclick: () => act(reindex, d) }, "Reindex"),
      el("button", { class: "delete", onclick: () => act(remove, d) }, "Delete"),
      el("button", { class: "show-chunks", onclick: () => act(showChunks, d) }, "Chunks")),
  );
  upsertPending(row, d);
  applyFilter(row);
  $("#doc-count").textContent = `(${state.docs.size})`;
}

// The pending version's own line (tr.pending right below its document), or none.
function upsertPending(row, d) {
  let line = document.querySelector(`#docs tr.pending[data-doc-id="${d.document_id}"]`);
  if (!d.pending) {
    if (line) line.remove();
    return;
  }
  if (!line) line = el("tr", { class: "pending", "data-doc-id": d.document_id });
  if (row.nextElementSibling !== line) row.after(line);
  const v = d.pending;
  const t = d.task || {};
  const status = v.status || "WAITING";
  line.dataset.status = status;
  line.replaceChildren(
    el("td", {}, ""),
    el("td", { class: "pending-file" }, el("span", { class: "meta" }, "new version: "), v.filename),
    el("td", { class: "status" }, el("span", { class: `badge ${status}` }, status)),
    el("td", { class: "stage" }, stageText(d)),
    progressCell(taskProgress(t)),
    errorCell(v.error_code, v.message),
    el("td", {}, ""),
    el("td", {}, ""),
    el("td", { class: "times" }, timesText({ create_time: v.create_time, task: d.task })),
    el("td", { class: "actions" },
      isRetryable(t) ? el("button", { class: "retry", onclick: () => act(retry, d) }, "Retry") : null,
      el("button", { class: "drop", onclick: () => act(dropPending, d) }, "Drop")),
  );
  applyFilter(line);
}

// The status filter (select#status-filter): rows of other statuses are hidden, not removed.
function applyFilter(row) {
  const want = $("#status-filter").value;
  const d = state.docs.get(Number(row.dataset.docId));
  row.hidden = Boolean(want) && !(d && d.status === want);
}

function removeDoc(id) {
  state.docs.delete(id);
  document.querySelectorAll(`#docs tr[data-doc-id="${id}"]`).forEach((tr) => tr.remove());
  $("#doc-count").textContent = `(${state.docs.size})`;
}

async function kbAct(fn) {
  $("#action-error").textContent = "";
  if (!state.kb) return;
  try {
    await fn();
  } catch (err) {
    $("#action-error").textContent = detailText(err);
  }
}

async function act(fn, d) {
  $("#action-error").textContent = "";
  try {
    await fn(d);
  } catch (err) {
    $("#action-error").textContent = `${d.filename}: ${detailText(err)}`;
  }
}

async function retry(d) {
  // the generation shown: a double click (or a retry someone else made) is a 409, not a second run
  await api(`/tasks/${d.task.task_id}/retry`, { method: "POST", json: { generation: d.task.generation } });
}

async function reindex(d) {
  const r = await api(`/documents/${d.document_id}/reindex`, { method: "POST", json: { force: true } });
  if (r && r.document) upsertDoc(r.document);
}

async function dropPending(d) {
  if (!confirm(`Drop the new version ${d.pending.filename}? The served version stays.`)) return;
  await api(`/documents/${d.document_id}/pending`, { method: "DELETE" });
  upsertDoc(await api(`/documents/${d.document_id}`));
}

async function remove(d) {
  if (!confirm(`Delete ${d.filename}? Its chunks and vectors go too.`)) return;
  await api(`/documents/${d.document_id}`, { method: "DELETE" });
  removeDoc(d.document_id);
}

async function showChunks(d) {
  const page = await api(`/documents/${d.document_id}/chunks?limit=50`);
  $("#chunks-title").textContent = d.filename;
  $("#chunks-total").textContent = `${page.total} chunks${page.total > page.items.length ? `, first ${page.items.length} shown` : ""}`;
  $("#chunks").replaceChildren(...page.items.map((c) => el("li", { value: c.chunk_index },
    el("div", { class: "meta" }, provenance(c), `${c.token_count} tokens`),
    el("div", { class: "content" }, c.content))));
  $("#chunks-panel").hidden = false;
}

function provenance(x) {
  const parts = [];
  if (x.page) parts.push(`page ${x.page}`);
  if (x.section) parts.push(`section ${x.section}`);
  return parts.length ? `${parts.join(" · ")} · ` : "";
}

// ------------------------------------------------------------------ uploads (one at a time, 429-aware)

const queue = [];
let pumping = false;

function enqueue(files) {
  if (!state.kb) return;
  for (const file of files) {
    const skip = skipReason(file.name);
    const li = el("li", { class: skip ? "skipped" : "queued" }, `${file.name}: ${skip || "queued"}`);
    $("#queue").append(li);
    if (!skip) queue.push({ file, kb: state.kb, li });
  }
  pump();
}

function mark(item, cls, text) {
  item.li.className = cls;
  item.li.textContent = `${item.file.name}: ${text}`;
}

async function pump() {
  if (pumping) return;
  pumping = true;
  try {
    while (queue.length) await uploadOne(queue.shift());
  } finally {
    pumping = false;
  }
}

async function uploadOne(item) {
  for (let networkErrors = 0; ;) {
    mark(item, "uploading", "uploading…");
    const form = new FormData();
    form.append("file", item.file, item.file.name);
    let r;
    try {
      r = await fetch(`${API}/knowledge-bases/${item.kb}/documents`, {
        method: "POST", headers: { Authorization: `Bearer ${state.token}` }, body: form,
      });
    } catch (err) {
      if (++networkErrors > 5) return mark(item, "failed", `network error: ${err}`);
      mark(item, "waiting", "network error, retrying in 5 s");
      await sleep(5000);
      continue;
    }
    if (r.status === 429) { // too many tasks in flight: wait as long as the server asks
      const wait = Math.max(1, parseInt(r.headers.get("Retry-After") || "5", 10) || 5);
      for (let s = wait; s > 0; s--) {
        mark(item, "waiting", `server busy (429), next try in ${s} s`);
        await sleep(1000);
      }
      continue;
    }
    const body = await r.json().catch(() => ({}));
    if (r.status === 200 && body.duplicate_of) { // the KB already holds these bytes: nothing new was stored
      return mark(item, "duplicate", `duplicate of document #${body.duplicate_of}`);
    }
    if (r.status === 202) {
      mark(item, "done", `accepted as document #${body.document_id}`);
      if (item.kb === state.kb && !state.docs.has(body.document_id)) {
        api(`/documents/${body.document_id}`).then(upsertDoc).catch(() => {});
      }
      return;
    }
    return mark(item, "failed", detailText(new HttpError(r.status, body.detail ?? r.statusText)));
  }
}

// Folders dropped on the page: walk them (webkitGetAsEntry), files only.
async function droppedFiles(dataTransfer) {
  const entries = [...dataTransfer.items].map((i) => i.webkitGetAsEntry && i.webkitGetAsEntry()).filter(Boolean);
  if (!entries.length) return [...dataTransfer.files];
  const out = [];
  const walk = async (entry) => {
    if (entry.isFile) {
      out.push(await new Promise((ok, ko) => entry.file(ok, ko)));
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((ok, ko) => reader.readEntries(ok, ko));
        if (!batch.length) break;
        for (const e of batch) await walk(e);
      }
    }
  };
  for (const e of entries) await walk(e);
  return out;
}

// ------------------------------------------------------------------ search

// The search modes and the default one, from the API's own schema (SearchMode; stated once, in
// knowledge_service/search/modes.py). Without them the select stays empty and the server's
// default mode is used.
async function loadModes() {
  const r = await fetch("/openapi.json");
  if (!r.ok) return;
  const schemas = (await r.json()).components.schemas;
  const modes = (schemas.SearchMode && schemas.SearchMode.enum) || [];
  const fallback = schemas.SearchRequest.properties.mode.default;
  $("#search-mode").replaceChildren(...modes.map((m) => el("option", m === fallback ? { selected: "" } : {}, m)));
}

async function search(query, mode) {
  $("#search-error").textContent = "";
  try {
    const json = mode ? { query, mode, top_k: 10 } : { query, top_k: 10 };
    const r = await api(`/knowledge-bases/${state.kb}/search`, { method: "POST", json });
    $("#results").replaceChildren(...r.results.map((h) => el("li", { class: "hit" },
      el("div", { class: "meta" }, el("span", { class: "score" }, h.score.toFixed(4)),
        ` · ${h.filename} #${h.chunk_index} · `, provenance(h),
        Object.entries(h.sources).map(([k, v]) => `${k} rank ${v}`).join(", ")),
      el("div", { class: "content" }, h.content),
      alsoIn(h))));
    if (!r.results.length) $("#results").append(el("li", {}, "no hits"));
  } catch (err) {
    $("#search-error").textContent = detailText(err);
  }
}

// Search shows one hit per text; the other documents and chunks holding it are named under the hit.
function alsoIn(h) {
  const copies = h.also_in || [];
  if (!copies.length) return null;
  const more = (h.also_in_total || 0) - copies.length;
  return el("div", { class: "also-in meta" }, "also in: ",
    copies.map((c) => `${c.filename} #${c.chunk_index} (document ${c.document_id})`).join("; "),
    more > 0 ? ` and ${more} more` : "");
}

// ------------------------------------------------------------------ wiring

document.addEventListener("DOMContentLoaded", () => {
  $("#signin-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("#signin-error").textContent = "";
    try {
      await signIn($("#token").value.trim());
    } catch (err) {
      state.token = "";
      $("#signin-error").textContent = err instanceof HttpError && err.status === 401
        ? "This token is not valid (unknown or revoked)." : detailText(err);
    }
  });
  $("#signout").addEventListener("click", signOut);
  $("#kb-select").addEventListener("change", (e) => selectKb(Number(e.target.value)));
  $("#kb-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const kb = await api("/knowledge-bases", { method: "POST", json: { name: $("#kb-name").value } });
      $("#kb-name").value = "";
      fillKbs((await api("/knowledge-bases")).items, kb.kb_id);
      selectKb(kb.kb_id);
    } catch (err) {
      $("#action-error").textContent = detailText(err);
    }
  });
  $("#kb-edit").addEventListener("submit", (e) => { e.preventDefault(); kbAct(renameKb); });
  $("#kb-delete").addEventListener("click", () => kbAct(deleteKb));
  $("#status-filter").addEventListener("change", () => document.querySelectorAll("#docs tbody tr").forEach(applyFilter));
  $("#file-input").addEventListener("change", (e) => { enqueue([...e.target.files]); e.target.value = ""; });
  $("#folder-input").addEventListener("change", (e) => { enqueue([...e.target.files]); e.target.value = ""; });
  const drop = $("#drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", async (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    enqueue(await droppedFiles(e.dataTransfer));
  });
  $("#chunks-close").addEventListener("click", () => { $("#chunks-panel").hidden = true; });
  $("#search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    search($("#search-q").value, $("#search-mode").value);
  });
  loadModes().catch(() => {}); // the server's default mode then
  if (state.token) signIn(state.token).catch(() => signOut());
});
