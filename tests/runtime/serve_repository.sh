#!/usr/bin/env bash
# The model repository's load and unload (Note [Repository load] in the controller) on a live
# host-backend server while its training job runs: over gRPC (psw client) and REST (curl), a
# model of the serve config unloaded and loaded again, a new model loaded from its entry, every
# refusal with its code, a worker killed after the loads (its successor has the models as they
# stand), training never stopping, and the decision log replayed to the same decisions. The server
# is host-tiny.yaml's (BERT-Tiny served and trained) with a small TorchScript model beside it, cnn
# (serve_lib.sh's tiny_config_with_fp32_model); the model it did not list is another TorchScript
# file, classifier (profiled here): requests of either take milliseconds. (The load of a zoo model
# from its entry: Controller.LoadsWithinTheDeviceMemoryLimitAndRefusesBeyondIt.)
#
#   serve_repository.sh PSW
set -euo pipefail
psw=$1
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
tiny_config_with_fp32_model
"$psw" profile --model "$work/torchscript/classifier.pt" --input-shape 1,3,16,16 --batch 1 --backend host --repeat 2 \
  --out "$work/profiles" > "$work/profile.log" 2>&1 || { cat "$work/profile.log"; echo "FAIL: psw profile of classifier.pt"; exit 1; }
start_ready_server --http-listen 127.0.0.1:0 --decisions "$work/decisions.jsonl"
url=$(sed -n 's/^psw serve: REST on \(http:[^ ]*\)$/\1/p' "$work/serve.log")
fail() { tail -30 "$work/serve.log"; echo "FAIL: $1"; exit 1; }
client() { "$psw" client --socket "$sock" "$@"; }
steps() { client --train-status bert_tiny --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["completed_steps"])'; }
state() {  # MODEL: its state and reason in the index
  client --index --format json |
    /usr/bin/python3 -c 'import json,sys; m={e["name"]: e for e in json.load(sys.stdin)["models"]}; e=m.get(sys.argv[1]); print(e["state"] + " " + e["reason"] if e else "absent")' "$1"
}
# expect_error RC PATTERN CMD...: the command fails with exit RC and says PATTERN.
expect_error() {
  local rc=$1 pattern=$2
  shift 2
  set +e
  "$@" > "$work/out.log" 2>&1
  local got=$?
  set -e
  test "$got" -eq "$rc" && grep -Eq "$pattern" "$work/out.log" || { cat "$work/out.log"; fail "$* exited $got, expected $rc and '$pattern'"; }
}
steps_before=$(steps)

# A model of the serve config, unloaded: not served, listed as unloaded, its memory freed.
client --unload cnn | tee -a "$work/timings.log" | grep -q "^unloaded cnn in" || fail "unload"
test "$(state cnn)" == "UNAVAILABLE unloaded" || fail "index after the unload: $(state cnn)"
expect_error 2 "unknown model 'cnn'" client --model cnn --random --batch 1
expect_error 2 "model 'cnn' is not loaded" client --unload cnn
for _ in $(seq 1 100); do grep -q "model 'cnn' unloaded: its memory is freed" "$work/serve.log" && break; sleep 0.1; done
grep -q "model 'cnn' unloaded: its memory is freed" "$work/serve.log" || fail "the daemon never freed cnn"
# ... and loaded again from the serve config: served as before.
client --load cnn | tee -a "$work/timings.log" | grep -q "^loaded cnn in" || fail "load from the serve config"
test "$(state cnn)" == "READY " || fail "index after the load: $(state cnn)"
client --model cnn --random --batch 1 --format json > "$work/cnn.json" || fail "cnn after its reload"

# A model the serve config does not list, loaded over REST from its entry (JSON in Triton's
# "config" parameter), and served.
entry="{\\\"name\\\": \\\"classifier\\\", \\\"torchscript\\\": \\\"$work/torchscript/classifier.pt\\\", \\\"input_shape\\\": [3, 16, 16], \\\"batch\\\": 1}"
curl -sS -o "$work/load.json" -w '%{http_code}\n' -X POST "$url/v2/repository/models/classifier/load" \
  -H 'Content-Type: application/json' -d "{\"parameters\": {\"config\": \"$entry\"}}" > "$work/code"
test "$(cat "$work/code")" == 200 || { cat "$work/load.json"; fail "REST load: HTTP $(cat "$work/code")"; }
client --model classifier --random --batch 1 --repeat 3 > "$work/classifier.log" || { cat "$work/classifier.log"; fail "classifier after its load"; }
test "$(state classifier)" == "READY " || fail "index after the REST load: $(state classifier)"

