#!/usr/bin/env bash
# On a GPU host: cold starts of LLM decoders and of the zoo in bf16. Builds, runs
# the decoder, dtype and Hugging Face reference tests of the `gpu` label, profiles the link and each model
# (`psw profile`, decoders at a 512-token prompt), then measures with `psw run --graph`:
#  - llama-1b and llama-8b (configs/zoo/) in bf16: time to first token of a cold switch beside
#    copy-then-prefill and the resident prefill, and per-token decode (Note [Time to first
#    token]); once copying every layer, once with --placement auto (the embedding read in place);
#  - resnet152 and bert_base in fp32 and bf16: the same switch with half the bytes.
# Writes OUT_DIR/<date>-llm.md (scripts/llm_report.py) and OUT_DIR/raw-llm.tar.gz.
#
# The decoders' profiles carry a prefill curve (Note [Prefill curve]: the whole prefill at
# PSW_LLM_PREFILL's prompt lengths), and TTFT is also measured at PSW_LLM_OTHER_PROMPTS, where
# psw run predicts it through the curve.
#
#   scripts/gpu-llm.sh [OUT_DIR]          # OUT_DIR defaults to results/gpu
#   PSW_LLM_MODELS="llama-1b" PSW_LLM_REPEAT=20 PSW_LLM_PROMPT=512 PSW_LLM_DECODE=32
#   PSW_LLM_PARTS="tests decoders zoo"   PSW_LLM_PREFILL=128,256,1024,2048  PSW_LLM_OTHER_PROMPTS="128 2048"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
parts=" ${PSW_LLM_PARTS:-tests decoders zoo} "
targets=(psw)
if [[ $parts == *" tests "* ]]; then targets+=(psw_gpu_tests); fi
source "$root/scripts/gpu-build.sh" "$out" "${targets[@]}"
raw="$out/raw-llm"
profiles="$raw/profiles"
mkdir -p "$raw" "$profiles"
bash "$root/scripts/environment.sh" > "$raw/environment.md"  # kept with the raw runs if the call is cut
psw="$build/cli/psw"
repeat=${PSW_LLM_REPEAT:-20}
prompt=${PSW_LLM_PROMPT:-512}
decode=${PSW_LLM_DECODE:-32}
if [[ $parts == *" tests "* ]]; then
  echo "== gpu tests: decoders and dtypes ($(date -u +%T))"
  ctest --test-dir "$build" -L gpu -R "Decoder|Dtype|HuggingFace" --output-on-failure --timeout 600 2>&1 | sed "s|$root/||g" | tee "$raw/gpu-tests.log" | tail -8
fi
echo "== link ($(date -u +%T))"
(cd "$root" && "$psw" profile --model bert_base --batch 1 --repeat 5 --link --hardware-name h200-pcie5 --out "$profiles/link") \
  | grep link
hardware="$profiles/link/h200-pcie5.yaml"
for model in ${PSW_LLM_MODELS:-llama-1b llama-8b}; do
  [[ $parts == *" decoders "* ]] || break
  echo "== $model bf16, prompt $prompt ($(date -u +%T))"
  config="configs/zoo/$model.yaml"
  (cd "$root" && "$psw" profile --model "$config" --dtype bf16 --batch 1 --prompt-tokens "$prompt" --repeat "$repeat" \
     --prefill-tokens "${PSW_LLM_PREFILL:-128,256,1024,2048}" --out "$profiles") | tail -2
  for placement in copy auto; do
    (cd "$root" && "$psw" run --model "$config" --dtype bf16 --batch 1 --prompt-tokens "$prompt" --decode "$decode" \
       --graph --placement "$placement" --repeat "$repeat" --warmup 3 --profile "$profiles/bf16/$model.yaml" \
       --hardware "$hardware" --format json) > "$raw/$model-bf16-$placement.json"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["decoder"]; print("%s: TTFT %.1f ms, bound %.1f ms (%.3f), copy-then-prefill %.1f ms, resident %.1f ms, decode %.2f ms/token" % (sys.argv[2], d["latency_ms"]["median"], c["first_token_bound_ms"], c["first_token_over_bound"], c["copy_then_prefill_ms"]["median"], c["resident_prefill_ms"], c["per_token_ms"]["median"]))' \
      "$raw/$model-bf16-$placement.json" "$model $placement"
  done
  # Other prompts, predicted through the profile's prefill curve.
  for other in ${PSW_LLM_OTHER_PROMPTS:-128 2048}; do
    (cd "$root" && "$psw" run --model "$config" --dtype bf16 --batch 1 --prompt-tokens "$other" --decode 4 \
       --graph --repeat "$repeat" --warmup 3 --profile "$profiles/bf16/$model.yaml" --hardware "$hardware" --format json) \
      > "$raw/$model-bf16-copy-prompt$other.json"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%s: TTFT %.1f ms, predicted %.1f ms (%+.1f%%)" % (sys.argv[2], d["latency_ms"]["median"], d["predicted_ms"], 100 * d["prediction_error"]))' \
      "$raw/$model-bf16-copy-prompt$other.json" "$model prompt $other"
  done
done
for model in resnet152 bert_base; do
  [[ $parts == *" zoo "* ]] || break
  for dtype in fp32 bf16; do
    echo "== $model $dtype ($(date -u +%T))"
    # psw profile writes fp32 profiles at the top of --out, the others under a folder of their dtype.
    in_dtype=$([[ $dtype == fp32 ]] && echo "" || echo "$dtype/")
    (cd "$root" && "$psw" profile --model "$model" --dtype "$dtype" --batch 8 --repeat "$repeat" --out "$profiles") | tail -1
    (cd "$root" && "$psw" run --model "$model" --dtype "$dtype" --batch 8 --graph --repeat "$repeat" --warmup 3 \
       --profile "$profiles/$in_dtype$model.yaml" --hardware "$hardware" --format json) > "$raw/$model-$dtype.json"
  done
done
report="$out/$(date -u +%F)-llm.md"
PSW="$psw" python3 "$root/scripts/llm_report.py" "$raw" "$raw/environment.md" > "$report"
tar -C "$raw" -czf "$out/raw-llm.tar.gz" . && rm -rf "$raw"
echo "== written $report ($(date -u +%T))"
