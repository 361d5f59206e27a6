// The arrivals of an experiment's workload (workload_source.hpp), moved out of gpu_server.cpp
// so that psw load replays the same arrivals as the simulator.
#include "psw/sim/workload_source.hpp"

#include <map>
#include <string>
#include <vector>

#include "psw/common/error.hpp"

namespace psw::sim {

namespace {

// `count` requests, one every `interval`, models round-robin; the first at `interval`.
class PeriodicSource : public RequestSource {
 public:
  explicit PeriodicSource(const WorkloadSpec& w) : w_(w) {}
  std::optional<Request> next() override {
    if (issued_ >= w_.count) return std::nullopt;
    Request r;
    r.arrival = w_.interval * (issued_ + 1);
    r.model = w_.models[static_cast<std::size_t>(issued_) % w_.models.size()];
    r.slo = w_.slo;
    ++issued_;
    return r;
  }

 private:
  const WorkloadSpec& w_;
  std::int64_t issued_ = 0;
};

}  // namespace

// Note [Batch of a request]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A ModelProfile describes one model at one batch (its `batch`): measured times were taken at
// that batch, and analytic FLOPs and memory traffic were computed for it. Nothing in a profile
// says how the time changes with the batch (a GPU is far from linear at small batches), so the
// simulator does not extrapolate: a project CSV row whose batch differs from its model's
// profile is refused, naming the trace file and line. To simulate another batch, make a profile
// at that batch (scripts/gen_model_profiles.py, psw profile --batch) and list it as another
// model. The other workloads (periodic, poisson, bursty, cycles, the Azure traces) have no
// batch key: every request is its model at the profile's batch (the server never reads a
// Request's `batch`; only this check does).
std::unique_ptr<RequestSource> open_workload_source(const ExperimentConfig& c) {
  const auto& w = c.workload;
  switch (w.kind) {
    case WorkloadKind::Periodic: return std::make_unique<PeriodicSource>(w);
    case WorkloadKind::Poisson: return make_poisson_source(w.poisson);
    case WorkloadKind::Bursty: return make_bursty_source(w.bursty);
    case WorkloadKind::Trace: {
      switch (w.format) {
        case TraceFormat::ProjectCsv: {
          // Note [Batch of a request]: a row must ask for the batch its model is profiled at.
          std::map<std::string, std::uint32_t> index;
          std::vector<int> batch;
          for (std::size_t i = 0; i < c.models.size(); ++i) {
            index[c.models[i].name] = static_cast<std::uint32_t>(i);
            batch.push_back(c.models[i].batch);
          }
          return open_project_csv(w.trace_path, index, batch);
        }
        case TraceFormat::AzureFunctions2019:
          return open_azure_functions_2019(w.trace_path, w.mapping, w.spread, c.seed, w.first_minute, w.minutes);
        case TraceFormat::AzureFunctions2021: return open_azure_functions_2021(w.trace_path, w.mapping);
        case TraceFormat::AzureLlm2023:
          return open_azure_llm_2023(w.trace_path, w.buckets, w.mapping.batch, w.slo);
      }
      break;
    }
    case WorkloadKind::Cycles: return nullptr;  // closed loop, driven by the server
  }
  throw Error("unhandled workload kind");
}

}  // namespace psw::sim
