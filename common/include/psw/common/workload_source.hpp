#pragma once
// The requests of an experiment's `workload:` (periodic, poisson, bursty, trace replay), as
// the simulator sees them. Shared by the simulator (simulated_server.cpp) and by `psw load`
// (exec/runtime load_generator), so that a live server is driven with exactly the arrivals the
// simulator models for the same config.

#include <memory>

#include "psw/common/experiment_config.hpp"
#include "psw/common/trace.hpp"

namespace psw {

// The arrivals of `config.workload`, in non-decreasing order, streamed. Null for a cycles
// workload: it is a closed loop (the next request is issued when one completes), so its
// arrivals depend on the server and no source can list them in advance.
//
// Note [Batch of a request] in common/src/workload_source.cpp: every request is its model at the
// model's profile batch (`config.models[request.model].batch`); a Request's own `batch` is
// not meaningful for every kind.
std::unique_ptr<RequestSource> open_workload_source(const ExperimentConfig& config);

}  // namespace psw
