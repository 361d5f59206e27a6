#!/usr/bin/env bash
# psw serve with a decoder (Note [Decoder in the pipeline]): llama-tiny in bf16 beside BERT-Tiny
# in fp32 on a host-backend server, the decoder's profile from psw profile. psw client shows its
# tensors (a prompt of prompt_tokens ids in, BF16 logits out) and gets answers to random
# prompts; docs/examples/generate_curl.sh generates over REST, plain and streamed (Note [Generate
# call]), psw client --generate and docs/examples/grpc_generate.py the same over gRPC; psw load drives a periodic workload, every request answered; psw profile-serving
# measures the decoder's request path and psw validate simulates the workload with it; then psw
# validate drives Azure LLM 2023 rows with `decode: true` as generate calls and compares their
# first token with the simulator's (Note [Generate requests]).
#
#   serve_decoder.sh PSW PROTO_DIR
set -euo pipefail
psw=$1
proto=$2
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
root=$PWD
"$psw" profile --model configs/zoo/llama-tiny.yaml --dtype bf16 --backend host --batch 1 --prompt-tokens 32 \
  --decode-tokens 4 --repeat 2 --out "$work/profiles" > /dev/null
test -f "$work/profiles/bf16/llama-tiny.yaml" || { ls -R "$work/profiles"; echo "FAIL: no bf16 profile"; exit 1; }
cp configs/models/bert_tiny.yaml "$work/profiles/"  # analytic: a CPU server plans with any
cat > "$work/serve.yaml" <<YAML
mechanism: pipeswitch
workers: 2
hardware: $root/configs/hardware/h200-pcie5.yaml
profiles: $work/profiles
max_tensor_bytes: 4194304
request_timeout_ms: 60000
models:
  - name: llama-tiny
    decoder: $root/configs/zoo/llama-tiny.yaml
    dtype: bf16
    prompt_tokens: 32
    batch: 1
  - name: bert_tiny
    batch: 1
YAML
serve_config=$work/serve.yaml
start_ready_server --http-listen 127.0.0.1:0
url=$(sed -n 's/^psw serve: REST on \(http:[^ ]*\)$/\1/p' "$work/serve.log")
bash docs/examples/generate_curl.sh "$url" llama-tiny > "$work/generate.log" 2>&1 \
  || { cat "$work/generate.log"; tail -20 "$work/serve.log"; echo "FAIL: generate_curl.sh"; exit 1; }
# The same generation over gRPC (the Control service's stream), through psw client.
"$psw" client --socket "$sock" --generate llama-tiny --prompt-ids 1,15,43,290 --max-tokens 8 --format json \
  > "$work/generate.json"
"$psw" client --socket "$sock" --generate llama-tiny --prompt-ids 1,15,43,290 --max-tokens 3 > "$work/generate.txt"
# Note [Generation measured]: three calls, each after a BERT-Tiny request (cache off: all cold).
"$psw" client --socket "$sock" --generate llama-tiny --prompt-ids 1,15,43,290 --max-tokens 8 --repeat 3 \
  --evict-with bert_tiny --format json > "$work/generate-measured.json"
/usr/bin/python3 docs/examples/grpc_generate.py --proto-dir "$proto" --socket "$sock" --model llama-tiny \
  > "$work/generate.py.log" 2>&1 || { cat "$work/generate.py.log"; echo "FAIL: grpc_generate.py"; exit 1; }
set +e
"$psw" client --socket "$sock" --generate bert_tiny --prompt-ids 1,2 > /dev/null 2> "$work/not-decoder.err"
rc=$?
set -e
test "$rc" = 2 && grep -q "model 'bert_tiny' is not a decoder" "$work/not-decoder.err" \
  || { cat "$work/not-decoder.err"; echo "FAIL: --generate of a model that is not a decoder: exit $rc"; exit 1; }
"$psw" client --socket "$sock" --metadata --model llama-tiny --format json > "$work/metadata.json"
"$psw" client --socket "$sock" --model llama-tiny --random --repeat 3 --format json > "$work/infer.json"
"$psw" client --socket "$sock" --model bert_tiny --random --format json > "$work/bert.json"
cat > "$work/load.yaml" <<YAML
name: load-decoder
hardware: $root/configs/hardware/h200-pcie5.yaml
models:
  - {name: llama-tiny, profile: $work/profiles/bf16/llama-tiny.yaml}
