// The agentkernel web chat. Plain browser JavaScript, no build step.
// Everything from the server or a model is put in the page as text (textContent), except the
// answer's Markdown, which goes marked -> DOMPurify.sanitize -> innerHTML, and charts, which are
// server-drawn SVG shown as an <img> from a data: URL (nothing in an image runs).
"use strict";

const TOKEN_KEY = "agentkernel.token";
const NO_LLM_HELP =
  "No LLM provider is reachable. Configure one in kernel.yaml under `llm:` (base_url, model and " +
  "the environment variable holding its API key), or try things out with the scripted LLM that " +
  "`agentkernel dev llm` starts: restart with `agentkernel serve --llm-url URL` and the URL it prints. " +
  "The Tools panel works without one.";
const LLM_POLL_MS = 15_000; // while the LLM does not answer, the status line is checked again this often

// `cards`: the approval cards in the chat shown, by run and call; `following`: the reading of a run of
// the chat shown that waits for a decision (ended when another chat opens); `pending`: GET /v1/approvals.
const state = {
  session: null, sessions: [], tools: [], busy: false, turning: null,
  cards: new Map(), cardCount: 0, following: null, pending: [],
};
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function status(text) {
  $("status").textContent = text;
}

// Text from the server with `code` spans (commands, settings) as <code>, so no backtick is shown;
// text with an odd number of backticks is left as it is.
function withCode(text) {
  const parts = String(text).split("`");
  if (parts.length % 2 === 0) return [String(text)];
  return parts.map((part, i) => (i % 2 ? el("code", { text: part }) : part)).filter((p) => p !== "");
}

const sentence = (text) => {
  const capital = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.?!]$/.test(capital) ? capital : capital + ".";
};

// -- the API -----------------------------------------------------------------------------------

function headers(json) {
  const out = {};
  if (json) out["Content-Type"] = "application/json";
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) out.Authorization = "Bearer " + token;
  return out;
}

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

async function failure(response) {
  let detail = response.statusText;
  try {
    const body = await response.json();
    detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    if (body.request_id) detail += " (request id " + body.request_id + ")";
  } catch (_) {
    /* not JSON: keep the status text */
  }
  if (response.status === 401) detail = "The server wants a bearer token: paste yours above and press Save.";
  return new ApiError(response.status, detail);
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response;
}

const getJSON = async (path) => (await api("GET", path)).json();
const postJSON = async (path, body) => (await api("POST", path, body)).json();

// -- visual blocks (S6.2) ------------------------------------------------------------------------

function cellText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function tableRows(tbody, columns, rows) {
  for (const row of rows) {
    tbody.append(el("tr", {}, ...columns.map((c) => el("td", { text: cellText(row[c.key]) }))));
  }
}

function renderTable(block) {
  const columns = block.columns || [];
  const tbody = el("tbody");
  tableRows(tbody, columns, block.rows || []);
  const table = el(
    "table",
    {},
    block.title ? el("caption", { text: block.title }) : null,
    el("thead", {}, el("tr", {}, ...columns.map((c) => el("th", { scope: "col", text: c.title || c.key })))),
    tbody,
  );
  const figure = el("figure", { class: "v-table" }, el("div", { class: "scroll", tabindex: "0" }, table));
  if (block.continuation && block.continuation.id) figure.append(moreControl(block.continuation.id, tbody, columns));
  return figure;
}

// "More": the next page through POST /v1/continuations, its rows added to the same table.
function moreControl(id, tbody, columns) {
  const note = el("span", { class: "quiet", role: "status" });
  const button = el("button", { type: "button", class: "more", text: "More" });
  let current = id;
  button.addEventListener("click", async () => {
    button.disabled = true;
    note.textContent = "loading…";
    try {
      const page = await postJSON("/v1/continuations", { id: current });
      const blocks = page.visual || [];
      const next = blocks.find((b) => b.type === "table");
      if (next) tableRows(tbody, columns, next.rows || []);
      const extra = blocks.filter((b) => b !== next);
      if (extra.length) wrap.append(renderVisual(extra));
      if (page.error) wrap.append(el("p", { class: "error", text: page.error }));
      for (const w of page.warnings || []) wrap.append(el("p", { class: "warning", text: "⚠ " + w }));
      const more = next && next.continuation && next.continuation.id;
      note.textContent = more ? "" : "no more rows";
      if (more) {
        current = more;
        button.disabled = false;
      } else {
        button.remove();
      }
    } catch (err) {
      note.textContent = err.status === 404 ? "these rows are no longer available" : err.message;
      button.disabled = err.status === 404;
    }
  });
  const wrap = el("div", { class: "more-row" }, button, note);
  return wrap;
}

// Drawn on the server as wide as the box it is shown in (asked once the figure is in the page), so its
// 12 px text stays 12 px: a 640 px chart shrunk into the tools panel had 5 px labels.
const CHART_WIDTH = { least: 240, most: 800, otherwise: 640 };

function chartWidth(figure) {
  const room = Math.floor(figure.clientWidth) - 2; // its 1 px border each side
  return room > 0 ? Math.max(CHART_WIDTH.least, Math.min(CHART_WIDTH.most, room)) : CHART_WIDTH.otherwise;
}

