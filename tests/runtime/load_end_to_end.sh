#!/usr/bin/env bash
# psw load against a real host-backend psw serve: every generated request answered and written,
# the arrivals those of psw sim on the same config, and a config naming a model the server does
# not serve refused (exit 2, the config file and key named) before anything is sent.
#
#   load_end_to_end.sh PSW
set -euo pipefail
psw=$1
work=$(mktemp -d)
sock=$work/run/psw.sock
cleanup() { [[ -n ${server:-} ]] && kill -KILL "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
source "$(dirname "$0")/serve_lib.sh"
config=tests/data/sim/load-periodic.yaml
"$psw" sim --config "$config" --out "$work/sim" > /dev/null
start_ready_server
"$psw" load --config "$config" --socket "$sock" --out "$work/load" > "$work/load.txt" 2> "$work/load.err" \
  || { cat "$work/load.txt" "$work/load.err"; echo "FAIL: psw load"; exit 1; }
test -f "$work/load/config.resolved.yaml" || { echo "FAIL: no config.resolved.yaml"; exit 1; }
/usr/bin/python3 - "$work/sim" "$work/load" <<'PY'
import csv, json, sys
sim_dir, load_dir = sys.argv[1:]
sim = list(csv.DictReader(open(f"{sim_dir}/requests.csv")))
load = list(csv.DictReader(open(f"{load_dir}/requests.csv")))
summary = json.load(open(f"{load_dir}/summary.json"))
assert len(load) == 4, load  # the config's count
assert all(r["status"] == "ok" and r["error"] == "" for r in load), load
# The simulator serves FIFO, so its completion ids are the arrival order psw load numbers by.
key = lambda r: (r["id"], r["model"], r["task"], r["arrival_ns"])
assert [key(r) for r in load] == [key(r) for r in sim], ([key(r) for r in load], [key(r) for r in sim])
assert all(int(r["scheduled_ns"]) == int(r["arrival_ns"]) for r in load), load  # time scale 1
assert all(int(r["latency_ns"]) > 0 for r in load), load
assert summary["generated"] == 4 and summary["requests"] == 4 and summary["errors"] == 0, summary
assert summary["latency"]["count"] == 4 and summary["models"]["bert_base"]["latency"]["count"] == 4, summary
assert set(summary["latency"]) == set(json.load(open(f"{sim_dir}/summary.json"))["latency"]), summary
PY
# A model the server does not serve: exit 2, one message naming the config file and key.
set +e
"$psw" load --config tests/data/sim/load-unserved.yaml --socket "$sock" --out "$work/bad" > /dev/null 2> "$work/bad.err"
rc=$?
set -e
test "$rc" = 2 || { cat "$work/bad.err"; echo "FAIL: exit $rc, expected 2"; exit 1; }
grep -q "load-unserved.yaml: models\[1\].name 'resnet152': the server at unix:$sock does not serve this model" "$work/bad.err" \
  || { cat "$work/bad.err"; echo "FAIL: message"; exit 1; }
test ! -e "$work/bad" || { echo "FAIL: an output folder for a refused config"; exit 1; }
# A cycles workload is a closed loop: refused, naming the key.
set +e
"$psw" load --config tests/data/sim/cycles.yaml --socket "$sock" > /dev/null 2> "$work/cycles.err"
rc=$?
set -e
test "$rc" = 2 && grep -q "cycles.yaml: workload.kind: cycles is a closed loop" "$work/cycles.err" \
  || { cat "$work/cycles.err"; echo "FAIL: cycles exit $rc"; exit 1; }
echo "PASS"