mechanism: pipeswitch
seed: 5
workload: {kind: periodic, interval_ms: 200, count: 6, models: [llama-tiny]}
YAML
"$psw" load --config "$work/load.yaml" --socket "$sock" --out "$work/load" > "$work/load.txt" 2> "$work/load.err" \
  || { cat "$work/load.txt" "$work/load.err"; echo "FAIL: psw load"; exit 1; }
# The request path of the decoder (psw profile-serving names it: the default is the zoo's
# built-in models), then psw validate of the same workload with it.
"$psw" profile-serving --socket "$sock" --name host-decoder --device "$(uname -n)" --model llama-tiny --requests 2 \
  --gap-ms 20 --batch 1 --training-window 0 --out "$work/serving.yaml" > /dev/null 2> "$work/profile.err" \
  || { cat "$work/profile.err"; echo "FAIL: psw profile-serving"; exit 1; }
grep -q "model: llama-tiny" "$work/serving.yaml" && ! grep -q "model: bert_tiny" "$work/serving.yaml" \
  || { cat "$work/serving.yaml"; echo "FAIL: the serving profile's models"; exit 1; }
set +e
"$psw" profile-serving --socket "$sock" --name x --device y --model gpt2 > /dev/null 2> "$work/unserved.err"
rc=$?
set -e
test "$rc" = 2 && grep -q "does not serve model 'gpt2'" "$work/unserved.err" \
  || { cat "$work/unserved.err"; echo "FAIL: an unserved --model: exit $rc"; exit 1; }
echo "serving: $work/serving.yaml" >> "$work/load.yaml"
"$psw" validate --config "$work/load.yaml" --socket "$sock" --out "$work/validation" > "$work/validate.txt" 2>&1 \
  || { cat "$work/validate.txt"; echo "FAIL: psw validate"; exit 1; }
grep -q "^llama-tiny *mean_ms" "$work/validate.txt" || { cat "$work/validate.txt"; echo "FAIL: validate's table"; exit 1; }
# Note [Generate requests]: rows of the Azure LLM 2023 format with `decode: true` go as generate
# calls (each prompt ContextTokens long, GeneratedTokens tokens); psw validate compares their first
# token with the simulator's.
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n' > "$work/llm.csv"
printf '2023-11-16 18:17:0%d.0000000,%d,%d\n' 0 20 5 1 40 3 2 12 1 3 30 6 >> "$work/llm.csv"
sed -e 's/^name: load-decoder$/name: load-decoder-generate/' \
    -e "s|^workload: .*|workload: {kind: trace, format: azure-llm-2023, path: $work/llm.csv, decode: true, buckets: [{max_context_tokens: 100, model: llama-tiny}]}|" \
    "$work/load.yaml" > "$work/generate.yaml"
"$psw" validate --config "$work/generate.yaml" --socket "$sock" --out "$work/validation-generate" \
  > "$work/validate-generate.txt" 2>&1 || { cat "$work/validate-generate.txt"; echo "FAIL: psw validate of generate requests"; exit 1; }
grep -q "^llama-tiny *first_token_p50_ms" "$work/validate-generate.txt" \
  || { cat "$work/validate-generate.txt"; echo "FAIL: no first-token rows"; exit 1; }