function renderChart(block) {
  const figure = el("figure", { class: "v-chart" }, el("p", { class: "quiet", text: "drawing the chart…" }));
  Promise.resolve() // the caller puts the figure in the page first
    .then(() => api("POST", "/v1/charts/svg?width=" + chartWidth(figure), block))
    .then((r) => r.text())
    .then((svg) => {
      const alt = block.title ? block.chart + " chart: " + block.title : block.chart + " chart";
      const img = el("img", { src: "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg), alt });
      figure.replaceChildren(img);
    })
    .catch((err) => figure.replaceChildren(el("p", { class: "error", text: "chart: " + err.message })));
  return figure;
}

// A file a tool made. `download.url` is this server's (a sealed id, GET /v1/files/{id}): it needs the
// bearer token, which a plain <a href> cannot send, so the file is fetched with it and saved through a
// Blob URL. The token never goes to a block's `url`, which is wherever a script said (a plain link).
const DOWNLOAD_URL = /^\/v1\/files\/[A-Za-z0-9_-]+$/;

function renderFile(block) {
  const label = block.name + (block.mime ? " (" + block.mime + ")" : "");
  const own = block.download && typeof block.download.url === "string" && DOWNLOAD_URL.test(block.download.url);
  if (own) {
    const note = el("span", { class: "quiet", role: "status" });
    const button = el("button", { type: "button", class: "download", text: "⬇ " + label });
    button.addEventListener("click", () => saveDownload(block.download.url, block.name, button, note));
    return el("p", { class: "v-file" }, button, " ", note);
  }
  let safe = null;
  try {
    const url = new URL(block.url, location.href);
    if (url.protocol === "https:" || url.protocol === "http:") safe = url.href;
  } catch (_) {
    /* no url, or not one */
  }
  if (safe) {
    return el("p", { class: "v-file" }, el("a", { href: safe, download: block.name, rel: "noopener noreferrer", text: "⬇ " + label }));
  }
  return el("p", { class: "v-file", text: "📄 " + label + " (no download offered)" });
}

async function saveDownload(url, name, button, note) {
  button.disabled = true;
  note.textContent = "downloading…";
  try {
    const response = await api("GET", url);
    // always a plain byte stream: whatever the file says it is, nothing of it runs in this page
    const blob = (await response.blob()).slice(0, undefined, "application/octet-stream");
    const href = URL.createObjectURL(blob);
    const link = el("a", { href, download: name || "download", hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(href), 60_000); // the download has its own copy by then
    note.textContent = "";
  } catch (err) {
    note.textContent = err.status === 404 ? "this file is no longer available" : err.message;
  } finally {
    button.disabled = false;
  }
}

function renderVisual(blocks) {
  const box = el("div", { class: "visual" });
  for (const block of blocks || []) {
    if (block.type === "text") box.append(el("div", { class: "v-text", text: block.text }));
    else if (block.type === "table") box.append(renderTable(block));
    else if (block.type === "chart") box.append(renderChart(block));
    else if (block.type === "file") box.append(renderFile(block));
  }
  return box;
}

function renderResult(result) {
  const box = el("div", { class: "result" });
  if (result.content) box.append(el("pre", { class: "content", text: result.content }));
  if (result.success === false) box.append(el("p", { class: "error", text: "✖ " + (result.error || "the tool failed") }));
  for (const w of result.warnings || []) box.append(el("p", { class: "warning", text: "⚠ " + w }));
  if (result.visual && result.visual.length) box.append(renderVisual(result.visual));
  return box;
}

// -- the chat log --------------------------------------------------------------------------------

// An answer is model output a script can steer. Beyond DOMPurify's defaults: its `id`s and `name`s are
// prefixed (`user-content-`), since the answers come before the message box in the page and
// getElementById finds the first match (`<textarea id="message">` in an answer was what got sent next);
// no form controls or `<style>` (nothing in an answer is to be typed in, pressed, or restyle the page).
const ANSWER_HTML = {
  SANITIZE_NAMED_PROPS: true,
  FORBID_TAGS: ["form", "input", "textarea", "select", "option", "button", "style"],
  FORBID_ATTR: ["style"],
};

function markdown(text) {
  return DOMPurify.sanitize(marked.parse(text || ""), ANSWER_HTML);
}

function line(kind, text) {
  const node = el("p", { class: kind }, ...withCode(text));
  $("log").append(node);
  follow(node);
  return node;
}

function userMessage(text) {
  $("log").append(el("div", { class: "msg user" }, el("span", { class: "who", text: "You" }), el("p", { text })));
}

function answerBox() {
  const body = el("div", { class: "md" });
  $("log").append(el("div", { class: "msg agent" }, el("span", { class: "who", text: "Agent" }), body));
  return body;
}

function toolIcon(name) {
  const tool = state.tools.find((t) => t.name === name);
  return (tool && tool.ui && tool.ui.icon) || "🔧";
}

function toolRow(name, args) {
  const details = el(
    "details",
    { class: "tool-call" },
    el("summary", {}, el("span", { "aria-hidden": "true", text: toolIcon(name) + " " }), "tool ", el("code", { text: name }), el("span", { class: "state quiet", text: " running…" })),
    el("p", { class: "label", text: "Arguments" }),
    el("pre", { text: typeof args === "string" ? args : JSON.stringify(args, null, 2) }),
  );
  $("log").append(details);
  return details;
}

function fillToolRow(details, result) {
  details.querySelector(".state").textContent = result.success === false ? " failed" : " done";
  details.classList.toggle("failed", result.success === false);
  details.append(el("p", { class: "label", text: "Result" }), renderResult({ ...result, visual: null }));
  if (result.visual && result.visual.length) {
    const visual = renderVisual(result.visual);
    details.after(visual);
    follow(visual);
  }
}

function errorLine(message, beforeAnyAnswer) {
  line("error", "✖ " + message);
  if (/LLM|provider|connect/i.test(message) && beforeAnyAnswer) {
    line("help", NO_LLM_HELP);
    checkLLM();
  }
}

// A frame's `event:`, `id:` and `data:` fields. Its lines end only at LF (the server's frames, per SSE); the
// data's JSON may hold U+2028/U+2029 as they are, where a regular expression's `.` and `$` would stop.
function frameFields(frame) {
  const fields = {};
  for (const text of frame.split("\n")) {
    if (text.startsWith("event: ")) fields.type = text.slice(7);
    else if (text.startsWith("id: ")) fields.id = text.slice(4);
    else if (text.startsWith("data: ")) fields.data = text.slice(6);
  }
  return fields;
}

// Read a stream of frames to its end, each one's type and parsed data to `handle`, its id to `seen`.
async function readFrames(response, handle, seen) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    pending += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = pending.indexOf("\n\n")) >= 0) {
      const frame = pending.slice(0, cut);
      pending = pending.slice(cut + 2);
      const { type, id, data } = frameFields(frame);
      if (id !== undefined) seen(id);
      if (type !== undefined && data !== undefined) handle(type, JSON.parse(data));
    }
  }
}

