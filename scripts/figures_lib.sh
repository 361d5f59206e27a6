# Shared by scripts/calibrate-h200.sh and scripts/resimulate-figures.sh, which run the simulator
# here against the H200's recorded runs of the figures (results/gpu/raw-figures-2026-12-0*).
# Needs `experiments` (configs/experiments) set by the caller.

# The recorded runs' hardware profile (raw-figures-2026-12-01-a/link-profile/h200-pcie5.yaml) was
# written before Note [Time slicing] became a share: its time_slicing has the old slice_ns.
# Writes it to DST with the current section: the slice dropped and the estimate every shipped
# profile starts from (equal turns, 50%). Nothing else changes.
translate_recorded_hardware() {  # SRC DST
  sed '/^time_slicing:/,/^[^ ]/{/^  slice_ns:/d}; s/^\(  context_switch_ns: .*\)$/\1\n  inference_share_percent: 50/' \
    "$1" > "$2"
}

# The figures' case (configs/experiments/h200-figures.yaml) under MECHANISM with HARDWARE and the
# serving profile SERVING, its training job at TRAINING_BATCH and of TRAINING_MODEL where given
# (else ResNet-152 at the profile's batch; Note [MPS contention]: SERVING must then have the job's
# step at that batch, or none of that model), written beside the original (its relative paths) as
# .figures-MECHANISM.yaml; prints its path. The caller removes "$experiments"/.figures-*.yaml.
configure_figures() {  # MECHANISM HARDWARE SERVING [TRAINING_BATCH [TRAINING_MODEL]]
  local config=$experiments/.figures-$1.yaml
  sed "s/^mechanism: .*/mechanism: $1/; /^serving:/d; s#^hardware: .*#hardware: $2#" "$experiments/h200-figures.yaml" > "$config"
  if [[ -n ${4:-} || -n ${5:-} ]]; then
    sed -i "s/^training: .*/training: {model: ${5:-resnet152}${4:+, batch: $4}}/" "$config"
  fi
  # The three requests 12 s apart of the process-per-task mechanisms (gpu-serve.sh part figures).
  if [[ $1 == stop-and-start || $1 == two-processes ]]; then
    sed -i "s/interval_ms: [0-9]*, count: [0-9]*/interval_ms: 12000, count: 3/" "$config"
  fi
  echo "serving: $3" >> "$config"
  echo "$config"
}

# Figure 6's case (configs/experiments/h200-fig6.yaml) under MECHANISM with cycles of CYCLE_MS,
# ROUNDS rounds, HARDWARE and SERVING, as gpu-serve.sh part fig6 ran it, written beside the
# original as .figures-fig6-MECHANISM-CYCLE_MS.yaml; prints its path.
configure_fig6() {  # MECHANISM CYCLE_MS ROUNDS HARDWARE SERVING
  local config=$experiments/.figures-fig6-$1-$2.yaml
  sed "s/^mechanism: .*/mechanism: $1/; /^serving:/d; s#^hardware: .*#hardware: $4#;
       s/cycle_ms: [0-9]*, rounds: [0-9]*/cycle_ms: $2, rounds: $3/" "$experiments/h200-fig6.yaml" > "$config"
  echo "serving: $5" >> "$config"
  echo "$config"
}
