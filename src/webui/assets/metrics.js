// llmserve web UI: Prometheus text-format parsing and histogram math.
// Pure functions, no DOM, so they can be tested on their own (node or a browser).
// Exposed as window.LlmsMetrics (globalThis.LlmsMetrics outside a browser).
"use strict";

(function (root) {
  const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
  const LABEL_NAME_RE = /^[a-zA-Z_][a-zA-Z0-9_]*/;

  // Number() does not know Prometheus's spellings of the infinities.
  function parseValue(text) {
    switch (text) {
      case "+Inf":
      case "Inf":
        return Infinity;
      case "-Inf":
        return -Infinity;
      case "NaN":
        return NaN;
      default: {
        if (text === "") return null;
        const v = Number(text);
        return Number.isNaN(v) ? null : v;
      }
    }
  }

  // Reads `{a="x",b="y"}` starting at line[pos] === "{".
  // Returns { labels, end } with end just past "}", or null when malformed.
  function parseLabels(line, pos) {
    const labels = {};
    let i = pos + 1;
    for (;;) {
      while (line[i] === " " || line[i] === "\t") i++;
      if (line[i] === "}") return { labels, end: i + 1 };
      const m = LABEL_NAME_RE.exec(line.slice(i));
      if (!m) return null;
      const name = m[0];
      i += name.length;
      while (line[i] === " " || line[i] === "\t") i++;
      if (line[i] !== "=") return null;
      i++;
      while (line[i] === " " || line[i] === "\t") i++;
      if (line[i] !== '"') return null;
      i++;
      let value = "";
      for (;;) {
        if (i >= line.length) return null;
        const c = line[i];
        if (c === '"') break;
        if (c === "\\") {
          const next = line[i + 1];
          // The exposition format escapes only these three; keep anything else as written.
          if (next === "n") value += "\n";
          else if (next === "\\" || next === '"') value += next;
          else value += "\\" + (next === undefined ? "" : next);
          i += 2;
        } else {
          value += c;
          i++;
        }
      }
      i++; // closing quote
      labels[name] = value;
      while (line[i] === " " || line[i] === "\t") i++;
      if (line[i] === ",") i++;
      else if (line[i] !== "}") return null;
    }
  }

  // One sample line -> { name, labels, value }, or null for a line that is not a sample.
  function parseLine(line) {
    const m = NAME_RE.exec(line);
    if (!m) return null;
    const name = m[0];
    let labels = {};
    let i = name.length;
    if (line[i] === "{") {
      const parsed = parseLabels(line, i);
      if (!parsed) return null;
      labels = parsed.labels;
      i = parsed.end;
    }
    // The value, then an optional timestamp, which the dashboard does not need.
    const fields = line.slice(i).trim().split(/\s+/);
    const value = parseValue(fields[0] || "");
    if (value === null) return null;
    return { name, labels, value };
  }

  // Prometheus text -> Map(metric name -> [{ name, labels, value }, ...]).
  // Comment lines (# HELP, # TYPE), blank lines and malformed lines are skipped.
  function parse(text) {
    const samples = new Map();
    for (const raw of String(text).split("\n")) {
      const line = raw.trim();
      if (line === "" || line[0] === "#") continue;
      const sample = parseLine(line);
      if (!sample) continue;
      let list = samples.get(sample.name);
      if (!list) {
        list = [];
        samples.set(sample.name, list);
      }
      list.push(sample);
    }
    return samples;
  }

  function labelsMatch(labels, match) {
    for (const key of Object.keys(match)) {
      if (labels[key] !== match[key]) return false;
    }
    return true;
  }

  // Sum of every sample of `name` whose labels include `match`: the label sets that
  // differ by model_name (or any label not in `match`) add up. undefined when absent.
  function scalar(samples, name, match = {}) {
    const list = samples.get(name);
    if (!list) return undefined;
    let total = 0;
    let found = false;
    for (const s of list) {
      if (!labelsMatch(s.labels, match)) continue;
      total += s.value;
      found = true;
    }
    return found ? total : undefined;
  }

  // Buckets as [{ le, count }] sorted by le, with equal bounds merged by summing
  // (as Prometheus coalesces them). Accepts {le, count} objects or [le, count] pairs,
  // le as a number or a string ("0.5", "+Inf").
  function normalizeBuckets(buckets) {
    const byLe = new Map();
    for (const b of buckets || []) {
      const rawLe = Array.isArray(b) ? b[0] : b.le;
      const count = Number(Array.isArray(b) ? b[1] : b.count);
      const le = typeof rawLe === "number" ? rawLe : parseValue(String(rawLe));
      if (le === null || Number.isNaN(le) || Number.isNaN(count)) continue;
      byLe.set(le, (byLe.get(le) || 0) + count);
    }
    return [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
  }

  // A histogram `name` (its _bucket, _sum, _count series) summed over the label sets
  // that include `match`. Returns { buckets: [{le, count}], sum, count } or undefined.
  function histogram(samples, name, match = {}) {
    const bucketSamples = samples.get(name + "_bucket");
    if (!bucketSamples) return undefined;
    const raw = [];
    for (const s of bucketSamples) {
      if (!labelsMatch(s.labels, match) || s.labels.le === undefined) continue;
      raw.push({ le: s.labels.le, count: s.value });
    }
    const buckets = normalizeBuckets(raw);
    if (buckets.length === 0) return undefined;
    const last = buckets[buckets.length - 1];
    const count = scalar(samples, name + "_count", match);
    return {
      buckets,
      sum: scalar(samples, name + "_sum", match) ?? NaN,
      count: count ?? (last.le === Infinity ? last.count : NaN),
    };
  }

  // Increase of a counter from `older` to `newer`. A drop means the counter was reset
  // (the server restarted); the increase is then unknown and counted as 0.
  function counterDelta(newer, older) {
    if (newer === undefined || older === undefined) return undefined;
    const d = newer - older;
    return d >= 0 ? d : 0;
  }

  // Observations that arrived between two scrapes of one histogram, as a histogram.
  // A reset (the total count drops) gives an empty histogram, like counterDelta.
  function histogramDelta(newer, older) {
    if (!newer) return undefined;
    if (!older) return newer;
    if (newer.count < older.count) {
      return { buckets: newer.buckets.map((b) => ({ le: b.le, count: 0 })), sum: 0, count: 0 };
    }
    const olderByLe = new Map(older.buckets.map((b) => [b.le, b.count]));
    const buckets = newer.buckets.map((b) => ({
      le: b.le,
      count: Math.max(0, b.count - (olderByLe.get(b.le) || 0)),
    }));
    return { buckets, sum: newer.sum - older.sum, count: newer.count - older.count };
  }

  // Prometheus's histogram_quantile over cumulative buckets: find the bucket holding the
  // rank q * count and interpolate linearly inside it. A rank in the +Inf bucket gives
  // the highest finite bound; no observations (or no +Inf bucket) give NaN.
  function histogramQuantile(q, buckets) {
    if (Number.isNaN(q)) return NaN;
    if (q < 0) return -Infinity;
    if (q > 1) return Infinity;
    const b = normalizeBuckets(buckets);
    if (b.length < 2 || b[b.length - 1].le !== Infinity) return NaN;
    // Cumulative counts must not fall; repair them as Prometheus does.
    for (let i = 1; i < b.length; i++) {
      if (b[i].count < b[i - 1].count) b[i].count = b[i - 1].count;
    }
    const total = b[b.length - 1].count;
    if (!(total > 0)) return NaN;

    let rank = q * total;
    let i = 0;
    while (i < b.length - 1 && b[i].count < rank) i++;
    if (i === b.length - 1) return b[b.length - 2].le;
    if (i === 0 && b[0].le <= 0) return b[0].le;

    let start = 0;
    let inBucket = b[i].count;
    if (i > 0) {
      start = b[i - 1].le;
      inBucket -= b[i - 1].count;
      rank -= b[i - 1].count;
    }
    return start + (b[i].le - start) * (rank / inBucket);
  }

  root.LlmsMetrics = Object.freeze({
    parse,
    parseLine,
    parseValue,
    scalar,
    histogram,
    normalizeBuckets,
    counterDelta,
    histogramDelta,
    histogramQuantile,
  });
})(typeof window !== "undefined" ? window : globalThis);
