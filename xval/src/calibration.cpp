#include "psw/xval/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "psw/common/error.hpp"
#include "psw/common/served_summary.hpp"
#include "psw/runtime/client/load_summary.hpp"
#include "psw/sim/simulation.hpp"
#include "psw/xval/validation.hpp"

namespace psw::xval {

using sim::run_simulation;
using sim::SimulationOptions;

namespace {

std::int64_t rounded(double value) { return static_cast<std::int64_t>(std::llround(value)); }

// A cost's value as the YAML writes it, and back (rounded to the field's integer unit).
double number(Duration d) { return static_cast<double>(d.ns()); }
double number(Bandwidth b) { return static_cast<double>(b.bytes_per_second()); }
double number(int percent) { return percent; }
void assign(Duration& d, double v) { d = nanoseconds(rounded(v)); }
void assign(Bandwidth& b, double v) { b = Bandwidth::bytes_per_second(rounded(v)); }
void assign(int& percent, double v) { percent = static_cast<int>(rounded(v)); }

// `field` is a generic lambda from a (const or not) HardwareProfile to the cost's field.
template <typename Field>
CalibratableCost make_cost(std::string name, Mechanism paid_by, FitMeasure measure, double lower, double upper,
                           Field field, bool falls_as_it_grows = false) {
  CalibratableCost c;
  c.name = std::move(name);
  c.paid_by = paid_by;
  c.measure = measure;
  c.lower = lower;
  c.upper = upper;
  c.falls_as_it_grows = falls_as_it_grows;
  c.get = [field](const HardwareProfile& hw) { return number(field(hw)); };
  c.set = [field](HardwareProfile& hw, double v) { assign(field(hw), v); };
  return c;
}

// The simulated mean of `config` with `cost` at `value`; `as_run`: the measured run's server
// (simulation_options_of_run).
double simulate_mean(ExperimentConfig config, const CalibratableCost& cost, double value, const SimulationOptions& as_run) {
  cost.set(config.hardware, value);
  return summary_mean_ms(to_json(run_simulation(config, as_run).summary), cost.measure, "the simulation");
}

// Each requested model's engine mean and count in a summary (psw sim's or psw load's); models
// without engine times (trained, not requested) left out.
struct EngineMean {
  double mean_ms = 0;
  std::int64_t count = 0;
};
std::map<std::string, EngineMean> engine_means(const nlohmann::json& summary, const std::string& origin) {
  // Note [Served summary]: read once, by the one reader of either side's summary.
  const ServedSummary served = served_summary_from_json(summary, origin);
  std::map<std::string, EngineMean> means;
  for (const auto& [name, model] : served.models) {
    if (!model.engine_latency) continue;  // trained, not requested, or answered none
    means[name] = {model.engine_latency->mean_ms, model.engine_latency->count};
  }
  if (means.empty()) throw InputError(origin + ": no model has engine times (a run before Note [Request path]?)");
  return means;
}

std::map<std::string, EngineMean> simulated_engine_means(const ExperimentConfig& config, const SimulationOptions& as_run) {
  return engine_means(to_json(run_simulation(config, as_run).summary), "the simulation");
}

// The profile with `points` as the contention of their training job and batch (earlier points of
// the same model, job and batch replaced).
HardwareProfile with_points(HardwareProfile hw, const std::vector<MpsContentionPoint>& points) {
  for (const MpsContentionPoint& point : points) {
    std::erase_if(hw.mps.contention, [&](const MpsContentionPoint& p) {
      return p.inference_model == point.inference_model && p.training_model == point.training_model &&
             p.training_batch == point.training_batch;
    });
    hw.mps.contention.push_back(point);
  }
  return hw;
}

}  // namespace

std::string to_string(FitMeasure measure) { return measure == FitMeasure::Engine ? "engine" : "latency"; }

const std::vector<CalibratableCost>& calibratable_costs() {
  static const std::vector<CalibratableCost> costs = [] {
    std::vector<CalibratableCost> c;
    // Ranges: from far below any estimate to far above any measurement of the H200's runs.
    c.push_back(make_cost("memory.cuda_malloc_ns", Mechanism::NoMemoryManagement, FitMeasure::Engine, 100, 1e8,
                          [](auto& hw) -> auto& { return hw.cuda_malloc; }));
    c.push_back(make_cost("memory.ipc_handle_open_ns", Mechanism::NoIpcOptimization, FitMeasure::Engine, 100, 1e8,
                          [](auto& hw) -> auto& { return hw.ipc_handle_open; }));
    c.push_back(make_cost("link.pageable.bandwidth_bytes_per_s", Mechanism::NoPinnedMemory, FitMeasure::Engine, 1e8,
                          1e12, [](auto& hw) -> auto& { return hw.pageable.bandwidth; }, /*falls_as_it_grows=*/true));
    c.push_back(make_cost("unified_memory.page_fault_ns", Mechanism::UnifiedMemory, FitMeasure::Engine, 10, 1e8,
                          [](auto& hw) -> auto& { return hw.unified_memory.page_fault; }));
    c.push_back(make_cost("mps.inference_slowdown_percent", Mechanism::Mps, FitMeasure::Engine, 100 /* none */, 1e5,
                          [](auto& hw) -> auto& { return hw.mps.inference_slowdown_percent; }));
    // fit_cost checks that the profile has time_slicing before it reads or sets these. The
    // share is what the H200's runs fit (Note [Time slicing]: the latency is a ratio of the
    // forward); the context switch is a fixed wait the same runs show to be small.
    c.push_back(make_cost("time_slicing.inference_share_percent", Mechanism::TimeSliced, FitMeasure::Engine, 1, 100,
                          [](auto& hw) -> auto& { return hw.time_slicing.value().inference_share_percent; },
                          /*falls_as_it_grows=*/true));
    c.push_back(make_cost("time_slicing.context_switch_ns", Mechanism::TimeSliced, FitMeasure::Engine, 1, 1e8,
                          [](auto& hw) -> auto& { return hw.time_slicing.value().context_switch; }));
    // A new process's start is paid before the engine's clock starts (the server times the
    // engine from the input on the device): fitted on the client's latency.
    c.push_back(make_cost("startup.framework_start_ns", Mechanism::StopAndStart, FitMeasure::Latency, 1e6, 1e11,
                          [](auto& hw) -> auto& { return hw.framework_start; }));
    // Note [Training abort]: paid before the one worker takes the request, so on the latency too;
    // the engine's own host times first (eager_switch.host of the same run).
    c.push_back(make_cost("training_abort_ns", Mechanism::OneProcess, FitMeasure::Latency, 1e3, 1e9,
                          [](auto& hw) -> auto& { return hw.training_abort; }));
    return c;
  }();
  return costs;
}

const CalibratableCost& calibratable_cost(const std::string& name) {
  std::string known;
  for (const auto& c : calibratable_costs()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  throw InputError("no calibratable cost '" + name + "' (the costs: " + known + ", " + kMpsContentionCost + ", " +
                   kWorkerStartCost + ", " + kEagerSwitchCost + ", " + kUnifiedMemoryCost + ")");
}

double summary_mean_ms(const nlohmann::json& summary, FitMeasure measure, const std::string& origin) {
  if (measure == FitMeasure::Latency) {
    const ServedSummary served = served_summary_from_json(summary, origin);
    if (!served.latency) throw InputError(origin + ": no request was answered (latency.count is 0)");
    return served.latency->mean_ms;
  }
  double total = 0;
  std::int64_t count = 0;
  for (const auto& [name, engine] : engine_means(summary, origin)) {
    total += engine.mean_ms * static_cast<double>(engine.count);
    count += engine.count;
  }
  return total / static_cast<double>(count);
}

namespace {

// Note [Processes a server starts with]: the simulator's server as the measured ones stood, the
// same for every run (Note [Pooled runs]).
SimulationOptions options_of_runs(const std::vector<RecordedRun>& runs) {
  if (runs.empty()) throw InputError("no recorded run to calibrate on");
  const SimulationOptions first = simulation_options_of_run(runs.front().summary, runs.front().origin);
  for (auto run = runs.begin() + 1; run != runs.end(); ++run) {
    if (simulation_options_of_run(run->summary, run->origin).fresh_standby_processes != first.fresh_standby_processes) {
      throw InputError(run->origin + ": its server stood otherwise than " + runs.front().origin +
                       "'s (fresh_standby_workers, warm-up): runs pooled must be of one case (Note [Pooled runs])");
    }
  }
  return first;
}

// The mean over every request of every run: each model's engine mean weighted by its count, or
// each run's latency mean by its count.
double pooled_mean_ms(const std::vector<RecordedRun>& runs, FitMeasure measure) {
  double total = 0;
  double count = 0;
  for (const RecordedRun& run : runs) {
    if (measure == FitMeasure::Engine) {
      for (const auto& [name, engine] : engine_means(run.summary, run.origin)) {
        total += engine.mean_ms * static_cast<double>(engine.count);
        count += static_cast<double>(engine.count);
      }
      continue;
    }
    const ServedSummary served = served_summary_from_json(run.summary, run.origin);
    if (!served.latency) throw InputError(run.origin + ": no request was answered (latency.count is 0)");
    const auto n = static_cast<double>(served.latency->count);
    total += served.latency->mean_ms * n;
    count += n;
  }
  return total / count;
}

// Each model's engine mean over every request of every run (Note [Pooled runs]).
std::map<std::string, EngineMean> pooled_engine_means(const std::vector<RecordedRun>& runs) {
  std::map<std::string, EngineMean> pooled;
  for (const RecordedRun& run : runs) {
    for (const auto& [model, engine] : engine_means(run.summary, run.origin)) {
      EngineMean& sum = pooled[model];
      sum.mean_ms += engine.mean_ms * static_cast<double>(engine.count);  // a sum until divided below
      sum.count += engine.count;
    }
  }
  for (auto& [model, sum] : pooled) sum.mean_ms /= static_cast<double>(sum.count);
  return pooled;
}

}  // namespace

CostFit fit_cost(const ExperimentConfig& config, const CalibratableCost& cost, const nlohmann::json& measured_summary,
                 const std::string& origin) {
  return fit_cost(config, cost, std::vector<RecordedRun>{{measured_summary, origin}});
}

CostFit fit_cost(const ExperimentConfig& config, const CalibratableCost& cost, const std::vector<RecordedRun>& runs) {
  const SimulationOptions as_run = options_of_runs(runs);
  if (config.mechanism != cost.paid_by) {
    throw InputError(cost.name + " is fitted on a run of " + to_string(cost.paid_by) + ", but " +
                     config.source.string() + " is of " + to_string(config.mechanism));
  }
  if (cost.name.rfind("time_slicing.", 0) == 0 && !config.hardware.time_slicing) {
    throw InputError(cost.name + ": the hardware profile of " + config.source.string() + " has no time_slicing");
  }
  CostFit fit;
  fit.cost = cost.name;
  fit.measure = cost.measure;
  fit.initial = cost.get(config.hardware);
  fit.measured_ms = pooled_mean_ms(runs, cost.measure);
  fit.simulated_initial_ms = simulate_mean(config, cost, fit.initial, as_run);
  // Bisection on log(value): `low` simulates below the measurement, `high` above (for a
  // bandwidth or a share the other way round).
  double low = cost.lower;
  double high = cost.upper;
  const double at_low = simulate_mean(config, cost, low, as_run);
  const double at_high = simulate_mean(config, cost, high, as_run);
  fit.simulations = 3;
  const double below = cost.falls_as_it_grows ? at_high : at_low;
  const double above = cost.falls_as_it_grows ? at_low : at_high;
  if (!(below <= fit.measured_ms && fit.measured_ms <= above)) {
    throw InputError(detail::concat(runs.front().origin, runs.size() > 1 ? " and the others" : "", ": no ", cost.name,
                                    " in [", cost.lower, ", ", cost.upper, "] gives the measured ", to_string(cost.measure), " mean of ", fit.measured_ms,
                                    " ms: the simulated mean runs from ", below, " to ", above,
                                    " ms over that range, so another cost is wrong (Note [Calibrating a cost])"));
  }
  while (high / low > 1.001) {
    const double middle = std::sqrt(low * high);
    const double simulated = simulate_mean(config, cost, middle, as_run);
    ++fit.simulations;
    const bool simulates_less = simulated < fit.measured_ms;
    // Less than measured: the cost must grow (a bandwidth or a share must shrink).
    if (simulates_less != cost.falls_as_it_grows) {
      low = middle;
    } else {
      high = middle;
    }
  }
  fit.fitted = std::sqrt(low * high);
  fit.hardware = config.hardware;
  cost.set(fit.hardware, fit.fitted);
  fit.fitted = cost.get(fit.hardware);  // as rounded to the field's unit
  fit.simulated_fitted_ms = simulate_mean(config, cost, fit.fitted, as_run);
  ++fit.simulations;
  return fit;
}

ContentionFit fit_mps_contention(const ExperimentConfig& config, const nlohmann::json& measured_summary,
                                 const std::string& origin) {
  // Note [Processes a server starts with]: the simulator's server as the measured one stood.
  const SimulationOptions as_run = simulation_options_of_run(measured_summary, origin);
  if (config.mechanism != Mechanism::Mps) {
    throw InputError(std::string(kMpsContentionCost) + " is fitted on a run of mps, but " + config.source.string() +
                     " is of " + to_string(config.mechanism));
  }
  if (!config.training_model) {
    throw InputError(std::string(kMpsContentionCost) + ": " + config.source.string() +
                     " has no training job (key 'training'), which the slowdown is beside");
  }
  ContentionFit fit;
  fit.training_model = config.models[*config.training_model].name;
  fit.training_batch = config.training_batch;
  const std::map<std::string, EngineMean> initial = simulated_engine_means(config, as_run);
  ExperimentConfig ready = config;
  ready.hardware.mps.inference_slowdown_percent = 100;
  ready.hardware.mps.contention.clear();
  const std::map<std::string, EngineMean> at_ready = simulated_engine_means(ready, as_run);
  std::vector<MpsContentionPoint> points;
  for (const auto& [model, measured] : engine_means(measured_summary, origin)) {
    const double measured_ms = measured.mean_ms;
    const auto simulated = at_ready.find(model);
    if (simulated == at_ready.end()) {
      throw InputError(detail::concat(origin, ": model '", model, "' has engine times, but the simulation of ",
                                      config.source.string(), " requests it not"));
    }
    const double ready_ms = simulated->second.mean_ms;
    const double percent = 100.0 * measured_ms / ready_ms;
    if (percent < 99.5) {
      throw InputError(detail::concat(origin, ": ", model, "'s engine, ", measured_ms, " ms, is below its ready engine (",
                                      ready_ms, " ms simulated): no MPS slowdown gives it, so another cost "
                                      "(its layers' times) is wrong (Note [Calibrating a cost])"));
    }
    const int rounded_percent = std::max(100, static_cast<int>(std::lround(percent)));
    points.push_back({model, fit.training_model, fit.training_batch, rounded_percent});
    fit.points.push_back({model, measured_ms, initial.at(model).mean_ms, ready_ms, 0, rounded_percent});
  }
  fit.hardware = with_points(config.hardware, points);
  ExperimentConfig fitted = config;
  fitted.hardware = fit.hardware;
  const std::map<std::string, EngineMean> after = simulated_engine_means(fitted, as_run);
  for (auto& point : fit.points) point.simulated_fitted_ms = after.at(point.model).mean_ms;
  return fit;
}

WorkerStartAdoption adopt_worker_start(const ExperimentConfig& config, const nlohmann::json& measured_summary,
                                       const std::string& origin) {
  // Note [Processes a server starts with]: the simulator's server as the measured one stood.
  const SimulationOptions as_run = simulation_options_of_run(measured_summary, origin);
  if (traits(config.mechanism).process != ProcessModel::FreshProcess) {
    throw InputError(std::string(kWorkerStartCost) + " is adopted from a run of stop-and-start or two-processes, but " +
                     config.source.string() + " is of " + to_string(config.mechanism));
  }
  const std::optional<MeasuredWorkerStart> measured = measured_worker_start(measured_summary, origin);
  if (!measured) {
    throw InputError(origin + ": no worker_starts (a run before Note [Worker starts measured], or one in which no "
                              "worker started)");
  }
  WorkerStartAdoption out;
  out.starts = measured->starts;
  out.process_ms = measured->process_ms;
  out.context_ms = measured->context_ms;
  out.framework_ms = measured->framework_ms;
  const double malloc_ms = static_cast<double>(config.hardware.cuda_malloc.ns()) / 1e6;
  if (out.framework_ms < malloc_ms) {
    throw InputError(detail::concat(origin, ": the starts' rest, ", out.framework_ms,
                                    " ms, is below one memory.cuda_malloc_ns (", malloc_ms, " ms)"));
  }
  out.measured_latency_ms = summary_mean_ms(measured_summary, FitMeasure::Latency, origin);
  out.simulated_initial_ms =
      summary_mean_ms(to_json(run_simulation(config, as_run).summary), FitMeasure::Latency, "the simulation");
  ExperimentConfig adopted = config;
  auto ns = [](double ms) { return nanoseconds(rounded(ms * 1e6)); };
  adopted.hardware.process_start = ns(out.process_ms);
  adopted.hardware.cuda_context_create = ns(out.context_ms);
  adopted.hardware.framework_start = ns(out.framework_ms - malloc_ms);
  out.kill_ms = measured->kill_ms;  // Note [Worker kill]: a run from before it keeps the profile's
  if (out.kill_ms) adopted.hardware.process_kill = ns(*out.kill_ms);
  // Note [First forward in a fresh process]: what the engine measured beyond the simulated one.
  adopted.hardware.first_forward.clear();
  const std::map<std::string, EngineMean> simulated_engines = simulated_engine_means(adopted, as_run);
  for (const auto& [model, engine] : engine_means(measured_summary, origin)) {
    const auto simulated = simulated_engines.find(model);
    if (simulated == simulated_engines.end()) {
      throw InputError(detail::concat(origin, ": model '", model, "' has engine times, but the simulation of ",
                                      config.source.string(), " requests it not"));
    }
    const double first_ms = std::max(0.0, engine.mean_ms - simulated->second.mean_ms);
    out.first_forwards.push_back({model, engine.mean_ms, simulated->second.mean_ms, first_ms});
    if (first_ms > 0) adopted.hardware.first_forward[model] = ns(first_ms);
  }
  out.simulated_adopted_ms =
      summary_mean_ms(to_json(run_simulation(adopted, as_run).summary), FitMeasure::Latency, "the simulation");
  out.hardware = adopted.hardware;
  return out;
}

EagerSwitchAdoption adopt_eager_switch(const ExperimentConfig& config, const nlohmann::json& measured_summary,
                                       const std::string& origin) {
  return adopt_eager_switch(config, std::vector<RecordedRun>{{measured_summary, origin}});
}

EagerSwitchAdoption adopt_eager_switch(const ExperimentConfig& config, const std::vector<RecordedRun>& runs) {
  const SimulationOptions as_run = options_of_runs(runs);
  const std::string mechanism = to_string(config.mechanism);
  if (!has_eager_host_times(config.mechanism)) {
    throw InputError(std::string(kEagerSwitchCost) +
                     " is adopted from a run of no-memory-management, no-ipc-optimization, no-pinned-memory or "
                     "one-process, but " +
                     config.source.string() + " is of " + mechanism);
  }
  const std::map<std::string, EngineMean> before = simulated_engine_means(config, as_run);
  // Per model, sums over every run (Note [Pooled runs]): switches and their host times, requests
  // and their engine times.
  struct Sums {
    std::int64_t switches = 0;
    double prepare_ms = 0;
    double forward_ms = 0;
    std::int64_t requests = 0;
    double engine_ms = 0;
  };
  std::map<std::string, Sums> sums;
  for (const RecordedRun& run : runs) {
    // Note [Load summary]: the key read by the summary's own reader.
    const std::map<std::string, runtime::EagerSwitchMeans> eager = runtime::eager_switches_of(run.summary, run.origin);
    if (eager.empty()) {
      throw InputError(run.origin + ": no eager_switches (a run before Note [Eager switches measured], or one whose "
                                    "server switched nothing eagerly)");
    }
    for (const auto& [model, entry] : eager) {
      if (!before.contains(model)) {
        throw InputError(detail::concat(run.origin, ": eager_switches has model '", model, "', but the simulation of ",
                                        config.source.string(), " requests it not"));
      }
      for (const auto& [key, value] : {std::pair{"count", static_cast<double>(entry.count)},
                                       std::pair{"prepare_mean_ms", entry.prepare_mean_ms},
                                       std::pair{"forward_mean_ms", entry.forward_mean_ms}}) {
        if (!std::isfinite(value) || value < 0) {
          throw InputError(
              detail::concat(run.origin, ": eager_switches.", model, ".", key, ": expected a number of at least 0"));
        }
      }
      Sums& sum = sums[model];
      sum.switches += entry.count;
      sum.prepare_ms += entry.prepare_mean_ms * static_cast<double>(entry.count);
      sum.forward_ms += entry.forward_mean_ms * static_cast<double>(entry.count);
    }
    for (const auto& [model, engine] : engine_means(run.summary, run.origin)) {
      sums[model].requests += engine.count;
      sums[model].engine_ms += engine.mean_ms * static_cast<double>(engine.count);
    }
  }
  EagerSwitchAdoption out;
  ExperimentConfig adopted = config;
  for (const auto& [model, sum] : sums) {
    if (sum.switches <= 0) continue;  // requested, never switched eagerly: its analytic costs
    EagerSwitchAdoption::PerModel m;
    m.model = model;
    m.switches = sum.switches;
    m.prepare_ms = sum.prepare_ms / static_cast<double>(sum.switches);
    m.forward_ms = sum.forward_ms / static_cast<double>(sum.switches);
    m.measured_engine_ms = sum.requests > 0 ? sum.engine_ms / static_cast<double>(sum.requests) : std::nan("");
    m.simulated_initial_ms = before.at(model).mean_ms;
    auto ns = [](double ms) { return nanoseconds(rounded(ms * 1e6)); };
    adopted.hardware.eager_switch[{model, mechanism}] = {ns(m.prepare_ms), ns(m.forward_ms)};
    out.models.push_back(std::move(m));
  }
  const std::map<std::string, EngineMean> after = simulated_engine_means(adopted, as_run);
  for (auto& m : out.models) m.simulated_adopted_ms = after.at(m.model).mean_ms;
  out.hardware = adopted.hardware;
  return out;
}

UnifiedMemoryFit fit_unified_memory(const ExperimentConfig& config, const std::vector<RecordedRun>& runs) {
  const SimulationOptions as_run = options_of_runs(runs);
  if (config.mechanism != Mechanism::UnifiedMemory) {
    throw InputError(std::string(kUnifiedMemoryCost) + " is fitted on a run of unified-memory, but " +
                     config.source.string() + " is of " + to_string(config.mechanism));
  }
  const std::map<std::string, EngineMean> measured = pooled_engine_means(runs);
  const std::string origin = runs.front().origin + (runs.size() > 1 ? " and the others" : "");
  UnifiedMemoryFit fit;
  const UnifiedMemoryModel& initial = config.hardware.unified_memory;
  fit.initial_page_fault_ns = number(initial.page_fault);
  fit.initial_bandwidth = number(initial.migration_bandwidth);
  if (fit.initial_bandwidth <= 0) throw InputError(config.source.string() + ": unified_memory's bandwidth is not positive");
  // Each model's simulated engine with the two costs at (fault in ns, bandwidth in bytes/s); its
  // response is affine in the fault and in the time per byte, 1e9 / bandwidth ns.
  auto engines_at = [&](double fault_ns, double bandwidth) {
    ExperimentConfig at = config;
    assign(at.hardware.unified_memory.page_fault, fault_ns);
    assign(at.hardware.unified_memory.migration_bandwidth, bandwidth);
    ++fit.simulations;
    return simulated_engine_means(at, as_run);
  };
  const double f0 = fit.initial_page_fault_ns;
  const double f1 = f0 + std::max(f0, 10'000.0);
  const double b0 = fit.initial_bandwidth;
  const double b1 = std::round(b0 / 2);
  const double s0 = 1e9 / b0;
  const double s1 = 1e9 / b1;
  const std::map<std::string, EngineMean> at_initial = engines_at(f0, b0);
  const std::map<std::string, EngineMean> more_fault = engines_at(f1, b0);
  const std::map<std::string, EngineMean> less_bandwidth = engines_at(f0, b1);
  // Least squares over the models: sum of n * (u f + v s - r)^2 with u, v the model's response
  // to the fault and the time per byte over its measured mean, r what is left to explain.
  struct Row {
    double n, u, v, r;
  };
  std::vector<Row> rows;
  for (const auto& [model, engine] : measured) {
    const auto simulated = at_initial.find(model);
    if (simulated == at_initial.end()) {
      throw InputError(detail::concat(origin, ": model '", model, "' has engine times, but the simulation of ",
                                      config.source.string(), " requests it not"));
    }
    const double e0 = simulated->second.mean_ms;
    const double per_fault = (more_fault.at(model).mean_ms - e0) / (f1 - f0);
    const double per_time_per_byte = (less_bandwidth.at(model).mean_ms - e0) / (s1 - s0);
    const double without = e0 - per_fault * f0 - per_time_per_byte * s0;  // the forward, no migration
    rows.push_back({static_cast<double>(engine.count), per_fault / engine.mean_ms, per_time_per_byte / engine.mean_ms,
                    1.0 - without / engine.mean_ms});
    fit.models.push_back({model, engine.count, engine.mean_ms, e0, 0});
  }
  double uu = 0, uv = 0, vv = 0, ur = 0, vr = 0;
  for (const Row& row : rows) {
    uu += row.n * row.u * row.u;
    uv += row.n * row.u * row.v;
    vv += row.n * row.v * row.v;
    ur += row.n * row.u * row.r;
    vr += row.n * row.v * row.r;
  }
  const double determinant = uu * vv - uv * uv;
  if (rows.size() < 2 || !(determinant > 1e-9 * uu * vv)) {
    throw InputError(detail::concat(origin, ": ", rows.size(), " model(s) with engine times cannot part ",
                                    "unified memory's page fault from its bandwidth: a run of two or more models is ",
                                    "needed (Note [Unified memory's two costs])"));
  }
  double fault_ns = (ur * vv - vr * uv) / determinant;
  double time_per_byte = (uu * vr - uv * ur) / determinant;
  if (fault_ns < 0) {  // held at zero, the bandwidth fitted alone
    fault_ns = 0;
    time_per_byte = vr / vv;
  }
  const double bandwidth = time_per_byte > 0 ? 1e9 / time_per_byte : 0;
  if (!(bandwidth >= 1e6 && bandwidth <= 1e13)) {
    throw InputError(detail::concat(origin, ": the models' engines fit unified memory's bandwidth at ", bandwidth,
                                    " bytes/s, outside [1e6, 1e13]: they do not grow with a model's bytes as a migration does (at or "
                                    "below the simulated forward, where it is not positive), so another cost (the layers' ",
                                    "times) is wrong (Note [Unified memory's two costs])"));
  }
  fit.hardware = config.hardware;
  assign(fit.hardware.unified_memory.page_fault, fault_ns);
  assign(fit.hardware.unified_memory.migration_bandwidth, bandwidth);
  fit.fitted_page_fault_ns = number(fit.hardware.unified_memory.page_fault);
  fit.fitted_bandwidth = number(fit.hardware.unified_memory.migration_bandwidth);
  const std::map<std::string, EngineMean> after = engines_at(fit.fitted_page_fault_ns, fit.fitted_bandwidth);
  for (auto& m : fit.models) m.simulated_fitted_ms = after.at(m.model).mean_ms;
  return fit;
}

}  // namespace psw::xval