// A turn's stream that broke before its `done` (the network, the server restarting) is read again from
// the store after the last event shown (S25.4), on whichever server answers: every RECONNECT_MS, a few
// minutes at most, so a server that restarts and resumes the run (S25.3) is waited for.
const RECONNECT_TRIES = 120;
const RECONNECT_MS = 1000;

// What a turn's events show in the chat: the answer as it streams, the tool calls with their results,
// the approval cards. `run` (its id, from its first event or an approval) and `lastId` (the last event
// shown) are where a broken stream is read again from.
function turnView(lastId) {
  const view = { run: null, lastId: lastId || "0", ended: false, answered: false };
  let answer = null;
  let buffer = "";
  const rows = new Map();
  // The answer so far is rendered once a frame, not once a token: each render parses all of it again
  // (marked, then DOMPurify), so a render per token made a long answer quadratic and froze the tab.
  let frameAsked = 0;
  view.showAnswer = () => {
    if (frameAsked) cancelAnimationFrame(frameAsked);
    frameAsked = 0;
    if (!answer) return;
    answer.innerHTML = markdown(buffer);
    follow(answer);
  };
  view.handle = (type, data) => {
    if (type === "run") {
      view.run = data.id;
    } else if (type === "token") {
      if (!answer) answer = answerBox();
      buffer += data.text;
      if (!frameAsked) frameAsked = requestAnimationFrame(view.showAnswer);
      view.answered = true;
    } else if (type === "reply") {
      if (frameAsked) cancelAnimationFrame(frameAsked);
      frameAsked = 0;
      if (!answer) answer = answerBox();
      buffer = data.content;
      answer.innerHTML = markdown(buffer);
      view.answered = true;
      answer = null;
      buffer = "";
    } else if (type === "notice") {
      line("notice", data.text);
    } else if (type === "tool_call") {
      view.showAnswer(); // the text before the call, whole, before the call's row
      answer = null;
      buffer = "";
      rows.set(data.id, toolRow(data.tool, data.args));
    } else if (type === "approval_required") {
      view.showAnswer();
      if (data.run_id) view.run = data.run_id;
      const row = data.call && rows.get(data.call.id);
      if (row) row.querySelector(".state").textContent = " waiting for your approval…";
      follow(approvalCard(data, "pending"));
    } else if (type === "approval_decided") {
      const card = findCard(view.run, data.call_id);
      if (card) card.decided(data.approved ? "approved" : "denied", data.reason);
      loadApprovals().catch((err) => status(err.message));
    } else if (type === "tool_result") {
      const row = rows.get(data.id) || toolRow(data.tool, "");
      fillToolRow(row, data);
    } else if (type === "warning") {
      line("warning", "⚠ " + (data.tool ? data.tool + ": " : "") + data.message);
    } else if (type === "error") {
      errorLine(data.message, !view.answered);
    } else if (type === "done") {
      view.ended = true;
      if (data.reason !== "job_done") line("notice", "turn ended: " + data.reason);
    }
  };
  view.seen = (id) => {
    view.lastId = id;
  };
  return view;
}

// A run's events from the store after the last one shown (S25.4), on whichever server answers, until its
// `done`: every RECONNECT_MS while it cannot be read, a few minutes at most. `signal` ends the reading
// (another chat opened).
async function readRun(view, signal, first) {
  for (let tries = 0; view.run !== null && !view.ended && !signal.aborted && tries < RECONNECT_TRIES; tries++) {
    if (!first || tries) status("the answer's stream broke; reconnecting…");
    await new Promise((done) => setTimeout(done, tries ? RECONNECT_MS : 0));
    try {
      const again = await fetch("/v1/runs/" + encodeURIComponent(view.run) + "/events", {
        headers: { ...headers(false), "Last-Event-ID": view.lastId },
        signal,
      });
      if (again.ok) await readFrames(again, view.handle, view.seen);
      else if (again.status === 404) return; // not this user's run, or gone
    } catch (err) {
      // the server is not back yet: the next try
    }
  }
  if (signal.aborted) return;
  if (view.run !== null && !view.ended) throw new Error("the connection to the server was lost; the answer goes on there");
  if ($("status").textContent.startsWith("the answer's stream broke")) status("");
}

