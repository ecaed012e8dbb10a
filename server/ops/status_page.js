// The status page's scrape loop (server/ops/status_page.html loads it last):
// fetches ./metrics every SCRAPE_INTERVAL_MS, keeps the last minute of
// scrapes for the current figures (status_figures.js) and hands every scrape
// to the charts' 15-minute ring (status_chart_data.js, status_charts.js).
"use strict";

// 2 s, or ?scrape_ms=N (100..60000 ms) for tests that need many scrapes soon.
const SCRAPE_INTERVAL_MS = (() => {
  const asked = Number(new URLSearchParams(location.search).get("scrape_ms"));
  return asked >= 100 && asked <= 60000 ? asked : 2000;
})();
const WINDOW_MS = 60000;  // "last minute"
const SCRAPE_TIMEOUT_MS = 5000;

let minuteScrapes = [];  // [{time (ms), samples}], oldest first, within WINDOW_MS
let scrapes = 0;

async function scrape() {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), SCRAPE_TIMEOUT_MS);
  try {
    const response = await fetch("metrics", {cache: "no-store", signal: controller.signal});
    if (!response.ok) throw new Error("HTTP " + response.status);
    const samples = parseExposition(await response.text());
    if (!samples.some((s) => s.name === "gdn_build_info")) {
      throw new Error("no gdn_build_info in /metrics: not a gdn-server?");
    }
    const time = Date.now();
    // A counter that went down means the server restarted: start afresh.
    const last = minuteScrapes[minuteScrapes.length - 1];
    const restarted = last !== undefined &&
        total(samples, "gdn_requests_total") < total(last.samples, "gdn_requests_total");
    if (restarted) minuteScrapes = [];
    minuteScrapes.push({time, samples});
    while (minuteScrapes.length > 2 && minuteScrapes[1].time <= time - WINDOW_MS) {
      minuteScrapes.shift();
    }
    renderFigures(minuteScrapes[minuteScrapes.length - 1],
                  minuteScrapes.length > 1 ? minuteScrapes[0] : null);
    recordChartScrape(time, samples, restarted);
    renderCharts(SCRAPE_INTERVAL_MS);
    scrapes++;
    document.body.dataset.scrapes = String(scrapes);
    document.body.dataset.lastScrape = new Date(time).toISOString();
    document.body.dataset.scrapeOk = "true";
    document.getElementById("last-scrape").textContent = new Date(time).toLocaleTimeString();
    document.getElementById("scrape-error").hidden = true;
  } catch (error) {
    document.body.dataset.scrapeOk = "false";
    const line = document.getElementById("scrape-error");
    line.textContent = "scrape of /metrics failed at " + new Date().toLocaleTimeString() +
        ": " + (error && error.message ? error.message : String(error)) +
        (scrapes > 0 ? " (figures below are from the last good scrape)" : "");
    line.hidden = false;
  } finally {
    clearTimeout(timer);
    setTimeout(scrape, SCRAPE_INTERVAL_MS);
  }
}

document.getElementById("scrape-interval").textContent =
    SCRAPE_INTERVAL_MS % 1000 === 0 ? SCRAPE_INTERVAL_MS / 1000 + " s" : SCRAPE_INTERVAL_MS + " ms";
renderCharts(SCRAPE_INTERVAL_MS);  // empty frames saying "no data yet"
scrape();
