#!/bin/bash
# ctest grpc.kserve_python_client: start the fake KServe server on a socket in a fresh private
# directory, run the Python protocol client against it, stop the server with SIGTERM, and check
# that it exited cleanly and removed its socket. The client checks the system shared memory
# extension too and that it removed its object from /dev/shm.
#   run_kserve_python_test.sh SERVER_BINARY CLIENT_SCRIPT PROTO_PYTHON_DIR
set -u
server=$1 client=$2 proto_dir=$3
python=/usr/bin/python3

# A missing Python gRPC is a broken test environment, not a reason to skip: fail loudly.
if ! "$python" -c 'import grpc, google.protobuf' 2>/dev/null; then
  echo "FAIL: $python cannot import grpc and google.protobuf (install python3-grpcio python3-protobuf)"
  exit 1
fi
if [ ! -f "$proto_dir/grpc_service_pb2.py" ]; then
  echo "FAIL: $proto_dir/grpc_service_pb2.py is missing (build the fake_kserve_server target)"
  exit 1
fi

dir=$(mktemp -d /tmp/psw-kserve-XXXXXX)
socket=$dir/psw.sock
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; fi
  rm -rf "$dir"
}
trap cleanup EXIT

"$server" --socket "$socket" >"$dir/server.out" 2>"$dir/server.err" &
pid=$!
for _ in $(seq 100); do
  grep -q '^ready' "$dir/server.out" 2>/dev/null && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: the server exited before it was ready:"; cat "$dir/server.err"; exit 1
  fi
  sleep 0.1
done
grep -q '^ready' "$dir/server.out" || { echo "FAIL: the server was not ready within 10 s"; exit 1; }

"$python" "$client" --socket "$socket" --model double --batch 3 --expect-doubled --shared-memory --proto-dir "$proto_dir"
rc=$?

kill -TERM "$pid"
wait "$pid"
server_rc=$?
pid=
if [ "$server_rc" -ne 0 ]; then
  echo "FAIL: the server exited with $server_rc after SIGTERM:"; cat "$dir/server.err"; rc=1
fi
if [ -e "$socket" ]; then
  echo "FAIL: the server left its socket $socket behind"; rc=1
fi
exit $rc
