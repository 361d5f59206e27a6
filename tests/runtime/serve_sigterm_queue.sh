#!/usr/bin/env bash
# psw serve stopped (SIGTERM) with a full queue: the requests still waiting are answered
# UNAVAILABLE ("the server is shutting down") at once instead of being run first, and the server
# exits 0 with its socket removed. 40 cold requests of BERT-Tiny at batch 16 are sent at once from
# Python threads to a host-backend server (configs/serve/host-tiny.yaml; two workers: at most two
# run at a time, each in tens of milliseconds on an idle machine, longer than the 40 threads take
# to send theirs, and in about a second on CI's loaded cores); SIGTERM comes when a few have been
# answered.
#
#   serve_sigterm_queue.sh PSW PROTO_DIR
set -euo pipefail
psw=$1
proto=$2
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
serve_config=configs/serve/host-tiny.yaml
start_ready_server
/usr/bin/python3 - "$proto" "$sock" "$server" > "$work/clients.log" 2>&1 <<'PY' || { cat "$work/clients.log"; tail -20 "$work/serve.log"; echo "FAIL"; exit 1; }
import collections, os, random, signal, struct, sys, threading, time
sys.path.insert(0, sys.argv[1])
import grpc
import grpc_service_pb2 as pb

sock, server = sys.argv[2], int(sys.argv[3])
channel = grpc.insecure_channel("unix:" + sock)
infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                            request_serializer=pb.ModelInferRequest.SerializeToString,
                            response_deserializer=pb.ModelInferResponse.FromString)
rng = random.Random(1)
ids = [rng.randrange(30522) for _ in range(16 * 128)]
request = pb.ModelInferRequest(model_name="bert_tiny")
request.inputs.add(name="input_ids", datatype="INT64", shape=[16, 128])
request.raw_input_contents.append(struct.pack("<%dq" % len(ids), *ids))
outcomes = collections.Counter()
messages = []
lock = threading.Lock()
answered = threading.Semaphore(0)

def send():
    try:
        infer(request, timeout=600)
        outcome = "OK"
    except grpc.RpcError as error:
        outcome = error.code().name
        with lock:
            messages.append(error.details())
    with lock:
        outcomes[outcome] += 1
    answered.release()

threads = [threading.Thread(target=send) for _ in range(40)]
for t in threads:
    t.start()
for _ in range(3):  # three answered, the rest queued
    answered.acquire()
os.kill(server, signal.SIGTERM)
stopped = time.monotonic()
for t in threads:
    t.join()
waited = time.monotonic() - stopped
print("outcomes", dict(outcomes), "all answered %.1f s after SIGTERM" % waited)
assert sum(outcomes.values()) == 40, outcomes
# Before the fix every queued request ran first (about a second each here); now the queue is
# answered at once and only the requests already on a worker may still complete.
assert set(outcomes) <= {"OK", "UNAVAILABLE"}, outcomes
# The queue's answer names the shutdown. A request whose call reached the socket only after the
# front end had closed gets the transport's UNAVAILABLE instead (its own message): a race of the
# client's threads with SIGTERM, not a queued request run or dropped.
shutting = [m for m in messages if "shutting down" in m]
assert len(shutting) >= 30, (outcomes, [m for m in messages if "shutting down" not in m][:3])
PY
cat "$work/clients.log"
set +e
timeout 60 bash -c "while kill -0 $server 2>/dev/null; do sleep 0.1; done"
wait "$server"
rc=$?
set -e
server=
test $rc -eq 0 || { tail -20 "$work/serve.log"; echo "FAIL: exit $rc, expected 0"; exit 1; }
test ! -e "$sock" || { echo "FAIL: socket left behind"; exit 1; }
echo "serve SIGTERM with a full queue: ok"
