#!/usr/bin/env bash
# A decoder generating through psw serve's REST front end, with curl (docs/llm.md, Generation).
# Serve a decoder with --http-listen (docs/llm.md says how, llama-tiny on the host backend
# included), then:  bash docs/examples/generate_curl.sh http://127.0.0.1:8000 llama-tiny
set -euo pipefail
url=${1:-http://127.0.0.1:8000}
model=${2:-llama-tiny}
# Token ids in, greedy decoding of max_tokens tokens, token ids out, with the time to the first
# token and per later token.
curl -sf "$url/v2/models/$model/generate" -H 'Content-Type: application/json' \
  -d '{"id": "gen-1", "input_ids": [1, 15, 43, 290], "parameters": {"max_tokens": 8}}' && echo
# The same as server-sent events: one `data:` line per token as it is generated, then `event: end`
# with the whole answer (-N: print each event as it arrives).
curl -sfN "$url/v2/models/$model/generate_stream" -H 'Content-Type: application/json' \
  -d '{"input_ids": [1, 15, 43, 290], "parameters": {"max_tokens": 4}}'
# An error: a prompt and max_tokens beyond the context.
curl -s -w ' (HTTP %{http_code})\n' "$url/v2/models/$model/generate" -H 'Content-Type: application/json' \
  -d '{"input_ids": [1, 2, 3], "parameters": {"max_tokens": 1000000}}'
