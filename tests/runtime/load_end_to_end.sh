#!/usr/bin/env bash
# psw load and psw validate against a real host-backend psw serve: every generated request answered and written,
# the arrivals those of psw sim on the same config, and a config naming a model the server does
# not serve refused (exit 2, the config file and key named) before anything is sent.
#
#   load_end_to_end.sh PSW
set -euo pipefail
psw=$1
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
# BERT-Tiny served and trained beside it (its requests and steps take milliseconds on the CPU,
# so that a second of training holds many steps): the configs of tests/data/sim/ (load-*.yaml,
# validate-periodic.yaml) describe this server.
serve_config=configs/serve/host-tiny.yaml
config=tests/data/sim/load-periodic.yaml
"$psw" sim --config "$config" --out "$work/sim" > /dev/null
start_ready_server --decisions "$work/decisions.jsonl"
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
# Note [Request path]: each answer's server and engine times, the engine's a part of the server's.
assert all(0 < int(r["engine_ns"]) < int(r["server_ns"]) < int(r["latency_ns"]) for r in load), load
assert summary["models"]["bert_tiny"]["engine_latency"]["count"] == 4, summary
assert summary["generated"] == 4 and summary["requests"] == 4 and summary["errors"] == 0, summary
assert summary["latency"]["count"] == 4 and summary["models"]["bert_tiny"]["latency"]["count"] == 4, summary
assert set(summary["latency"]) == set(json.load(open(f"{sim_dir}/summary.json"))["latency"]), summary
# Note [Eager switches measured]: `host` replays no graphs and the cache is off, so each of the
# four requests switched eagerly, and the server's host time for them is in the summary.
eager = summary["eager_switches"]
assert list(eager) == ["bert_tiny"] and eager["bert_tiny"]["count"] == 4, eager
assert eager["bert_tiny"]["prepare_mean_ms"] > 0 and eager["bert_tiny"]["forward_mean_ms"] > 0, eager
assert "eager_switches" not in json.load(open(f"{sim_dir}/summary.json")), "the simulator has no host times"
PY
# Senders sharing one connection (Note [Client connections]), after a warm-up request: every
# request answered, the warm-up not among them, and the protocol part of each (the latency less
# the server's time, Note [Latency parts]) in the summary.
"$psw" load --config "$config" --socket "$sock" --senders 3 --connections 1 --warmup 1 --out "$work/shared" > /dev/null 2> "$work/shared.err" \
  || { cat "$work/shared.err"; echo "FAIL: psw load --connections 1"; exit 1; }
/usr/bin/python3 - "$work/shared" <<'PY'
import csv, json, sys
out = sys.argv[1]
summary = json.load(open(f"{out}/summary.json"))
rows = list(csv.DictReader(open(f"{out}/requests.csv")))
assert summary["senders"] == 3 and summary["connections"] == 1, summary
assert summary["warmup_per_model"] == 1 and summary["generated"] == 4 and len(rows) == 4, summary  # not recorded
assert summary["requests"] == 4 and summary["errors"] == 0, summary
protocol = summary["models"]["bert_tiny"]["protocol_latency"]
assert protocol["count"] == 4, protocol
paid = sorted((int(r["latency_ns"]) - int(r["server_ns"])) / 1e6 for r in rows)  # the send's lateness in it
assert 0 < protocol["min_ms"] and abs(protocol["max_ms"] - paid[-1]) < 1e-3, (protocol, paid)
PY
# Inputs in shared memory (Note [Shared memory senders]): every request answered through the
# controller, which reads each input from the sender's region (psw_inputs_read_in_place_total is
# placement auto's, not this); the summary says so, and the request path fitted from the run says
# so too; a validation with a serving profile of raw inputs is refused before anything is sent.
"$psw" load --config "$config" --socket "$sock" --senders 2 --warmup 1 --shared-memory --out "$work/shm" > /dev/null 2> "$work/shm.err" \
  || { cat "$work/shm.err"; echo "FAIL: psw load --shared-memory"; exit 1; }
