// The arrivals of an experiment's workload (workload_source.hpp), moved out of simulated_server.cpp
// so that psw load replays the same arrivals as the simulator.
#include "psw/common/workload_source.hpp"

#include <map>
#include <string>
#include <vector>

#include "psw/common/error.hpp"

namespace psw {

// Named, not anonymous: the unity build compiles this file with the rest of psw_core.
namespace workload_sources {

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

// Note [Trace window and sample]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A public trace is rarely the size of the case at hand: a day of Azure Functions is ~150
// requests a second, more than one GPU switches, and a replay on hardware lasts minutes, not a
// day. Any trace workload may therefore keep only the requests arriving in [window_start_s,
// window_start_s + window_s) (shifted so that the window starts at 0), and of those each one
// with probability `sample`. The choice of request i is a hash of (seed, i), i counted over the
// whole trace, so it is the same in psw sim, psw load and psw validate, and independent of
// everything else the simulator draws.
class WindowedSource : public RequestSource {
 public:
  WindowedSource(std::unique_ptr<RequestSource> inner, const WorkloadSpec& w, std::uint64_t seed)
      : inner_(std::move(inner)), start_(w.window_start), window_(w.window), sample_(w.sample), seed_(seed) {}

  std::optional<Request> next() override {
    while (std::optional<Request> r = inner_->next()) {
      const std::uint64_t index = index_++;
      if (r->arrival < start_) continue;
      if (window_ > Duration::zero() && r->arrival - start_ >= window_) return std::nullopt;  // arrivals only grow
      if (sample_ < 1.0 && uniform(index) >= sample_) continue;
      r->arrival -= start_;
      return r;
    }
    return std::nullopt;
  }

 private:
  // splitmix64 of (seed, index), as a double in [0, 1).
  double uniform(std::uint64_t index) const {
    std::uint64_t z = seed_ + 0x9e3779b97f4a7c15ULL * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

  std::unique_ptr<RequestSource> inner_;
  Duration start_;
  Duration window_;
  double sample_;
  std::uint64_t seed_;
  std::uint64_t index_ = 0;
};

std::unique_ptr<RequestSource> open_trace(const ExperimentConfig& c) {
  const auto& w = c.workload;
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
    case TraceFormat::AzureLlm2023: return open_azure_llm_2023(w.trace_path, w.buckets, w.mapping.batch, w.slo, w.decode);
  }
  throw Error("unhandled trace format");
}

}  // namespace workload_sources

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
    case WorkloadKind::Periodic: return std::make_unique<workload_sources::PeriodicSource>(w);
    case WorkloadKind::Poisson: return make_poisson_source(w.poisson);
    case WorkloadKind::Bursty: return make_bursty_source(w.bursty);
    case WorkloadKind::Trace: {
      const bool whole = w.window_start == Duration::zero() && w.window == Duration::zero() && w.sample >= 1.0;
      if (whole) return workload_sources::open_trace(c);
      return std::make_unique<workload_sources::WindowedSource>(workload_sources::open_trace(c), w, c.seed);
    }
    case WorkloadKind::Cycles: return nullptr;  // closed loop, driven by the server
  }
  throw Error("unhandled workload kind");
}

}  // namespace psw
