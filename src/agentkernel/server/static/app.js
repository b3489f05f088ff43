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

const state = { session: null, sessions: [], tools: [], busy: false, turning: null };
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

// One turn: POST the message, read `event: TYPE` / `data: JSON` frames as they come.
async function sendMessage(text) {
  const session = state.session;
  userMessage(text);
  setBusy(true);
  state.turning = session;
  $("stop").hidden = false;
  let answer = null;
  let buffer = "";
  let answered = false;
  let run = null; // the turn's run id (its first event), and the id of the last event shown
  let lastId = "0";
  let ended = false;
  const rows = new Map();
  // The answer so far is rendered once a frame, not once a token: each render parses all of it again
  // (marked, then DOMPurify), so a render per token made a long answer quadratic and froze the tab.
  let frameAsked = 0;
  const showAnswer = () => {
    if (frameAsked) cancelAnimationFrame(frameAsked);
    frameAsked = 0;
    if (!answer) return;
    answer.innerHTML = markdown(buffer);
    follow(answer);
  };
  const handle = (type, data) => {
    if (type === "run") {
      run = data.id;
    } else if (type === "token") {
      if (!answer) answer = answerBox();
      buffer += data.text;
      if (!frameAsked) frameAsked = requestAnimationFrame(showAnswer);
      answered = true;
    } else if (type === "reply") {
      if (frameAsked) cancelAnimationFrame(frameAsked);
      frameAsked = 0;
      if (!answer) answer = answerBox();
      buffer = data.content;
      answer.innerHTML = markdown(buffer);
      answered = true;
      answer = null;
      buffer = "";
    } else if (type === "notice") {
      line("notice", data.text);
    } else if (type === "tool_call") {
      showAnswer(); // the text before the call, whole, before the call's row
      answer = null;
      buffer = "";
      rows.set(data.id, toolRow(data.tool, data.args));
    } else if (type === "tool_result") {
      const row = rows.get(data.id) || toolRow(data.tool, "");
      fillToolRow(row, data);
    } else if (type === "warning") {
      line("warning", "⚠ " + (data.tool ? data.tool + ": " : "") + data.message);
    } else if (type === "error") {
      errorLine(data.message, !answered);
    } else if (type === "done") {
      ended = true;
      if (data.reason !== "job_done") line("notice", "turn ended: " + data.reason);
    }
  };
  const seen = (id) => {
    lastId = id;
  };
  try {
    const response = await api("POST", "/v1/sessions/" + encodeURIComponent(session.id) + "/messages", { content: text });
    if (!session.title) loadSessions().catch((err) => status(err.message)); // its first message named it
    try {
      await readFrames(response, handle, seen);
    } catch (err) {
      if (run === null) throw err; // no run to go back to
    }
    for (let tries = 0; run !== null && !ended && tries < RECONNECT_TRIES; tries++) {
      status("the answer's stream broke; reconnecting…");
      await new Promise((done) => setTimeout(done, tries ? RECONNECT_MS : 0));
      try {
        const again = await fetch("/v1/runs/" + encodeURIComponent(run) + "/events", {
          headers: { ...headers(false), "Last-Event-ID": lastId },
        });
        if (again.ok) await readFrames(again, handle, seen);
      } catch (err) {
        // the server is not back yet: the next try
      }
    }
    if (run !== null && !ended) throw new Error("the connection to the server was lost; the answer goes on there");
    if (lastId !== "0" && $("status").textContent.startsWith("the answer's stream broke")) status("");
  } catch (err) {
    showAnswer();
    errorLine(err.message, !answered);
  } finally {
    showAnswer();
    $("stop").hidden = true;
    state.turning = null;
    setBusy(false);
    $("message").focus();
    loadJobs().catch((err) => status(err.message)); // the agent's tools may have scheduled a job
  }
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

// A transcript read: what was said, the tool calls and their results with their visual blocks.
function showTranscript(records) {
  const rows = new Map();
  for (const r of records) {
    const meta = r.meta || {};
    if (r.kind === "user") userMessage(r.content);
    else if (r.kind === "agent") answerBox().innerHTML = markdown(r.content);
    else if (r.kind === "tool_call") rows.set(meta.id, toolRow(meta.tool, r.content));
    else if (r.kind === "tool_result") fillToolRow(rows.get(meta.id) || toolRow(meta.tool, ""), { content: r.content, success: meta.success, visual: meta.visual, warnings: meta.visual_warnings });
    else if (r.kind === "notice") line("notice", r.content);
    else if (r.kind === "warning") line("warning", "⚠ " + r.content);
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
      { type: "button", "aria-current": current ? "true" : null, title: s.title || null, onclick: () => openSession(s) },
      el("span", { class: "title", text: s.title || "New chat" }),
      el("span", { class: "when", text: when }),
    );
    list.append(el("li", {}, button));
  }
}

function showTitle(session) {
  $("chat-title").textContent = session.title || "Chat with " + session.template;
}

// The compose box opens only once the transcript is shown, so a message cannot race its own history.
async function openSession(session) {
  state.session = session;
  showTitle(session);
  $("log").replaceChildren();
  setBusy(true);
  try {
    const [records] = await Promise.all([
      getJSON("/v1/sessions/" + encodeURIComponent(session.id) + "/messages"),
      loadSessions(),
      loadTools(),
    ]);
    if (state.session !== session) return; // another chat was opened meanwhile
    showTranscript(records);
  } catch (err) {
    line("error", "✖ " + err.message);
  }
  setBusy(false);
  $("message").focus();
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
    status("");
  } catch (err) {
    status(err.message);
    if (err.status === 401) $("token").focus();
  }
}

document.addEventListener("DOMContentLoaded", start);
