#!/usr/bin/env python3
"""scripts/any_model_report.py turns gpu-any-model.sh's raw runs into the report and any-model.json:
a synthetic raw folder (one model run and served, one whose run failed) with the environment
given as a file, checked for the table's row, the served ratio, the failure named, and the JSON's
summary under the names results/gpu/README.md documents.

Usage: test_any_model_report.py PROJECT_ROOT OUT_DIR"""
import json
import os
import subprocess
import sys

root, out = sys.argv[1], sys.argv[2]
raw = os.path.join(out, "raw")
os.makedirs(raw, exist_ok=True)
run = {
    "model": "/tmp/x/tiny.pt", "param_bytes": 2_000_000, "bound_ms": 2.0, "over_bound": 1.05,
    "latency_ms": {"median": 2.1, "min": 2.0, "p99": 2.4}, "resident_ms": {"median": 1.5, "p99": 1.6},
    "copy_only_ms": {"median": 1.2, "p99": 1.3}, "copy_then_replay_ms": {"median": 2.7, "p99": 2.9},
    "speedup_over_copy_then_replay": 2.7 / 2.1, "outputs_equal": 9, "outputs_checked": 10,
    "graph": {"nodes": 12, "kernels": 10, "kernels_from_extra": 2, "kernels_unread": 1, "parameters_used": 7,
              "parameters": 8, "layers": 6, "memcpys": 0, "opaque": 0, "nodes_using_everything": 1},
    "plan": {"groups": 3, "copy_ranges": 4, "added_edges": 5},
}
with open(os.path.join(raw, "tiny.json"), "w") as f:
    json.dump(run, f)
with open(os.path.join(raw, "tiny-served.json"), "w") as f:
    json.dump({"latency_ms": {"count": 5, "median": 2.52, "p99": 3.0, "min": 2.4, "max": 3.0}}, f)
with open(os.path.join(raw, "broken.json"), "w") as f:
    f.write("")  # the run failed: its error is the .err's last line
with open(os.path.join(raw, "broken.err"), "w") as f:
    f.write("capturing...\npsw run: broken.pt cannot be captured: host synchronisation in the forward\n")
environment = os.path.join(out, "environment.md")
with open(environment, "w") as f:
    f.write("- date: 2026-12-06T00:00:00Z\n- commit: 0123abcd (given by the caller)\n- gpu: Test GPU\n")
json_out = os.path.join(out, "any-model.json")
report = subprocess.run([sys.executable, os.path.join(root, "scripts", "any_model_report.py"), raw, environment,
                         json_out], capture_output=True, text=True, check=True).stdout

assert "- gpu: Test GPU" in report, report
row = next(line for line in report.splitlines() if line.startswith("| tiny |"))
cells = [c.strip() for c in row.strip("|").split("|")]
assert cells[1:9] == ["2.0", "12", "10 (2, 1)", "7 of 8", "6", "3", "4", "2.100"], cells
assert cells[10] == "1.050" and cells[-1] == "9/10", cells
served = next(line for line in report.splitlines() if line.startswith("| tiny | 5 |"))
assert served.rstrip(" |").endswith("1.20"), served  # 2.52 / 2.1
assert "- broken: psw run: broken.pt cannot be captured" in report, report

data = json.load(open(json_out))
assert data["environment"].startswith("- date: 2026-12-06"), data["environment"]
tiny = data["models"]["tiny"]
expected = {"model": "tiny", "file": "/tmp/x/tiny.pt", "params_bytes": 2_000_000, "layers": 6, "groups": 3,
            "switch_ms": 2.1, "bound_ms": 2.0, "ratio": 1.05, "outputs_equal": 9, "outputs_checked": 10,
            "pytorch_pinned_graph_ms": 2.7, "kernels_unresolved": 1}
assert {k: tiny[k] for k in expected} == expected, tiny
assert tiny["served_latency_ms"]["median"] == 2.52, tiny
assert "broken" in data["failures"], data["failures"]
print("PASS: any_model_report.py's table, served ratio, failure and JSON summary")