/usr/bin/python3 - "$work/shm" <<'PY'
import csv, json, sys
out = sys.argv[1]
summary = json.load(open(f"{out}/summary.json"))
rows = list(csv.DictReader(open(f"{out}/requests.csv")))
assert summary["inputs"] == "shared-memory" and summary["requests"] == 4 and summary["errors"] == 0, summary
assert all(r["status"] == "ok" and 0 < int(r["engine_ns"]) < int(r["server_ns"]) for r in rows), rows
PY
"$psw" profile-serving --from-load "$work/shm/requests.csv" --name shm --device host --out "$work/shm.yaml" 2> "$work/shm-fit.err" \
  || { cat "$work/shm-fit.err"; echo "FAIL: profile-serving --from-load of a shared-memory load"; exit 1; }
grep -q "^inputs: shared-memory$" "$work/shm.yaml" || { cat "$work/shm.yaml"; echo "FAIL: the fitted profile's inputs"; exit 1; }
sed "s#\.\./\.\./\.\./#$PWD/#g" tests/data/sim/validate-periodic.yaml > "$work/validate-raw-path.yaml"
echo "serving: $PWD/configs/serving/h200.yaml" >> "$work/validate-raw-path.yaml"
set +e
"$psw" validate --config "$work/validate-raw-path.yaml" --socket "$sock" --shared-memory --training-alone 0 \
  --out "$work/shm-refused" > /dev/null 2> "$work/shm-refused.err"
rc=$?
set -e
test "$rc" = 2 && grep -q "validate-raw-path.yaml: key 'serving': the serving profile 'h200-from-burst-c' was measured with inputs raw, but this run sends them shared-memory" "$work/shm-refused.err" \
  || { cat "$work/shm-refused.err"; echo "FAIL: validate --shared-memory with a raw profile: exit $rc"; exit 1; }
test ! -e "$work/shm-refused" || { echo "FAIL: an output folder for a refused validation"; exit 1; }
set +e
"$psw" load --config "$config" --socket "$sock" --senders 2 --connections 3 > /dev/null 2> "$work/conns.err"
rc=$?
set -e
test "$rc" = 2 && grep -q -- "--connections 3: must be between 1 and --senders (2)" "$work/conns.err" \
  || { cat "$work/conns.err"; echo "FAIL: --connections above --senders: exit $rc"; exit 1; }
# A model the server does not serve: exit 2, one message naming the config file and key.
set +e
"$psw" load --config tests/data/sim/load-unserved.yaml --socket "$sock" --out "$work/bad" > /dev/null 2> "$work/bad.err"
rc=$?
set -e
test "$rc" = 2 || { cat "$work/bad.err"; echo "FAIL: exit $rc, expected 2"; exit 1; }
grep -q "load-unserved.yaml: models\[1\].name 'resnet152': the server at unix:$sock does not serve this model" "$work/bad.err" \
  || { cat "$work/bad.err"; echo "FAIL: message"; exit 1; }
test ! -e "$work/bad" || { echo "FAIL: an output folder for a refused config"; exit 1; }
# A cycles workload, a closed loop (Note [Closed-loop cycles]): in each inference phase the
# first request at its start, each next one when the previous answer came, until an answer
# comes at or after the phase's end; throughput is the answers within their phase per second of
# inference phase. Through psw validate, which compares it with the simulator's closed loop ...
"$psw" validate --config tests/data/sim/load-cycles.yaml --socket "$sock" --out "$work/cycles" --training-alone 0 \
  > "$work/cycles.txt" 2>&1 || { cat "$work/cycles.txt"; echo "FAIL: psw validate of cycles"; exit 1; }
/usr/bin/python3 - "$work/cycles" <<'PY'
import csv, json, sys
out = sys.argv[1]
load = list(csv.DictReader(open(f"{out}/measured/requests.csv")))
summary = json.load(open(f"{out}/measured/summary.json"))
cycle, rounds = 1_000_000_000, 2
assert summary["senders"] == 1 and summary["connections"] == 1, summary
assert all(r["model"] == "bert_tiny" and r["status"] == "ok" for r in load), load
in_phase = 0
for k in range(rounds):
    start, end = cycle * (2 * k + 1), cycle * (2 * k + 2)
    phase = [r for r in load if start <= int(r["scheduled_ns"]) < end]
    assert phase and int(phase[0]["scheduled_ns"]) == start, (k, phase)
    for before, after in zip(phase, phase[1:]):
        assert int(after["scheduled_ns"]) == int(before["finish_ns"]) < end, (before, after)
        assert int(after["send_start_ns"]) >= int(after["scheduled_ns"]), after
    assert int(phase[-1]["finish_ns"]) >= end, phase[-1]
    in_phase += sum(int(r["finish_ns"]) <= end for r in phase)
