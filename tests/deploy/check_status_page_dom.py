#!/usr/bin/env python3
"""Checks the status page's DOM (as a headless browser dumped it) against the
/metrics text scraped from the same idle server right after.

Usage: check_status_page_dom.py DOM.html METRICS.txt [--sessions N]
       [--min-spills N]

Every figure is read from its element's data-value attribute (base units; ""
when there is none) and compared with the value computed here, independently,
from the exposition text: sums by label as the dashboard's queries do, and
Prometheus' histogram_quantile for quantiles. The server must have been idle
while the page scraped (no calls between its scrapes and the one here), so the
"last minute" rates are 0 and the "last minute" quantiles have no data.
Exits 1 with one line per mismatch.
"""

import argparse
import html.parser
import math
import re
import sys
from collections import defaultdict

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_value(text):
    return float(text)  # also "+Inf", "-Inf" and "NaN"


def parse_metrics(text):
    """The exposition text -> [(name, {label: value}, value)]."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"unparsable sample line: {line!r}")
        labels = {k: re.sub(r'\\(.)', lambda e: "\n" if e.group(1) == "n"
                            else e.group(1), v)
                  for k, v in LABEL.findall(m.group(3) or "")}
        samples.append((m.group(1), labels, parse_value(m.group(4))))
    return samples


def total(samples, name, **filt):
    values = [v for n, l, v in samples
              if n == name and all(l.get(k) == x for k, x in filt.items())]
    return sum(values) if values else math.nan


def sum_by(samples, name, label):
    out = defaultdict(float)
    for n, l, v in samples:
        if n == name and label in l:
            out[l[label]] += v
    return dict(out)


def buckets_by(samples, base, label):
    """label value -> {le: cumulative count} (sum by (label, le))."""
    out = defaultdict(lambda: defaultdict(float))
    for n, l, v in samples:
        if n == base + "_bucket" and label in l:
            out[l[label]][parse_value(l["le"])] += v
    return out


def histogram_quantile(q, buckets):
    """Prometheus' bucketQuantile (promql/quantile.go)."""
    if not buckets:
        return math.nan
    b = sorted(buckets.items())
    if len(b) < 2 or b[-1][0] != math.inf:
        return math.nan
    counts = [c for _, c in b]
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    observations = counts[-1]
    if observations <= 0:
        return math.nan
    rank = q * observations
    index = next((i for i in range(len(b) - 1) if counts[i] >= rank),
                 len(b) - 1)
    if index == len(b) - 1:
        return b[-2][0]
    if index == 0 and b[0][0] <= 0:
        return b[0][0]
    start, end, count = 0.0, b[index][0], counts[index]
    if index > 0:
        start = b[index - 1][0]
        count -= counts[index - 1]
        rank -= counts[index - 1]
    return start + (end - start) * (rank / count)


class Elements(html.parser.HTMLParser):
    """id -> (attributes, text) of every element with an id, plus <body>'s
    attributes."""

    def __init__(self):
        super().__init__()
        self.by_id = {}
        self.body = {}
        self._open = []  # ids of the elements being read, innermost last

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "body":
            self.body = attrs
        if "id" in attrs:
            self.by_id[attrs["id"]] = [attrs, ""]
        self._open.append(attrs.get("id"))

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        for element_id in self._open:
            if element_id is not None:
                self.by_id[element_id][1] += data


class Checker:
    def __init__(self, elements):
        self.elements = elements
        self.errors = []
        self.checked = 0

    def value(self, element_id):
        """The element's data-value as a float (NaN for ""), or None."""
        element = self.elements.by_id.get(element_id)
        if element is None:
            self.errors.append(f"#{element_id}: no such element")
            return None
        text = element[0].get("data-value")
        if text is None:
            self.errors.append(f"#{element_id}: no data-value")
            return None
        return math.nan if text == "" else float(text)

    def expect(self, element_id, want, rel=1e-9):
        got = self.value(element_id)
        if got is None:
            return
        self.checked += 1
        if math.isnan(want) and math.isnan(got):
            return
        if math.isnan(want) or math.isnan(got) or \
                abs(got - want) > rel * max(abs(want), 1e-300):
            self.errors.append(f"#{element_id}: page shows {got!r}, "
                               f"/metrics gives {want!r}")

    def expect_text(self, element_id, want):
        element = self.elements.by_id.get(element_id)
        got = element[0].get("data-value") if element else None
        self.checked += 1
        if got != want:
            self.errors.append(f"#{element_id}: page shows {got!r}, "
                               f"/metrics gives {want!r}")

    def expect_true(self, condition, message):
        self.checked += 1
        if not condition:
            self.errors.append(message)


