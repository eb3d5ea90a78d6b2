// markdown.js: renders model output (Markdown) into DOM nodes, with light code highlighting.
//
// Model text is hostile input: this renderer never parses HTML. Every piece of text becomes a
// Text node (textContent), elements come only from a fixed list made with createElement, and a
// link keeps its href only for http(s) and mailto URLs. So `<script>` or `onerror=` in an answer
// shows as the characters it is. Incomplete input (a stream cut mid-block) renders as far as it
// goes: an unterminated code fence is code to the end.
"use strict";

(function () {
  // ---- inline: code spans, bold, italic, strike, links ------------------------------------
  const SAFE_URL = /^(https?:\/\/|mailto:)/i;
  const MAX_LINK_TEXT = 1000;

  function appendInline(parent, text) {
    let i = 0;
    let plain = "";
    // Positions of the next "]" and newline at or after a point, found once and reused, so a
    // long run of "[" costs linear time.
    const next = { bracket: -1, newline: -1 };
    const after = (what, ch, from) => {
      if (next[what] !== Infinity && next[what] < from) {
        const at = text.indexOf(ch, from);
        next[what] = at < 0 ? Infinity : at;
      }
      return next[what];
    };
    // "[" at i can open a link: the first "]" after it, at most MAX_LINK_TEXT on, is followed by
    // "(" on the same line.
    const linkCandidate = (at) => {
      const bracket = after("bracket", "]", at + 1);
      return bracket !== Infinity && bracket > at + 1 && bracket - at <= MAX_LINK_TEXT &&
             text[bracket + 1] === "(" &&
             after("newline", "\n", at + 1) > bracket;
    };
    const flush = () => {
      if (plain) parent.appendChild(document.createTextNode(plain));
      plain = "";
    };
    while (i < text.length) {
      const c = text[i];
      if (c === "\\" && i + 1 < text.length && /[\\`*_~\[\]()#>!|-]/.test(text[i + 1])) {
        plain += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "`") {
        const run = /^`+/.exec(text.slice(i))[0];
        const end = text.indexOf(run, i + run.length);
        if (end > 0) {
          flush();
          const code = document.createElement("code");
          code.textContent = text.slice(i + run.length, end).replace(/^ (.*) $/, "$1");
          parent.appendChild(code);
          i = end + run.length;
          continue;
        }
      }
      const emphasis = matchDelimited(text, i);
      if (emphasis) {
        flush();
        const el = document.createElement(emphasis.tag);
        appendInline(el, emphasis.inner);
        parent.appendChild(el);
        i = emphasis.end;
        continue;
      }
      if (c === "[" && linkCandidate(i)) {
        const end = text.indexOf(")", next.bracket);
        const link = end > 0 && end - next.bracket <= MAX_LINK_TEXT ? /^\[([^\]\n]+)\]\(([^()\s]+)\)$/.exec(text.slice(i, end + 1)) : null;
        if (link) {
          flush();
          if (SAFE_URL.test(link[2])) {
            const a = document.createElement("a");
            a.href = link[2];
            a.rel = "noopener noreferrer nofollow";
            a.target = "_blank";
            appendInline(a, link[1]);
            parent.appendChild(a);
          } else {
            parent.appendChild(document.createTextNode(link[0]));
          }
          i += link[0].length;
          continue;
        }
      }
      plain += c;
      i += 1;
    }
    flush();
  }

  // **bold**, __bold__, *italic*, _italic_, ~~strike~~ starting at text[i], or null.
  function matchDelimited(text, i) {
    const kinds = [
      ["**", "strong"],
      ["__", "strong"],
      ["~~", "del"],
      ["*", "em"],
      ["_", "em"],
    ];
    for (const [mark, tag] of kinds) {
      if (!text.startsWith(mark, i)) continue;
      const after = text[i + mark.length];
      if (after === undefined || /\s/.test(after)) continue;
      // Intra-word underscores (snake_case) are not emphasis.
      if (mark[0] === "_" && i > 0 && /\w/.test(text[i - 1])) continue;
      // The closing mark: the first of the next few that can close (a few, so a run of marks
      // stays linear). A code span is one piece: emphasis may hold it whole but never end inside.
      let end = i + mark.length;
      for (let tries = 0; tries < 4; ++tries) {
        end = text.indexOf(mark, end + 1);
        if (end < 0) break;
        if (/\s/.test(text[end - 1])) continue;
        if (mark[0] === "_" && /\w/.test(text[end + mark.length] || "")) continue;
        const inner = text.slice(i + mark.length, end);
        if ((inner.match(/`/g) || []).length % 2 === 1) continue;
        return { tag, inner, end: end + mark.length };
      }
    }
    return null;
  }

  // ---- code highlighting --------------------------------------------------------------------
  const KEYWORDS = {
    c: "auto break case char const constexpr continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while bool true false nullptr class namespace template typename public private protected virtual override new delete this using try catch throw include define",
    py: "False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield self print",
    js: "async await break case catch class const continue debugger default delete do else export extends false finally for function if import in instanceof let new null return super switch this throw true try typeof undefined var void while with yield interface type",
    rust: "as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while",
    go: "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false",
    sh: "if then else elif fi for while do done case esac function in return export local echo exit",
    sql: "select from where insert into values update set delete create table drop alter join left right inner outer on group by order having limit and or not null as distinct",
  };
  const LANG_FAMILY = {
    c: "c", h: "c", cpp: "c", "c++": "c", cc: "c", cxx: "c", hpp: "c", java: "c", cs: "c",
    csharp: "c", kotlin: "c", swift: "c", python: "py", py: "py", javascript: "js", js: "js",
    typescript: "js", ts: "js", jsx: "js", tsx: "js", json: "js", rust: "rust", rs: "rust",
    go: "go", golang: "go", bash: "sh", sh: "sh", shell: "sh", zsh: "sh", sql: "sql",
  };
  const keywordSets = {};
  for (const [family, words] of Object.entries(KEYWORDS)) {
    keywordSets[family] = new Set(words.split(" "));
  }

  // One token regex per family: comments, strings, numbers, words, anything else.
  function tokenPattern(family) {
    const lineComment = family === "py" || family === "sh" ? "#[^\\n]*" : "\\/\\/[^\\n]*";
    const blockComment = family === "py" || family === "sh" ? "" : "|\\/\\*[\\s\\S]*?(?:\\*\\/|$)";
    const sqlComment = family === "sql" ? "|--[^\\n]*" : "";
    return new RegExp(
      `(${lineComment}${blockComment}${sqlComment})` +
        "|(\"(?:[^\"\\\\\\n]|\\\\.)*\"?|'(?:[^'\\\\\\n]|\\\\.)*'?|`(?:[^`\\\\]|\\\\.)*`?)" +
        "|(\\b\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?[a-zA-Z]*\\b|\\b0x[0-9a-fA-F]+\\b)" +
        "|([A-Za-z_][A-Za-z0-9_]*)",
      "g"
    );
  }

  function highlight(code, lang) {
    const fragment = document.createDocumentFragment();
    const family = LANG_FAMILY[(lang || "").toLowerCase()];
    if (!family) {
      fragment.appendChild(document.createTextNode(code));
      return fragment;
    }
    const keywords = keywordSets[family];
    const pattern = tokenPattern(family);
    let last = 0;
    const span = (cls, text) => {
      const s = document.createElement("span");
      s.className = cls;
      s.textContent = text;
      fragment.appendChild(s);
    };
    for (let m = pattern.exec(code); m; m = pattern.exec(code)) {
      if (m[0] === "") {
        pattern.lastIndex += 1;
        continue;
      }
      if (m.index > last) fragment.appendChild(document.createTextNode(code.slice(last, m.index)));
      if (m[1]) span("tok-com", m[1]);
      else if (m[2]) span("tok-str", m[2]);
      else if (m[3]) span("tok-num", m[3]);
      else if (keywords.has(family === "sql" ? m[4].toLowerCase() : m[4])) span("tok-kw", m[4]);
      else fragment.appendChild(document.createTextNode(m[4]));
      last = pattern.lastIndex;
    }
    if (last < code.length) fragment.appendChild(document.createTextNode(code.slice(last)));
    return fragment;
  }

  function codeBlock(code, lang) {
    const wrap = document.createElement("div");
    wrap.className = "code-block";
    const bar = document.createElement("div");
    bar.className = "code-bar";
    const label = document.createElement("span");
    label.textContent = lang || "text";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy-code";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy code");
    bar.append(label, copy);
    const pre = document.createElement("pre");
    const el = document.createElement("code");
    if (lang) el.className = "lang-" + lang.replace(/[^\w+-]/g, "");
    el.appendChild(highlight(code, lang));
    pre.appendChild(el);
    wrap.append(bar, pre);
    return wrap;
  }

  // ---- blocks -------------------------------------------------------------------------------
  // An opening fence: its info string holds no backtick (so "```x```" is inline code).
  const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
  const HEADING_START = /^ {0,3}(#{1,6})(?:[ \t]+|$)/;
  // Nesting (quotes, lists) deeper than this renders as plain text: hostile input cannot
  // exhaust the stack.
  const MAX_DEPTH = 24;
  const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
  const BULLET = /^(\s*)([-*+])\s+(.*)$/;
  const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
  const QUOTE = /^ {0,3}>\s?(.*)$/;
  const TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

  function splitRow(line) {
    let s = line.trim();
    if (s.startsWith("|")) s = s.slice(1);
    if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
    return s.split(/(?<!\\)\|/).map((c) => c.trim());
  }

  // Heading text without its closing "#"s (kept when no space precedes them: "C#").
  function headingText(line, marker) {
    let t = line.slice(marker.length).trim();
    const hashes = /#+$/.exec(t);
    if (hashes) {
      const before = t.slice(0, t.length - hashes[0].length);
      if (before === "" || /[ \t]$/.test(before)) t = before.trimEnd();
    }
    return t;
  }

  // A closing fence: the opening's character, at least as many, nothing after but spaces.
  function closesFence(line, fence) {
    const t = line.trim();
    if (t.length < fence.length || !t.startsWith(fence)) return false;
    return /^(`+|~+)$/.test(t) && t[0] === fence[0];
  }

  function render(text, depth = 0) {
    const root = document.createDocumentFragment();
    if (depth > MAX_DEPTH) {
      const p = document.createElement("p");
      p.textContent = String(text);
      root.appendChild(p);
      return root;
    }
    const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    let paragraph = [];
    const endParagraph = () => {
      if (!paragraph.length) return;
      const p = document.createElement("p");
      paragraph.forEach((line, k) => {
        if (k > 0) p.appendChild(document.createElement("br"));
        appendInline(p, line);
      });
      root.appendChild(p);
      paragraph = [];
    };
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = FENCE.exec(line))) {
        endParagraph();
        const fence = m[1];
        const body = [];
        i += 1;
        while (i < lines.length && !closesFence(lines[i], fence)) body.push(lines[i++]);
        i += 1;  // the closing fence (or past the end when the stream has not closed it yet)
        root.appendChild(codeBlock(body.join("\n"), m[2]));
        continue;
      }
      if (line.trim() === "") {
        endParagraph();
        i += 1;
        continue;
      }
      if ((m = HEADING_START.exec(line))) {
        endParagraph();
        const h = document.createElement("h" + Math.min(6, m[1].length + 2));
        appendInline(h, headingText(line.trimStart(), m[1]));
        root.appendChild(h);
        i += 1;
        continue;
      }
      if (RULE.test(line)) {
        endParagraph();
        root.appendChild(document.createElement("hr"));
        i += 1;
        continue;
      }
      if (QUOTE.test(line)) {
        endParagraph();
        const quoted = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
          quoted.push(m[1]);
          i += 1;
        }
        const q = document.createElement("blockquote");
        q.appendChild(render(quoted.join("\n"), depth + 1));
        root.appendChild(q);
        continue;
      }
      if (BULLET.test(line) || ORDERED.test(line)) {
        endParagraph();
        i = renderList(lines, i, root, depth);
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) &&
          splitRow(lines[i + 1]).length === splitRow(line).length) {
        endParagraph();
        i = renderTable(lines, i, root);
        continue;
      }
      paragraph.push(line);
      i += 1;
    }
    endParagraph();
    return root;
  }

  // A list starting at lines[i]; deeper-indented items and continuation lines nest inside the
  // item above. Returns the index of the first line after the list.
  function renderList(lines, i, parent, depth) {
    const first = BULLET.exec(lines[i]) || ORDERED.exec(lines[i]);
    const ordered = !BULLET.test(lines[i]);
    const indent = first[1].length;
    // Where an item's text starts: its continuation lines are indented to here.
    const contentStart = lines[i].length - first[3].length;
    const list = document.createElement(ordered ? "ol" : "ul");
    if (ordered && first[2] !== "1") list.start = Number(first[2]);
    while (i < lines.length) {
      const m = (ordered ? ORDERED : BULLET).exec(lines[i]);
      if (!m || m[1].length !== indent) break;
      const item = document.createElement("li");
      const body = [m[3]];
      let fence = FENCE.exec(m[3])?.[1] ?? null;
      i += 1;
      // Continuation: indented deeper than the marker (a nested list, more text), and inside an
      // open code fence blank lines too.
      while (i < lines.length) {
        const next = lines[i];
        const lead = next.search(/\S/);
        if (!(fence && next.trim() === "") && !(lead > indent)) break;
        body.push(next.slice(Math.min(lead < 0 ? next.length : lead, contentStart)));
        const content = next.trim();
        if (fence) {
          if (closesFence(content, fence)) fence = null;
        } else {
          const opened = FENCE.exec(content);
          if (opened) fence = opened[1];
        }
        i += 1;
      }
      const inner = render(body.join("\n"), depth + 1);
      // A single paragraph item shows inline, without the paragraph's margins.
      if (inner.childNodes.length === 1 && inner.firstChild.nodeName === "P") {
        while (inner.firstChild.firstChild) item.appendChild(inner.firstChild.firstChild);
      } else {
        item.appendChild(inner);
      }
      list.appendChild(item);
      if (i < lines.length && lines[i].trim() === "" && i + 1 < lines.length &&
          (ordered ? ORDERED : BULLET).test(lines[i + 1])) {
        i += 1;  // a blank line between items keeps the list going
      }
    }
    parent.appendChild(list);
    return i;
  }

  function renderTable(lines, i, parent) {
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    for (const cell of splitRow(lines[i])) {
      const th = document.createElement("th");
      appendInline(th, cell);
      head.appendChild(th);
    }
    i += 2;
    const body = table.createTBody();
    while (i < lines.length && lines[i].includes("|") && lines[i].trim() !== "") {
      const row = body.insertRow();
      for (const cell of splitRow(lines[i])) appendInline(row.insertCell(), cell);
      i += 1;
    }
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    wrap.appendChild(table);
    parent.appendChild(wrap);
    return i;
  }

  window.LlmsMarkdown = { render, highlight };
})();