assert sum(len([r for r in load if cycle * (2 * k + 1) <= int(r["scheduled_ns"]) < cycle * (2 * k + 2)]) for k in range(rounds)) == len(load)
assert abs(summary["throughput_rps"] - in_phase / (rounds * cycle / 1e9)) <= 1e-9, (summary, in_phase)
assert all(int(r["latency_ns"]) == int(r["finish_ns"]) - int(r["scheduled_ns"]) for r in load), load
rows = {(r["scope"], r["measure"]): r for r in csv.DictReader(open(f"{out}/validation.csv"))}
assert abs(float(rows[("all", "throughput_rps")]["measured"]) - summary["throughput_rps"]) <= 1e-8 * max(1, summary["throughput_rps"]), rows
assert float(rows[("all", "throughput_rps")]["simulated"]) > 0, rows
PY
# ... and again from the recording, where the request counts differ by nature (the server's
# pace, not the workload's) and are not compared.
"$psw" validate --config tests/data/sim/load-cycles.yaml --measured "$work/cycles" --out "$work/cycles-again" \
  > "$work/cycles-again.txt" 2>&1 || { cat "$work/cycles-again.txt"; echo "FAIL: psw validate --measured of cycles"; exit 1; }
cmp "$work/cycles/validation.csv" "$work/cycles-again/validation.csv" \
  || { echo "FAIL: the cycles comparison differs from its recording"; exit 1; }
# psw validate: the same case is required (the server trains BERT-Tiny in the background; a
# config without training is refused before anything runs, naming the config file) ...
set +e
"$psw" validate --config tests/data/sim/load-periodic.yaml --socket "$sock" --out "$work/refused" > /dev/null 2> "$work/refused.err"
rc=$?
set -e
test "$rc" = 2 && grep -q "load-periodic.yaml: the config has no training job, but the server's job of bert_tiny is running" "$work/refused.err" \
  || { cat "$work/refused.err"; echo "FAIL: validate without training: exit $rc"; exit 1; }
test ! -e "$work/refused" || { echo "FAIL: an output folder for a refused validation"; exit 1; }
# ... and with training on both sides, every row of the comparison is written (here without the
# training job's alone window: no training_share row; with it below).
"$psw" validate --config tests/data/sim/validate-periodic.yaml --socket "$sock" --out "$work/validation" --training-alone 0 \
  > "$work/validate.txt" 2> "$work/validate.err" || { cat "$work/validate.txt" "$work/validate.err"; echo "FAIL: psw validate"; exit 1; }
grep -q "within tolerance" "$work/validate.txt" || { cat "$work/validate.txt"; echo "FAIL: validate's table"; exit 1; }
cat "$work/validate.txt"  # in the test's log: the host is not the H200 of the profile, so the errors are large
/usr/bin/python3 - "$work/validation" <<'PY'
import csv, json, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/validation.csv")))
report = json.load(open(f"{out}/validation.json"))
sim = json.load(open(f"{out}/simulated/summary.json"))
measured = json.load(open(f"{out}/measured/summary.json"))
scopes = [(r["scope"], r["measure"]) for r in rows]
assert scopes[:3] == [("all", "mean_ms"), ("all", "p50_ms"), ("all", "p99_ms")], scopes
assert ("bert_tiny", "mean_ms") in scopes and not any(s == "resnet152" for s, _ in scopes), scopes
assert scopes[-2:] == [("all", "throughput_rps"), ("all", "training_steps_per_s")], scopes
mean = rows[0]
close = lambda a, b: abs(a - b) <= 1e-8 * abs(b)  # the CSV has 9 significant digits
assert close(float(mean["simulated"]), sim["latency"]["mean_ms"]), (mean, sim["latency"])
assert close(float(mean["measured"]), measured["latency"]["mean_ms"]), (mean, measured["latency"])
err = (float(mean["simulated"]) - float(mean["measured"])) / float(mean["measured"])
assert abs(float(mean["relative_error"]) - err) < 1e-6 * max(1, abs(err)), (mean, err)
training = rows[-1]
# BERT-Tiny's steps take milliseconds on the host: the run's 1.2 s holds many on both sides.
assert float(training["simulated"]) > 0 and float(training["measured"]) > 0, training
assert report["mechanism"] == "pipeswitch" and len(report["rows"]) == len(rows), report
# Note [Training held]: the server's time holding its job for the requests, within the run.
t = report["training"]
assert set(t) == {"measured_steps", "measured_seconds", "held_seconds"}, t
assert 0 <= t["held_seconds"] <= 1.01 * t["measured_seconds"] + 0.1, t
assert report["within"] + report["outside"] + sum(r["status"] == "one-sided" for r in rows) == len(rows), report
assert measured["requests"] == 3 and measured["errors"] == 0, measured
PY
# psw profile-serving: the same server's request path per model and training step (Note
# [Request path]), a profile psw validate's simulator then adds: its simulated BERT latency is
# the engine's plus exactly the profile's protocol and server parts. Two seconds of training
# alone: BERT-Tiny's steps (batch 4, host-tiny.yaml) take milliseconds even on a loaded host.
"$psw" profile-serving --socket "$sock" --name host-test --device "$(uname -n)" --requests 2 --gap-ms 50 --batch 1 \
  --training-batch 4 --training-window 2 --out "$work/serving.yaml" 2> "$work/profile.err" \
  || { cat "$work/profile.err"; echo "FAIL: psw profile-serving"; exit 1; }