/usr/bin/python3 - "$work" <<'PY'
import csv, json, sys
work = sys.argv[1]
meta = json.load(open(f"{work}/metadata.json"))
assert meta["inputs"] == [{"datatype": "INT64", "name": "input_ids", "shape": [-1, 32]}], meta
assert meta["outputs"] == [{"datatype": "BF16", "name": "logits", "shape": [-1, 512]}], meta
infer = json.load(open(f"{work}/infer.json"))
assert infer["latency_ms"]["count"] == 3, infer
out = infer["outputs"][0]
assert out["datatype"] == "BF16" and out["shape"] == [1, 512] and out["bytes"] == 1024, out
assert any(v != 0 for v in out["first_values"]), out
bert = json.load(open(f"{work}/bert.json"))
assert bert["outputs"][0]["datatype"] == "FP32" and bert["outputs"][0]["shape"] == [1, 128], bert
rows = list(csv.DictReader(open(f"{work}/load/requests.csv")))
assert len(rows) == 6 and all(r["model"] == "llama-tiny" and r["status"] == "ok" for r in rows), rows
summary = json.load(open(f"{work}/load/summary.json"))
assert summary["requests"] == 6 and summary["errors"] == 0, summary
assert "first_token_latency" not in summary["models"]["llama-tiny"], summary  # nothing decoded
generated = json.load(open(f"{work}/validation-generate/measured/summary.json"))
tiny = generated["models"]["llama-tiny"]
assert generated["requests"] == 4 and generated["errors"] == 0, generated
assert tiny["first_token_latency"]["count"] == 3, tiny  # the row of one token answers its first
# Each first token comes no later than its own request's answer (the means are over other sets).
assert tiny["first_token_latency"]["max_ms"] <= tiny["latency"]["max_ms"], tiny
# requests.csv has each generate call's first token (empty for the inference requests).
rows = list(csv.DictReader(open(f"{work}/validation-generate/measured/requests.csv")))
firsts = [r for r in rows if r["first_token_ns"]]
assert len(firsts) == 3 and all(0 < int(r["first_token_ns"]) <= int(r["latency_ns"]) for r in firsts), rows
# generate_curl.sh: the answer, the stream (4 tokens, then the end event with the same ids), the error.
lines = open(f"{work}/generate.log").read().splitlines()
answer = json.loads(lines[0])
assert answer["id"] == "gen-1" and len(answer["output_ids"]) == 8 and answer["prompt_bucket"] == 16, answer
assert answer["ttft_ms"] > 0 and answer["tpot_ms"] > 0, answer
tokens = [json.loads(l[len("data: "):]) for l in lines if l.startswith("data: {\"index\"")]
assert [t["index"] for t in tokens] == [0, 1, 2, 3], lines
end = json.loads(lines[lines.index("event: end") + 1][len("data: "):])
assert end["output_ids"] == [t["output_id"] for t in tokens] == answer["output_ids"][:4], (end, tokens, answer)
assert "exceed llama-tiny's context of 256 positions" in lines[-1] and lines[-1].endswith("(HTTP 400)"), lines[-1]
# psw client --generate over gRPC: the same greedy ids as REST's; the table's tokens as they came.
grpc = json.load(open(f"{work}/generate.json"))
assert grpc["output_ids"] == answer["output_ids"] and grpc["prompt_bucket"] == 16 and grpc["ttft_ms"] > 0, (grpc, answer)
measured = json.load(open(f"{work}/generate-measured.json"))
assert measured["output_ids"] == answer["output_ids"] and measured["outputs_equal"], (measured, answer)
assert measured["differing_calls"] == [] and measured["first_call_switched"] is True, measured
assert measured["first_call_worker"] in (0, 1) and answer["worker"] in (0, 1), (measured, answer)
assert measured["ttft_cold_ms"]["count"] == 3 and measured["ttft_warm_ms"]["count"] == 0, measured
assert measured["tpot_ms"]["count"] == 3 and 0 < measured["tpot_ms"]["min"] <= measured["tpot_ms"]["max"], measured
assert measured["prompt_bucket"] == 16 and measured["evict_with"] == "bert_tiny", measured
table = open(f"{work}/generate.txt").read().splitlines()
assert table[0].split()[1:] == [str(i) for i in answer["output_ids"][:3]], table
# docs/examples/grpc_generate.py: eight tokens as they came, then the same answer.
python = open(f"{work}/generate.py.log").read().splitlines()
assert python[:8] == ["token %d: %d" % (i, t) for i, t in enumerate(answer["output_ids"])], python
assert python[8].startswith("answer: %s" % answer["output_ids"]), python
PY
echo "PASS: llama-tiny (bf16) served beside bert_tiny; psw client, generate over REST and psw load answered"
