#!/usr/bin/env python3
"""Loads the status page in headless chromium and saves what a checker needs:
the DOM, the geometry of every chart and a PNG screenshot of the whole page,
all of one frozen moment.

Usage: status_page_screenshot.py URL OUT_DIR [--scrapes N] [--timeout-s S]
       [--width PX] [--chromium BIN] [--break CHART:HOW ...]

chromium is driven over the DevTools protocol on a pipe (--remote-debugging-
pipe: JSON messages ended by a NUL byte on fds 3 and 4; no port, no
websocket). Real time, not --virtual-time-budget: the page's rates divide by
its own clock, which virtual time runs far faster than the server's, and
waiting for a condition (body data-scrapes >= N) is sturdier on a loaded
machine than a fixed budget. Once there, the page's scrape loop is stopped
(no scrape redraws the charts while they are read), and the reading is
retried if a scrape still landed in between.

Writes OUT_DIR/clean/{dom.html,charts.json,screenshot.png}; with --break,
then breaks those charts in the live page (the checker's own test: it must
fail on exactly them) and writes OUT_DIR/broken/ the same way. HOW is
empty-path (d=""), hidden-lines (paths invisible, DOM intact: only pixels
can tell), no-ticks (tick labels removed) or blank (the <svg> emptied,
data attributes kept). Exits 1 with a message on any failure.
"""

import argparse
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

SABOTAGE = {
    "empty-path": "svg.querySelectorAll('path.series').forEach(p => p.setAttribute('d', ''))",
    "hidden-lines":
        "svg.querySelectorAll('path.series').forEach(p => p.style.visibility = 'hidden')",
    "no-ticks": "svg.querySelectorAll('text.tick').forEach(t => t.remove())",
    "blank": "svg.replaceChildren()",
}

# Every chart's geometry in page pixels (scroll offsets added), for
# check_status_charts.py.
GEOMETRY_JS = r"""(() => {
  const box = (e) => { const r = e.getBoundingClientRect();
    return [r.left + scrollX, r.top + scrollY, r.width, r.height]; };
  return {
    scrapes: document.body.dataset.scrapes,
    devicePixelRatio: devicePixelRatio,
    charts: [...document.querySelectorAll('svg.chart')].map((svg) => {
      const plot = svg.querySelector('rect.plot');
      return {
        id: svg.id, box: box(svg), plot: plot ? box(plot) : null,
        points: svg.dataset.points, series: svg.dataset.series, state: svg.dataset.state,
        ticks: [...svg.querySelectorAll('text.tick')].map((t) => t.textContent),
        noData: [...svg.querySelectorAll('text.no-data, text.no-data-why')]
            .map((t) => t.textContent).join(' '),
        paths: [...svg.querySelectorAll('path.series')].map((p) => ({
          series: p.dataset.series, points: p.dataset.points,
          stroke: p.getAttribute('stroke'), d: p.getAttribute('d') || '',
          visible: getComputedStyle(p).visibility === 'visible'})),
      };
    }),
  };
})()"""


