#!/usr/bin/env python3
"""Tests of check_metric_names.py: that it finds the names an expression uses
and rejects a renamed metric, a misused histogram and an unknown label.
Run: python3 tests/deploy/check_metric_names_test.py (stdlib only)."""
import copy
import json
import os
import random
import string
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_metric_names as cmn  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
METRICS_SOURCE = os.path.join(ROOT, "server", "ops", "metrics.cc")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "gdn-serve.json")


def random_name(rng, prefix="gdn_"):
    return prefix + "".join(rng.choice(string.ascii_lowercase) for _ in range(8))


class ParseTest(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random()

    def test_exported_metrics_reads_names_kinds_and_labels(self):
        names = {random_name(self.rng): kind for kind in ("counter", "gauge", "histogram")}
        label = random_name(self.rng, prefix="l")
        source = "\n".join(
            f'x_(Build{kind.capitalize()}()\n    .Name("{name}")\n    .Help("h"))'
            for name, kind in names.items())
        source += f'\nfoo.Add({{{{"{label}", std::string(v)}}}});'
        kinds, labels = cmn.exported_metrics(source)
        self.assertEqual(kinds, names)
        self.assertEqual(labels, {label})

    def test_parse_expression_finds_metrics_and_labels_only(self):
        a, b = random_name(self.rng), random_name(self.rng)
        la, lb, lc = (random_name(self.rng, prefix="l") for _ in range(3))
        expr = (f'histogram_quantile(0.99, sum by ({la}, le) (rate({a}_bucket'
                f'{{{lb}=~"x|y", {lc}!="a{{b}}"}}[5m] offset 1h))) > 2.5e-3 * '
                f'on ({la}) group_left max without ({lb}) ({b})')
        metrics, labels = cmn.parse_expression(expr)
        self.assertEqual(metrics, {a + "_bucket", b})
        self.assertEqual(labels, {la, lb, lc, "le"})


class CheckTest(unittest.TestCase):
    def setUp(self):
        with open(METRICS_SOURCE) as f:
            self.kinds, labels = cmn.exported_metrics(f.read())
        self.known_labels = labels | cmn.TARGET_LABELS
        with open(DASHBOARD) as f:
            self.dashboard = json.load(f)
        self.rng = random.Random()

    def errors_of(self, dashboard):
        items = cmn.dashboard_expressions(dashboard)
        return cmn.check_expressions(items, self.kinds, self.known_labels, False)

    def test_real_dashboard_passes(self):
        self.assertGreater(len(self.kinds), 0)
        self.assertEqual(self.errors_of(self.dashboard), [])

    def test_renamed_metric_in_any_panel_fails(self):
        panels = [p for p in self.dashboard["panels"] if p.get("targets")]
        panel = self.rng.choice(panels)
        target = self.rng.choice(panel["targets"])
        used = sorted(cmn.parse_expression(target["expr"])[0])
        old = self.rng.choice(used)
        new = old.replace("gdn_", "gdn_x" + random_name(self.rng, prefix=""), 1)
        mutated = copy.deepcopy(self.dashboard)
        for p in mutated["panels"]:
            if p["id"] == panel["id"]:
                for t in p["targets"]:
                    t["expr"] = t["expr"].replace(old, new)
        errors = self.errors_of(mutated)
        self.assertTrue(any(new in e for e in errors), errors)

    def test_histogram_without_suffix_and_gauge_with_suffix_fail(self):
        histogram = self.rng.choice([n for n, k in self.kinds.items() if k == "histogram"])
        gauge = self.rng.choice([n for n, k in self.kinds.items() if k == "gauge"])
        self.assertIsNotNone(cmn.check_name(histogram, self.kinds, False))
        self.assertIsNone(cmn.check_name(histogram + "_count", self.kinds, False))
        self.assertIsNotNone(cmn.check_name(gauge + "_bucket", self.kinds, False))
        self.assertIsNone(cmn.check_name(gauge, self.kinds, False))

    def test_unknown_label_and_prometheus_series_outside_rules_fail(self):
        gauge = self.rng.choice([n for n, k in self.kinds.items() if k == "gauge"])
        label = random_name(self.rng, prefix="lbl_")
        items = [("t", f'sum by ({label}) ({gauge})')]
        errors = cmn.check_expressions(items, self.kinds, self.known_labels, False)
        self.assertTrue(any(label in e for e in errors), errors)
        up = [("t", "up == 0")]
        self.assertNotEqual(cmn.check_expressions(up, self.kinds, self.known_labels, False), [])
        self.assertEqual(cmn.check_expressions(up, self.kinds, self.known_labels, True), [])

    def test_variable_query_with_unknown_metric_fails(self):
        mutated = copy.deepcopy(self.dashboard)
        name = random_name(self.rng)
        for variable in mutated["templating"]["list"]:
            if variable["type"] == "query":
                variable["query"]["query"] = f"label_values({name}, instance)"
        errors = self.errors_of(mutated)
        self.assertTrue(any(name in e for e in errors), errors)


if __name__ == "__main__":
    unittest.main()
