#!/usr/bin/env bash
# On a GPU host: the served workloads' numbers (what runs on the server is real).
#
#   decoder   llama-1b (a context of PSW_WORKLOADS_CONTEXT positions, default 8,192) with seeded
#             random weights made by Hugging Face transformers (scripts/hf_generate.py), served
#             by `psw serve --backend cuda` from those weights in bf16 and in fp32 beside
#             ResNet-152 (cache: active, prompt buckets 128, 512, 2048 and the context). Per
#             prompt length (PSW_WORKLOADS_PROMPTS, one inside each bucket): generate calls of
#             PSW_WORKLOADS_DECODE tokens measured by `psw client --generate --repeat`
#             (Note [Generation measured]): time to first token cold (a ResNet-152 request before
#             each call) and warm (back to back), per token after it, and the output ids; beside
#             them psw run --graph of the same decoder at the bucket's length (the cold switch and
#             its bound: every byte over the link measured in the same call plus the resident
#             prefill; its decode steps, replayed as the server's) and transformers' own greedy `generate` of the same weights, resident, in
#             the same session (ids in fp32 and bf16, time in bf16).
#   training  the ResNet-152 job of configs/serve/h200.yaml (batch 8, SGD with momentum) on two
#             fresh servers: `psw bench-serve` with PSW_WORKLOADS_WINDOW seconds alone then under
#             one request per second (round robin over the served models, inputs in shared
#             memory), and on the other the window under requests first, so that both loss curves
#             start at the job's first steps; each run's throughput share side by side.
#
# Writes OUT_DIR/<date>-<gpu>-workloads-<parts>.md (scripts/workloads_report.py), the loss curves
# beside it (-loss.png) and its raw JSON, logs and profiles in
# OUT_DIR/raw-workloads-<date>-<gpu>-<parts>.tar.gz. The weights (7.4 GB) go to a temporary
# folder, not OUT_DIR.
#
#   scripts/gpu-workloads.sh [OUT_DIR]        # OUT_DIR defaults to results/gpu
#   PSW_WORKLOADS_PARTS="decoder training" PSW_WORKLOADS_PROMPTS="100 500 2000 8000" PSW_WORKLOADS_CONTEXT=8192
#   PSW_WORKLOADS_DECODE=32 PSW_WORKLOADS_REPEAT=10 PSW_WORKLOADS_WINDOW=90 PSW_WORKLOADS_ROUNDS=1
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
parts=" ${PSW_WORKLOADS_PARTS:-decoder training} "
prompts=(${PSW_WORKLOADS_PROMPTS:-100 500 2000 8000})
decode=${PSW_WORKLOADS_DECODE:-32}
repeat=${PSW_WORKLOADS_REPEAT:-10}
window=${PSW_WORKLOADS_WINDOW:-90}
rounds=${PSW_WORKLOADS_ROUNDS:-1}  # pairs of windows per server (Note [Training windows])
# The served context (PSW_WORKLOADS_CONTEXT positions, llama-1b's 8,192 by default: a shorter one
# keeps the same weights and rotary frequencies); the last bucket is its longest prompt.
context=${PSW_WORKLOADS_CONTEXT:-8192}
buckets="128, 512, 2048, $((context - 1))"
for part in $parts; do
  [[ $part == decoder || $part == training ]] \
    || { echo "gpu-workloads: unknown part '$part' in PSW_WORKLOADS_PARTS (decoder, training)" >&2; exit 2; }
done
((context > 2049)) || { echo "gpu-workloads: PSW_WORKLOADS_CONTEXT=$context: the buckets need more than 2,049 positions" >&2; exit 2; }
source "$root/scripts/gpu-build.sh" "$out" psw
psw="$build/cli/psw"
gpu=${gpu:-gpu}
tag=$(echo $parts | tr ' ' '-')  # the parts run, in the files' names: a call per part keeps both
raw="$out/raw-workloads-$(date -u +%F)-$gpu-$tag"
mkdir -p "$raw"
bash "$root/scripts/environment.sh" > "$raw/environment.md"
weights=$(mktemp -d)
sock_dir=$(mktemp -d)
sock="$sock_dir/psw.sock"
server=
stop_server() {
  if [[ -n $server ]]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  server=
}
trap 'stop_server; rm -rf "$weights" "$sock_dir"' EXIT
start_server() {  # CONFIG LOG
  (cd "$root" && "$psw" serve --backend cuda --config "$1" --socket "$sock") 2> "$2" &
  server=$!
  for _ in $(seq 1 600); do
    if "$psw" client --socket "$sock" --live 2>/dev/null | grep -q "ready  yes"; then return 0; fi
    kill -0 "$server" 2>/dev/null || { tail -20 "$2"; echo "!! the server exited"; server=; return 1; }
    sleep 0.5
  done
  echo "!! the server was not ready within 300 s"; return 1
}

