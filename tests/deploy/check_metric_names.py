#!/usr/bin/env python3
"""Checks that the dashboard and the alert rules only use metrics gdn-server exports.

The exported names, their types and label names are read from server/ops/metrics.cc
(the BuildCounter/BuildGauge/BuildHistogram().Name("...") calls), so renaming a
metric in the server without updating deploy/ fails the build, and so does a
typo in a panel or a rule. Histograms may only be used through their _bucket,
_sum and _count series; counters and gauges only under their own name.

Usage:
  check_metric_names.py --metrics-source server/ops/metrics.cc \
      --dashboard deploy/grafana/gdn-serve.json --rules deploy/prometheus/alerts.yml \
      [--emit-rules OUT.yml]
--emit-rules writes every dashboard expression (Grafana variables filled in) as a
recording rule, so `promtool check rules OUT.yml` parses each one as PromQL.
"""
import argparse
import json
import re
import sys

# Labels a scrape adds (deploy/prometheus/prometheus.yml) and histograms' le.
TARGET_LABELS = {"instance", "job", "namespace", "le"}
# Series Prometheus makes itself, allowed in alert rules only.
PROMETHEUS_SERIES = {"up"}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring",
                "group_left", "group_right", "bool", "offset", "inf", "nan"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Grafana variables, replaced by values PromQL accepts.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m",
                     "$__range": "1h", "$instance": ".*", "${instance}": ".*"}


def exported_metrics(source_text):
    """{name: kind} and the label names used in server/ops/metrics.cc."""
    kinds = {}
    for kind, name in re.findall(
            r'Build(Counter|Gauge|Histogram)\(\)\s*\.Name\("([a-z_:][a-z0-9_:]*)"\)',
            source_text):
        kinds[name] = kind.lower()
    labels = set(re.findall(r'\{\s*"([a-z_][a-z0-9_]*)"\s*,', source_text))
    return kinds, labels


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)


def parse_expression(expr):
    """(metric names, label names) that a PromQL expression refers to."""
    text = strip_strings(expr)
    labels = set()
    for body in re.findall(r"\{([^}]*)\}", text):
        labels |= set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body))
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    grouping = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)"
    for body in re.findall(grouping, text):
        labels |= set(re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", body))
    text = re.sub(grouping, " ", text)
    metrics = set()
    for match in re.finditer(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        word = match.group(0)
        followed_by_call = re.match(r"\s*\(", text[match.end():])
        if followed_by_call or word.lower() in PROMQL_WORDS:
            continue
        metrics.add(word)
    return metrics, labels


def check_name(name, kinds, allow_prometheus_series):
    """An error message, or None when the series name is one gdn-server exports."""
    if name in kinds:
        if kinds[name] == "histogram":
            return f"{name} is a histogram: use {name}_bucket, _sum or _count"
        return None
    for suffix in HISTOGRAM_SUFFIXES:
        base = name[: -len(suffix)]
        if name.endswith(suffix) and kinds.get(base) == "histogram":
            return None
    if allow_prometheus_series and name in PROMETHEUS_SERIES:
        return None
    return f"{name} is not a metric gdn-server exports"


def dashboard_expressions(dashboard):
    """(where, expr) of every panel target and of the query variables."""
    found = []

    def walk_panels(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                if "expr" in target:
                    found.append((f'panel "{panel.get("title")}"', target["expr"]))
            walk_panels(panel.get("panels", []))

    walk_panels(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        if variable.get("type") == "query" and query:
            found.append((f'variable "{variable.get("name")}"', query))
    return found


def label_values_call(expr):
    """Grafana's label_values(metric, label) as (metric, label), else None."""
    match = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*", expr)
    return (match.group(1), match.group(2)) if match else None


def check_expressions(items, kinds, known_labels, allow_prometheus_series):
    errors = []
    for where, expr in items:
        call = label_values_call(expr)
        if call:
            metrics, labels = {call[0]}, {call[1]}
        else:
            metrics, labels = parse_expression(expr)
        if not any(m.startswith("gdn_") or m in PROMETHEUS_SERIES for m in metrics):
            errors.append(f"{where}: no gdn_ metric in {expr!r}")
        for name in sorted(metrics):
            problem = check_name(name, kinds, allow_prometheus_series)
            if problem:
                errors.append(f"{where}: {problem}")
        for label in sorted(labels - known_labels):
            errors.append(f"{where}: label {label!r} is neither a gdn-server nor a target label")
    return errors


def fill_variables(expr):
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--metrics-source", required=True)
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--rules", action="append", default=[])
    parser.add_argument("--emit-rules")
    args = parser.parse_args(argv)

    with open(args.metrics_source) as f:
        kinds, labels = exported_metrics(f.read())
    if not kinds:
        print(f"error: no BuildX().Name(...) metric found in {args.metrics_source}")
        return 1
    known_labels = labels | TARGET_LABELS

    with open(args.dashboard) as f:
        dashboard = json.load(f)
    panel_items = dashboard_expressions(dashboard)
    errors = check_expressions(panel_items, kinds, known_labels, False)
    rule_count = 0
    for path in args.rules:
        import yaml  # only the rules need PyYAML (the tools venv has it)
        with open(path) as f:
            groups = yaml.safe_load(f)["groups"]
        items = [(f'{path}: {r.get("alert") or r.get("record")}', r["expr"])
                 for g in groups for r in g["rules"]]
        rule_count += len(items)
        errors += check_expressions(items, kinds, known_labels, True)

    used = set()
    for _, expr in panel_items:
        used |= parse_expression(expr)[0]
    unshown = [n for n in sorted(kinds)
               if not ({n} | {n + s for s in HISTOGRAM_SUFFIXES}) & used]
    for name in unshown:
        print(f"note: {name} has no panel on the dashboard")

    if args.emit_rules:
        with open(args.emit_rules, "w") as f:
            f.write("groups:\n  - name: dashboard_expressions\n    rules:\n")
            for i, (_, expr) in enumerate(panel_items):
                if label_values_call(expr):
                    continue
                f.write(f"      - record: dashboard:expr_{i}\n")
                f.write(f"        expr: {json.dumps(fill_variables(expr))}\n")

    for error in errors:
        print(f"error: {error}")
    print(f"{len(panel_items)} dashboard and {rule_count} rule expressions checked "
          f"against {len(kinds)} exported metrics: {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
