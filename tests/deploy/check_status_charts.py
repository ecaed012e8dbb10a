#!/usr/bin/env python3
"""Checks the status page's charts in what status_page_screenshot.py saved
(charts.json: the DOM state and boxes of every chart <svg>; screenshot.png:
the whole page at one CSS pixel per pixel), against the /metrics text the
server exported meanwhile.

Usage: check_status_charts.py CAPTURE_DIR METRICS.txt [--min-points N]
       [--expect-broken CHART,CHART]

METRICS.txt is scraped before the page opens, while the load runs: the page
scrapes later, so it sees every series METRICS.txt has (and maybe more).

A chart whose metric /metrics has must be drawn, in the DOM:
  state "drawn"; a series for every label value /metrics has (and P50 + P99
  per method for the quantile charts); one series with >= --min-points
  points; every path's data made of "M x y" / "L x y" / "h0" only (no NaN),
  one M or L per point it claims; at least 2 y tick labels and "now".
and in the screenshot, inside the chart's box:
  not blank (some ink away from the border); tick label text left of and
  below the plot (dark pixels); and drawn lines: pixels of a series' stroke
  colour inside the plot, at least LINE_PIXELS of one colour. (Not of every
  colour: a series can lie under another one, e.g. CreateSession and
  CloseSession at the same rate.)
A chart whose metric /metrics lacks (gdn_engine_batches_in_flight on servers
that predate it) must say so instead: state "no-data", no points, "no data"
and the metric's name in its text, and that text visible in the plot (or,
the metric having appeared since, be drawn as above).

Exits 0 when every chart passes; with --expect-broken, when exactly those
charts fail (the checker's own test against charts broken on purpose).
"""

import argparse
import json
import math
import os
import re
import sys

import matplotlib.image
import numpy as np

# The exposition parser of the figures' checker, beside this file (no
# __pycache__ left in the source tree).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_status_page_dom import parse_metrics  # noqa: E402

# Chart id -> (metric, label it is by, series per label value).
CHARTS = {
    "chart-calls": ("gdn_requests_total", "method", ["{}"]),
    "chart-tokens": ("gdn_tokens_total", "phase", ["{}"]),
    "chart-latency": ("gdn_request_duration_seconds_count", "method", ["{} P50", "{} P99"]),
    "chart-queue": ("gdn_queue_duration_seconds_count", "method", ["{} P50", "{} P99"]),
    "chart-batches": ("gdn_engine_batches_in_flight", "phase", ["{}"]),
    "chart-cache": ("gdn_state_cache_pages", "tier", ["{} used", "{} capacity"]),
}
PATH_DATA = re.compile(r"^(?:[ML]-?\d+(?:\.\d+)? -?\d+(?:\.\d+)?|h0)(?: (?:[ML]-?\d+(?:\.\d+)? "
                       r"-?\d+(?:\.\d+)?|h0))*$")
COLOUR_DISTANCE = 40  # 0..255 RGB; antialiased edges fall outside, line cores in
LINE_PIXELS = 20      # of one series colour inside the plot
TEXT_PIXELS = 15      # dark (tick label) pixels in each margin
INK_FRACTION = 0.01   # of the chart's box not white


def hex_colour(text):
    text = text.lstrip("#")
    return np.array([int(text[i:i + 2], 16) for i in (0, 2, 4)], dtype=float)


def crop(image, left, top, right, bottom):
    h, w = image.shape[:2]
    left, right = max(0, int(round(left))), min(w, int(round(right)))
    top, bottom = max(0, int(round(top))), min(h, int(round(bottom)))
    return image[top:bottom, left:right]


def dark_pixels(region, below=150):
    return int(np.sum(region.max(axis=2) < below)) if region.size else 0


def check_dom(chart, samples, args, errors):
    """Checks the chart's DOM state; returns whether it should show lines."""
    metric, label, patterns = CHARTS[chart["id"]]
    present = [l for n, l, _ in samples if n == metric]
    paths = chart["paths"]
    if not present and chart["state"] != "drawn":
        if chart["state"] != "no-data" or chart["points"] != "0" or paths:
            errors.append(f"/metrics has no {metric}, yet state={chart['state']!r} "
                          f"points={chart['points']!r} paths={len(paths)}")
        if "no data" not in chart["noData"] or metric.replace("_count", "") not in chart["noData"]:
            errors.append(f"says {chart['noData']!r}, not 'no data' and {metric}")
        return False
    if chart["state"] != "drawn":
        errors.append(f"state {chart['state']!r}, /metrics has {metric}")
    names = (chart["series"] or "").split(",")
    for value in sorted({l[label] for l in present if label in l}):
        for pattern in patterns:
            if pattern.format(value) not in names:
                errors.append(f"no series {pattern.format(value)!r} (has {names})")
    total = 0
    for path in paths:
        claimed = int(path["points"])
        total += claimed
        if path["d"] and not PATH_DATA.match(path["d"]):
            errors.append(f"series {path['series']!r}: bad path data {path['d'][:80]!r}")
        drawn = len(re.findall(r"[ML]", path["d"]))
        if drawn != claimed or (claimed > 0 and not path["d"]):
            errors.append(f"series {path['series']!r}: {drawn} points in its path, "
                          f"data-points says {claimed}")
    if str(total) != chart["points"]:
        errors.append(f"data-points {chart['points']} != {total}, the sum over its paths")
    most = max((int(p["points"]) for p in paths), default=0)
    if most < args.min_points:
        errors.append(f"its longest series has {most} points, want >= {args.min_points}")
    ticks = chart["ticks"]
    if "now" not in ticks or len(ticks) < 4 or any(re.search(r"NaN|Infinity|undefined", t)
                                                   for t in ticks):
        errors.append(f"tick labels {ticks}")
    return True


