// The status page's time-series charts (server/ops/status_page.html, "Last
// 15 minutes"): each an inline <svg> of fixed size drawn from chartHistory
// (status_chart_data.js) with plain SVG elements: a title with the unit,
// axes with tick labels, one <path> per series and a legend (colour: the
// label value, dash: the variant); "no data yet" where nothing can be
// drawn. The x axis runs from the oldest point of the ring (at most 15
// minutes back) to the newest scrape ("now"); the y axis from 0 (linear) or
// over whole decades (log, for latencies).
//
// For tests (tests/deploy/check_status_charts.py): every chart <svg> carries
// data-points (points drawn, all series), data-series (series names, comma
// separated, legend order) and data-state ("drawn" or "no-data"); each line
// is a <path class="series"> with data-series, data-points and its stroke
// colour; <rect class="plot"> is the plot area, tick labels are
// <text class="tick">. Path data holds only "M x y", "L x y" (one per point)
// and "h0" (an isolated point), coordinates with one decimal.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART_WIDTH = 600;   // SVG units = CSS px
const CHART_HEIGHT = 240;
const PLOT = {left: 64, top: 30, right: 420, bottom: 212};
const LEGEND_LEFT = 434;
const LEGEND_ROW = 16;
// Colour-blind-safe (Okabe-Ito without yellow and black), one per label value
// in order of first sight, shared by every chart of that label: a method has
// one colour in the calls, latency and queue charts.
const CHART_PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                       "#56B4E9", "#7F3C8D", "#8C564B"];
const chartColours = {method: new Map(), phase: new Map(), tier: new Map()};
// Series variants: legend order, and dash pattern (none: solid).
const CHART_VARIANTS = {
  P99: {rank: 0}, P50: {rank: 1, dash: "5 3"},
  used: {rank: 0}, pinned: {rank: 1, dash: "2 3"}, capacity: {rank: 2, dash: "7 4"},
};
// Tick steps of the time axis in seconds; the first that gives <= 5 ticks.
const TIME_TICK_STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 180, 300, 600];

function formatTickNumber(v) {
  if (v === 0) return "0";
  if (Math.abs(v) >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
  if (Math.abs(v) >= 1e3) return +(v / 1e3).toPrecision(3) + "k";
  return String(+v.toPrecision(3));
}

function formatTickSeconds(s) {
  if (s < 1e-3) return +(s * 1e6).toPrecision(3) + " µs";
  if (s < 1) return +(s * 1e3).toPrecision(3) + " ms";
  return +s.toPrecision(3) + " s";
}

// Chart id -> what it shows; `metric` names the one it reads (for "no data").
const CHART_SPECS = {
  "chart-calls": {title: "calls/s by method", metric: "gdn_requests_total",
                  colours: "method", scale: "linear", format: formatTickNumber},
  "chart-tokens": {title: "tokens/s by phase", metric: "gdn_tokens_total",
                   colours: "phase", scale: "linear", format: formatTickNumber},
  "chart-latency": {title: "request latency by method (log scale)",
                    metric: "gdn_request_duration_seconds", colours: "method",
                    scale: "log", format: formatTickSeconds},
  "chart-queue": {title: "queue time by method (log scale)",
                  metric: "gdn_queue_duration_seconds", colours: "method",
                  scale: "log", format: formatTickSeconds},
  "chart-batches": {title: "batches in flight by phase",
                    metric: "gdn_engine_batches_in_flight", colours: "phase",
                    scale: "linear", integer: true, format: formatTickNumber},
  "chart-cache": {title: "state cache pages by tier", metric: "gdn_state_cache_pages",
                  colours: "tier", scale: "linear", integer: true, format: formatTickNumber},
};

function colourFor(kind, key) {
  const colours = chartColours[kind];
  if (!colours.has(key)) colours.set(key, CHART_PALETTE[colours.size % CHART_PALETTE.length]);
  return colours.get(key);
}

// A chart's series from chartHistory, in legend order (key, then variant):
// [{name, key, variant, points: [{time, value}] one per ring entry}], value
// NaN where the entry has none (a gap in the line).
function chartSeries(chartId) {
  const names = new Set();
  for (const entry of chartHistory) {
    for (const name of entry.series[chartId].keys()) names.add(name);
  }
  const rank = (variant) => (CHART_VARIANTS[variant] || {rank: 0}).rank;
  return [...names].map((name) => {
    const [key, variant = ""] = name.split(" ");
    const points = chartHistory.map((entry) => {
      const value = entry.series[chartId].get(name);
      return {time: entry.time, value: value === undefined ? NaN : value};
    });
    return {name, key, variant, points};
  }).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : rank(a.variant) - rank(b.variant)));
}

