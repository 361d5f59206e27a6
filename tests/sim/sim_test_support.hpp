#pragma once
// Helpers shared by the simulator's tests (tests/sim): the test experiments under
// tests/data/sim/, run in process, and the files a run writes.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/experiment_config.hpp"
#include "psw/sim/simulation.hpp"

namespace psw::sim::testing_support {

using Overrides = std::vector<std::pair<std::string, std::string>>;

// A file of tests/data/sim/.
inline std::string data(const std::string& name) { return std::string(PSW_TEST_DATA_DIR) + "/sim/" + name; }

// summary.json of the experiment tests/data/sim/CONFIG with `overrides` (as --set); the
// outputs go to `out` and the Chrome trace to `trace` where given.
inline nlohmann::json simulate(const std::string& config, const Overrides& overrides = {},
                               const std::filesystem::path& out = {}, const std::filesystem::path& trace = {}) {
  SimulationOptions options;
  options.out_dir = out;
  options.chrome_trace = trace;
  return to_json(run_simulation(load_experiment_config(data(config), overrides), options).summary);
}

// A summary's mean latency over every request.
inline double mean_ms(const nlohmann::json& summary) {
  return summary.at("latency").at("mean_ms").get<double>();
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace psw::sim::testing_support
