# Shared by the psw serve script tests: start a host-backend server in the background and wait
# until it is ready. Sets `server` (its pid); needs `psw`, `work` and `sock`; serves
# `serve_config` where set, else configs/serve/host-small.yaml, on PSW_SERVE_BACKEND (default host).
start_ready_server() {  # EXTRA_ARGS...
  "$psw" serve --config "${serve_config:-configs/serve/host-small.yaml}" --backend "${PSW_SERVE_BACKEND:-host}" --socket "$sock" "$@" 2> "$work/serve.log" &
  server=$!
  for _ in $(seq 1 600); do
    if "$psw" client --socket "$sock" --live 2>/dev/null | grep -q "ready  yes"; then return 0; fi
    kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; echo "FAIL: the server exited during start-up"; exit 1; }
    sleep 0.5
  done
  cat "$work/serve.log"
  echo "FAIL: never ready"
  exit 1
}