// Linear axis from 0: a 1-2-2.5-5 step giving about 4 ticks above 0.
function linearAxis(values, integer) {
  const max = values.reduce((a, b) => Math.max(a, b), 0);
  const rough = (max > 0 ? max : 1) / 4;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  let step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough);
  if (integer) step = Math.max(1, Math.round(step));
  const steps = Math.max(1, Math.ceil(max / step));
  const ticks = Array.from({length: steps + 1}, (_, i) => i * step);
  const hi = steps * step;
  return {ticks, map: (v) => v / hi};
}

// Log axis over whole decades; 2x and 5x ticks too when it spans <= 2.
function logAxis(values) {
  const positive = values.filter((v) => v > 0);
  const min = positive.reduce((a, b) => Math.min(a, b), Infinity);
  const max = positive.reduce((a, b) => Math.max(a, b), 0);
  const lo = positive.length ? 10 ** Math.floor(Math.log10(min)) : 1e-3;
  let hi = positive.length ? 10 ** Math.ceil(Math.log10(max)) : 1;
  if (hi <= lo) hi = lo * 10;
  const ticks = [];
  const multiples = hi / lo <= 100 ? [1, 2, 5] : [1];
  for (let decade = lo; decade < hi * 1.001; decade *= 10) {
    for (const m of multiples) {
      if (decade * m <= hi * 1.001) ticks.push(+(decade * m).toPrecision(3));
    }
  }
  const span = Math.log10(hi) - Math.log10(lo);
  return {ticks, map: (v) => (v > 0 ? (Math.log10(v) - Math.log10(lo)) / span : NaN)};
}

function svgElement(parent, tag, attributes, text) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  if (text !== undefined) element.textContent = text;
  parent.appendChild(element);
  return element;
}

// "M x y L x y ..." of the finite points, a new subpath after every gap;
// a point alone gets "h0" so that its round cap draws a dot.
function pathData(points, x, y) {
  const parts = [];
  let run = 0;
  let drawn = 0;
  for (const p of points) {
    const px = x(p.time);
    const py = y(p.value);
    if (!Number.isFinite(px) || !Number.isFinite(py)) {
      if (run === 1) parts.push("h0");
      run = 0;
      continue;
    }
    parts.push((run === 0 ? "M" : "L") + px.toFixed(1) + " " + py.toFixed(1));
    run++;
    drawn++;
  }
  if (run === 1) parts.push("h0");
  return {d: parts.join(" "), drawn};
}

function drawAxes(svg, spec, axis, y, newest, span) {
  const plotWidth = PLOT.right - PLOT.left;
  for (const tick of axis.ticks) {
    const ty = y(tick);
    svgElement(svg, "line", {x1: PLOT.left, x2: PLOT.right, y1: ty, y2: ty, class: "grid"});
    svgElement(svg, "text", {x: PLOT.left - 6, y: ty + 4, "text-anchor": "end", class: "tick"},
               spec.format(tick));
  }
  const step = TIME_TICK_STEPS_S.find((s) => span / 1000 / s <= 5) ||
      TIME_TICK_STEPS_S[TIME_TICK_STEPS_S.length - 1];
  for (let k = 0; k * step * 1000 <= span; k++) {
    const tx = PLOT.right - (k * step * 1000) / span * plotWidth;
    const ago = k * step;
    const label = k === 0 ? "now" : "-" + (step >= 60 ? ago / 60 + "m" : ago + "s");
    svgElement(svg, "line", {x1: tx, x2: tx, y1: PLOT.bottom, y2: PLOT.bottom + 4, class: "axis"});
    svgElement(svg, "text", {x: tx, y: PLOT.bottom + 17, "text-anchor": "middle", class: "tick"},
               label);
  }
}

