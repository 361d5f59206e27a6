#pragma once
// One GPU server time-shared by inference requests and (optionally) a training job, under
// one switching mechanism, simulated: the server policy that psw serve runs (Note [Server
// policy]) decides, and cost models answer its actions in virtual time (Note [The simulator
// drives the server policy] in simulated_server.cpp). Requests wait in one FIFO queue;
// inference preempts training; training resumes where it stopped once the queue is empty.
//
//   time ->   training ......|stop|switch-in M|infer M|infer M|switch back|training ...
//   request          arrives ^                ^ startup       ^ reply
//
// Requests stream in from a RequestSource (one pending arrival at a time) and results
// stream out (per-request CSV, histogram), so memory is flat in the number of requests.

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "psw/common/experiment_config.hpp"
#include "psw/sim/summary.hpp"

namespace psw::sim {

struct SimulationOptions {
  std::filesystem::path out_dir;       // requests.csv, summary.json, config.resolved.yaml; empty: none
  std::filesystem::path chrome_trace;  // Chrome trace of transfers, computes and switches; empty: none
  std::size_t chrome_trace_max_events = 500'000;  // the trace stops growing past this
  // The server policy's events and actions, one JSON line each, as psw serve --decisions
  // writes them (Note [Decision log]); empty: none.
  std::filesystem::path decisions;
  // Note [Processes a server starts with]: the fresh worker processes psw serve had ready and
  // unused when the workload began (psw load's `fresh_standby_workers`); nullopt: as a server
  // starts. Read only where the simulator models psw serve (a serving profile) under
  // stop-and-start or two processes.
  std::optional<int> fresh_standby_processes;
};

struct SimulationResult {
  SimulationSummary summary;         // summary.json is to_json(summary) (deterministic: no wall time)
  double wall_seconds = 0;           // how long the simulation took
  std::uint64_t events = 0;          // engine events processed
};

SimulationResult run_simulation(const ExperimentConfig& config, const SimulationOptions& options);

// How long one step of the config's training job takes with nothing else on the GPU, as the
// simulator runs it (the serving profile's measured step where it has one, else the model
// profile's layers); nullopt when the config has no training job.
std::optional<Duration> training_step(const ExperimentConfig& config);

}  // namespace psw::sim