def check(elements, samples, args):
    c = Checker(elements)
    body = elements.body
    c.expect_true(int(body.get("data-scrapes", "0")) >= 2,
                  f"body data-scrapes={body.get('data-scrapes')!r}: the page "
                  "should have scraped at least twice")
    c.expect_true(body.get("data-scrape-ok") == "true",
                  f"body data-scrape-ok={body.get('data-scrape-ok')!r}")
    c.expect_true(body.get("data-last-scrape", "") != "",
                  "body data-last-scrape is empty")
    error_line = elements.by_id.get("scrape-error")
    c.expect_true(error_line is not None and "hidden" in error_line[0],
                  f"#scrape-error is showing: {error_line and error_line[1]!r}")

    build = [l for n, l, _ in samples if n == "gdn_build_info"]
    c.expect_true(len(build) == 1, "no gdn_build_info in /metrics")
    if build:
        c.expect_text("build-version", build[0]["version"])
        c.expect_text("build-backend", build[0]["backend"])

    sessions = total(samples, "gdn_sessions")
    c.expect("sessions", sessions)
    if args.sessions is not None:
        c.expect_true(sessions == args.sessions,
                      f"gdn_sessions is {sessions}, the test opened "
                      f"{args.sessions}")
    c.expect("draft-pages", total(samples, "gdn_draft_pages"))
    c.expect("kept-states", total(samples, "gdn_kept_states"))
    c.expect("device-memory-used", total(samples, "gdn_device_memory_used_bytes"))
    c.expect("device-memory-total", total(samples, "gdn_device_memory_total_bytes"))
    # Idle server: nothing changed between the page's scrapes.
    c.expect("calls-per-second", 0.0)
    c.expect("tokens-per-second", 0.0)

    # Requests by method.
    calls = sum_by(samples, "gdn_requests_total", "method")
    latency = buckets_by(samples, "gdn_request_duration_seconds", "method")
    queue = buckets_by(samples, "gdn_queue_duration_seconds", "method")
    c.expect_true("Forward" in calls and "CreateSession" in calls,
                  f"expected Forward and CreateSession calls, got {sorted(calls)}")
    for method in sorted(set(calls) | set(latency)):
        c.expect(f"calls-total-{method}", calls.get(method, math.nan))
        c.expect(f"calls-per-second-{method}", 0.0)
        c.expect(f"errors-per-second-{method}", 0.0)
        p50 = histogram_quantile(0.5, latency.get(method))
        p99 = histogram_quantile(0.99, latency.get(method))
        c.expect(f"p50-total-{method}", p50)
        c.expect(f"p99-total-{method}", p99)
        c.expect_true(math.isfinite(p99) and p99 > 0,
                      f"P99 of {method} is {p99}, not a positive number")
        c.expect(f"queue-p99-total-{method}",
                 histogram_quantile(0.99, queue.get(method)))
        # No calls in the page's window.
        c.expect(f"p99-{method}", math.nan)
    forward_queue = histogram_quantile(0.99, queue.get("Forward"))
    c.expect_true(math.isfinite(forward_queue),
                  f"queue P99 of Forward is {forward_queue}, not a number")

    # Batching and kernels by phase.
    tokens = sum_by(samples, "gdn_tokens_total", "phase")
    kernel = buckets_by(samples, "gdn_kernel_duration_seconds", "phase")
    for phase in sorted(tokens):
        c.expect(f"tokens-total-{phase}", tokens[phase])
        c.expect(f"tokens-per-second-{phase}", 0.0)
        count = total(samples, "gdn_batch_size_count", phase=phase)
        mean = total(samples, "gdn_batch_size_sum", phase=phase) / count \
            if count > 0 else math.nan
        c.expect(f"batch-size-mean-total-{phase}", mean)
        c.expect(f"kernel-p99-total-{phase}",
                 histogram_quantile(0.99, kernel.get(phase)))
    c.expect_true(tokens.get("decode", 0) > 0 and tokens.get("prefill", 0) > 0,
                  f"expected decode and prefill tokens, got {tokens}")

    # State cache by tier and state.
    cache_series = 0
    for n, l, v in samples:
        if n in ("gdn_state_cache_pages", "gdn_state_cache_bytes"):
            what = n.rsplit("_", 1)[1]
            c.expect(f"cache-{what}-{l['tier']}-{l['state']}", v)
            cache_series += 1
    c.expect_true(cache_series >= 8,
                  f"only {cache_series} gdn_state_cache_* series in /metrics")
    for element_id, name in [("spills", "gdn_state_spills_total"),
                             ("restores", "gdn_state_restores_total"),
                             ("evictions", "gdn_state_evictions_total"),
                             ("sessions-expired", "gdn_sessions_expired_total"),
                             ("cow-copies", "gdn_cow_copies_total"),
                             ("draft-tokens", "gdn_draft_tokens_total"),
                             ("draft-accepted", "gdn_draft_accepted_tokens_total"),
                             ("kept-dropped", "gdn_kept_states_dropped_total")]:
        c.expect(element_id, total(samples, name))
        c.expect(element_id + "-per-second", 0.0)
    spills = total(samples, "gdn_state_spills_total")
    c.expect_true(spills >= args.min_spills,
                  f"gdn_state_spills_total is {spills}, expected at least "
                  f"{args.min_spills}")
    return c


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dom")
    parser.add_argument("metrics")
    parser.add_argument("--sessions", type=float, default=None,
                        help="the gdn_sessions the test expects")
    parser.add_argument("--min-spills", type=float, default=0)
    args = parser.parse_args()
    elements = Elements()
    with open(args.dom, encoding="utf-8") as f:
        elements.feed(f.read())
    with open(args.metrics, encoding="utf-8") as f:
        samples = parse_metrics(f.read())
    c = check(elements, samples, args)
    for error in c.errors:
        print("status page mismatch:", error)
    print(f"check_status_page_dom: {c.checked} figures checked, "
          f"{len(c.errors)} mismatches")
    return 1 if c.errors else 0


if __name__ == "__main__":
    sys.exit(main())
