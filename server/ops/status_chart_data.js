// The status page's chart data (server/ops/status_page.html, "Last 15
// minutes"): a ring of the page's own scrapes, each reduced on arrival to the
// value of every chart series over the interval since the scrape before it.
// Counters become rates and histograms quantiles of their increase, as
// Prometheus' rate(x[I]) and histogram_quantile(q, rate(x_bucket[I])) would
// with a range I of one scrape interval; gauges are taken as read.
// Uses status_metrics.js; status_charts.js draws chartHistory.
//
// Series names are "KEY" or "KEY VARIANT": KEY a label value (a method, phase
// or tier: no spaces), VARIANT one word ("P50", "P99", "used", "pinned",
// "capacity") that status_charts.js draws with its own dash pattern.
"use strict";

const CHART_WINDOW_MS = 15 * 60 * 1000;
// 15 minutes of the default 2 s scrapes. A shorter ?scrape_ms keeps as many
// points, so the charts then cover less time.
const CHART_MAX_POINTS = 450;
const CHART_QUANTILES = [["P50", 0.5], ["P99", 0.99]];

// [{time (ms), series: {chart id: Map(series name -> value)}}], oldest first,
// at most CHART_MAX_POINTS entries within CHART_WINDOW_MS of the newest. A
// value is NaN where its interval had nothing to measure (a quantile without
// calls); a series absent from an entry did not exist or had no older scrape.
const chartHistory = [];
// The newest scrape ({time (ms), samples}): the older side of the next interval.
let lastChartScrape = null;

// label value -> increase per second of counter `name`; older null: none.
function ratesBy(now, older, seconds, name, label) {
  const out = new Map();
  if (!older) return out;
  const before = sumBy(older, name, label);
  for (const [key, value] of sumBy(now, name, label)) {
    out.set(key, perSecond(value, before.has(key) ? before.get(key) : NaN, seconds));
  }
  return out;
}

// "KEY P50" and "KEY P99" -> quantiles of histogram `base`'s increase per
// label value; a label value absent from the older scrape started from 0.
function quantilesBy(now, older, base, label) {
  const out = new Map();
  if (!older) return out;
  const before = histogramsBy(older, base, label);
  for (const [key, histogram] of histogramsBy(now, base, label)) {
    const increase = histogramIncrease(histogram, before.get(key));
    for (const [variant, q] of CHART_QUANTILES) {
      out.set(key + " " + variant, histogramQuantile(q, increase));
    }
  }
  return out;
}

// Per tier: "TIER used", "TIER pinned" (tiers that report it) and
// "TIER capacity" (used + free), in pages.
function cachePagesByTier(now) {
  const out = new Map();
  const name = "gdn_state_cache_pages";
  for (const tier of [...sumBy(now, name, "tier").keys()].sort()) {
    const pages = (state) => total(now, name, {tier, state});
    out.set(tier + " used", pages("used"));
    if (!Number.isNaN(pages("pinned"))) out.set(tier + " pinned", pages("pinned"));
    out.set(tier + " capacity", pages("used") + pages("free"));
  }
  return out;
}

// Chart id -> (newest samples, older samples or null, seconds between them)
// -> Map(series name -> value). The ids are the <svg> ids of the page.
const CHART_SERIES = {
  "chart-calls": (now, older, seconds) =>
      ratesBy(now, older, seconds, "gdn_requests_total", "method"),
  "chart-tokens": (now, older, seconds) =>
      ratesBy(now, older, seconds, "gdn_tokens_total", "phase"),
  "chart-latency": (now, older) =>
      quantilesBy(now, older, "gdn_request_duration_seconds", "method"),
  "chart-queue": (now, older) =>
      quantilesBy(now, older, "gdn_queue_duration_seconds", "method"),
  // A gauge of the engine; servers that predate it have none: no series.
  "chart-batches": (now) => sumBy(now, "gdn_engine_batches_in_flight", "phase"),
  "chart-cache": (now) => cachePagesByTier(now),
};

// Adds one successful scrape to the ring. `restarted`: a counter went down
// since the previous scrape, so no rate or quantile spans that interval
// (gauges still get their point).
function recordChartScrape(time, samples, restarted) {
  const older = lastChartScrape && !restarted ? lastChartScrape : null;
  const seconds = older ? (time - older.time) / 1000 : 0;
  const series = {};
  for (const [chartId, derive] of Object.entries(CHART_SERIES)) {
    series[chartId] = derive(samples, older ? older.samples : null, seconds);
  }
  chartHistory.push({time, series});
  while (chartHistory.length > CHART_MAX_POINTS ||
         (chartHistory.length > 1 && chartHistory[0].time < time - CHART_WINDOW_MS)) {
    chartHistory.shift();
  }
  lastChartScrape = {time, samples};
}

// Whether the newest scrape has metric `name` (a histogram by its _count).
function chartMetricScraped(name) {
  return lastChartScrape !== null && lastChartScrape.samples.some(
      (s) => s.name === name || s.name === name + "_count");
}