// The compose box while a turn is being made (or a run followed): closed, Stop shown.
function turnStarted(session) {
  setBusy(true);
  state.turning = session;
  $("stop").hidden = false;
}

function turnOver(view) {
  view.showAnswer();
  $("stop").hidden = true;
  state.turning = null;
  setBusy(false);
  $("message").focus();
  loadJobs().catch((err) => status(err.message)); // the agent's tools may have scheduled a job
  loadApprovals().catch((err) => status(err.message));
}

// One turn: POST the message, read `event: TYPE` / `data: JSON` frames as they come.
async function sendMessage(text) {
  const session = state.session;
  userMessage(text);
  turnStarted(session);
  const view = turnView();
  try {
    const response = await api("POST", "/v1/sessions/" + encodeURIComponent(session.id) + "/messages", { content: text });
    if (!session.title) loadSessions().catch((err) => status(err.message)); // its first message named it
    try {
      await readFrames(response, view.handle, view.seen);
    } catch (err) {
      if (view.run === null) throw err; // no run to go back to
    }
    await readRun(view, new AbortController().signal, false);
  } catch (err) {
    view.showAnswer();
    errorLine(err.message, !view.answered);
  } finally {
    turnOver(view);
  }
}

// A run of the chat shown that waits for a decision (the page was reloaded, or the chat opened again):
// its events after the transcript's last record, so the answer streams in once it is decided.
async function followRun(session, runId, lastId) {
  if (state.following) state.following.abort();
  const following = new AbortController();
  state.following = following;
  turnStarted(session);
  const view = turnView(lastId);
  view.run = runId;
  try {
    await readRun(view, following.signal, true);
  } catch (err) {
    errorLine(err.message, false);
  } finally {
    if (state.following === following) {
      state.following = null;
      turnOver(view);
    }
  }
}

// -- approvals (S24.4, S24.6) ----------------------------------------------------------------------

const cardKey = (run, call) => String(run) + "\u0000" + String(call);

// The approval card of `call` in the chat shown; the call's id alone when the run is not known.
function findCard(run, call) {
  const exact = state.cards.get(cardKey(run, call));
  if (exact) return exact;
  for (const card of state.cards.values()) if (card.call === call) return card;
  return null;
}

// What became of a call: `approved`, `denied` (the reason as the event says it: "denied by alice: …"),
// `closed` (no longer waiting, the decision unknown here), `already` (a 409: decided elsewhere).
function outcomeText(how, why, by) {
  if (how === "closed") return "No longer waiting (expired, stopped, or decided elsewhere)";
  if (how === "already") return "Decided already (in another tab, or by someone else)";
  if (how === "denied" && /^(denied|no decision)/.test(why || "")) return "✖ " + sentence(why);
  const said = how === "approved" ? "✔ Approved" : "✖ Denied";
  return said + (by ? " by " + by : "") + (why ? ": " + why : "");
}

const until = (seconds) => (seconds ? new Date(seconds * 1000).toLocaleString() : "—");

