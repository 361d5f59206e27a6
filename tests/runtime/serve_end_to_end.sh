#!/usr/bin/env bash
# psw serve end to end on the host backend: start it, wait until ready, answer the C++ client,
# the Python KServe client and psw bench-serve (each also with its tensors in shared memory),
# refuse a second server on the same socket, then SIGTERM: exit 0, socket removed, no process
# of the server left. The server is host-tiny.yaml's (BERT-Tiny served and trained) with a small
# TorchScript model of fp32 input beside it (serve_lib.sh's tiny_config_with_fp32_model), so that
# both of the protocol's int64 and fp32 tensors are sent, raw and typed.
#
#   serve_end_to_end.sh PSW PROTO_PYTHON_DIR
set -euo pipefail
psw=$1
proto=$2
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
tiny_config_with_fp32_model
start_ready_server --trace "$work/trace.json" --metrics-listen 127.0.0.1:0
test "$(stat -c %a "$sock")" = 600 || { echo "FAIL: socket mode $(stat -c %a "$sock")"; exit 1; }
test "$(stat -c %a "$(dirname "$sock")")" = 700 || { echo "FAIL: socket folder mode"; exit 1; }
# The C++ client: an answer of the right shape.
"$psw" client --socket "$sock" --model bert_tiny --random --batch 2 --format json > "$work/client.json"
grep -q '"pooled_output"' "$work/client.json" || { cat "$work/client.json"; echo "FAIL: psw client"; exit 1; }
# The same request with its tensors in shared memory (the system shared memory extension): the
# same outputs, and the client's object gone from /dev/shm once it exits.
"$psw" client --socket "$sock" --model bert_tiny --random --batch 2 --format json --shared-memory > "$work/client_shm.json"
/usr/bin/python3 - "$work/client.json" "$work/client_shm.json" <<'PY'
import json, sys
raw, shm = (json.load(open(path)) for path in sys.argv[1:])
assert shm["shared_memory"] is True and raw["shared_memory"] is False
strip = lambda outputs: [{k: o[k] for k in ("name", "datatype", "shape", "bytes", "first_values")} for o in outputs]
assert strip(raw["outputs"]) == strip(shm["outputs"]), (raw["outputs"], shm["outputs"])
assert all(o["bytes"] > 0 for o in shm["outputs"]), shm["outputs"]
PY
"$psw" client --socket "$sock" --model bert_tiny --random --shared-memory > "$work/client_shm.txt"
region=$(awk '$1 == "tensors" {print $NF}' "$work/client_shm.txt")
test -n "$region" || { cat "$work/client_shm.txt"; echo "FAIL: psw client --shared-memory named no region"; exit 1; }
test ! -e "/dev/shm/$region" || { echo "FAIL: /dev/shm/$region left behind"; exit 1; }
# An ordinary gRPC client in Python, raw and through shared memory (same outputs required).
/usr/bin/python3 tests/runtime/kserve_client.py --proto-dir "$proto" --socket "$sock" --model cnn --batch 1 \
  --shared-memory > "$work/python.log" || { cat "$work/python.log"; echo "FAIL: python client"; exit 1; }
# Training goes on and is preempted by the requests; the metrics say so.
"$psw" client --socket "$sock" --train-status bert_tiny | grep -q "state *running" || { echo "FAIL: training not running"; exit 1; }
# Started and not stopped: active, whether running or between tasks at this instant.
"$psw" client --socket "$sock" --train-status bert_tiny --format json \
  | /usr/bin/python3 -c "import json,sys; t=json.load(sys.stdin); assert t['active'] is True and t['stopped'] is False, t" \
  || { echo "FAIL: the training job is not active"; exit 1; }
# The training windows (alone, then beside requests; Note [Training held]): the requests held
# the job for part of the second window, and its rate while not held is at least its rate over
# the whole window (before the switches below, which stop the job).
"$psw" bench-serve --socket "$sock" --cold-requests 0 --window 1.5 --rate 2 --batch 1 --switches 0 \
  --out "$work/bench-window.json" 2>/dev/null
