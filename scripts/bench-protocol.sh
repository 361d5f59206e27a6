#!/usr/bin/env bash
# Runs the protocol benchmark (Google Benchmark, tests/bench/protocol_bench.cpp) and writes
# results/protocol.md: one raw-input ModelInfer through psw's gRPC front end and client on a Unix
# socket, split where its time goes (Note [Protocol split]), beside the same bytes there and back
# through a plain Unix socket pair and a memcpy, at BERT-base's, ResNet-152's and Inception-v3's
# input sizes, with the machine it ran on. On this host: the gRPC path's cost, not the GPU's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$build/tests/psw_protocol_bench" --benchmark_format=json --benchmark_out="$json" \
  --benchmark_out_format=json --benchmark_min_time=1 >/dev/null
{
  echo "# The request path's protocol on the host"
  echo
  echo "Produced by \`scripts/bench-protocol.sh\` (Google Benchmark, \`tests/bench/protocol_bench.cpp\`); do not"
  echo "edit by hand. One ModelInfer of the fake service's \`double\` model (its output the input's size) with"
  echo "the input's bytes inside the gRPC message, through psw's front end and client on a Unix socket"
  echo "(the client sends the input from where it is: Note [Raw inputs sent in place] in"
  echo "\`exec/runtime/client/src/client.cpp\`), beside the same call through the generated stub with the"
  echo "input copied into the message (as the client sent it before, and as a plain C++ client does),"
  echo "and against the same bytes there and back through a Unix socket pair with the system's default buffers"
  echo "(an echo thread at the other end) and through memcpy. The gRPC call's split (Note [Protocol split]"
  echo "in \`exec/runtime/client/include/psw/runtime/client/serving_benchmark.hpp\`): \`to server\` is the"
  echo "client's message built to the server's handler entered (serialisation, the socket, the parse),"
  echo "\`to client\` the handler's response complete to the client's call returned. Medians in ms."
  echo
  "$root/scripts/environment.sh"
  echo
  python3 "$root/scripts/protocol_table.py" "$json"
} > "$root/results/protocol.md"
cat "$root/results/protocol.md"