// A call waiting for a person: its tool, arguments (as text), question and expiry, and Approve (with
// "remember"), Deny (an optional reason) and Edit (the arguments as JSON, checked before they are sent).
// `where` is the element it goes in (the chat's log by default). `shown` is `pending`, `closed` (no
// longer waiting: expired or stopped), or a decision from the transcript.
function approvalCard(approval, shown, where) {
  const call = approval.call || {};
  const run = approval.run_id;
  const key = cardKey(run, call.id);
  const old = state.cards.get(key);
  if (old && !where) return old.node;
  const id = "approval-" + (++state.cardCount);
  const argsText = JSON.stringify(call.args === undefined ? {} : call.args, null, 2);
  const outcome = el("p", { class: "outcome", role: "status", id: id + "-outcome" });
  const remember = el("input", { type: "checkbox", id: id + "-remember" });
  const approve = el("button", { type: "button", class: "approve", text: "Approve" });
  const deny = el("button", { type: "button", class: "deny", text: "Deny", "aria-expanded": "false", "aria-controls": id + "-deny" });
  const edit = el("button", { type: "button", class: "edit", text: "Edit", "aria-expanded": "false", "aria-controls": id + "-edit" });

  const reason = el("input", { type: "text", id: id + "-reason", maxlength: "2000", placeholder: "what the agent is told" });
  const denyForm = el(
    "form", { class: "approval-form", id: id + "-deny", hidden: true },
    el("label", { for: id + "-reason", text: "Reason (optional)" }),
    reason,
    el("div", { class: "approval-actions" }, el("button", { type: "submit", text: "Deny the call" }), el("button", { type: "button", class: "plain", text: "Cancel", onclick: () => closeForms(deny) })),
  );
  const tall = argsText.split("\n").length + Math.floor(argsText.length / 30); // its lines, wrapped at a phone's width
  const argsBox = el("textarea", { id: id + "-args", rows: String(Math.max(3, Math.min(14, tall))), spellcheck: "false", "aria-describedby": id + "-args-problem" });
  argsBox.value = argsText;
  const argsProblem = el("p", { class: "error", id: id + "-args-problem", role: "alert", hidden: true });
  const editForm = el(
    "form", { class: "approval-form", id: id + "-edit", hidden: true },
    el("label", { for: id + "-args", text: "Arguments (JSON)" }),
    argsBox,
    argsProblem,
    el("div", { class: "approval-actions" }, el("button", { type: "submit", text: "Run with these arguments" }), el("button", { type: "button", class: "plain", text: "Cancel", onclick: () => closeForms(edit) })),
  );

  const node = el(
    "section",
    { class: "approval", "aria-labelledby": id + "-title" },
    el("h3", { id: id + "-title" }, el("span", { "aria-hidden": "true", text: "✋ " }), "Approve tool ", el("code", { text: call.tool || "?" }), "?"),
    approval.question ? el("p", { class: "question", text: approval.question }) : null,
    el("p", { class: "label", text: "Arguments" }),
    el("pre", { class: "args", text: argsText }),
    el("p", { class: "quiet expires", text: "Waits until " + until(approval.expires_at) + "; then it is denied." }),
    el(
      "div", { class: "approval-actions" },
      el("span", { class: "group" }, approve, el("span", { class: "remember" }, remember, el("label", { for: id + "-remember", text: "remember for this tool" }))),
      el("span", { class: "group" }, deny, edit),
    ),
    denyForm,
    editForm,
    outcome,
  );
  const buttons = [approve, deny, edit, remember, reason, argsBox, ...denyForm.querySelectorAll("button"), ...editForm.querySelectorAll("button")];
  const card = { node, run, call: call.id, open: true };

  function closeForms(back) {
    denyForm.hidden = true;
    editForm.hidden = true;
    deny.setAttribute("aria-expanded", "false");
    edit.setAttribute("aria-expanded", "false");
    if (back) back.focus();
  }
  function toggle(form, button, focus) {
    const opening = form.hidden;
    closeForms();
    form.hidden = !opening;
    button.setAttribute("aria-expanded", String(opening));
    if (opening) focus.focus();
  }
  card.decided = (how, why, by) => {
    card.open = false;
    for (const b of buttons) b.disabled = true;
    closeForms();
    node.className = "approval " + (how === "approved" || how === "denied" ? how : "closed");
    outcome.textContent = outcomeText(how, why, by);
    if (where) where.classList.add("decided"); // kept in the list, its outcome shown, until the page reloads
  };
  async function send(body, problem) {
    for (const b of buttons) b.disabled = true;
    outcome.textContent = "sending…";
    try {
      const done = await postJSON("/v1/runs/" + encodeURIComponent(run) + "/approvals/" + encodeURIComponent(call.id), body);
      card.decided(done.status === "approved" ? "approved" : "denied", done.reason, done.decided_by);
      if (done.decision === "edit") outcome.textContent += ", with the arguments edited";
      if (done.remember) outcome.textContent += " — remembered: " + call.tool + " runs without asking from now on";
    } catch (err) {
      if (err.status === 409) card.decided("already");
      else if (err.status === 422 && problem) {
        for (const b of buttons) b.disabled = false;
        outcome.textContent = "";
        problem.textContent = "✖ " + err.message;
        problem.hidden = false;
        argsBox.focus();
      } else {
        for (const b of buttons) b.disabled = err.status === 404;
        outcome.textContent = "✖ " + (err.status === 404 ? "this call is not yours to decide, or no longer exists" : err.message);
      }
    }
    loadApprovals().catch((e) => status(e.message));
  }
  approve.addEventListener("click", () => send({ decision: "approve", remember: remember.checked }));
  deny.addEventListener("click", () => toggle(denyForm, deny, reason));
  edit.addEventListener("click", () => toggle(editForm, edit, argsBox));
  denyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const why = reason.value.trim();
    send(why ? { decision: "deny", reason: why } : { decision: "deny" });
  });
  editForm.addEventListener("submit", (event) => {
    event.preventDefault();
    let args;
    try {
      args = JSON.parse(argsBox.value);
    } catch (err) {
      args = err;
    }
    const wrong = args instanceof Error ? "not JSON: " + args.message : args === null || typeof args !== "object" || Array.isArray(args) ? "the arguments must be a JSON object: {…}" : null;
    if (wrong) {
      argsProblem.textContent = "✖ " + wrong;
      argsProblem.hidden = false;
      argsBox.focus();
      return;
    }
    argsProblem.hidden = true;
    send({ decision: "edit", args }, argsProblem);
  });
  // Esc in a form closes it, and goes no further (Esc elsewhere stops the turn)
  for (const [form, back] of [[denyForm, deny], [editForm, edit]]) {
    form.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      event.stopPropagation();
      closeForms(back);
    });
  }

  node.classList.add("pending");
  if (shown === "closed") card.decided("closed");
  else if (shown !== "pending") card.decided(shown.approved ? "approved" : "denied", shown.reason);
  if (where) where.append(node);
  else {
    state.cards.set(key, card);
    $("log").append(node);
  }
  return node;
}