/usr/bin/python3 - "$work/bench-window.json" <<'PY' || { echo "FAIL: bench-serve's training windows"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
rates, held = d["training_steps_per_s"], d["training_with_requests"]
assert rates["requests"] >= 1 and 0 < held["held_s"] <= d["spec"]["window_s"] + 1, d
if rates["alone"] > 0:
    assert held["running_share"] >= rates["with_requests"] / rates["alone"] - 1e-9, d
# The job's loss, sampled in both windows: one sample per step seen, steps increasing, losses
# positive (cross-entropy; Note [Training objective]).
for samples in d["training_loss"].values():
    steps = [x["step"] for x in samples]
    assert steps == sorted(steps) and len(set(steps)) == len(steps), samples
    assert all(x["loss"] > 0 for x in samples), samples
assert d["training_loss"]["alone"], d
PY
# Note [Training windows]: two rounds, the first with requests first: windows with requests,
# alone, alone, with requests, those alone shorter (--alone-window); the rates are each kind's
# steps over its windows' time.
rounds_began=$(date +%s.%N)
"$psw" bench-serve --socket "$sock" --cold-requests 0 --window 1 --alone-window 0.5 --rate 2 --batch 1 --switches 0 \
  --requests-first --rounds 2 --rate-slice 0.25 --out "$work/bench-rounds.json" 2>/dev/null
rounds_ended=$(date +%s.%N)
/usr/bin/python3 - "$work/bench-rounds.json" "$rounds_began" "$rounds_ended" <<'PY' || { echo "FAIL: bench-serve --requests-first --rounds 2"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
# The first window's wall clock, for a monitor's samples: within the run, the windows after it.
began, ended = float(sys.argv[2]), float(sys.argv[3])
assert began <= d["training_started_unix_s"] <= ended - 3, (began, d["training_started_unix_s"], ended)
windows, loss, rates = d["training_windows"], d["training_loss"], d["training_steps_per_s"]
assert d["spec"]["requests_first"] and d["spec"]["rounds"] == 2 and d["spec"]["alone_window_s"] == 0.5, d["spec"]
assert [w["with_requests"] for w in windows] == [True, False, False, True], windows
assert all(w["seconds"] >= (1 if w["with_requests"] else 0.5) for w in windows), windows
assert all(w["seconds"] < 0.9 for w in windows if not w["with_requests"]), windows
assert all(b["start_s"] >= a["start_s"] + a["seconds"] - 1e-6 for a, b in zip(windows, windows[1:])), windows
assert [w["requests"] > 0 for w in windows] == [True, False, False, True], windows
for kind, key in ((True, "with_requests"), (False, "alone")):
    mine = [w for w in windows if w["with_requests"] == kind]
    assert abs(rates[key] - sum(w["steps"] for w in mine) / sum(w["seconds"] for w in mine)) < 1e-9, (rates, mine)
assert rates["requests"] == sum(w["requests"] for w in windows), d
# The rate in 0.25 s slices (sampled every 100 ms): some of each kind, each within the run.
slices = d["training_rate_slices"]
assert d["spec"]["rate_slice_s"] == 0.25 and {x["with_requests"] for x in slices} == {True, False}, slices
assert all(x["seconds"] > 0 and x["steps"] >= 0 and x["start_s"] >= 0 for x in slices), slices
assert len(slices) <= 4 + 2 + 2 + 4, slices
# The first window's steps, under requests, precede every window's alone.
assert loss["with_requests"] and loss["alone"], d
first_loaded = [x for x in loss["with_requests"] if x["elapsed_s"] <= windows[0]["seconds"]]
assert first_loaded and first_loaded[-1]["step"] <= loss["alone"][0]["step"], loss
PY
"$psw" bench-serve --socket "$sock" --cold-requests 1 --gap-ms 100 --batch 1 --window 0 --switches 2 --out "$work/bench.json" 2>/dev/null
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); s=d['server']; assert s['preemptions'] >= 1 and s['switches'] >= 4 and s['worker_restarts'] == 0, s; assert sum(s['preemptions_at_' + b] for b in ('step_start', 'forward', 'backward', 'update')) == s['preemptions'] and s['preemption_drain_p99_s'] >= 0, s" "$work/bench.json"
# scripts/serve_report.py reads bench-serve's preemption split by the names the server gives it,
# and its part `pieces` table has one row per server (by its MiB, in order), the update's stops counted.
mkdir -p "$work/pieces"
cp "$work/bench.json" "$work/pieces/pieces-16.json"
cp "$work/bench.json" "$work/pieces/pieces-0.json"
/usr/bin/python3 - "$work/bench.json" "$work/pieces" <<'PY' || { echo "FAIL: serve_report.py's preemption tables"; exit 1; }
import contextlib, io, json, sys
sys.path.insert(0, "scripts")
from serve_report import print_preemption_split, print_split_by_model, print_update_pieces
bench = json.load(open(sys.argv[1]))
server = bench["server"]


def table_rows(print_table, argument):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_table(argument)
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in out.getvalue().splitlines() if line.startswith("| ")]
    return rows, out.getvalue()