def check_pixels(chart, image, has_data, errors, report):
    left, top, width, height = chart["box"]
    # Inside the border (1 px, rounded corners).
    inside = crop(image, left + 3, top + 3, left + width - 3, top + height - 3)
    ink = float(np.mean(inside.min(axis=2) < 235)) if inside.size else 0.0
    report.append(f"ink {ink:.1%}")
    if ink < INK_FRACTION:
        errors.append(f"blank in the screenshot: {ink:.2%} of its box is not white")
    if chart["plot"] is None:
        errors.append("no plot area (rect.plot)")
        return
    pl, pt, pw, ph = chart["plot"]
    left_text = dark_pixels(crop(image, left + 3, pt - 8, pl - 2, pt + ph + 8))
    below_text = dark_pixels(crop(image, pl - 20, pt + ph + 5, pl + pw + 20, pt + ph + 24))
    report.append(f"tick text {left_text}+{below_text} px")
    if left_text < TEXT_PIXELS or below_text < TEXT_PIXELS:
        errors.append(f"axis text missing in the screenshot: {left_text} dark pixels left "
                      f"of the plot, {below_text} below (want >= {TEXT_PIXELS} each)")
    plot = crop(image, pl - 2, pt - 2, pl + pw + 2, pt + ph + 2)
    if not has_data:
        message = dark_pixels(crop(image, pl + pw / 4, pt + ph / 3, pl + 3 * pw / 4,
                                   pt + 2 * ph / 3), below=200)
        report.append(f"no-data text {message} px")
        if message < TEXT_PIXELS:
            errors.append(f"its 'no data' text is not visible ({message} px)")
        return
    counts = {}
    for path in chart["paths"]:
        if int(path["points"]) < 2 or path["stroke"] in counts:
            continue
        distance = np.linalg.norm(plot - hex_colour(path["stroke"]), axis=2)
        counts[path["stroke"]] = int(np.sum(distance < COLOUR_DISTANCE))
    report.append("line px " + " ".join(f"{c}={n}" for c, n in counts.items()))
    if max(counts.values(), default=0) < LINE_PIXELS:
        errors.append(f"no drawn line in the screenshot: series colour pixels in the plot "
                      f"{counts}, want >= {LINE_PIXELS} of one")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("capture_dir")
    parser.add_argument("metrics")
    parser.add_argument("--min-points", type=int, default=6)
    parser.add_argument("--expect-broken", default="")
    args = parser.parse_args()
    with open(f"{args.capture_dir}/charts.json", encoding="utf-8") as f:
        geometry = json.load(f)
    with open(args.metrics, encoding="utf-8") as f:
        samples = parse_metrics(f.read())
    # RGB(A) floats 0..1 -> RGB 0..255.
    image = matplotlib.image.imread(f"{args.capture_dir}/screenshot.png")[:, :, :3] * 255.0
    if not math.isclose(geometry["devicePixelRatio"], 1.0):
        print(f"check_status_charts: devicePixelRatio {geometry['devicePixelRatio']}, want 1")
        return 1

    charts = {c["id"]: c for c in geometry["charts"]}
    failed = []
    for chart_id in CHARTS:
        errors, report = [], []
        chart = charts.get(chart_id)
        if chart is None:
            errors.append("no such <svg> on the page")
        else:
            has_data = check_dom(chart, samples, args, errors)
            check_pixels(chart, image, has_data, errors, report)
        status = "FAILED" if errors else "ok"
        print(f"check_status_charts: #{chart_id} {status}: points={chart and chart['points']} "
              f"{'; '.join(report)}")
        for error in errors:
            print(f"  #{chart_id}: {error}")
        if errors:
            failed.append(chart_id)

    expected = sorted(filter(None, args.expect_broken.split(",")))
    if sorted(failed) != expected:
        print(f"check_status_charts: charts failing {sorted(failed)}, expected {expected}")
        return 1
    print(f"check_status_charts: {len(CHARTS) - len(failed)} charts pass, "
          f"{len(failed)} fail as expected" if expected else
          f"check_status_charts: all {len(CHARTS)} charts pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