// The calls waiting for the user's decision (GET /v1/approvals), for the chats not shown: each with its
// chat to open (the user's), or its card to decide from here (a chat of someone naming them an approver).
async function loadApprovals() {
  const found = (await getJSON("/v1/approvals")).approvals || [];
  state.pending = found;
  const shown = state.session ? state.session.id : null;
  const others = found.filter((a) => a.session_id !== shown);
  const list = $("approval-list");
  const decided = [...list.querySelectorAll(":scope > li.decided")];
  list.replaceChildren(...decided);
  for (const a of others) {
    const mine = state.sessions.find((s) => s.id === a.session_id);
    const what = el("span", {}, el("span", { "aria-hidden": "true", text: "✋ " }), el("code", { text: a.call.tool }), " in ", mine ? "“" + (mine.title || "New chat") + "”" : "a chat of " + a.template);
    if (mine) {
      list.append(el("li", {}, el("button", { type: "button", class: "open-approval", onclick: () => openSession(mine) }, what, el("span", { class: "when", text: "open the chat to decide" }))));
    } else {
      const item = el("li", {}, what);
      approvalCard(a, "pending", item);
      list.append(item);
    }
  }
  $("approvals").hidden = others.length === 0 && decided.length === 0;
  $("approvals-count").textContent = String(others.length);
  for (const button of $("session-list").querySelectorAll("button[data-session]")) {
    const waits = found.some((a) => a.session_id === button.dataset.session);
    button.classList.toggle("waiting", waits);
    const badge = button.querySelector(".badge");
    if (badge) badge.hidden = !waits;
  }
  return found;
}

// Stop the answer being made (the button, or Esc): it ends `terminated`, what was shown is kept.
// The stop and the message are two requests in flight: a stop pressed at once may reach the server
// before the turn it stops has started (`stopped: false`), so it is asked again until the server has
// stopped the turn or the turn is over, a few seconds at most.
const STOP_TRIES = 25;
const STOP_RETRY_MS = 200;

async function stopTurn() {
  const session = state.turning;
  if (!session) return;
  for (let tries = 0; tries < STOP_TRIES && state.turning === session; tries++) {
    try {
      const answer = await postJSON("/v1/sessions/" + encodeURIComponent(session.id) + "/stop", {});
      if (answer.stopped) return;
    } catch (err) {
      status(err.message);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, STOP_RETRY_MS));
  }
}

// Keep the newest part of the chat in view as it grows.
function follow(node) {
  node.scrollIntoView({ block: "nearest" });
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy || !state.session;
  $("message").disabled = !state.session;
  $("log").setAttribute("aria-busy", busy ? "true" : "false");
}

// A transcript read: what was said, the tool calls and their results with their visual blocks, the calls
// that asked for a person (a card: still waiting when `pending`, GET /v1/approvals, lists it).
function showTranscript(records, pending) {
  const rows = new Map();
  const waiting = new Set(pending.map((a) => cardKey(a.run_id, a.call.id)));
  for (const r of records) {
    const meta = r.meta || {};
    if (r.kind === "user") userMessage(r.content);
    else if (r.kind === "agent") answerBox().innerHTML = markdown(r.content);
    else if (r.kind === "tool_call") rows.set(meta.id, toolRow(meta.tool, r.content));
    else if (r.kind === "tool_result") fillToolRow(rows.get(meta.id) || toolRow(meta.tool, ""), { content: r.content, success: meta.success, visual: meta.visual, warnings: meta.visual_warnings });
    else if (r.kind === "notice") line("notice", r.content);
    else if (r.kind === "approval") {
      const approval = { run_id: meta.run_id, call: { id: meta.id, tool: meta.tool, args: meta.args }, question: r.content, expires_at: meta.expires_at };
      const waits = waiting.has(cardKey(meta.run_id, meta.id));
      approvalCard(approval, waits ? "pending" : "closed");
      if (waits && rows.has(meta.id)) rows.get(meta.id).querySelector(".state").textContent = " waiting for your approval…";
    } else if (r.kind === "approval_decision") {
      const card = findCard(null, meta.id);
      if (card) card.decided(meta.approved ? "approved" : "denied", r.content);
    } else if (r.kind === "warning") line("warning", "⚠ " + r.content);
    else if (r.kind === "error") line("error", "✖ " + r.content);
  }
}

// -- sessions ------------------------------------------------------------------------------------

// Newest first, each by its title (the server's: the first message, shortened), then template and date.
async function loadSessions() {
  state.sessions = await getJSON("/v1/sessions");
  const list = $("session-list");
  list.replaceChildren();
  for (const s of state.sessions.slice().reverse()) {
    const current = state.session && state.session.id === s.id;
    if (current) showTitle(s);
    const when = s.template + " · " + new Date(s.created_at).toLocaleString();
    const button = el(
      "button",
      { type: "button", "aria-current": current ? "true" : null, title: s.title || null, "data-session": s.id, onclick: () => openSession(s) },
      el("span", { class: "title", text: s.title || "New chat" }),
      el("span", { class: "when", text: when }),
      el("span", { class: "badge", hidden: !state.pending.some((a) => a.session_id === s.id), text: "✋ waits for your decision" }),
    );
    list.append(el("li", {}, button));
  }
}

function showTitle(session) {
  $("chat-title").textContent = session.title || "Chat with " + session.template;
}

