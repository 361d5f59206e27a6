#include "psw/common/model_profile.hpp"

#include "psw/common/error.hpp"

namespace psw {

std::string to_string(ProfileSource source) {
  return source == ProfileSource::Analytic ? "analytic" : "measured";
}

std::string to_string(Task task) { return task == Task::Inference ? "inference" : "training"; }

Task parse_task(const std::string& text) {
  if (text == "inference") return Task::Inference;
  if (text == "training") return Task::Training;
  throw InputError("unknown task '" + text + "': expected one of inference, training");
}

Bytes ModelProfile::total_param_bytes() const {
  Bytes total = 0;
  for (const auto& layer : layers) total += layer.param_bytes;
  return total;
}

}  // namespace psw