class DevTools:
    """The DevTools protocol over chromium's pipe: one command at a time."""

    def __init__(self, chromium, profile, width, log):
        to_chromium = os.pipe()
        from_chromium = os.pipe()

        def wire_fds():  # in the child: fd 3 reads commands, fd 4 writes replies
            os.dup2(to_chromium[0], 3)
            os.dup2(from_chromium[1], 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
             "--force-device-scale-factor=1", f"--window-size={width},1000",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire_fds, stdout=log, stderr=log)
        os.close(to_chromium[0])
        os.close(from_chromium[1])
        self.out = to_chromium[1]
        self.inp = from_chromium[0]
        self.buffer = b""
        self.next_id = 0
        self.session = None

    def send(self, method, params=None, timeout_s=30, browser=False):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not browser:
            message["sessionId"] = self.session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:  # replies come in order among events; skip the events
            while b"\0" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.inp], [], [], left)[0]:
                    raise RuntimeError(f"no reply to {method} in {timeout_s} s")
                chunk = os.read(self.inp, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate",
                           {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self):
        try:
            self.send("Browser.close", browser=True, timeout_s=5)
        except RuntimeError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def open_page(tools, url, width):
    targets = tools.send("Target.getTargets", browser=True)["targetInfos"]
    page = next(t for t in targets if t["type"] == "page")
    tools.session = tools.send("Target.attachToTarget", {
        "targetId": page["targetId"], "flatten": True}, browser=True)["sessionId"]
    tools.send("Page.enable")
    tools.send("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    tools.send("Page.navigate", {"url": url})


def wait_for_scrapes(tools, scrapes, timeout_s):
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        seen = tools.evaluate("document.body ? document.body.dataset.scrapes : null")
        if seen is not None and int(seen or 0) >= scrapes:
            return
        time.sleep(0.1)
    error = tools.evaluate("(document.getElementById('scrape-error') || {}).textContent")
    raise RuntimeError(f"the page made {seen} scrapes in {timeout_s} s, wanted "
                       f"{scrapes}; its error line: {error!r}")


def freeze(tools):
    """Stops the page's scrape loop; returns once no scrape has landed for 1 s.

    The loop re-arms itself with setTimeout after every scrape, so a no-op
    setTimeout ends it after the scrape in flight, if any. (Pausing virtual
    time instead also stops the renderer's main thread, and a screenshot
    then waits forever now and then.)"""
    tools.evaluate("window.setTimeout = () => 0")
    last, since = None, time.monotonic()
    while time.monotonic() - since < 1.0:
        now = tools.evaluate("document.body.dataset.scrapes")
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.1)


def capture(tools, out_dir, width):
    """DOM, geometry and screenshot of one moment (retried if it moved)."""
    os.makedirs(out_dir, exist_ok=True)
    for _ in range(5):
        height = tools.evaluate("document.documentElement.scrollHeight")
        tools.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        geometry = tools.evaluate(GEOMETRY_JS)
        dom = tools.evaluate("document.documentElement.outerHTML")
        shot = tools.send("Page.captureScreenshot", {"format": "png"})
        if tools.evaluate("document.body.dataset.scrapes") == geometry["scrapes"]:
            break
    else:
        raise RuntimeError("the page kept redrawing while it was captured")
    with open(os.path.join(out_dir, "dom.html"), "w", encoding="utf-8") as f:
        f.write("<!doctype html>\n" + dom)
    with open(os.path.join(out_dir, "charts.json"), "w", encoding="utf-8") as f:
        json.dump(geometry, f, indent=1)
    with open(os.path.join(out_dir, "screenshot.png"), "wb") as f:
        f.write(base64.b64decode(shot["data"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("out_dir")
    parser.add_argument("--scrapes", type=int, default=12)
    parser.add_argument("--timeout-s", type=float, default=40)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--break", dest="breaks", action="append", default=[],
                        metavar="CHART:HOW")
    args = parser.parse_args()
    for spec in args.breaks:
        if spec.partition(":")[2] not in SABOTAGE:
            parser.error(f"--break {spec}: HOW is one of {', '.join(SABOTAGE)}")

    os.makedirs(args.out_dir, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="gdn-status-chromium-")
    with open(os.path.join(args.out_dir, "chromium.log"), "wb") as log:
        tools = DevTools(args.chromium, profile, args.width, log)
        try:
            open_page(tools, args.url, args.width)
            wait_for_scrapes(tools, args.scrapes, args.timeout_s)
            freeze(tools)
            capture(tools, os.path.join(args.out_dir, "clean"), args.width)
            if args.breaks:
                for spec in args.breaks:
                    chart, _, how = spec.partition(":")
                    tools.evaluate(f"(() => {{ const svg = document.getElementById("
                                   f"{json.dumps(chart)}); {SABOTAGE[how]}; }})()")
                capture(tools, os.path.join(args.out_dir, "broken"), args.width)
        except (RuntimeError, StopIteration) as error:
            print(f"status_page_screenshot: {error}", file=sys.stderr)
            return 1
        finally:
            tools.close()
            shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