// The compose box opens only once the transcript is shown, so a message cannot race its own history.
async function openSession(session) {
  if (state.following) state.following.abort(); // the other chat's run is no longer shown
  state.following = null;
  state.session = session;
  showTitle(session);
  $("log").replaceChildren();
  state.cards.clear();
  setBusy(true);
  let waits = null;
  try {
    const [records] = await Promise.all([
      getJSON("/v1/sessions/" + encodeURIComponent(session.id) + "/messages"),
      loadSessions(),
      loadTools(),
    ]);
    const pending = (await loadApprovals()).filter((a) => a.session_id === session.id);
    if (state.session !== session) return; // another chat was opened meanwhile
    showTranscript(records, pending);
    for (const a of pending) approvalCard(a, "pending"); // at its place, or else at the end
    // read on, unless this page reads the run already (its turn's own stream)
    if (pending.length && state.turning !== session) waits = { run: pending[0].run_id, after: records.length ? String(records[records.length - 1].id) : "0" };
  } catch (err) {
    line("error", "✖ " + err.message);
  }
  setBusy(false);
  if (waits) {
    followRun(session, waits.run, waits.after); // the answer streams in once it is decided
    const card = findCard(waits.run, state.pending.find((a) => a.run_id === waits.run).call.id);
    if (card) card.node.querySelector("button.approve").focus();
  } else $("message").focus();
}

// The picker shows names; the chosen template's description goes under it (an option as long as its
// description made the picker, and the column, as wide as the description).
async function loadTemplates() {
  const templates = await getJSON("/v1/templates");
  const select = $("template");
  const describe = () => {
    const chosen = templates.find((t) => t.name === select.value);
    $("template-description").textContent = (chosen && chosen.description) || "";
  };
  select.replaceChildren(...templates.map((t) => el("option", { value: t.name, title: t.description || null, text: t.name })));
  if (!templates.length) select.append(el("option", { value: "", text: "no templates load (see agentkernel check)" }));
  select.onchange = describe;
  describe();
  // disabled in the page as served: a click before the templates came would be lost on an empty picker
  $("new-chat-button").disabled = !templates.length;
}

// -- scheduled jobs (cron) -------------------------------------------------------------------------

// A moment of the API (RFC 3339, UTC) in the reader's own time; "—" for none.
const when = (moment) => (moment ? new Date(moment).toLocaleString() : "—");

function timingText(timing) {
  if (timing.interval_secs !== undefined) return "every " + timing.interval_secs + " s";
  if (timing.oneshot_at !== undefined) return "once, at " + when(timing.oneshot_at);
  return "on " + timing.schedule + " (" + timing.timezone + ")";
}

function jobItem(job) {
  const next = job.done ? "done" : job.running ? "running now" : when(job.next_run);
  const last = job.last_run ? when(job.last_run) + (job.last_ok ? " ✓ ok" : " ✖ failed") : "never";
  const cancel = el("button", { type: "button", class: "cancel-job", "aria-label": "Cancel " + job.name, text: "Cancel" });
  cancel.addEventListener("click", () => cancelJob(job.name, cancel));
  return el(
    "li",
    { class: "job" + (job.last_ok === false ? " failed" : ""), "data-job": job.name },
    el("strong", { text: job.name }),
    el("span", { class: "quiet", text: job.template + " · " + timingText(job.timing) }),
    el("span", { class: "next", text: "next: " + next }),
    el("span", { class: "last", text: "last: " + last + " · runs: " + job.runs }),
    job.last_error ? el("span", { class: "error", text: job.last_error }) : null,
    cancel,
  );
}

// The user's jobs (GET /v1/cron): made by scripts, so looked at again after each tool run and turn.
async function loadJobs() {
  const jobs = await getJSON("/v1/cron");
  const list = $("job-list");
  list.replaceChildren(...jobs.map(jobItem));
  if (!jobs.length) list.append(el("li", { class: "quiet", text: "no scheduled jobs" }));
}

async function cancelJob(name, button) {
  button.disabled = true;
  try {
    await api("DELETE", "/v1/cron/" + encodeURIComponent(name));
    status("cancelled " + name);
  } catch (err) {
    status(err.status === 404 ? name + " was already gone" : err.message);
  }
  await loadJobs().catch((err) => status(err.message));
}

// -- the tools panel -----------------------------------------------------------------------------

async function loadTools() {
  const query = state.session ? "?template=" + encodeURIComponent(state.session.template) : "";
  state.tools = await getJSON("/v1/tools" + query);
  const list = $("tool-list");
  list.replaceChildren();
  for (const tool of state.tools) {
    const icon = (tool.ui && tool.ui.icon) || "🔧";
    list.append(el("li", {}, el("button", { type: "button", class: "tool-pick", "data-tool": tool.name, onclick: () => showToolForm(tool) }, el("span", { "aria-hidden": "true", text: icon + " " }), tool.name)));
  }
  if (!state.tools.length) list.append(el("li", { class: "quiet", text: "no tools" }));
}