grep -q "^inputs: raw" "$work/serving.yaml" || { cat "$work/serving.yaml"; echo "FAIL: the profile"; exit 1; }
sed "s#\.\./\.\./\.\./#$PWD/#g" tests/data/sim/validate-periodic.yaml > "$work/validate-serving.yaml"
echo "serving: $work/serving.yaml" >> "$work/validate-serving.yaml"
# The profile is of batch-4 training, the model profile of batch 8: refused.
set +e
"$psw" sim --config "$work/validate-serving.yaml" --out "$work/sim-refused" > /dev/null 2> "$work/batch.err"
rc=$?
set -e
test "$rc" = 2 && grep -q "serving profile's training step of bert_tiny is for batch 4, the training job's for batch 8" "$work/batch.err" \
  || { cat "$work/batch.err" "$work/serving.yaml"; echo "FAIL: batch mismatch: exit $rc"; exit 1; }
sed -i "s/batch: 4, step_ns/batch: 8, step_ns/" "$work/serving.yaml"
"$psw" validate --config "$work/validate-serving.yaml" --socket "$sock" --out "$work/validation-serving" --training-alone 1 \
  > "$work/validate-serving.txt" 2>&1 || { cat "$work/validate-serving.txt"; echo "FAIL: psw validate with a serving profile"; exit 1; }
# Note [Training share]: a window alone before the workload and one after it, each reported.
for when in "before the workload" "after the workload"; do
  grep -q "training alone $when: [0-9]* steps in" "$work/validate-serving.txt" \
    || { cat "$work/validate-serving.txt"; echo "FAIL: no alone window $when"; exit 1; }
done
/usr/bin/python3 - "$work/serving.yaml" "$work/validation" "$work/validation-serving" <<'PY'
import json, re, sys
profile_text, without, with_serving = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
path = {m: (int(p), int(s)) for m, p, s in re.findall(r"model: (\w+), protocol_ns: (\d+), server_ns: (\d+)", profile_text)}
assert set(path) == {"bert_tiny"}, path  # every model the server serves
step = int(re.search(r"step_ns: (\d+)", profile_text).group(1))
# Requests 400 ms apart never queue: a request's latency is its engine time plus exactly the path
# (where the training job is when it arrives depends on the training step, so not the latency
# without the profile plus the path), the protocol drawn between its quantiles' ends (Note
# [Protocol spread]: profile-serving writes them).
bert = json.load(open(f"{with_serving}/simulated/summary.json"))["models"]["bert_tiny"]
quantiles = [int(q) for q in re.search(r"model: bert_tiny, .*protocol_quantiles_ns: \[([^\]]*)\]", profile_text).group(1).split(",")]
assert len(quantiles) == 21 and quantiles == sorted(quantiles), quantiles
added = bert["latency"]["mean_ms"] - bert["engine_latency"]["mean_ms"]
server_ms = path["bert_tiny"][1] / 1e6
assert server_ms + quantiles[0] / 1e6 - 1e-6 <= added <= server_ms + quantiles[-1] / 1e6 + 1e-6, (bert, quantiles, server_ms)
assert json.load(open(f"{without}/simulated/summary.json"))["models"]["bert_tiny"]["latency"]["mean_ms"] < bert["latency"]["mean_ms"]
sim = json.load(open(f"{with_serving}/simulated/summary.json"))
makespan = sim["makespan_s"]
assert sim["training_iterations"] <= makespan / (step / 1e9), (sim, step)
# Note [Training share]: the job measured alone before and after the workload (1 s each here,
# 5 s by default, from one step's end to another's; added), and the share row on each side: the
# simulator's rate times its step (the profile's), the server's rate beside the requests over
# its rate alone.
t = json.load(open(f"{with_serving}/validation.json"))["training"]
assert t["alone_steps"] >= 2 and t["alone_seconds"] >= 2.0, t
import csv
rows = {r["measure"]: r for r in csv.DictReader(open(f"{with_serving}/validation.csv")) if r["scope"] == "all"}
# A side with no step (a step longer than the run on a loaded host) has no value; a row neither
# side has a value for is left out.
sim_share = sim["training_iterations_per_s"] * step / 1e9
measured_share = t["measured_steps"] / t["measured_seconds"] / (t["alone_steps"] / t["alone_seconds"])
if sim_share == 0 and measured_share == 0:
    assert "training_share" not in rows, rows
