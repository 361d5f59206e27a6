#!/usr/bin/env bash
# Writes the protocol benchmark's report (markdown, to stdout) from its Google Benchmark JSON
# (tests/bench/protocol_bench.cpp) and the environment it ran on (scripts/environment.sh's
# output): results/protocol.md on the project's host (scripts/bench-protocol.sh), and
# <date>-<gpu>-protocol.md on a GPU host (scripts/gpu-protocol.sh).
#
#   scripts/protocol_report.sh BENCHMARK_JSON ENVIRONMENT_MD > REPORT
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if (($# != 2)) || [[ ! -f $1 || ! -f $2 ]]; then
  echo "usage: scripts/protocol_report.sh BENCHMARK_JSON ENVIRONMENT_MD (both files must exist)" >&2
  exit 2
fi
echo "# The request path's protocol on the host it ran on"
echo
echo "Produced by \`scripts/bench-protocol.sh\` (or \`scripts/gpu-protocol.sh\` on a GPU host; Google Benchmark,"
echo "\`tests/bench/protocol_bench.cpp\`); do not edit by hand. One ModelInfer of the fake service's \`double\`"
echo "model (its output the input's size) with the input's bytes inside the gRPC message, through psw's front"
echo "end and client on a Unix socket (the client sends the input from where it is: Note [Raw inputs sent in"
echo "place] in \`exec/runtime/client/src/client.cpp\`), beside the same call through the generated stub with"
echo "the input copied into the message (as the client sent it before, and as a plain C++ client does), and"
echo "against the same bytes there and back through a Unix socket pair with the system's default buffers (an"
echo "echo thread at the other end) and through memcpy. The gRPC call's split (Note [Protocol split] in"
echo "\`exec/runtime/client/include/psw/runtime/client/serving_benchmark.hpp\`): \`to server\` is the client's"
echo "message built to the server's handler holding it (serialisation, the socket), \`front end\` the handler (the"
echo "message split and the input copied once into the front end's staging, Note [Raw inputs received in place]"
echo "in \`exec/runtime/server/src/grpc_server.cpp\`, then the fake's copy of it into its output), \`to client\`"
echo "the handler's response complete to the client's call returned. Medians in ms. The second table makes the"
echo "psw call and the memcpy again with 150 ms of idle before each, as the serve benchmark's cold requests"
echo "come: a buffer the processor has not touched for that long is no longer in its caches, and every copy"
echo "of the request's bytes (the kernel's into and out of the socket, the front end's one) is then paid at"
echo "the memory's speed. Its \`held\` columns hold the host's CPU wake-up latency at 0 while they run"
echo "(Note [CPU wake-up latency] in \`exec/runtime/ipc/include/psw/runtime/ipc/cpu_latency.hpp\`; root), as"
echo "\`psw serve\` does with \`cpu_wakeup_latency_us: 0\`. The third table makes the same call over the REST front"
echo "end (\`exec/runtime/server/src/http_server.cpp\`, the binary tensor extension on loopback TCP)."
echo
cat "$2"
echo
python3 "$root/scripts/protocol_table.py" "$1"