# Refusals, each with its code, the server going on.
expect_error 2 "is loaded already" client --load bert_tiny
expect_error 2 "no model 'gpt9' in the repository" client --load gpt9
printf 'name: mobilenet\nbatch: 1\nwidth: 3\n' > "$work/unknown-key.yaml"
expect_error 2 "width" client --load mobilenet --model-config "$work/unknown-key.yaml"
printf 'name: other\n' > "$work/other.yaml"
expect_error 2 "names model 'other', not 'mobilenet'" client --load mobilenet --model-config "$work/other.yaml"
printf 'name: mynet\ntorchscript: /nonexistent/mynet.pt\ninput_shape: [3, 8, 8]\n' > "$work/missing.yaml"
expect_error 2 "no such file: /nonexistent/mynet.pt" client --load mynet --model-config "$work/missing.yaml"
printf 'name: not_a_zoo_model\n' > "$work/not-zoo.yaml"
expect_error 2 "the load of 'not_a_zoo_model': .*not in the zoo" client --load not_a_zoo_model --model-config "$work/not-zoo.yaml"
# A load the daemon refuses (a TorchScript file that is not one): listed as failed in the index.
printf 'not torchscript' > "$work/broken.pt"
printf 'name: broken\ntorchscript: %s\ninput_shape: [3, 8, 8]\n' "$work/broken.pt" > "$work/broken.yaml"
expect_error 2 "the load of 'broken' failed: .*broken.pt" client --load broken --model-config "$work/broken.yaml"
[[ $(state broken) == "UNAVAILABLE its load failed: "* ]] || fail "index after a failed load: $(state broken)"
expect_error 2 "is not loaded" client --unload gpt9
code=$(curl -sS -o "$work/bad.json" -w '%{http_code}' -X POST "$url/v2/repository/models/bert_tiny/unload" -d '{"parameters": {"force": true}}')
test "$code" == 400 && grep -q "unknown parameter 'force'" "$work/bad.json" || { cat "$work/bad.json"; fail "REST unload with a bad body: HTTP $code"; }
# The codes as HTTP statuses: ALREADY_EXISTS 409, NOT_FOUND 404, INVALID_ARGUMENT 400.
for expected in "409 bert_tiny/load" "404 gpt9/unload" "404 gpt9/load"; do
  code=$(curl -sS -o "$work/answer.json" -w '%{http_code}' "$url/v2/repository/models/${expected#* }" -d '{}')
  test "$code" == "${expected%% *}" || { cat "$work/answer.json"; fail "REST ${expected#* }: HTTP $code"; }
done
code=$(curl -sS -o "$work/bad.json" -w '%{http_code}' -X POST "$url/v2/repository/models/bert_tiny/load" -d '[1]')
test "$code" == 400 || { cat "$work/bad.json"; fail "REST load with a bad body: HTTP $code"; }

# A worker killed after the loads: its successor starts with the models as they stand.
worker=$(pgrep -P "$server" -f 'runtime-worker.*--worker 1' | head -1)
test -n "$worker" || fail "no worker 1 to kill"
kill -KILL "$worker"
for _ in $(seq 1 600); do
  grep -q "worker 1 ready" <(sed -n '/exited; starting a new one/,$p' "$work/serve.log") && break
  sleep 0.2
done
for _ in 1 2 3 4; do client --model classifier --random --batch 1 > /dev/null || fail "classifier after a worker's replacement"; done
client --model cnn --random --batch 1 > /dev/null || fail "cnn after a worker's replacement"

# Unloaded again, the new model is gone; training went on all along.
client --unload classifier > /dev/null || fail "unload of the loaded model"
expect_error 2 "unknown model 'classifier'" client --model classifier --random --batch 1
steps_after=$(steps)
test "$steps_after" -gt "$steps_before" || fail "training stopped: $steps_before steps, then $steps_after"
kill -TERM "$server"
wait "$server" || fail "the server exited $?"
server=
"$psw" replay-decisions "$work/decisions.jsonl" > "$work/replay.txt" 2>&1 || { cat "$work/replay.txt"; fail "replay-decisions"; }
grep -q '"kind":"model_unloaded"' "$work/decisions.jsonl" && grep -q '"kind":"model_loaded"' "$work/decisions.jsonl" ||
  fail "no model_loaded or model_unloaded in the decision log"
cat "$work/timings.log"
grep -E "loaded|unloaded|freed|ready \(pid" "$work/serve.log" | sed 's/^/  server: /'
echo "serve repository: ok ($steps_before -> $steps_after training steps)"