else:
    share = rows["training_share"]
    for side, expected in (("simulated", sim_share), ("measured", measured_share)):
        assert share[side] == "" if expected == 0 else abs(float(share[side]) - expected) <= 1e-8 * expected, (side, share, expected)
PY
# Note [Validating again]: the same measurement compared once more without the server, with a
# profile fitted from that load run's own requests (psw profile-serving --from-load) ...
"$psw" profile-serving --from-load "$work/validation-serving/measured/requests.csv" --training-from "$work/serving.yaml" \
  --name from-load --device "$(uname -n)" --out "$work/from-load.yaml" 2> "$work/from-load.err" \
  || { cat "$work/from-load.err"; echo "FAIL: profile-serving --from-load"; exit 1; }
sed "s#^serving: .*#serving: $work/from-load.yaml#" "$work/validate-serving.yaml" > "$work/validate-from-load.yaml"
"$psw" validate --config "$work/validate-from-load.yaml" --measured "$work/validation-serving" --out "$work/again" \
  > "$work/again.txt" 2>&1 || { cat "$work/again.txt"; echo "FAIL: validate --measured"; exit 1; }
/usr/bin/python3 - "$work/validation-serving" "$work/again" "$work/from-load.yaml" <<'PY'
import csv, json, re, sys, statistics
first, again, profile = sys.argv[1:]
assert open(f"{first}/measured/requests.csv").read() == open(f"{again}/measured/requests.csv").read()  # the measurement kept
rows = {(r["scope"], r["measure"]): r for r in csv.DictReader(open(f"{again}/validation.csv"))}
measured = json.load(open(f"{first}/measured/summary.json"))
expected = measured["models"]["bert_tiny"]["latency"]["mean_ms"]
assert abs(float(rows[("bert_tiny", "mean_ms")]["measured"]) - expected) <= 1e-8 * expected, (rows, expected)  # 9 digits
# The fitted path is the medians of the run's own splits.
load = [r for r in csv.DictReader(open(f"{first}/measured/requests.csv")) if r["model"] == "bert_tiny"]
protocol = statistics.median(int(r["latency_ns"]) - int(r["server_ns"]) for r in load)
fitted = int(re.search(r"model: bert_tiny, protocol_ns: (\d+)", open(profile).read()).group(1))
assert abs(fitted - protocol) <= 1, (fitted, protocol)
assert "training:" in open(profile).read()  # kept from --training-from
# The training rows from the recorded steps, alone window included (Note [Training share]); a
# row neither side has a value for is left out (a loaded host may complete no step).
recorded = {(r["scope"], r["measure"]): r for r in csv.DictReader(open(f"{first}/validation.csv"))}
for key in [("all", "training_steps_per_s"), ("all", "training_share")]:
    value = lambda table: table[key]["measured"] if key in table else ""
    assert value(rows) == value(recorded), (key, rows.get(key), recorded.get(key))
