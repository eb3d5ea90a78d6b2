// chat.js: the chat page. Talks to this server's OpenAI API (/v1/chat/completions, streamed as
// SSE); keeps conversations and settings in the browser's localStorage; shows each answer's
// time to first token and decode speed.
//
// Test contract: document.body.dataset.state is "loading", "idle" or "generating"; assistant
// messages are .msg.assistant with .msg-body and .msg-stats; errors are .msg.error.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const STORE_CONVERSATIONS = "llmserve.conversations";
  const STORE_CURRENT = "llmserve.current";
  const STORE_SETTINGS = "llmserve.settings";
  const STORE_KEY = "llmserve.apiKey";
  // Settings inputs by id -> how their value goes into the request.
  const NUMBER_SETTINGS = {
    temperature: "temperature",
    "top-p": "top_p",
    "top-k": "top_k",
    "min-p": "min_p",
    "max-tokens": "max_tokens",
    seed: "seed",
  };
  const TEXT_SETTINGS = ["system-prompt", "stop-seqs", "json-schema", "tools"];

  const state = {
    model: "",
    conversations: [],
    currentId: null,
    generation: null,  // {controller, conversation, message} while a request runs
  };

  // ---- storage --------------------------------------------------------------------------------
  // Storage may be blocked (privacy settings) or full: the page works without it.
  function readItem(key) {
    try {
      return localStorage.getItem(key);
    } catch {
      return null;
    }
  }

  function writeItem(key, value) {
    try {
      localStorage.setItem(key, value);
    } catch (e) {
      setStatus("Could not save to the browser's storage: " + e.message);
    }
  }

  function readJson(key, fallback) {
    try {
      const v = JSON.parse(readItem(key));
      return v === null || v === undefined ? fallback : v;
    } catch {
      return fallback;
    }
  }

  // Stored data may be old or edited by hand: keep only well-formed conversations and messages.
  function sanitizeConversations(list) {
    if (!Array.isArray(list)) return [];
    const out = [];
    for (const c of list) {
      if (!c || typeof c.id !== "string" || !Array.isArray(c.messages)) continue;
      const messages = c.messages
        .filter((m) => m && ["user", "assistant", "error"].includes(m.role) &&
                       typeof m.content === "string")
        .map((m) => ({
          role: m.role,
          content: m.content,
          reasoning: typeof m.reasoning === "string" ? m.reasoning : "",
          toolCalls: (Array.isArray(m.toolCalls) ? m.toolCalls : [])
            .filter((t) => t && typeof t === "object")
            .map((t) => ({ id: String(t.id || ""), name: String(t.name || ""),
                           arguments: String(t.arguments || "") })),
          stats: typeof m.stats === "string" ? m.stats : "",
          structured: m.structured === true,
        }));
      out.push({ id: c.id, title: String(c.title || "Chat"), messages });
    }
    return out;
  }

  function saveConversations() {
    writeItem(STORE_CONVERSATIONS, JSON.stringify(state.conversations));
    writeItem(STORE_CURRENT, state.currentId || "");
  }

  function loadSettings() {
    const saved = readJson(STORE_SETTINGS, {});
    for (const id of [...Object.keys(NUMBER_SETTINGS), ...TEXT_SETTINGS]) {
      if (typeof saved[id] === "string") $(id).value = saved[id];
    }
    $("api-key").value = readItem(STORE_KEY) || "";
  }

  function saveSettings() {
    const out = {};
    for (const id of [...Object.keys(NUMBER_SETTINGS), ...TEXT_SETTINGS]) out[id] = $(id).value;
    writeItem(STORE_SETTINGS, JSON.stringify(out));
    writeItem(STORE_KEY, $("api-key").value);
  }

  // ---- conversations --------------------------------------------------------------------------
  function current() {
    return state.conversations.find((c) => c.id === state.currentId) || null;
  }

  function newConversation() {
    const c = { id: "c" + Date.now().toString(36) + Math.random().toString(36).slice(2, 6),
                title: "New chat", messages: [] };
    state.conversations.unshift(c);
    state.currentId = c.id;
    saveConversations();
    renderAll();
    $("prompt").focus();
    return c;
  }

  function renderConversationList() {
    const list = $("conversations");
    list.replaceChildren();
    for (const c of state.conversations) {
      const li = document.createElement("li");
      if (c.id === state.currentId) li.className = "current";
      const open = document.createElement("button");
      open.type = "button";
      open.className = "open-conv";
      open.textContent = c.title;
      open.title = c.title;
      if (c.id === state.currentId) open.setAttribute("aria-current", "true");
      open.addEventListener("click", () => {
        if (state.generation) return;
        state.currentId = c.id;
        saveConversations();
        renderAll();
        closeSidebar();
      });
      const del = document.createElement("button");
      del.type = "button";
      del.className = "delete-conv";
      del.textContent = "\u00d7";
      del.setAttribute("aria-label", "Delete conversation " + c.title);
      del.addEventListener("click", () => {
        if (state.generation && state.generation.conversation === c) return;
        state.conversations = state.conversations.filter((x) => x !== c);
        if (state.currentId === c.id) state.currentId = state.conversations[0]?.id || null;
        saveConversations();
        renderAll();
      });
      li.append(open, del);
      list.appendChild(li);
    }
  }

  // ---- rendering messages ---------------------------------------------------------------------
  function renderAll() {
    renderConversationList();
    renderMessages();
  }

  function renderMessages() {
    const box = $("messages");
    box.replaceChildren();
    const c = current();
    if (!c) return;
    c.messages.forEach((m, index) => box.appendChild(messageElement(c, m, index)));
    box.scrollTop = box.scrollHeight;
  }

  function messageElement(conversation, m, index) {
    const el = document.createElement("article");
    el.className = "msg " + m.role;
    el.dataset.index = String(index);
    const role = document.createElement("div");
    role.className = "msg-role";
    role.textContent = m.role === "error" ? "Error" : m.role === "user" ? "You" : "Assistant";
    el.appendChild(role);
    fillMessage(el, m);
    const actions = document.createElement("div");
    actions.className = "msg-actions";
    const last = index === conversation.messages.length - 1;
    if (m.role === "user") {
      actions.appendChild(actionButton("Edit", "edit", () => startEdit(conversation, index, el)));
    }
    if ((m.role === "assistant" || m.role === "error") && last) {
      actions.appendChild(actionButton("Regenerate", "regenerate", () => regenerate(conversation)));
    }
    if (actions.childNodes.length) el.appendChild(actions);
    return el;
  }

  function actionButton(label, cls, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = cls;
    b.textContent = label;
    b.addEventListener("click", () => {
      if (!state.generation) onClick();
    });
    return b;
  }

  // Fills (or refills, while streaming) a message's reasoning, body, tool calls and stats. Should
  // rendering fail on some input, the message shows as plain text rather than break the page.
  function fillMessage(el, m) {
    try {
      fillMessageParts(el, m);
    } catch (e) {
      console.warn("message shown as plain text:", e);
      clearParts(el);
      const body = document.createElement("div");
      body.className = "msg-body plain";
      body.textContent = m.content;
      el.insertBefore(body, el.querySelector(":scope > .msg-actions"));
    }
  }

  // Removes what fillMessage adds (the role line and the action buttons stay).
  function clearParts(el) {
    for (const old of el.querySelectorAll(":scope > .reasoning, :scope > .msg-body, " +
                                          ":scope > .tool-call, :scope > .msg-stats")) {
      old.remove();
    }
  }

  function fillMessageParts(el, m) {
    clearParts(el);
    const anchor = el.querySelector(":scope > .msg-actions");
    const add = (node) => el.insertBefore(node, anchor);
    if (m.reasoning) {
      const details = document.createElement("details");
      details.className = "reasoning";
      details.open = !m.content;
      const summary = document.createElement("summary");
      summary.textContent = "Reasoning";
      const body = document.createElement("div");
      body.className = "msg-body";
      body.appendChild(LlmsMarkdown.render(m.reasoning));
      details.append(summary, body);
      add(details);
    }
    const body = document.createElement("div");
    body.className = "msg-body";
    if (m.role === "assistant") {
      body.appendChild(LlmsMarkdown.render(prettyIfJson(m.content, m.structured)));
    } else {
      body.classList.add("plain");
      body.textContent = m.content;
    }
    add(body);
    for (const call of m.toolCalls || []) add(toolCallElement(call));
    if (m.stats) {
      const stats = document.createElement("div");
      stats.className = "msg-stats";
      stats.textContent = m.stats;
      add(stats);
    }
  }

  // A structured answer is JSON: show it indented, as a code block.
  function prettyIfJson(text, structured) {
    if (!structured) return text;
    try {
      return "```json\n" + JSON.stringify(JSON.parse(text), null, 2) + "\n```";
    } catch {
      return text;
    }
  }

  function toolCallElement(call) {
    const box = document.createElement("div");
    box.className = "tool-call";
    const name = document.createElement("div");
    name.className = "tool-call-name";
    name.textContent = "\u2192 " + (call.name || "(tool)") + "()";
    const args = document.createElement("pre");
    let text = call.arguments || "";
    try {
      text = JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      // still streaming, or not JSON: show as sent
    }
    args.textContent = text;
    box.append(name, args);
    return box;
  }

  function startEdit(conversation, index, el) {
    const m = conversation.messages[index];
    const area = document.createElement("textarea");
    area.className = "edit-area";
    area.value = m.content;
    area.setAttribute("aria-label", "Edit message");
    const save = actionButton("Save & send", "save-edit", () => {
      const text = area.value.trim();
      if (!text) return;
      conversation.messages = conversation.messages.slice(0, index);
      conversation.messages.push({ role: "user", content: text });
      saveConversations();
      renderMessages();
      generate(conversation);
    });
    save.classList.add("primary");
    const cancel = actionButton("Cancel", "cancel-edit", () => renderMessages());
    const actions = document.createElement("div");
    actions.className = "msg-actions";
    actions.append(save, cancel);
    el.replaceChildren(el.firstChild, area, actions);
    area.addEventListener("keydown", (e) => {
      if (e.key === "Escape") renderMessages();
    });
    area.focus();
  }

  function regenerate(conversation) {
    while (conversation.messages.length && conversation.messages.at(-1).role !== "user") {
      conversation.messages.pop();
    }
    if (!conversation.messages.length) return;
    saveConversations();
    renderMessages();
    generate(conversation);
  }

  // ---- requests -------------------------------------------------------------------------------
  function authHeaders() {
    const key = $("api-key").value.trim();
    return key ? { Authorization: "Bearer " + key } : {};
  }

  // The request body from the settings; throws Error with a message for a bad setting.
  function requestBody(conversation) {
    const messages = [];
    const system = $("system-prompt").value.trim();
    if (system) messages.push({ role: "system", content: system });
    const turns = conversation.messages.filter((m) => m.role !== "error");
    turns.forEach((m, i) => {
      // A user message whose request failed (the next turn is the user's again) is left out, so
      // roles alternate as chat templates require.
      if (m.role === "user" && turns[i + 1]?.role !== "user") {
        messages.push({ role: "user", content: m.content });
      }
      if (m.role === "assistant") {
        const msg = { role: "assistant", content: m.content };
        if (m.toolCalls && m.toolCalls.length) {
          msg.tool_calls = m.toolCalls.map((t, i) => ({
            id: t.id || "call_" + i, type: "function",
            function: { name: t.name, arguments: t.arguments } }));
        }
        messages.push(msg);
      }
    });
    const body = { messages, stream: true, stream_options: { include_usage: true } };
    if (state.model) body.model = state.model;
    for (const [id, param] of Object.entries(NUMBER_SETTINGS)) {
      const raw = $(id).value.trim();
      if (raw === "") continue;
      const v = Number(raw);
      if (!Number.isFinite(v)) throw new Error(`${param}: '${raw}' is not a number`);
      body[param] = v;
    }
    const stops = $("stop-seqs").value.split("\n").filter((s) => s !== "");
    if (stops.length) body.stop = stops;
    const schema = $("json-schema").value.trim();
    if (schema) {
      body.response_format = { type: "json_schema",
                               json_schema: { name: "answer", schema: parseSetting(schema, "JSON Schema") } };
    }
    const tools = $("tools").value.trim();
    if (tools) body.tools = parseSetting(tools, "Tools");
    return body;
  }

  function parseSetting(text, what) {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`${what} setting is not JSON: ${e.message}`);
    }
  }

  async function send() {
    if (state.generation) return;
    const text = $("prompt").value.trim();
    if (!text) return;
    const conversation = current() || newConversation();
    if (!conversation.messages.length) conversation.title = text.slice(0, 60);
    conversation.messages.push({ role: "user", content: text });
    $("prompt").value = "";
    saveConversations();
    renderAll();
    await generate(conversation);
  }

  // Streams an answer to the conversation's last user message into a new assistant message.
  async function generate(conversation) {
    let body;
    try {
      body = requestBody(conversation);
    } catch (e) {
      addError(conversation, e.message);
      return;
    }
    const message = { role: "assistant", content: "", reasoning: "", toolCalls: [],
                      structured: !!body.response_format };
    conversation.messages.push(message);
    const index = conversation.messages.length - 1;
    const controller = new AbortController();
    state.generation = { controller, conversation, message };
    const started = performance.now();
    let firstTokenAt = 0;
    let chunks = 0;
    let usage = null;
    let finish = "";
    let scheduled = false;
    const repaint = () => {
      if (scheduled) return;
      scheduled = true;
      requestAnimationFrame(() => {
        scheduled = false;
        // Looked up each time: the list may have been redrawn since (another conversation
        // deleted), and another conversation may be on screen.
        if (current() !== conversation) return;
        const el = $("messages").querySelector(`:scope > .msg[data-index="${index}"]`);
        if (el) fillMessage(el, message);
        const box = $("messages");
        box.scrollTop = box.scrollHeight;
      });
    };
    try {
      setGenerating(true);
      renderMessages();
      const response = await fetch("/v1/chat/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json", ...authHeaders() },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) throw await httpError(response);
      let done = false;
      for await (const event of sseEvents(response.body, () => { done = true; })) {
        if (event.error) throw new Error(event.error.message || "the server ended the request");
        if (event.usage) usage = event.usage;
        const choice = event.choices && event.choices[0];
        if (!choice) continue;
        const delta = choice.delta || {};
        if (delta.content || delta.reasoning_content || delta.tool_calls) {
          if (!firstTokenAt) firstTokenAt = performance.now();
          chunks += 1;
        }
        if (delta.content) message.content += delta.content;
        if (delta.reasoning_content) message.reasoning += delta.reasoning_content;
        for (const t of delta.tool_calls || []) mergeToolCall(message.toolCalls, t);
        if (choice.finish_reason) finish = choice.finish_reason;
        repaint();
      }
      if (!done) throw new Error("the connection closed before the answer was complete");
      message.stats = statsLine(started, firstTokenAt, performance.now(), usage, chunks, finish);
    } catch (e) {
      if (e.name === "AbortError") {
        message.stats = statsLine(started, firstTokenAt, performance.now(), usage, chunks, "stopped");
      } else {
        if (!message.content && !message.reasoning && !message.toolCalls.length) {
          conversation.messages.pop();
        } else {
          message.stats = statsLine(started, firstTokenAt, performance.now(), usage, chunks, "error");
        }
        addError(conversation, e.message, e.status);
      }
    } finally {
      state.generation = null;
      setGenerating(false);
      saveConversations();
      if (current() === conversation) renderMessages();
      renderConversationList();
    }
  }

  function mergeToolCall(calls, delta) {
    const i = Number.isInteger(delta.index) ? delta.index : calls.length;
    calls[i] = calls[i] || { id: "", name: "", arguments: "" };
    if (delta.id) calls[i].id = delta.id;
    if (delta.function?.name) calls[i].name += delta.function.name;
    if (delta.function?.arguments) calls[i].arguments += delta.function.arguments;
  }

  function statsLine(started, firstTokenAt, ended, usage, chunks, finish) {
    const parts = [];
    if (firstTokenAt) parts.push(`TTFT ${Math.round(firstTokenAt - started)} ms`);
    const tokens = usage?.completion_tokens ?? chunks;
    if (firstTokenAt && tokens > 1 && ended > firstTokenAt) {
      parts.push(`${((tokens - 1) / ((ended - firstTokenAt) / 1000)).toFixed(1)} tok/s`);
    }
    parts.push(`${tokens} token${tokens === 1 ? "" : "s"}`);
    if (finish) parts.push(finish);
    return parts.join(" \u00b7 ");
  }

  // The server's OpenAI-shaped error as an Error (with .status); asks for a key on 401.
  async function httpError(response) {
    let message = `HTTP ${response.status}`;
    try {
      const j = await response.json();
      if (j.error?.message) message = j.error.message;
    } catch {
      // not JSON: keep the status line
    }
    const e = new Error(message);
    e.status = response.status;
    return e;
  }

  function addError(conversation, text, status) {
    conversation.messages.push({ role: "error", content: text });
    saveConversations();
    renderMessages();
    if (status === 401) askForKey(text);
  }

  // Yields each SSE `data:` payload, parsed; calls onDone at `[DONE]`. Events end at a blank
  // line (LF, CRLF or CR endings); an event the stream ends in without one still counts.
  async function* sseEvents(stream, onDone) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    const BOUNDARY = /\r\n\r\n|\n\n|\r\r/;
    let buffer = "";
    const payload = (block) =>
      block.split(/\r\n|\r|\n/).filter((l) => l.startsWith("data:"))
           .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          buffer += decoder.decode();
        } else {
          buffer += decoder.decode(value, { stream: true });
        }
        let m;
        while ((m = BOUNDARY.exec(buffer))) {
          const data = payload(buffer.slice(0, m.index));
          buffer = buffer.slice(m.index + m[0].length);
          if (!data) continue;
          if (data === "[DONE]") {
            onDone();
            return;
          }
          yield JSON.parse(data);
        }
        if (done) {
          const data = payload(buffer);
          if (data === "[DONE]") onDone();
          else if (data) yield JSON.parse(data);
          return;
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  function stop() {
    if (state.generation) state.generation.controller.abort();
  }

  // ---- page state -----------------------------------------------------------------------------
  function setGenerating(on) {
    document.body.dataset.state = on ? "generating" : "idle";
    $("send").hidden = on;
    $("stop").hidden = !on;
    if (on) $("stop").focus();
    else if (document.activeElement === document.body || document.activeElement === $("stop")) {
      $("prompt").focus();
    }
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  function askForKey(message) {
    $("api-key-message").textContent = message || "This server needs an API key.";
    $("api-key-message").classList.toggle("error", !!message);
    $("api-key-input").value = $("api-key").value;
    const dialog = $("api-key-dialog");
    if (!dialog.open) dialog.showModal();
    $("api-key-input").focus();
  }

  async function useKey() {
    $("api-key").value = $("api-key-input").value.trim();
    saveSettings();
    $("api-key-dialog").close();
    await loadModel();
  }

  // Asks /v1/models for the served model's name (and so learns whether a key is needed).
  async function loadModel() {
    try {
      const response = await fetch("/v1/models", { headers: authHeaders() });
      if (response.status === 401) {
        const e = await httpError(response);
        setStatus("This server needs an API key.");
        askForKey($("api-key").value ? e.message : "");
        return;
      }
      if (!response.ok) throw await httpError(response);
      const j = await response.json();
      state.model = j.data?.[0]?.id || "";
      $("model-name").textContent = state.model;
      setStatus("");
    } catch (e) {
      setStatus("Cannot reach the server: " + e.message);
    }
  }

  function toggle(buttonId, panelId, open) {
    const panel = $(panelId);
    const show = open ?? panel.hidden;
    panel.hidden = !show;
    $(buttonId).setAttribute("aria-expanded", String(show));
    return show;
  }

  function closeSidebar() {
    $("sidebar").classList.remove("open");
    $("sidebar-toggle").setAttribute("aria-expanded", "false");
  }

  function init() {
    state.conversations = sanitizeConversations(readJson(STORE_CONVERSATIONS, []));
    state.currentId = readItem(STORE_CURRENT) || state.conversations[0]?.id || null;
    loadSettings();
    renderAll();
    $("send").addEventListener("click", send);
    $("stop").addEventListener("click", stop);
    $("new-chat").addEventListener("click", () => {
      if (!state.generation) newConversation();
      closeSidebar();
    });
    $("prompt").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        send();
      }
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && state.generation) {
        e.preventDefault();
        stop();
      }
    });
    $("settings-toggle").addEventListener("click", () => {
      if (toggle("settings-toggle", "settings")) $("system-prompt").focus();
    });
    $("settings-close").addEventListener("click", () => {
      toggle("settings-toggle", "settings", false);
      $("settings-toggle").focus();
    });
    $("settings").addEventListener("input", saveSettings);
    $("sidebar-toggle").addEventListener("click", () => {
      const open = $("sidebar").classList.toggle("open");
      $("sidebar-toggle").setAttribute("aria-expanded", String(open));
    });
    $("api-key-save").addEventListener("click", useKey);
    $("api-key-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter") useKey();
    });
    $("api-key-cancel").addEventListener("click", () => $("api-key-dialog").close());
    $("messages").addEventListener("click", (e) => {
      const copy = e.target.closest(".copy-code");
      if (!copy) return;
      const code = copy.closest(".code-block").querySelector("code").textContent;
      navigator.clipboard?.writeText(code).then(
        () => { copy.textContent = "Copied"; },
        () => { copy.textContent = "Copy failed"; });
    });
    document.body.dataset.state = "idle";
    $("prompt").focus();
    loadModel();
  }

  init();
})();
