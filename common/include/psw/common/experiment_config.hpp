#pragma once
// Experiment configs: one simulation (`psw sim`) and grids of them (`psw sweep`).
// Parsed here, in common/, like every YAML of the project; the simulator receives plain
// structs. Paths inside a config are relative to the config file.
//
//   name: fig5-resnet152
//   hardware: ../hardware/v100-pcie3-x16.yaml
//   models:
//     - {name: resnet152, profile: ../models/resnet152.yaml}
//   mechanism: pipeswitch          # see sim/include/psw/sim/mechanism.hpp for the list
//   planner: optimal               # grouping for the pipelined mechanisms
//   standby_workers: 1
//   parallel: {gpus: 2, helpers: idle}  # optional: pipeswitch-parallel's GPUs (ParallelSpec)
//   seed: 1
//   training: {model: resnet152}   # optional background training job
//   serving: ../serving/h200.yaml  # optional: a live server's request path (Note [Request path])
//   workload: {kind: periodic, interval_ms: 1000, count: 20, models: [resnet152]}
//   outputs: {requests_csv: true}

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/serving_profile.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/trace.hpp"
#include "psw/common/units.hpp"

namespace psw {

enum class WorkloadKind { Periodic, Cycles, Poisson, Bursty, Trace };
enum class TraceFormat { ProjectCsv, AzureFunctions2019, AzureFunctions2021, AzureLlm2023 };

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::Periodic;
  Duration slo;  // zero: none

  // periodic: `count` requests, one every `interval`, models taken round-robin.
  Duration interval;
  std::int64_t count = 0;
  std::vector<std::uint32_t> models;

  // cycles (the paper's Figure 6): training owns the GPU for `cycle`, then inference
  // requests for `model` run back to back for `cycle`; `rounds` times.
  Duration cycle;
  std::int64_t rounds = 0;
  std::uint32_t cycle_model = 0;

  // poisson / bursty
  PoissonSpec poisson;
  BurstySpec bursty;

  // trace
  TraceFormat format = TraceFormat::ProjectCsv;
  std::filesystem::path trace_path;
  TraceMapping mapping;
  SpreadKind spread = SpreadKind::Uniform;
  int first_minute = 1;
  int minutes = 1440;
  std::vector<TokenBucket> buckets;
  // azure-llm-2023: requests decode their GeneratedTokens (Note [Decode in the simulator]); every
  // bucket's model needs a profile with decode_step_ns. Otherwise each answers its first token.
  bool decode = false;
  // Note [Trace window and sample] (common/src/workload_source.cpp): any trace format.
  Duration window_start;   // requests before it are dropped; the rest shifted to start at 0
  Duration window;         // zero: to the trace's end
  double sample = 1.0;     // each request kept with this probability (seeded), in (0, 1]
};

// pipeswitch-parallel (Note [Parallel paths]): how many of the host's GPUs take part in a
// switch (the target and gpus - 1 helpers), and whether the helpers are training (their host
// links then shared: helper_busy_share_percent). Config key `parallel: {gpus: 4, helpers:
// idle|training}`; absent: every GPU of the hardware's multi_gpu section (one without it),
// helpers idle. Other mechanisms ignore it.
struct ParallelSpec {
  int gpus = 1;
  bool helpers_training = false;
};

struct ExperimentConfig {
  std::string name;
  std::filesystem::path source;  // the config file
  HardwareProfile hardware;
  std::vector<ModelProfile> models;  // index = model id in requests
  Mechanism mechanism = Mechanism::PipeSwitch;
  Strategy planner = Strategy::Optimal;
  // PipeSwitch's placement of layers (Note [Placement]): copy all (the paper) or auto.
  Placement placement = Placement::Copy;
  int standby_workers = 1;
  ParallelSpec parallel;
  std::uint64_t seed = 1;
  std::optional<std::uint32_t> training_model;
  // The training job's batch (`training: {batch: N}`; default the model profile's). Another
  // batch than the profile's needs a serving profile with the job's step at that batch: the
  // simulator scales the job's layers to it (Note [Request path]). MPS's slowdown depends on it
  // (Note [MPS contention]).
  int training_batch = 0;
  // What a live server adds around the engine (Note [Request path]); absent: the engine's
  // latency only, and the training job's step from the model profile.
  std::optional<ServingProfile> serving;
  WorkloadSpec workload;
  bool requests_csv = true;

  // The files the config named, absolute (resolved_yaml records them); empty in a config built
  // in code. model_paths: one per model, in the order of `models`.
  std::filesystem::path hardware_path;
  std::vector<std::filesystem::path> model_paths;
  std::filesystem::path serving_path;

  std::uint32_t model_index(const std::string& name) const;  // throws InputError
};

ExperimentConfig load_experiment_config(const std::filesystem::path& path);
// `overrides`: dotted keys set on the YAML before parsing (`workload.rate_per_s: 50`),
// values in YAML syntax. Used by sweeps and by `psw sim --set`. `overrides_from` names where
// they came from in messages (`--set KEY=VALUE: ...`): an error in an overridden value names
// the override, not a line of the file. A key inside a section the config does not have is
// refused (set the whole section instead: `--set 'training={model: resnet152}'`).
ExperimentConfig load_experiment_config(const std::filesystem::path& path,
                                        const std::vector<std::pair<std::string, std::string>>& overrides,
                                        const std::string& overrides_from = "--set");

// The same from text; `path` names the file in messages and is what relative paths inside
// the config are resolved against.
ExperimentConfig parse_experiment_config(const std::string& text, const std::filesystem::path& path,
                                         const std::vector<std::pair<std::string, std::string>>& overrides = {},
                                         const std::string& overrides_from = "--set");

// Note [Resolved configs]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The resolved config, written beside every run's results as config.resolved.yaml, is an
// experiment config itself: `psw sim --config DIR/config.resolved.yaml` reruns the run and
// gives the same summary.json. Every default is filled in (the training job's batch, the
// trace's minutes, ...), overrides are applied, durations are in the keys' units, exactly
// (below about eleven days; longer ones to the nanosecond the parser's double holds), and
// the files it names (hardware, model and serving profiles, the trace) are recorded by path,
// relative to the folder of `written_to`, the file it is written to, so that the folder of a
// run can move with the project (a clone elsewhere) and still be rerun. The profiles are not
// copied: a rerun reads them afresh. Without `written_to` (or for a file on another root)
// the paths are absolute. The config it came from is named in a comment (`# source:`).
std::string resolved_yaml(const ExperimentConfig& config, const std::filesystem::path& written_to = {});

// A sweep: a base experiment and a grid of overrides.
//   base: fig5-base.yaml
//   grid:
//     mechanism: [ready, pipeswitch, mps, stop-and-start]
//     workload.models: [[resnet152], [bert_base]]
//   seeds: [1, 2, 3]
struct SweepPoint {
  std::vector<std::pair<std::string, std::string>> overrides;  // key, value (YAML text)
  std::uint64_t seed = 1;
  ExperimentConfig config;
};
struct SweepConfig {
  std::string name;
  std::vector<std::string> keys;  // grid keys in order, for the CSV columns
  std::vector<SweepPoint> points;
};
SweepConfig load_sweep_config(const std::filesystem::path& path);
SweepConfig parse_sweep_config(const std::string& text, const std::filesystem::path& path);

}  // namespace psw
