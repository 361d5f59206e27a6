#!/usr/bin/env bash
# On a GPU host: the paper's Figures 5-9 on this GPU, through the server, beside the simulator's
# prediction of the same runs and the authors' V100 artifact. One command:
#
#   scripts/reproduce-gpu.sh [OUT_DIR]        (default results/gpu)
#
# It builds, fits the link again (part `link`: the hardware profile with the base's other costs,
# time_slicing among them), calibrates the request path on the server (part `calibrate`, psw
# profile-serving, and part `calibrate-load`, the path of psw load's own client, which the
# simulated side then uses: Note [Client connections]), runs one
# psw serve and one psw validate of configs/experiments/h200-figures.yaml per mechanism of
# Figures 5, 7, 8 and 9 and time-sliced (part `figures`), one psw serve per mechanism of Figure 6
# with one psw validate of configs/experiments/h200-fig6.yaml per cycle (part `fig6`: a closed
# loop), and draws OUT_DIR/figures/fig5.png ... fig9.png with their tables in
# OUT_DIR/figures/README.md (scripts/gpu_figures.py). The raw runs are archived in
# OUT_DIR/raw-serve.tar.gz, the run's report in OUT_DIR/<date>-<gpu>-serve.md.
#
# The fourteen mechanisms take about 7 minutes on the H200 after the build, Figure 6's four
# mechanisms at three cycles of three rounds about 4 more (2026-12-02: 4 minutes 5 s, with two
# of stop-and-start's three cycles failing at once; a whole run perhaps 5). Where a call is
# limited (the lent device: 10 minutes), split them: PSW_FIGURE_MECHANISMS="ready pipeswitch ...",
# PSW_FIG6_MECHANISMS, and PSW_SKIP_FIG6=1 in the calls that should not run Figure 6
# and, in the later calls, PSW_SERVING_PROFILE and PSW_HARDWARE_PROFILE = the first call's
# OUT_DIR/profiles/serving-h200-from-load.yaml and h200-pcie5.yaml, with PSW_SKIP_CALIBRATION=1, so that
# every mechanism is simulated with one calibration; then
# scripts/gpu_figures.py --out OUT_DIR/figures RAW_DIR... over the calls' raw folders.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
parts=figures
[[ -n ${PSW_SKIP_FIG6:-} ]] || parts+=,fig6
[[ -n ${PSW_SKIP_CALIBRATION:-} ]] || parts=link,calibrate,calibrate-load,$parts
exec bash "$root/scripts/gpu-serve.sh" "$out" "$parts"
