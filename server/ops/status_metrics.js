// The status page's reading of /metrics (server/ops/status_page.html loads
// this first): the Prometheus text format (0.0.4) parsed into samples, and the
// few PromQL operations the page needs, computed the way Prometheus computes
// them: sum by a label, the increase of a histogram between two scrapes,
// histogram_quantile, and a counter's rate. Plain functions on plain data, no
// DOM; status_figures.js and status_chart_data.js build on them.
"use strict";

// ---- The Prometheus text format (0.0.4) -> [{name, labels, value}] ----

function parseValue(text) {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  return Number(text);  // "NaN" -> NaN
}

// `name{a="x",b="y\"z"} 1.5 [timestamp]`; label values may hold \\, \" and \n.
function parseSampleLine(line) {
  const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
  if (!nameMatch) return null;
  const name = nameMatch[0];
  const labels = {};
  let i = name.length;
  if (line[i] === "{") {
    i++;
    while (i < line.length && line[i] !== "}") {
      const keyMatch = /^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
      if (!keyMatch) return null;
      i += keyMatch[0].length;
      let value = "";
      while (i < line.length && line[i] !== '"') {
        if (line[i] === "\\" && i + 1 < line.length) {
          const next = line[i + 1];
          value += next === "n" ? "\n" : next;
          i += 2;
        } else {
          value += line[i++];
        }
      }
      labels[keyMatch[1]] = value;
      i++;  // closing quote
      while (i < line.length && (line[i] === "," || line[i] === " ")) i++;
    }
    i++;  // closing brace
  }
  const fields = line.slice(i).trim().split(/\s+/);
  if (fields.length < 1 || fields[0] === "") return null;
  return {name, labels, value: parseValue(fields[0])};
}

function parseExposition(text) {
  const samples = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const sample = parseSampleLine(line);
    if (sample) samples.push(sample);
  }
  return samples;
}

// ---- Aggregation (sum by a label, as the dashboard's queries do) ----

function matches(sample, name, filter) {
  if (sample.name !== name) return false;
  for (const key in filter) {
    if (sample.labels[key] !== filter[key]) return false;
  }
  return true;
}

// Sum of every series of `name` whose labels include `filter`; NaN if none.
function total(samples, name, filter = {}) {
  let sum = NaN;
  for (const s of samples) {
    if (matches(s, name, filter)) sum = (Number.isNaN(sum) ? 0 : sum) + s.value;
  }
  return sum;
}

// label value -> sum over the other labels.
function sumBy(samples, name, label, filter = {}) {
  const out = new Map();
  for (const s of samples) {
    if (!matches(s, name, filter) || !(label in s.labels)) continue;
    const key = s.labels[label];
    out.set(key, (out.get(key) || 0) + s.value);
  }
  return out;
}

// Histogram `base` by `label`: value -> {buckets: Map(le -> cumulative count),
// count, sum}, summed over the other labels (sum by (label, le)).
function histogramsBy(samples, base, label) {
  const out = new Map();
  const entry = (key) => {
    if (!out.has(key)) out.set(key, {buckets: new Map(), count: 0, sum: 0});
    return out.get(key);
  };
  for (const s of samples) {
    if (!(label in s.labels)) continue;
    const key = s.labels[label];
    if (s.name === base + "_bucket") {
      const le = parseValue(s.labels.le);
      const h = entry(key);
      h.buckets.set(le, (h.buckets.get(le) || 0) + s.value);
    } else if (s.name === base + "_count") {
      entry(key).count += s.value;
    } else if (s.name === base + "_sum") {
      entry(key).sum += s.value;
    }
  }
  return out;
}

// newer - older, bucket by bucket (the increase over the window).
function histogramIncrease(newer, older) {
  if (!newer || !older) return newer || null;
  const buckets = new Map();
  for (const [le, count] of newer.buckets) {
    buckets.set(le, count - (older.buckets.get(le) || 0));
  }
  return {buckets, count: newer.count - older.count, sum: newer.sum - older.sum};
}

// Prometheus' histogram_quantile (promql/quantile.go, bucketQuantile):
// linear interpolation inside the bucket that holds rank q * count, the
// lower bound of the first bucket taken as 0, and the upper bound of the
// highest finite bucket when the rank falls into +Inf.
function histogramQuantile(q, histogram) {
  if (!histogram) return NaN;
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  const buckets = [...histogram.buckets.entries()]
      .map(([le, count]) => ({le, count}))
      .sort((a, b) => a.le - b.le);
  if (buckets.length < 2 || buckets[buckets.length - 1].le !== Infinity) return NaN;
  for (let i = 1; i < buckets.length; i++) {  // ensureMonotonic
    if (buckets[i].count < buckets[i - 1].count) buckets[i].count = buckets[i - 1].count;
  }
  const observations = buckets[buckets.length - 1].count;
  if (!(observations > 0)) return NaN;
  let rank = q * observations;
  let b = buckets.findIndex((x, i) => i < buckets.length - 1 && x.count >= rank);
  if (b < 0) b = buckets.length - 1;
  if (b === buckets.length - 1) return buckets[buckets.length - 2].le;
  if (b === 0 && buckets[0].le <= 0) return buckets[0].le;
  let start = 0;
  const end = buckets[b].le;
  let count = buckets[b].count;
  if (b > 0) {
    start = buckets[b - 1].le;
    count -= buckets[b - 1].count;
    rank -= buckets[b - 1].count;
  }
  return start + (end - start) * (rank / count);
}

// The increase per second of a counter between two scrapes `seconds` apart; a
// series absent from the older scrape (NaN) started from 0. A counter that
// went down (a restart) counts as no increase.
function perSecond(newer, older, seconds) {
  if (!(seconds > 0)) return NaN;
  const delta = newer - (Number.isNaN(older) ? 0 : older);
  return Number.isFinite(delta) ? Math.max(0, delta) / seconds : NaN;
}
