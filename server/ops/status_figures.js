// The status page's current figures (server/ops/status_page.html: the tiles
// and tables with stable ids): formatting, the rows per label value, and one
// render from two scrapes. Uses status_metrics.js; status_page.js calls
// renderFigures after every successful scrape.
"use strict";

// ---- Formatting ----

function formatSeconds(s) {
  if (!Number.isFinite(s)) return "—";
  if (s < 1e-3) return (s * 1e6).toPrecision(3) + " µs";
  if (s < 1) return (s * 1e3).toPrecision(3) + " ms";
  return s.toPrecision(3) + " s";
}

function formatBytes(b) {
  if (!Number.isFinite(b)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  while (Math.abs(b) >= 1024 && u < units.length - 1) { b /= 1024; u++; }
  return (u === 0 ? String(b) : b.toFixed(2)) + " " + units[u];
}

function formatCount(n) {
  if (!Number.isFinite(n)) return "—";
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function formatRate(r) {
  if (!Number.isFinite(r)) return "—";
  return r >= 100 ? r.toFixed(0) : r.toFixed(2);
}

function formatMean(x) {
  return Number.isFinite(x) ? x.toFixed(2) : "—";
}

// ---- The DOM ----

function show(id, value, format) {
  const el = document.getElementById(id);
  if (!el) return;
  el.dataset.value = Number.isFinite(value) ? String(value) : "";
  el.textContent = format(value);
}

function showText(id, text) {
  const el = document.getElementById(id);
  if (!el) return;
  el.dataset.value = text;
  el.textContent = text || "—";
}

// A row of `tbody` for one label value, created on first sight: the key,
// then one <td> per id in `cellIds`.
function ensureRow(tbody, key, cellIds) {
  const rowId = tbody.id + "-" + key;
  let row = document.getElementById(rowId);
  if (row) return row;
  row = document.createElement("tr");
  row.id = rowId;
  const head = document.createElement("td");
  head.textContent = key;
  row.appendChild(head);
  for (const id of cellIds) {
    const cell = document.createElement("td");
    cell.id = id;
    cell.dataset.value = "";
    cell.textContent = "—";
    row.appendChild(cell);
  }
  // Rows stay sorted by key whatever order the labels first appear in.
  const after = [...tbody.children].find((r) => r.firstChild.textContent > key);
  tbody.insertBefore(row, after || null);
  return row;
}

// The ids PREFIX-KEY of a row's cells.
const idsFor = (key, prefixes) => prefixes.map((prefix) => prefix + "-" + key);

// ---- One render: the newest scrape and the oldest one of the window ----

// newest, oldest: {time (ms), samples}; oldest is the scrape at the start of
// the last minute, or null while there is only one scrape.
function renderFigures(newest, oldest) {
  const now = newest.samples;
  const then = oldest ? oldest.samples : null;
  const seconds = oldest ? (newest.time - oldest.time) / 1000 : 0;
  // A series not created yet (no call of that kind so far) counts as 0.
  const orZero = (x) => (Number.isNaN(x) ? 0 : x);
  const rate = (name, filter = {}) => then
      ? perSecond(orZero(total(now, name, filter)), total(then, name, filter), seconds)
      : NaN;

  const build = now.find((s) => s.name === "gdn_build_info");
  showText("build-version", build ? build.labels.version : "");
  showText("build-backend", build ? build.labels.backend : "");
  const format = now.find((s) => s.name === "gdn_state_format_info");
  showText("state-dtype", format
      ? format.labels.state_dtype + (format.labels.rounding !== "-" ? " (" + format.labels.rounding + " rounding)" : "")
      : "");
  show("state-page-bytes", total(now, "gdn_state_page_bytes"), formatBytes);

  show("calls-per-second", rate("gdn_requests_total"), formatRate);
  show("tokens-per-second", rate("gdn_tokens_total"), formatRate);
  show("sessions", total(now, "gdn_sessions"), formatCount);
  show("draft-pages", total(now, "gdn_draft_pages"), formatCount);
  show("kept-states", total(now, "gdn_kept_states"), formatCount);
  show("device-memory-used", total(now, "gdn_device_memory_used_bytes"), formatBytes);
  show("device-memory-total", total(now, "gdn_device_memory_total_bytes"), formatBytes);

  // Requests by method.
  const latency = histogramsBy(now, "gdn_request_duration_seconds", "method");
  const latencyThen = then ? histogramsBy(then, "gdn_request_duration_seconds", "method") : null;
  const queue = histogramsBy(now, "gdn_queue_duration_seconds", "method");
  const queueThen = then ? histogramsBy(then, "gdn_queue_duration_seconds", "method") : null;
  const calls = sumBy(now, "gdn_requests_total", "method");
  const methods = new Set([...calls.keys(), ...latency.keys()]);
  const requests = document.getElementById("requests");
  for (const method of methods) {
    ensureRow(requests, method, idsFor(method, [
        "calls-per-second", "errors-per-second", "p50", "p99", "queue-p99",
        "calls-total", "p50-total", "p99-total", "queue-p99-total"]));
    const errors = (samples) => {
      let sum = 0;
      for (const s of samples) {
        if (s.name === "gdn_requests_total" && s.labels.method === method &&
            s.labels.code !== "OK") sum += s.value;
      }
      return sum;
    };
    const latencyWindow = latencyThen ? histogramIncrease(latency.get(method), latencyThen.get(method)) : null;
    const queueWindow = queueThen && queue.has(method)
        ? histogramIncrease(queue.get(method), queueThen.get(method)) : null;
    show("calls-per-second-" + method, rate("gdn_requests_total", {method}), formatRate);
    show("errors-per-second-" + method, then ? perSecond(errors(now), errors(then), seconds) : NaN, formatRate);
    show("p50-" + method, histogramQuantile(0.5, latencyWindow), formatSeconds);
    show("p99-" + method, histogramQuantile(0.99, latencyWindow), formatSeconds);
    show("queue-p99-" + method, histogramQuantile(0.99, queueWindow), formatSeconds);
    show("calls-total-" + method, calls.has(method) ? calls.get(method) : NaN, formatCount);
    show("p50-total-" + method, histogramQuantile(0.5, latency.get(method)), formatSeconds);
    show("p99-total-" + method, histogramQuantile(0.99, latency.get(method)), formatSeconds);
    show("queue-p99-total-" + method, histogramQuantile(0.99, queue.get(method)), formatSeconds);
  }

  // Batching and kernels by phase.
  const batchSize = histogramsBy(now, "gdn_batch_size", "phase");
  const batchSizeThen = then ? histogramsBy(then, "gdn_batch_size", "phase") : null;
  const batchTokens = histogramsBy(now, "gdn_batch_tokens", "phase");
  const batchTokensThen = then ? histogramsBy(then, "gdn_batch_tokens", "phase") : null;
  const kernel = histogramsBy(now, "gdn_kernel_duration_seconds", "phase");
  const kernelThen = then ? histogramsBy(then, "gdn_kernel_duration_seconds", "phase") : null;
  const tokens = sumBy(now, "gdn_tokens_total", "phase");
  const batching = document.getElementById("batching");
  const mean = (h) => (h && h.count > 0 ? h.sum / h.count : NaN);
  for (const phase of new Set([...tokens.keys(), ...batchSize.keys()])) {
    ensureRow(batching, phase, idsFor(phase, [
        "tokens-per-second", "batch-size-mean", "batch-size-p90", "batch-tokens-mean",
        "kernel-p99", "tokens-total", "batch-size-mean-total", "kernel-p99-total"]));
    const sizeWindow = batchSizeThen && batchSize.has(phase)
        ? histogramIncrease(batchSize.get(phase), batchSizeThen.get(phase)) : null;
    const tokensWindow = batchTokensThen && batchTokens.has(phase)
        ? histogramIncrease(batchTokens.get(phase), batchTokensThen.get(phase)) : null;
    const kernelWindow = kernelThen && kernel.has(phase)
        ? histogramIncrease(kernel.get(phase), kernelThen.get(phase)) : null;
    show("tokens-per-second-" + phase, rate("gdn_tokens_total", {phase}), formatRate);
    show("batch-size-mean-" + phase, mean(sizeWindow), formatMean);
    show("batch-size-p90-" + phase, histogramQuantile(0.9, sizeWindow), formatMean);
    show("batch-tokens-mean-" + phase, mean(tokensWindow), formatMean);
    show("kernel-p99-" + phase, histogramQuantile(0.99, kernelWindow), formatSeconds);
    show("tokens-total-" + phase, tokens.has(phase) ? tokens.get(phase) : NaN, formatCount);
    show("batch-size-mean-total-" + phase, mean(batchSize.get(phase)), formatMean);
    show("kernel-p99-total-" + phase, histogramQuantile(0.99, kernel.get(phase)), formatSeconds);
  }

  // State cache by tier and state.
  const cache = document.getElementById("cache");
  const tiers = new Set();
  for (const s of now) {
    if (s.name === "gdn_state_cache_pages" && s.labels.tier) tiers.add(s.labels.tier);
  }
  for (const tier of tiers) {
    // Cells cache-{pages,bytes}-TIER-{used,free,pinned}, in the header's order.
    const cells = [];
    for (const what of ["pages", "bytes"]) {
      for (const state of ["used", "free", "pinned"]) {
        cells.push({id: "cache-" + what + "-" + tier + "-" + state, what, state});
      }
    }
    ensureRow(cache, tier, cells.map((c) => c.id));
    for (const c of cells) {
      show(c.id, total(now, "gdn_state_cache_" + c.what, {tier, state: c.state}),
           c.what === "pages" ? formatCount : formatBytes);
    }
  }

  for (const [id, name] of [["spills", "gdn_state_spills_total"],
                            ["restores", "gdn_state_restores_total"],
                            ["evictions", "gdn_state_evictions_total"],
                            ["sessions-expired", "gdn_sessions_expired_total"],
                            ["cow-copies", "gdn_cow_copies_total"],
                            ["draft-tokens", "gdn_draft_tokens_total"],
                            ["draft-accepted", "gdn_draft_accepted_tokens_total"],
                            ["kept-dropped", "gdn_kept_states_dropped_total"]]) {
    show(id, total(now, name), formatCount);
    show(id + "-per-second", rate(name), formatRate);
  }
}
