#include "psw/sim/calibration.hpp"

#include <cmath>

#include "psw/common/error.hpp"
#include "psw/sim/gpu_server.hpp"

namespace psw::sim {

namespace {

std::int64_t rounded(double value) { return static_cast<std::int64_t>(std::llround(value)); }

CalibratableCost duration_cost(std::string name, Mechanism paid_by, FitMeasure measure, double lower, double upper,
                               Duration HardwareProfile::*field) {
  CalibratableCost c;
  c.name = std::move(name);
  c.paid_by = paid_by;
  c.measure = measure;
  c.lower = lower;
  c.upper = upper;
  c.get = [field](const HardwareProfile& hw) { return static_cast<double>((hw.*field).ns()); };
  c.set = [field](HardwareProfile& hw, double v) { hw.*field = nanoseconds(rounded(v)); };
  return c;
}

// The simulated mean of `config` with `cost` at `value`.
double simulate_mean(ExperimentConfig config, const CalibratableCost& cost, double value) {
  cost.set(config.hardware, value);
  return summary_mean_ms(run_simulation(config, SimulationOptions{}).summary, cost.measure, "the simulation");
}

}  // namespace

std::string to_string(FitMeasure measure) { return measure == FitMeasure::Engine ? "engine" : "latency"; }

const std::vector<CalibratableCost>& calibratable_costs() {
  static const std::vector<CalibratableCost> costs = [] {
    std::vector<CalibratableCost> c;
    // Ranges: from far below any estimate to far above any measurement of the H200's runs.
    c.push_back(duration_cost("memory.cuda_malloc_ns", Mechanism::NoMemoryManagement, FitMeasure::Engine, 100, 1e8,
                              &HardwareProfile::cuda_malloc));
    c.push_back(duration_cost("memory.ipc_handle_open_ns", Mechanism::NoIpcOptimization, FitMeasure::Engine, 100, 1e8,
                              &HardwareProfile::ipc_handle_open));
    c.push_back(duration_cost("startup.framework_start_ns", Mechanism::StopAndStart, FitMeasure::Latency, 1e6, 1e11,
                              &HardwareProfile::framework_start));
    {
      CalibratableCost b;
      b.name = "link.pageable.bandwidth_bytes_per_s";
      b.paid_by = Mechanism::NoPinnedMemory;
      b.measure = FitMeasure::Engine;
      b.lower = 1e8;
      b.upper = 1e12;
      b.is_bandwidth = true;
      b.get = [](const HardwareProfile& hw) { return static_cast<double>(hw.pageable.bandwidth.bytes_per_second()); };
      b.set = [](HardwareProfile& hw, double v) { hw.pageable.bandwidth = Bandwidth::bytes_per_second(rounded(v)); };
      c.push_back(std::move(b));
    }
    {
      CalibratableCost f;
      f.name = "unified_memory.page_fault_ns";
      f.paid_by = Mechanism::UnifiedMemory;
      f.measure = FitMeasure::Engine;
      f.lower = 10;
      f.upper = 1e8;
      f.get = [](const HardwareProfile& hw) { return static_cast<double>(hw.unified_memory.page_fault.ns()); };
      f.set = [](HardwareProfile& hw, double v) { hw.unified_memory.page_fault = nanoseconds(rounded(v)); };
      c.push_back(std::move(f));
    }
    {
      CalibratableCost m;
      m.name = "mps.inference_slowdown_percent";
      m.paid_by = Mechanism::Mps;
      m.measure = FitMeasure::Engine;
      m.lower = 100;  // no slowdown
      m.upper = 100000;
      m.get = [](const HardwareProfile& hw) { return static_cast<double>(hw.mps.inference_slowdown_percent); };
      m.set = [](HardwareProfile& hw, double v) { hw.mps.inference_slowdown_percent = static_cast<int>(rounded(v)); };
      c.push_back(std::move(m));
    }
    {
      // Not the slice: the latency is not monotone in it (short slices pay context switches,
      // long ones the wait for the training's turn to end), so bisection cannot fit it.
      CalibratableCost s;
      s.name = "time_slicing.context_switch_ns";
      s.paid_by = Mechanism::TimeSliced;
      s.measure = FitMeasure::Engine;
      s.lower = 1;
      s.upper = 1e8;
      s.get = [](const HardwareProfile& hw) {
        return hw.time_slicing ? static_cast<double>(hw.time_slicing->context_switch.ns()) : 0.0;
      };
      s.set = [](HardwareProfile& hw, double v) {
        PSW_CHECK(hw.time_slicing.has_value(), "time_slicing.context_switch_ns set on a profile without time_slicing");
        hw.time_slicing->context_switch = nanoseconds(rounded(v));
      };
      c.push_back(std::move(s));
    }
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
  throw InputError("no calibratable cost '" + name + "' (the costs: " + known + ")");
}

double summary_mean_ms(const nlohmann::json& summary, FitMeasure measure, const std::string& origin) {
  if (measure == FitMeasure::Latency) {
    const auto latency = summary.find("latency");
    if (latency == summary.end() || !latency->is_object() || !latency->contains("mean_ms") ||
        !(*latency)["mean_ms"].is_number()) {
      throw InputError(origin + ": no number latency.mean_ms");
    }
    return (*latency)["mean_ms"].get<double>();
  }
  const auto models = summary.find("models");
  if (models == summary.end() || !models->is_object()) throw InputError(origin + ": no object 'models'");
  double total = 0;
  std::int64_t count = 0;
  for (const auto& [name, model] : models->items()) {
    if (!model.is_object() || !model.contains("engine_latency")) continue;  // trained, not requested
    const nlohmann::json& engine = model["engine_latency"];
    if (!engine.is_object() || !engine.contains("count") || !engine["count"].is_number_integer()) {
      throw InputError(origin + ": models." + name + ".engine_latency has no integer count");
    }
    const std::int64_t n = engine["count"].get<std::int64_t>();
    if (n == 0) continue;
    if (!engine.contains("mean_ms") || !engine["mean_ms"].is_number()) {
      throw InputError(origin + ": models." + name + ".engine_latency has no number mean_ms");
    }
    total += engine["mean_ms"].get<double>() * static_cast<double>(n);
    count += n;
  }
  if (count == 0) throw InputError(origin + ": no model has engine times (a run before Note [Request path]?)");
  return total / static_cast<double>(count);
}

CostFit fit_cost(const ExperimentConfig& config, const CalibratableCost& cost, const nlohmann::json& measured_summary,
                 const std::string& origin) {
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
  fit.measured_ms = summary_mean_ms(measured_summary, cost.measure, origin);
  fit.simulated_initial_ms = simulate_mean(config, cost, fit.initial);
  // Bisection on log(value): `low` simulates below the measurement, `high` above (for a
  // bandwidth the other way round).
  double low = cost.lower;
  double high = cost.upper;
  const double at_low = simulate_mean(config, cost, low);
  const double at_high = simulate_mean(config, cost, high);
  fit.simulations = 3;
  const double below = cost.is_bandwidth ? at_high : at_low;
  const double above = cost.is_bandwidth ? at_low : at_high;
  if (!(below <= fit.measured_ms && fit.measured_ms <= above)) {
    throw InputError(detail::concat(origin, ": no ", cost.name, " in [", cost.lower, ", ", cost.upper,
                                    "] gives the measured ", to_string(cost.measure), " mean of ", fit.measured_ms,
                                    " ms: the simulated mean runs from ", below, " to ", above,
                                    " ms over that range, so another cost is wrong (Note [Calibrating a cost])"));
  }
  while (high / low > 1.001) {
    const double middle = std::sqrt(low * high);
    const double simulated = simulate_mean(config, cost, middle);
    ++fit.simulations;
    const bool simulates_less = simulated < fit.measured_ms;
    // Less than measured: the cost must grow (a bandwidth must shrink).
    if (simulates_less != cost.is_bandwidth) {
      low = middle;
    } else {
      high = middle;
    }
  }
  fit.fitted = std::sqrt(low * high);
  fit.hardware = config.hardware;
  cost.set(fit.hardware, fit.fitted);
  fit.fitted = cost.get(fit.hardware);  // as rounded to the field's unit
  fit.simulated_fitted_ms = simulate_mean(config, cost, fit.fitted);
  ++fit.simulations;
  return fit;
}

}  // namespace psw::sim
