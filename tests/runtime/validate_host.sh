#!/usr/bin/env bash
# The cross-validation on the host (issue 9): the simulator, given profiles measured on this
# machine, predicts a host-backend psw serve within a tolerance, and a deliberately wrong profile
# breaks it. The steps of a user who calibrates a machine: psw profile (the model's layers and
# the link), psw serve with those profiles, psw profile-serving (the request path), psw validate.
#
# The compared rows are the model's engine time (Note [Request path]: the input on the device to
# the forward's end), which the model profile predicts, and the client's latency, which adds the
# request path fitted by profile-serving on the same server. The host is a shared CPU (CI runs
# other tests beside this one unless it runs alone: RUN_SERIAL), so the tolerance is wide:
# PSW_HOST_VALIDATE_TOLERANCE (0.35). The wrong profile's forward times are 3x the measured
# ones, an error no noise explains.
#
#   validate_host.sh PSW
set -euo pipefail
psw=$1
tolerance=${PSW_HOST_VALIDATE_TOLERANCE:-0.35}
work=$(mktemp -d)
sock=$work/run/psw.sock
cleanup() { [[ -n ${server:-} ]] && kill -KILL "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
source "$(dirname "$0")/serve_lib.sh"

# 1. This machine's profiles: BERT-base's layers at batch 1 (the smallest of the zoo's inputs on a
# CPU) and the host backend's copies.
"$psw" profile --model bert_base --backend host --batch 1 --repeat 5 --link --link-max 16MiB \
  --hardware-name host --out "$work/profiles" > "$work/profile.txt" 2>&1 \
  || { cat "$work/profile.txt"; echo "FAIL: psw profile"; exit 1; }
# 2. A server that uses them: one model, no training (a CPU would spend seconds per step), and
# the model resident (ready): on a CPU the copies of a switch and the forward compete for the
# same cores, which the simulator's link and compute, measured apart, do not model.
cat > "$work/serve.yaml" <<YAML
mechanism: ready
workers: 2
hardware: $work/profiles/host.yaml
profiles: $work/profiles
cache: off
request_timeout_ms: 60000
models:
  - {name: bert_base, batch: 1}
YAML
serve_config=$work/serve.yaml start_ready_server
# 3. The request path of this server.
"$psw" profile-serving --socket "$sock" --name host --device "$(uname -n)" --requests 3 --gap-ms 50 --batch 1 \
  --out "$work/serving.yaml" > "$work/serving.txt" 2>&1 || { cat "$work/serving.txt"; echo "FAIL: psw profile-serving"; exit 1; }
# 4. The simulator beside the server, with the right profile and with a wrong one. Requests
# twice the profiled forward apart, so that none queues behind another: queueing would multiply
# the latency's error by the load, which depends on the machine.
interval_ms=$(/usr/bin/python3 -c '
import re, sys
forward = sum(int(n) for n in re.findall(r"forward_ns: (\d+)", open(sys.argv[1]).read()))
print(max(200, round(2 * forward / 1e6)))' "$work/profiles/bert_base.yaml")
experiment() {  # NAME MODEL_PROFILE
  cat <<YAML
name: $1
hardware: $work/profiles/host.yaml
serving: $work/serving.yaml
models:
  - {name: bert_base, profile: $2}
mechanism: ready
seed: 1
workload: {kind: periodic, interval_ms: $interval_ms, count: 8, models: [bert_base]}
YAML
}
experiment right "$work/profiles/bert_base.yaml" > "$work/right.yaml"
/usr/bin/python3 - "$work/profiles/bert_base.yaml" "$work/wrong-bert_base.yaml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
scaled = re.sub(r"(forward_ns: )(\d+)", lambda m: m.group(1) + str(3 * int(m.group(2))), text)
assert scaled != text, "no forward_ns in the profile"
open(sys.argv[2], "w").write(scaled)
PY
experiment wrong "$work/wrong-bert_base.yaml" > "$work/wrong.yaml"
for case in right wrong; do
  "$psw" validate --config "$work/$case.yaml" --socket "$sock" --out "$work/$case" > "$work/$case.txt" 2>&1 \
    || { cat "$work/$case.txt"; echo "FAIL: psw validate ($case)"; exit 1; }
  echo "== $case profile"
  cat "$work/$case.txt"
done
/usr/bin/python3 - "$work/right" "$work/wrong" "$tolerance" <<'PY'
import csv, sys
right, wrong, tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3])
def error(folder, scope, measure):
    rows = {(r["scope"], r["measure"]): r for r in csv.DictReader(open(f"{folder}/validation.csv"))}
    row = rows[(scope, measure)]
    assert row["status"] in ("within", "outside"), row  # both sides measured it
    return float(row["relative_error"])
checked = [("bert_base", "engine_mean_ms"), ("bert_base", "mean_ms")]
for scope, measure in checked:
    e = error(right, scope, measure)
    print(f"right profile: {scope} {measure} relative error {e:+.3f} (tolerance {tolerance})")
    assert abs(e) <= tolerance, f"the host-measured profile misses {scope} {measure} by {e:+.3f}"
for scope, measure in checked:
    e = error(wrong, scope, measure)
    print(f"wrong profile: {scope} {measure} relative error {e:+.3f}")
    assert e > 2 * tolerance, f"the 3x profile is within {e:+.3f} of {scope} {measure}: the comparison cannot tell"
PY
echo "PASS"