// The legend at the right of the plot: a row per label value (a line sample
// in its colour, then the value, "no data yet" when none of its series has
// a point), then a row per line style (a gray sample in its dash pattern).
function drawLegend(svg, keys, variants) {
  const fits = Math.floor((CHART_HEIGHT - PLOT.top) / LEGEND_ROW);  // rows
  const styleRows = variants.length ? variants.length + 1 : 0;  // a gap, then one each
  // Too many label values: as many as fit, then "+N more".
  const shownKeys = keys.length + styleRows > fits ? fits - 1 - styleRows : keys.length;
  const sample = (row, colour, dash) => {
    const attributes = {x1: LEGEND_LEFT, x2: LEGEND_LEFT + 20, y1: row - 4, y2: row - 4,
                        stroke: colour, "stroke-width": 2.5, class: "legend-line"};
    if (dash) attributes["stroke-dasharray"] = dash;
    svgElement(svg, "line", attributes);
  };
  let row = PLOT.top + 12;
  const text = (label, empty) => svgElement(
      svg, "text", {x: LEGEND_LEFT + 26, y: row, class: empty ? "legend empty" : "legend"}, label);
  for (const entry of keys.slice(0, Math.max(0, shownKeys))) {
    // About 25 characters fit beside the sample, 14 before "no data yet".
    const room = entry.drawn > 0 ? 25 : 14;
    const label = entry.key.length > room ? entry.key.slice(0, room - 1) + "…" : entry.key;
    sample(row, entry.colour);
    const line = text(label, entry.drawn === 0);
    if (entry.drawn === 0) svgElement(line, "tspan", {class: "legend-note"}, " no data yet");
    row += LEGEND_ROW;
  }
  if (shownKeys < keys.length) {
    text("+" + (keys.length - shownKeys) + " more", true);
    row += LEGEND_ROW;
  }
  if (variants.length) row += LEGEND_ROW / 2;
  for (const {variant, dash} of variants) {
    sample(row, "#777", dash);
    text(variant);
    row += LEGEND_ROW;
  }
}

function drawChart(svg, spec, intervalMs) {
  const series = chartSeries(svg.id);
  const newest = chartHistory.length ? chartHistory[chartHistory.length - 1].time : 0;
  const oldest = chartHistory.length ? chartHistory[0].time : 0;
  const span = Math.min(CHART_WINDOW_MS, Math.max(newest - oldest, 10 * intervalMs));
  const values = [];
  for (const s of series) {
    for (const p of s.points) if (Number.isFinite(p.value)) values.push(p.value);
  }
  const axis = spec.scale === "log" ? logAxis(values) : linearAxis(values, spec.integer);
  const x = (t) => PLOT.right - (newest - t) / span * (PLOT.right - PLOT.left);
  const y = (v) => PLOT.bottom - axis.map(v) * (PLOT.bottom - PLOT.top);

  svg.replaceChildren();
  for (const [name, value] of [["width", CHART_WIDTH], ["height", CHART_HEIGHT],
                               ["viewBox", `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`],
                               ["role", "img"], ["aria-label", spec.title]]) {
    svg.setAttribute(name, value);
  }
  svgElement(svg, "text", {x: PLOT.left, y: 18, class: "chart-title"}, spec.title);
  svgElement(svg, "rect", {x: PLOT.left, y: PLOT.top, width: PLOT.right - PLOT.left,
                           height: PLOT.bottom - PLOT.top, class: "plot"});
  drawAxes(svg, spec, axis, y, newest, span);

  const keys = new Map();      // label value -> {key, colour, drawn (points)}
  const variants = new Map();  // variant -> {variant, dash}
  let points = 0;
  const paths = series.map((s) => {
    const dash = (CHART_VARIANTS[s.variant] || {}).dash;
    const colour = colourFor(spec.colours, s.key);
    const path = pathData(s.points, x, y);
    points += path.drawn;
    if (!keys.has(s.key)) keys.set(s.key, {key: s.key, colour, drawn: 0});
    keys.get(s.key).drawn += path.drawn;
    if (s.variant) variants.set(s.variant, {variant: s.variant, dash});
    return {s, path, colour, dash};
  });
  // Dashed and dotted lines first, so that the solid ones stay on top.
  for (const {s, path, colour, dash} of [...paths].sort((a, b) => !!b.dash - !!a.dash)) {
    const attributes = {d: path.d, stroke: colour, class: "series",
                        "data-series": s.name, "data-points": path.drawn};
    if (dash) attributes["stroke-dasharray"] = dash;
    svgElement(svg, "path", attributes);
  }
  drawLegend(svg, [...keys.values()], [...variants.values()]);
  if (points === 0) {
    const cx = (PLOT.left + PLOT.right) / 2;
    const cy = (PLOT.top + PLOT.bottom) / 2;
    svgElement(svg, "text", {x: cx, y: cy, "text-anchor": "middle", class: "no-data"},
               "no data yet");
    if (chartHistory.length > 0 && !chartMetricScraped(spec.metric)) {
      svgElement(svg, "text", {x: cx, y: cy + 18, "text-anchor": "middle", class: "no-data-why"},
                 "(/metrics has no " + spec.metric + ")");
    }
  }
  svg.dataset.points = String(points);
  svg.dataset.series = series.map((s) => s.name).join(",");
  svg.dataset.state = points > 0 ? "drawn" : "no-data";
}

// Redraws every chart of the page; intervalMs: the scrape interval (the
// shortest time axis is 10 of them).
function renderCharts(intervalMs) {
  for (const [chartId, spec] of Object.entries(CHART_SPECS)) {
    const svg = document.getElementById(chartId);
    if (svg) drawChart(svg, spec, intervalMs);
  }
}