rows, text = table_rows(print_preemption_split, server)
places = {r[0]: int(r[1]) for r in rows if r[0] in ("step_start", "forward", "backward", "update")}
assert len(places) == 4 and sum(places.values()) == server["preemptions"], text
# Each place's largest stop (quantile 1) beside its p50 and p99.
for r in rows:
    if r[0] in places and places[r[0]] > 0:
        assert len(r) == 5 and float(r[2]) <= float(r[3]) <= float(r[4]), text
assert [r[0].split(":")[0] for r in rows[:4]] == ["phase", "signal", "to_boundary", "drain"], text
rows, text = table_rows(print_update_pieces, sys.argv[2])
assert [r[0] for r in rows[1:]] == ["0", "16"], text
assert all(int(r[1]) == server["preemptions"] and int(r[3].split(",")[0]) == server["preemptions_at_update"] for r in rows[1:]), text
# Per model: the server's own latency of each cold model, and the client's median split at it.
rows, text = table_rows(lambda b: print_split_by_model(sys.argv[2], b), bench)
assert [r[0] for r in rows[1:]] == sorted(bench["cold_latency_ms"]), text
for model, client, at_server, outside, _, to_worker, startup_phase, compute, output, startup in rows[1:]:
    assert float(at_server) == round(server[f"server_latency_{model}_p50_s"] * 1e3, 3) and float(at_server) > 0, text
    assert abs(float(client) - float(at_server) - float(outside)) < 0.0011, text
    assert float(compute) == round(server[f"phase_{model}_compute_p50_s"] * 1e3, 3) and 0 < float(compute) <= float(at_server), text
    p50, p99 = (float(x) for x in startup.split(" / "))
    assert 0 < p50 <= p99 and p50 <= float(at_server) + 0.001, text  # each request's startup is within its latency
PY
# Note [Training held]: preempted, so held for a while.
"$psw" client --socket "$sock" --train-status bert_tiny --format json \
  | /usr/bin/python3 -c "import json,sys; t=json.load(sys.stdin); assert t['preemptions'] >= 1 and t['held_s'] > 0, t" \
  || { echo "FAIL: the training job was never held"; exit 1; }
# BERT-Tiny's only: a TorchScript model's metadata gives its output no size ([-1]; its answers do),
# so the client cannot size the output's region before the request.
"$psw" bench-serve --socket "$sock" --model bert_tiny --cold-requests 1 --gap-ms 100 --batch 1 --window 0 --switches 2 \
  --shared-memory --out "$work/bench_shm.json" 2>/dev/null
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['spec']['shared_memory'] is True and d['switch_latency_ms']['count'] == 2, d" "$work/bench_shm.json"
# Prometheus scrapes the metrics over HTTP; anything but GET /metrics is 404.
url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$work/serve.log" | head -1)
/usr/bin/python3 - "$url" <<'PY'
import sys, urllib.request, urllib.error
body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
assert "psw_preemptions_total" in body and "psw_request_latency_seconds_bucket" in body, body[:500]
try:
    urllib.request.urlopen(sys.argv[1].replace("/metrics", "/other"), timeout=10)
    raise SystemExit("expected 404")
except urllib.error.HTTPError as e:
    assert e.code == 404, e.code
PY
# A second server on the same socket: a clear error, exit 2, the first one unharmed.
set +e
"$psw" serve --config "$serve_config" --backend host --socket "$sock" 2> "$work/second.log"
rc=$?
set -e
test $rc -eq 2 && grep -q "another server is already listening" "$work/second.log" || { cat "$work/second.log"; echo "FAIL: second server rc=$rc"; exit 1; }
"$psw" client --socket "$sock" --live | grep -q "ready  yes"
# SIGTERM: clean exit, socket removed, every process of the server gone.
children=$(pgrep -P "$server" | tr '\n' ' ')
kill -TERM "$server"
wait "$server"
rc=$?
server=
test $rc -eq 0 || { cat "$work/serve.log"; echo "FAIL: exit $rc after SIGTERM"; exit 1; }
test ! -e "$sock" || { echo "FAIL: socket left behind"; exit 1; }
for pid in $children; do
  if kill -0 "$pid" 2>/dev/null; then echo "FAIL: process $pid of the server left running"; exit 1; fi
done
grep -q "stopped" "$work/serve.log"
# Note [Serve trace]: every request's phases on its worker's track, and the training's stops.
/usr/bin/python3 - "$work/trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = [e["name"] for e in events if e["ph"] == "X"]
assert any(n.startswith("startup bert_tiny (switch)") for n in names), names[:20]
assert any(n.startswith("run cnn (switch)") for n in names), names[:20]
assert any(n == "stopping training" for n in names), names[:20]
assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
PY
echo "serve end to end: ok"
