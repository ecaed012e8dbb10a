#!/usr/bin/env python3
"""Schema check of an Envoy bootstrap YAML (deploy/envoy/envoy.yaml) without
Envoy: parses it into envoy.config.bootstrap.v3.Bootstrap with the generated
protobuf classes of PyPI's xds-protos, so unknown fields, wrong types and
unknown "@type"s of typed_config fail. Envoy's own validation rules (PGV
annotations: ranges, required fields) and cross-references (a route naming a
missing cluster) are checked by the few explicit checks below, not in full.
Usage: check_envoy_config.py FILE
"""
import importlib
import sys

import yaml
from google.protobuf import json_format

# Every typed_config "@type" the file uses must have its module imported so
# that json_format can resolve it.
_MODULES = [
    "envoy.config.bootstrap.v3.bootstrap_pb2",
    "envoy.extensions.filters.network.http_connection_manager.v3.http_connection_manager_pb2",
    "envoy.extensions.filters.http.router.v3.router_pb2",
    "envoy.extensions.retry.host.previous_hosts.v3.previous_hosts_pb2",
    "envoy.extensions.upstreams.http.v3.http_protocol_options_pb2",
]


def main(path):
    for m in _MODULES:
        importlib.import_module(m)
    from envoy.config.bootstrap.v3 import bootstrap_pb2
    with open(path) as f:
        doc = yaml.safe_load(f)
    bootstrap = bootstrap_pb2.Bootstrap()
    json_format.ParseDict(doc, bootstrap)  # raises on any schema error
    clusters = {c.name for c in bootstrap.static_resources.clusters}
    errors = []
    for c in bootstrap.static_resources.clusters:
        if c.lb_policy != c.RING_HASH:
            errors.append("cluster %s: lb_policy is not RING_HASH" % c.name)
    from envoy.extensions.filters.network.http_connection_manager.v3 import (
        http_connection_manager_pb2 as hcm_pb2)
    for listener in bootstrap.static_resources.listeners:
        for chain in listener.filter_chains:
            for flt in chain.filters:
                hcm = hcm_pb2.HttpConnectionManager()
                if not flt.typed_config.Unpack(hcm):
                    continue
                for vh in hcm.route_config.virtual_hosts:
                    for r in vh.routes:
                        if r.route.cluster not in clusters:
                            errors.append("route to unknown cluster %s" % r.route.cluster)
                        headers = [h.header.header_name for h in r.route.hash_policy]
                        if headers != ["x-gdn-route"]:
                            errors.append("route hash_policy is %s, not x-gdn-route" % headers)
    for e in errors:
        print("check_envoy_config: %s: %s" % (path, e), file=sys.stderr)
    if errors:
        return 1
    print("check_envoy_config: %s: OK (%d clusters)" % (path, len(clusters)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
