"""Reads Prometheus text exposition from stdin with Prometheus's own Python client parser and prints its
samples as JSON: [{"name", "labels", "value"}]. A text the parser refuses exits non-zero."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for sample in family.samples:
        samples.append({"name": sample.name, "labels": sample.labels, "value": sample.value, "type": family.type})
json.dump(samples, sys.stdout)