if [[ $parts == *" decoder "* ]]; then
  profiles="$raw/profiles"
  mkdir -p "$profiles"
  echo "== link ($(date -u +%T))"
  (cd "$root" && "$psw" profile --model bert_base --batch 1 --repeat 5 --link --hardware-name "$gpu-link" \
     --out "$profiles/link") | grep link
  hardware="$profiles/link/$gpu-link.yaml"
  echo "== transformers: weights, prompts, greedy generate ($(date -u +%T))"
  sed "s/^max_positions: .*/max_positions: $context/" "$root/configs/zoo/llama-1b.yaml" > "$weights/llama-1b.yaml"
  python3 "$root/scripts/hf_generate.py" --zoo "$weights/llama-1b.yaml" --out "$weights" \
    --prompts "$(IFS=,; echo "${prompts[*]}")" --max-new-tokens "$decode" --repeat "$repeat"
  cp "$weights/hf.json" "$weights/prompts.json" "$raw/"
  # The fp32 decoder is served beside the bf16 one under its own name (a profile goes by it).
  sed 's/^name: llama-1b$/name: llama-1b-fp32/' "$weights/llama-1b.yaml" > "$weights/llama-1b-fp32.yaml"
  echo "== profiles ($(date -u +%T))"
  (cd "$root" && "$psw" profile --model "$weights/llama-1b.yaml" --dtype bf16 --batch 1 --prompt-tokens 512 \
     --prefill-tokens "$(echo "$buckets" | tr -d ' ')" --decode-tokens 16 --repeat 5 --out "$profiles") | tail -1
  (cd "$root" && "$psw" profile --model "$weights/llama-1b-fp32.yaml" --dtype fp32 --batch 1 --prompt-tokens 512 \
     --decode-tokens 16 --repeat 5 --out "$profiles") | tail -1
  cp "$root/configs/models/h200/resnet152.yaml" "$profiles/"
  buckets_of=$(echo "$buckets" | tr -d ' ' | tr ',' ' ')
  for bucket in $buckets_of; do
    # Its decode steps where they fit the context (the prompt, the steps and two untimed before them).
    run_decode=$((context - bucket - 2 < decode ? context - bucket - 2 : decode))
    ((run_decode > 0)) || run_decode=0
    echo "== psw run llama-1b bf16 at $bucket tokens ($(date -u +%T))"
    (cd "$root" && "$psw" run --model "$weights/llama-1b.yaml" --dtype bf16 --batch 1 --prompt-tokens "$bucket" \
       --decode "$run_decode" --graph --repeat "$repeat" --warmup 3 --profile "$profiles/bf16/llama-1b.yaml" \
       --hardware "$hardware" --format json) > "$raw/run-$bucket.json"
  done
  cat > "$raw/serve-decoder.yaml" <<YAML
# scripts/gpu-workloads.sh, part decoder
mechanism: pipeswitch
workers: 2
hardware: $hardware
profiles: $profiles
cache: active
max_tensor_bytes: 67108864
request_timeout_ms: 60000
models:
  - name: llama-1b
    decoder: $weights/llama-1b.yaml
    dtype: bf16
    weights: $weights/llama-1b-bf16.safetensors
    prompt_tokens: 512
    prompt_buckets: [$buckets]
    batch: 1
  - name: llama-1b-fp32
    decoder: $weights/llama-1b-fp32.yaml
    weights: $weights/llama-1b-fp32.safetensors
    prompt_tokens: 512
    prompt_buckets: [$buckets]
    batch: 1
  - name: resnet152
    batch: 8
YAML
  echo "== psw serve ($(date -u +%T))"
  start_server "$raw/serve-decoder.yaml" "$raw/serve-decoder.log"
  for n in "${prompts[@]}"; do
    ids=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))[sys.argv[2]])))' \
      "$raw/prompts.json" "$n")
    echo "== generate, prompt $n ($(date -u +%T))"
    "$psw" client --socket "$sock" --generate llama-1b --prompt-ids "$ids" --max-tokens "$decode" --repeat "$repeat" \
      --evict-with resnet152 --format json > "$raw/generate-$n-cold.json"
    "$psw" client --socket "$sock" --generate llama-1b --prompt-ids "$ids" --max-tokens "$decode" \
      --repeat "$((repeat + 1))" --format json > "$raw/generate-$n-warm.json"
    "$psw" client --socket "$sock" --generate llama-1b-fp32 --prompt-ids "$ids" --max-tokens "$decode" --repeat 2 \
      --format json > "$raw/generate-$n-fp32.json"
  done
  stop_server
fi

if [[ $parts == *" training "* ]]; then
  for order in alone-first requests-first; do
    echo "== training, $order: $window s alone and $window s at 1 request/s ($(date -u +%T))"
    start_server "$root/configs/serve/h200.yaml" "$raw/serve-training-$order.log"
    flags=()
    [[ $order == requests-first ]] && flags=(--requests-first)
    "$psw" bench-serve --socket "$sock" --cold-requests 0 --window "$window" --rate 1 --shared-memory \
      --rounds "$rounds" "${flags[@]}" --out "$raw/training-$order.json"
    stop_server
  done
fi

report="$out/$(date -u +%F)-$gpu-workloads-$tag.md"
python3 "$root/scripts/workloads_report.py" "$raw" > "$report"
tar -C "$out" -czf "$raw.tar.gz" "$(basename "$raw")" && rm -rf "$raw"
echo "== written $report and $(basename "$raw").tar.gz ($(date -u +%T))"
