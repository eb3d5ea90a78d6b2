// llmserve web UI: the live dashboard. Polls GET /metrics every second, keeps five
// minutes of scrapes, and shows gauges, windowed rates, latency quantiles and charts.
// Needs metrics.js (window.LlmsMetrics) loaded first.
"use strict";

(function () {
  const M = window.LlmsMetrics;

  const POLL_MS = 1000;
  const FETCH_TIMEOUT_MS = 5000;
  const HISTORY_MS = 5 * 60 * 1000;
  const RATE_WINDOW_MS = 10 * 1000;
  const LATENCY_WINDOW_MS = 60 * 1000;
  const NO_DATA = "–";
  const SVG_NS = "http://www.w3.org/2000/svg";

  const GAUGES = {
    running: "vllm:num_requests_running",
    waiting: "vllm:num_requests_waiting",
    kv: "vllm:kv_cache_usage_perc",
    connections: "llmserve:open_connections",
  };
  const COUNTERS = {
    prompt: "vllm:prompt_tokens_total",
    gen: "vllm:generation_tokens_total",
    prefixHits: "vllm:prefix_cache_hits",
    prefixQueries: "vllm:prefix_cache_queries",
    finished: "vllm:request_success_total",
    preemptions: "vllm:num_preemptions_total",
    aborted: "llmserve:requests_aborted_by_client_total",
    failed: "llmserve:requests_failed_total",
    specDrafts: "vllm:spec_decode_num_drafts_total",
    specDraftTokens: "vllm:spec_decode_num_draft_tokens_total",
    specAccepted: "vllm:spec_decode_num_accepted_tokens_total",
  };
  const HISTOGRAMS = {
    ttft: "vllm:time_to_first_token_seconds",
    itl: "vllm:inter_token_latency_seconds",
    e2e: "vllm:e2e_request_latency_seconds",
    queue: "vllm:request_queue_time_seconds",
  };
  const QUANTILES = [
    ["p50", 0.5],
    ["p90", 0.9],
    ["p99", 0.99],
  ];
  // Counters shown as a per-second rate with their lifetime total beside it.
  const EVENT_COUNTERS = ["finished", "preemptions", "aborted", "failed"];

  const CHARTS = [
    {
      id: "requests",
      title: "Running and waiting requests",
      unit: "",
      series: [
        { key: "running", label: "running" },
        { key: "waiting", label: "waiting" },
      ],
    },
    { id: "kv", title: "KV-cache usage", unit: " %", fixedMax: 100, series: [{ key: "kvPct", label: "KV usage" }] },
    {
      id: "tokens",
      title: "Tokens per second",
      unit: " tok/s",
      series: [
        { key: "genTps", label: "generation" },
        { key: "promptTps", label: "prompt" },
      ],
    },
    { id: "ttft", title: "Time to first token, p50", unit: " ms", series: [{ key: "ttftP50Ms", label: "TTFT p50" }] },
  ];

  // Chart geometry in viewBox units; the SVG scales to its card's width.
  const CHART_W = 320;
  const CHART_H = 140;
  const PLOT_TOP = 20;
  const PLOT_BOTTOM = 118;

  const scrapes = []; // { t, wall, gauges, counters, histograms }, oldest first
  const points = []; // chart points, one per scrape: { t, running, waiting, kvPct, ... }
  const charts = []; // { spec, figure, lines, maxLabel }
  let successCount = 0;
  let lastSuccessWall = null;

  // ---- formatting -------------------------------------------------------------------

  const isNum = (v) => typeof v === "number" && Number.isFinite(v);

  function fmtCount(v) {
    return isNum(v) ? Math.round(v).toLocaleString("en-US") : NO_DATA;
  }

  function fmtPercent(fraction) {
    return isNum(fraction) ? (fraction * 100).toFixed(1) + " %" : NO_DATA;
  }

  // Small rates keep decimals; large ones read better as grouped integers.
  function fmtRate(v, unit) {
    if (!isNum(v)) return NO_DATA;
    let text;
    if (v === 0) text = "0";
    else if (v < 1) text = v.toFixed(2);
    else if (v < 100) text = v.toFixed(1);
    else text = Math.round(v).toLocaleString("en-US");
    return text + unit;
  }

  function fmtMs(seconds) {
    if (!isNum(seconds)) return NO_DATA;
    const ms = seconds * 1000;
    let text;
    if (ms < 10) text = ms.toFixed(2);
    else if (ms < 100) text = ms.toFixed(1);
    else text = Math.round(ms).toLocaleString("en-US");
    return text + " ms";
  }

  // Axis maxima are 1, 2 or 5 times a power of ten: no decimals unless below 1.
  function fmtAxis(v, unit) {
    return (v >= 1 ? v.toLocaleString("en-US") : String(v)) + unit;
  }

  function fmtTime(date) {
    return date.toLocaleTimeString("en-GB", { hour12: false });
  }

  // ---- DOM output -------------------------------------------------------------------

  // A figure: formatted text for people, the raw number in data-value for tests.
  function setFigure(id, value, text) {
    const el = document.getElementById(id);
    if (!el) return;
    el.textContent = text;
    el.dataset.value = isNum(value) ? String(value) : "";
  }

  function setText(id, text) {
    const el = document.getElementById(id);
    if (el) el.textContent = text;
  }

  // ---- scrapes ----------------------------------------------------------------------

  function pick(names, read) {
    const out = {};
    for (const [key, name] of Object.entries(names)) out[key] = read(name);
    return out;
  }

  // The few numbers the dashboard needs from one parsed scrape.
  function snapshot(samples, t, wall) {
    return {
      t,
      wall,
      gauges: pick(GAUGES, (name) => M.scalar(samples, name)),
      counters: pick(COUNTERS, (name) => M.scalar(samples, name)),
      histograms: pick(HISTOGRAMS, (name) => M.histogram(samples, name)),
    };
  }

  // The scrape that starts a window ending at the newest scrape: the latest one at least
  // windowMs old, else the oldest one there is (shortly after the page opened).
  function windowStart(windowMs) {
    if (scrapes.length < 2) return null;
    const newest = scrapes[scrapes.length - 1];
    for (let i = scrapes.length - 2; i >= 0; i--) {
      if (newest.t - scrapes[i].t >= windowMs) return scrapes[i];
    }
    return scrapes[0];
  }

  // A counter that went down means the server restarted.
  function isReset(before, after) {
    for (const key of Object.keys(COUNTERS)) {
      if (after.counters[key] < before.counters[key]) return true;
    }
    for (const key of Object.keys(HISTOGRAMS)) {
      const b = before.histograms[key];
      const a = after.histograms[key];
      if (a && b && a.count < b.count) return true;
    }
    return false;
  }

  // Windows must not reach back across a restart, so the older scrapes go.
  function addScrape(scrape) {
    const previous = scrapes[scrapes.length - 1];
    if (previous && isReset(previous, scrape)) scrapes.length = 0;
    scrapes.push(scrape);
    trimHistory(scrape.t);
  }

  function trimHistory(now) {
    while (scrapes.length > 1 && now - scrapes[0].t > HISTORY_MS) scrapes.shift();
    while (points.length > 0 && now - points[0].t > HISTORY_MS) points.shift();
  }

  // ---- derived figures --------------------------------------------------------------

  // Per-second increase of every counter between two scrapes.
  function counterRates(newest, start) {
    const rates = {};
    const elapsed = start ? (newest.t - start.t) / 1000 : 0;
    for (const key of Object.keys(COUNTERS)) {
      const d = start ? M.counterDelta(newest.counters[key], start.counters[key]) : undefined;
      rates[key] = d !== undefined && elapsed > 0 ? d / elapsed : undefined;
    }
    return { rates, elapsed };
  }

  // numerator / denominator over the window when the window saw any, else over the
  // lifetime. Returns { value, label } with value undefined when neither has data.
  function windowedRatio(newest, start, numKey, denKey, windowLabel) {
    if (start) {
      const num = M.counterDelta(newest.counters[numKey], start.counters[numKey]);
      const den = M.counterDelta(newest.counters[denKey], start.counters[denKey]);
      if (num !== undefined && den > 0) return { value: num / den, label: windowLabel };
    }
    const num = newest.counters[numKey];
    const den = newest.counters[denKey];
    if (isNum(num) && den > 0) return { value: num / den, label: "since start" };
    return { value: undefined, label: "" };
  }

  // The histogram to take quantiles from: the last 60 s when it had observations,
  // else everything since the server started.
  function latencyHistogram(key, newest, start) {
    const lifetime = newest.histograms[key];
    if (!lifetime) return null;
    const before = start && start.histograms[key];
    if (before) {
      const recent = M.histogramDelta(lifetime, before);
      if (recent && recent.count > 0) return { hist: recent, label: "last 60 s" };
    }
    return { hist: lifetime, label: "since start" };
  }

  function quantile(q, chosen) {
    return chosen ? M.histogramQuantile(q, chosen.hist.buckets) : NaN;
  }

  // ---- rendering --------------------------------------------------------------------

  function renderGauges(g) {
    setFigure("dash-running", g.running, fmtCount(g.running));
    setFigure("dash-waiting", g.waiting, fmtCount(g.waiting));
    setFigure("dash-kv", g.kv, fmtPercent(g.kv));
    setFigure("dash-connections", g.connections, fmtCount(g.connections));
    const meter = document.getElementById("dash-kv-meter");
    if (meter && isNum(g.kv)) meter.value = Math.min(1, Math.max(0, g.kv));
  }

  function renderRates(newest, start, rates, elapsed) {
    setText("dash-rate-window", start ? `(last ${Math.round(elapsed)} s)` : "(waiting for a second scrape)");
    setFigure("dash-prompt-tps", rates.prompt, fmtRate(rates.prompt, ""));
    setFigure("dash-gen-tps", rates.gen, fmtRate(rates.gen, ""));
    for (const key of EVENT_COUNTERS) {
      setFigure(`dash-${key}`, rates[key], fmtRate(rates[key], " /s"));
      const total = newest.counters[key];
      setFigure(`dash-${key}-total`, total, isNum(total) ? `${fmtCount(total)} in total` : "");
    }
    const hit = windowedRatio(newest, start, "prefixHits", "prefixQueries", `last ${Math.round(elapsed)} s`);
    setFigure("dash-prefix-hit", hit.value, fmtPercent(hit.value));
    setText("dash-prefix-window", hit.label);
  }

  function renderSpec(newest, start, elapsed) {
    const card = document.getElementById("dash-spec-card");
    const enabled = newest.counters.specDraftTokens !== undefined;
    if (card) card.hidden = !enabled;
    if (!enabled) return;
    const label = `last ${Math.round(elapsed)} s`;
    const accept = windowedRatio(newest, start, "specAccepted", "specDraftTokens", label);
    const perDraft = windowedRatio(newest, start, "specAccepted", "specDrafts", label);
    setFigure("dash-spec-accept", accept.value, fmtPercent(accept.value));
    setFigure("dash-spec-mean", perDraft.value, isNum(perDraft.value) ? perDraft.value.toFixed(2) : NO_DATA);
    setText("dash-spec-window", accept.label ? ` (${accept.label})` : "");
  }

  function renderLatencies(newest, start) {
    for (const key of Object.keys(HISTOGRAMS)) {
      const chosen = latencyHistogram(key, newest, start);
      for (const [name, q] of QUANTILES) {
        const v = quantile(q, chosen);
        // Inside the lowest bucket the interpolated value says nothing (vLLM's queue-time and
        // E2E buckets start at 300 ms): show the bound instead.
        const lowest = chosen?.hist.buckets[0]?.le;
        const text = isNum(v) && isNum(lowest) && v <= lowest ? "\u2264 " + fmtMs(lowest) : fmtMs(v);
        setFigure(`dash-${key}-${name}`, v, text);
      }
      setText(`dash-${key}-window`, chosen ? chosen.label : "");
    }
  }

  function chartPoint(newest, rates, latencyStart) {
    const kv = newest.gauges.kv;
    const ttft = quantile(0.5, latencyHistogram("ttft", newest, latencyStart));
    return {
      t: newest.t,
      running: newest.gauges.running,
      waiting: newest.gauges.waiting,
      kvPct: isNum(kv) ? kv * 100 : undefined,
      genTps: rates.gen,
      promptTps: rates.prompt,
      ttftP50Ms: isNum(ttft) ? ttft * 1000 : undefined,
    };
  }

  function render() {
    const newest = scrapes[scrapes.length - 1];
    const rateStart = windowStart(RATE_WINDOW_MS);
    const latencyStart = windowStart(LATENCY_WINDOW_MS);
    const { rates, elapsed } = counterRates(newest, rateStart);

    renderGauges(newest.gauges);
    renderRates(newest, rateStart, rates, elapsed);
    renderSpec(newest, rateStart, elapsed);
    renderLatencies(newest, latencyStart);

    points.push(chartPoint(newest, rates, latencyStart));
    for (const chart of charts) updateChart(chart, newest.t);
  }

  // ---- charts -----------------------------------------------------------------------

  function svgEl(name, attrs) {
    const el = document.createElementNS(SVG_NS, name);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }

  function svgText(x, y, text, cls) {
    const el = svgEl("text", { x, y, class: cls });
    el.textContent = text;
    return el;
  }

  // The smallest 1, 2 or 5 times a power of ten that is >= v, so the axis reads well.
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    // toPrecision drops float noise such as 0.30000000000000004.
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return Number((m * p).toPrecision(12));
    return 10 * p;
  }

  function buildChart(spec) {
    const figure = document.createElement("figure");
    figure.className = "card chart";
    figure.id = `dash-chart-${spec.id}`;
    const caption = document.createElement("figcaption");
    caption.textContent = spec.title;
    figure.append(caption);

    const titleId = `dash-chart-${spec.id}-title`;
    const svg = svgEl("svg", {
      viewBox: `0 0 ${CHART_W} ${CHART_H}`,
      role: "img",
      "aria-labelledby": titleId,
      class: "chart-svg",
    });
    const title = svgEl("title", { id: titleId });
    title.textContent = `${spec.title}, last 5 minutes`;
    svg.append(title);
    svg.append(svgEl("line", { x1: 0, y1: PLOT_TOP, x2: CHART_W, y2: PLOT_TOP, class: "grid-line" }));
    svg.append(svgEl("line", { x1: 0, y1: PLOT_BOTTOM, x2: CHART_W, y2: PLOT_BOTTOM, class: "axis-line" }));
    const maxLabel = svgText(2, PLOT_TOP - 6, "", "axis-label");
    svg.append(maxLabel);
    svg.append(svgText(2, CHART_H - 6, "−5 min", "axis-label"));
    const now = svgText(CHART_W - 2, CHART_H - 6, "now", "axis-label");
    now.setAttribute("text-anchor", "end");
    svg.append(now);

    const lines = spec.series.map((s, i) => {
      const line = svgEl("polyline", { points: "", class: `series series-${i}` });
      line.setAttribute("data-series", s.key);
      svg.append(line);
      return line;
    });
    figure.append(svg);
    figure.append(buildLegend(spec));
    return { spec, figure, lines, maxLabel };
  }

  function buildLegend(spec) {
    const list = document.createElement("ul");
    list.className = "legend";
    spec.series.forEach((s, i) => {
      const item = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = `swatch series-${i}`;
      swatch.setAttribute("aria-hidden", "true");
      item.append(swatch, document.createTextNode(s.label));
      list.append(item);
    });
    return list;
  }

  function chartMax(spec) {
    if (spec.fixedMax) return spec.fixedMax;
    let max = 0;
    for (const p of points) {
      for (const s of spec.series) if (isNum(p[s.key]) && p[s.key] > max) max = p[s.key];
    }
    return niceCeil(max);
  }

  function updateChart(chart, now) {
    const max = chartMax(chart.spec);
    chart.maxLabel.textContent = fmtAxis(max, chart.spec.unit);
    const span = PLOT_BOTTOM - PLOT_TOP;
    chart.spec.series.forEach((s, i) => {
      const coords = [];
      for (const p of points) {
        const v = p[s.key];
        if (!isNum(v)) continue; // a missing value just joins its neighbours
        const x = CHART_W * (1 - (now - p.t) / HISTORY_MS);
        const y = PLOT_BOTTOM - span * Math.min(1, Math.max(0, v / max));
        coords.push(`${x.toFixed(1)},${y.toFixed(1)}`);
      }
      chart.lines[i].setAttribute("points", coords.join(" "));
    });
  }

  // ---- polling ----------------------------------------------------------------------

  async function fetchMetrics() {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), FETCH_TIMEOUT_MS);
    try {
      const res = await fetch("/metrics", { cache: "no-store", signal: controller.signal });
      if (!res.ok) throw new Error(`HTTP ${res.status}${res.statusText ? " " + res.statusText : ""}`);
      return await res.text();
    } finally {
      clearTimeout(timer);
    }
  }

  function describeError(err) {
    if (err && err.name === "AbortError") return `no answer within ${FETCH_TIMEOUT_MS / 1000} s`;
    if (err instanceof TypeError) return `network error (${err.message})`;
    return err && err.message ? err.message : String(err);
  }

  function showStatus(text, isError) {
    const el = document.getElementById("dash-status");
    el.textContent = text;
    el.classList.toggle("is-error", isError);
  }

  function onScrape(text, t, wall) {
    const samples = M.parse(text);
    if (!Object.values(GAUGES).some((name) => samples.has(name))) {
      throw new Error("the response has no llmserve metrics");
    }
    addScrape(snapshot(samples, t, wall));
    render();
    successCount++;
    lastSuccessWall = wall;
    document.body.dataset.scrapes = String(successCount);
    document.body.dataset.lastError = "";
    showStatus(`Last scrape ${fmtTime(wall)}`, false);
  }

  // Keeps the figures of the last good scrape and says what went wrong; polling goes on.
  function onError(message) {
    document.body.dataset.lastError = message;
    const since = lastSuccessWall ? ` Last good scrape ${fmtTime(lastSuccessWall)}.` : "";
    showStatus(`Scrape of /metrics failed: ${message}. Retrying every second.${since}`, true);
  }

  // One poll at a time; the next starts a second after this one started.
  async function poll() {
    const started = performance.now();
    try {
      const text = await fetchMetrics();
      onScrape(text, performance.now(), new Date());
    } catch (err) {
      onError(describeError(err));
    }
    setTimeout(poll, Math.max(0, POLL_MS - (performance.now() - started)));
  }

  function init() {
    document.body.dataset.scrapes = "0";
    document.body.dataset.lastError = "";
    const container = document.getElementById("dash-charts");
    for (const spec of CHARTS) {
      const chart = buildChart(spec);
      container.append(chart.figure);
      charts.push(chart);
    }
    poll();
  }

  init();
})();
