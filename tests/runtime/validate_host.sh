#!/usr/bin/env bash
# The cross-validation on the host: the simulator, given profiles measured on this
# machine, predicts a host-backend psw serve within a tolerance, and a deliberately wrong profile
# breaks it. The steps of a user who calibrates a machine: psw profile (the model's layers and
# the link), psw serve with those profiles, psw profile-serving (the request path), psw validate.
#
# The compared rows are the model's engine time (Note [Request path]: the input on the device to
# the forward's end), which the model profile predicts, and the client's latency, which adds the
# request path fitted by profile-serving on the same server. The host is a shared CPU with slow
# spells (step 4), so this is a check of the calibration pipeline and of gross errors, with a wide
# tolerance: PSW_HOST_VALIDATE_TOLERANCE (0.6). The simulator's accuracy is measured on the GPU
# (results/gpu/), where the same comparison is within a few percent. The wrong profile's forward
# times are 5x the measured ones, an error no slow spell explains.
#
#   validate_host.sh PSW
set -euo pipefail
psw=$1
tolerance=${PSW_HOST_VALIDATE_TOLERANCE:-0.6}
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock

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
#
# A shared 2-vCPU host (this VM, CI's) has slow spells: the hypervisor takes a core for seconds,
# and the same forward then takes 1.5-3x as long, in psw profile as in the server (measured here:
# 251 to 829 ms medians for BERT-base's forward minutes apart). One comparison of two time windows
# is then noise, not a verdict. So an attempt measures the profile right before the requests it
# predicts, compares medians (a spell that catches two of eight requests moves the mean, not the
# median), and the test passes when one of three attempts has the right profile within the
# tolerance and the 5x profile outside twice it. A simulator or profiler that is wrong by more
# than the tolerance fails all three. (Measured here in a noisy hour: the right profile's median
# engine error from -0.47 to +0.18 per attempt; in a quiet one, -0.03.)
attempts=${PSW_HOST_VALIDATE_ATTEMPTS:-3}
experiment() {  # NAME MODEL_PROFILE INTERVAL_MS
  cat <<YAML
name: $1
hardware: $work/profiles/host.yaml
serving: $work/serving.yaml
models:
  - {name: bert_base, profile: $2}
mechanism: ready
seed: 1
workload: {kind: periodic, interval_ms: $3, count: 8, models: [bert_base]}
YAML
}
for attempt in $(seq 1 "$attempts"); do
  dir=$work/attempt$attempt
  mkdir -p "$dir"
  if (( attempt > 1 )); then  # the first attempt uses step 1's profile, measured moments ago
    "$psw" profile --model bert_base --backend host --batch 1 --repeat 5 --hardware-name host \
      --out "$dir/profiles" > "$dir/profile.txt" 2>&1 || { cat "$dir/profile.txt"; echo "FAIL: psw profile"; exit 1; }
  else
    mkdir -p "$dir/profiles" && cp "$work/profiles/bert_base.yaml" "$dir/profiles/"
  fi
  interval_ms=$(/usr/bin/python3 -c '
import re, sys
forward = sum(int(n) for n in re.findall(r"forward_ns: (\d+)", open(sys.argv[1]).read()))
print(max(200, round(2 * forward / 1e6)))' "$dir/profiles/bert_base.yaml")
  /usr/bin/python3 - "$dir/profiles/bert_base.yaml" "$dir/wrong-bert_base.yaml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
scaled = re.sub(r"(forward_ns: )(\d+)", lambda m: m.group(1) + str(5 * int(m.group(2))), text)
assert scaled != text, "no forward_ns in the profile"
open(sys.argv[2], "w").write(scaled)
PY
  experiment right "$dir/profiles/bert_base.yaml" "$interval_ms" > "$dir/right.yaml"
  experiment wrong "$dir/wrong-bert_base.yaml" "$interval_ms" > "$dir/wrong.yaml"
  for case in right wrong; do
    "$psw" validate --config "$dir/$case.yaml" --socket "$sock" --out "$dir/$case" > "$dir/$case.txt" 2>&1 \
      || { cat "$dir/$case.txt"; echo "FAIL: psw validate ($case)"; exit 1; }
    echo "== attempt $attempt of $attempts, $case profile"
    cat "$dir/$case.txt"
  done
  if /usr/bin/python3 - "$dir/right" "$dir/wrong" "$tolerance" <<'PY'
import csv, sys
right, wrong, tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3])
def error(folder, scope, measure):
    rows = {(r["scope"], r["measure"]): r for r in csv.DictReader(open(f"{folder}/validation.csv"))}
    row = rows[(scope, measure)]
    assert row["status"] in ("within", "outside"), row  # both sides measured it: a broken run fails the test
    return float(row["relative_error"])
checked = [("bert_base", "engine_p50_ms"), ("bert_base", "p50_ms")]
ok = True
for scope, measure in checked:
    e = error(right, scope, measure)
    within = abs(e) <= tolerance
    ok &= within
    print(f"right profile: {scope} {measure} relative error {e:+.3f} (tolerance {tolerance}): {'within' if within else 'OUTSIDE'}")
for scope, measure in checked:
    e = error(wrong, scope, measure)
    told = e > 2 * tolerance
    ok &= told
    print(f"wrong profile: {scope} {measure} relative error {e:+.3f}: {'told apart' if told else 'NOT TOLD APART'}")
sys.exit(0 if ok else 3)
PY
  then
    echo "PASS (attempt $attempt of $attempts)"
    exit 0
  else
    rc=$?
    (( rc == 3 )) || { echo "FAIL: the comparison script failed (exit $rc)"; exit 1; }
  fi
done
echo "FAIL: in none of $attempts attempts was the host-measured profile within $tolerance of the server and the 5x profile outside twice that"
exit 1
