# Shared by the psw serve script tests. Sourcing it makes `work`, a fresh folder that is removed
# at exit (with the server killed if one is left), and `sock`, the server's socket in it.
work=$(mktemp -d)
sock=$work/run/psw.sock
cleanup() { [[ -n ${server:-} ]] && kill -KILL "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# Start a host-backend server in the background and wait until it is ready. Sets `server` (its
# pid); needs `psw`; serves `serve_config` where set, else configs/serve/host-small.yaml, on
# PSW_SERVE_BACKEND (default host).
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

# The server of the tests whose subject is the server, not its models, when they need a model of
# fp32 inputs (bert_tiny takes int64 token ids): configs/serve/host-tiny.yaml (BERT-Tiny served and
# trained) with a second model, `cnn`, tests/exec/make_torchscript.py's conv-BatchNorm-ReLU-pool-
# linear net of fp32 input Nx3x16x16 (a user's TorchScript file, Note [TorchScript models]),
# profiled on this host by psw profile. Both answer in milliseconds on a CPU, where the zoo's
# Inception-v3 and BERT-base take a second per request and half a minute to start a server.
# Writes $work/serve.yaml and sets `serve_config` to it; needs `psw` and `work`.
tiny_config_with_fp32_model() {
  "${PSW_PYTHON:-/usr/bin/python3}" tests/exec/make_torchscript.py "$work/torchscript" \
    || { echo "FAIL: tests/exec/make_torchscript.py (scripts/setup.sh installs python3-torch)"; exit 1; }
  "$psw" profile --model "$work/torchscript/cnn.pt" --input-shape 1,3,16,16 --batch 1 --backend host --repeat 2 \
    --out "$work/profiles" > "$work/profile.log" 2>&1 || { cat "$work/profile.log"; echo "FAIL: psw profile of cnn.pt"; exit 1; }
  cp configs/models/bert_tiny.yaml "$work/profiles/"
  # host-tiny.yaml's own settings, its paths made absolute, the profiles those above, cnn served.
  sed -e "s#^hardware: \.\./#hardware: $PWD/configs/#" -e "s#^profiles: .*#profiles: $work/profiles#" \
      -e "s#^models:\$#models:\n  - name: cnn\n    torchscript: $work/torchscript/cnn.pt\n    input_shape: [3, 16, 16]\n    batch: 1#" \
      configs/serve/host-tiny.yaml > "$work/serve.yaml"
  serve_config=$work/serve.yaml
}