// One form field per property of the tool's JSON Schema; `read` gives its value back as JSON.
function schemaField(name, schema, required) {
  const id = "arg-" + name;
  const label = el("label", { for: id, text: name + (required ? " *" : "") });
  const hint = schema.description ? el("small", { class: "quiet", id: id + "-hint", text: schema.description }) : null;
  const described = hint ? id + "-hint" : null;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  let input;
  let read;
  if (Array.isArray(schema.enum)) {
    input = el("select", { id, "aria-describedby": described }, ...(required ? [] : [el("option", { value: "", text: "—" })]),
      ...schema.enum.map((v, i) => el("option", { value: String(i), text: cellText(v) })));
    read = () => (input.value === "" ? undefined : schema.enum[Number(input.value)]);
  } else if (type === "boolean") {
    input = el("input", { id, type: "checkbox", "aria-describedby": described, checked: schema.default === true });
    read = () => input.checked;
  } else if (type === "integer" || type === "number") {
    input = el("input", { id, type: "number", step: type === "integer" ? "1" : "any", required, "aria-describedby": described, value: schema.default });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else if (type === "array" && schema.items && schema.items.type === "string") {
    input = el("textarea", { id, rows: "3", placeholder: "one per line", required, "aria-describedby": described });
    read = () => input.value.split("\n").filter((s) => s !== "");
  } else if (type === "string" || type === undefined) {
    input = el("input", { id, type: "text", required, "aria-describedby": described, value: schema.default });
    read = () => (input.value === "" && !required ? undefined : input.value);
  } else {
    input = el("textarea", { id, rows: "3", placeholder: "JSON " + type, required, "aria-describedby": described });
    read = () => (input.value.trim() === "" ? undefined : JSON.parse(input.value));
  }
  const box = type === "boolean" ? el("div", { class: "field check" }, input, label, hint) : el("div", { class: "field" }, label, input, hint);
  return { box, read, name };
}

function showToolForm(tool) {
  const schema = tool.parameters || {};
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {}).map(([name, s]) => schemaField(name, s || {}, required.has(name)));
  const form = $("tool-form");
  const output = $("tool-output");
  $("tool-run").hidden = false;
  $("tool-run-title").textContent = ((tool.ui && tool.ui.icon) || "🔧") + " " + tool.name;
  $("tool-description").textContent = tool.description || "";
  output.replaceChildren();
  const run = el("button", { type: "submit", text: "Run " + tool.name });
  form.replaceChildren(...fields.map((f) => f.box), run);
  form.onsubmit = async (event) => {
    event.preventDefault();
    const args = {};
    try {
      for (const f of fields) {
        const value = f.read();
        if (value !== undefined) args[f.name] = value;
      }
    } catch (err) {
      output.replaceChildren(el("p", { class: "error", text: "✖ " + err.message }));
      return;
    }
    run.disabled = true;
    output.replaceChildren(el("p", { class: "quiet", text: "running…" }));
    try {
      const body = { args };
      if (state.session) body.session = state.session.id;
      output.replaceChildren(renderResult(await postJSON("/v1/tools/" + encodeURIComponent(tool.name) + "/run", body)));
    } catch (err) {
      output.replaceChildren(el("p", { class: "error", text: "✖ " + err.message }));
    } finally {
      run.disabled = false;
    }
    loadJobs().catch((err) => status(err.message)); // the tool may have scheduled or cancelled a job
  };
  (fields.length ? form.querySelector("input, select, textarea") : run).focus();
}

// -- the LLM's status line (GET /v1/llm/status) --------------------------------------------------

let llmPoll = 0;

// Read at load, on "Check again", after a turn failed for want of an LLM, and every LLM_POLL_MS while
// the LLM does not answer; hidden once it does.
async function checkLLM() {
  clearTimeout(llmPoll);
  const box = $("llm-status");
  let found;
  try {
    found = await getJSON("/v1/llm/status");
  } catch (err) {
    if (err.status !== 401) status("LLM status: " + err.message); // 401: the token box says it
    return;
  }
  if (!found.problem) {
    box.hidden = true;
    return;
  }
  $("llm-status-title").textContent = found.ok ? "LLM:" : "The chat cannot answer:";
  const said = [found.problem, found.hint, found.fix ? "To fix: " + found.fix : null].filter(Boolean);
  $("llm-status-text").replaceChildren(...said.flatMap((s) => [...withCode(sentence(s)), " "]));
  box.hidden = false;
  if (!found.ok) llmPoll = setTimeout(checkLLM, LLM_POLL_MS);
}

// -- start ---------------------------------------------------------------------------------------

async function start() {
  $("token").value = localStorage.getItem(TOKEN_KEY) || "";
  $("token-form").onsubmit = (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
    status(token ? "token saved in this browser" : "token removed");
    start();
  };
  $("tools-toggle").onclick = () => {
    const open = $("tools").hidden;
    $("tools").hidden = !open;
    $("tools-toggle").setAttribute("aria-expanded", String(open));
  };
  $("new-chat").onsubmit = async (event) => {
    event.preventDefault();
    try {
      const made = await postJSON("/v1/sessions", { template: $("template").value });
      await openSession(made);
    } catch (err) {
      status(err.message);
    }
  };
  $("compose").onsubmit = (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text || state.busy || !state.session) return;
    $("message").value = "";
    sendMessage(text);
  };
  $("stop").onclick = stopTurn;
  $("jobs-refresh").onclick = () => loadJobs().catch((err) => status(err.message));
  $("llm-recheck").onclick = checkLLM;
  document.onkeydown = (event) => {
    if (event.key === "Escape" && state.turning) stopTurn();
  };
  $("message").onkeydown = (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("compose").requestSubmit();
    }
  };
  checkLLM();
  try {
    await Promise.all([loadTemplates(), loadSessions(), loadTools(), loadJobs()]);
    await loadApprovals();
    status("");
  } catch (err) {
    status(err.message);
    if (err.status === 401) $("token").focus();
  }
}

document.addEventListener("DOMContentLoaded", start);