assert json.load(open(f"{again}/validation.json"))["training"] == json.load(open(f"{first}/validation.json"))["training"]
PY
# Note [Latency parts]: the server's and the protocol's rows, the protocol the latency less the
# server's time on both sides; validate --measured counts it again from the recorded requests
# (a recording whose summary counted it otherwise compares as a new one), keeping the files.
mkdir -p "$work/tampered" && cp -r "$work/validation-serving/." "$work/tampered/"
/usr/bin/python3 - "$work/tampered/measured/summary.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
summary["models"]["bert_tiny"]["protocol_latency"]["mean_ms"] = 999.0
json.dump(summary, open(sys.argv[1], "w"))
PY
"$psw" validate --config "$work/validate-from-load.yaml" --measured "$work/tampered" --out "$work/parts" \
  > "$work/parts.txt" 2>&1 || { cat "$work/parts.txt"; echo "FAIL: validate --measured of the tampered summary"; exit 1; }
/usr/bin/python3 - "$work/validation-serving" "$work/parts" <<'PY'
import csv, json, sys
live, parts = sys.argv[1:]
load = [r for r in csv.DictReader(open(f"{live}/measured/requests.csv")) if r["model"] == "bert_tiny" and r["status"] == "ok"]
paid = sum(int(r["latency_ns"]) - int(r["server_ns"]) for r in load) / len(load) / 1e6
for folder in (live, parts):
    rows = {(r["scope"], r["measure"]): r for r in csv.DictReader(open(f"{folder}/validation.csv"))}
    for measure in ("server_mean_ms", "server_p50_ms", "server_p99_ms", "protocol_p50_ms", "protocol_p99_ms"):
        assert rows[("bert_tiny", measure)]["simulated"] and rows[("bert_tiny", measure)]["measured"], (folder, measure)
    measured = float(rows[("bert_tiny", "protocol_mean_ms")]["measured"])
    assert abs(measured - paid) <= 1e-6 * paid, (folder, measured, paid)
assert json.load(open(f"{parts}/measured/summary.json"))["models"]["bert_tiny"]["protocol_latency"]["mean_ms"] == 999.0
PY
# ... and a config of another case is refused, naming the folder.
sed "s/^mechanism: .*/mechanism: ready/" "$work/validate-from-load.yaml" > "$work/validate-ready.yaml"
set +e
"$psw" validate --config "$work/validate-ready.yaml" --measured "$work/validation-serving" --out "$work/refused-again" \
  > /dev/null 2> "$work/refused-again.err"
rc=$?
set -e
test "$rc" = 2 && grep -q "validation-serving: measured under pipeswitch, but .* simulates ready" "$work/refused-again.err" \
  || { cat "$work/refused-again.err"; echo "FAIL: validate --measured of another mechanism: exit $rc"; exit 1; }
# Note [Decision log]: everything the server decided in this test, replayed through the scheduling
# policy after its shutdown (SIGTERM), without a difference; a log whose server sent a request to
# another worker than the policy would is refused (exit 3) naming the line.
kill -TERM "$server"
wait "$server" || true
server=""
"$psw" replay-decisions "$work/decisions.jsonl" > "$work/replay.txt" 2>&1 \
  || { cat "$work/replay.txt"; echo "FAIL: the server's decisions differ from the policy's"; exit 1; }
grep -q "the policy decides every one as the server did" "$work/replay.txt" || { cat "$work/replay.txt"; exit 1; }
/usr/bin/python3 - "$work/decisions.jsonl" "$work/tampered.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert json.loads(lines[0])["policy"]["mechanism"] == "pipeswitch", lines[0]
kinds = [a["kind"] for line in lines[1:] for a in json.loads(line)["actions"]]
assert kinds.count("dispatch") >= 20 and "stop_training" in kinds and "start_training" in kinds, kinds
for n, line in enumerate(lines[1:], start=2):
    record = json.loads(line)
    dispatch = [a for a in record["actions"] if a["kind"] == "dispatch"]
    if dispatch:
        dispatch[0]["worker"] = 1 - dispatch[0]["worker"]
        lines[n - 1] = json.dumps(record)
        break
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print(n)
PY
set +e
"$psw" replay-decisions "$work/tampered.jsonl" > "$work/tampered.txt" 2>&1
rc=$?
set -e
test "$rc" = 3 && grep -q "tampered.jsonl:[0-9]*: after [0-9]* identical events" "$work/tampered.txt" \
  || { cat "$work/tampered.txt"; echo "FAIL: a tampered decision log: exit $rc"; exit 1; }
echo "PASS"
