#include "psw/common/model_profile.hpp"

#include <algorithm>

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

namespace {

// Note [Prefill curve]: linear between points, flat below the first, the last segment's slope
// above the last; never below the first point (a curve measured with noise may dip).
double curve_ns(const std::vector<PrefillPoint>& curve, std::int64_t tokens) {
  if (tokens <= curve.front().tokens) return static_cast<double>(curve.front().forward.ns());
  std::size_t i = 1;
  while (i + 1 < curve.size() && curve[i].tokens < tokens) ++i;
  const PrefillPoint& a = curve[i - 1];
  const PrefillPoint& b = curve[i];
  const double slope = static_cast<double>(b.forward.ns() - a.forward.ns()) / static_cast<double>(b.tokens - a.tokens);
  const double value = static_cast<double>(a.forward.ns()) + slope * static_cast<double>(tokens - a.tokens);
  return std::max(value, static_cast<double>(curve.front().forward.ns()));
}

}  // namespace

double prefill_scale(std::int64_t prompt_tokens, const std::vector<PrefillPoint>& curve, std::int64_t tokens) {
  if (tokens <= 0 || curve.empty() || tokens == prompt_tokens) return 1.0;
  return curve_ns(curve, tokens) / curve_ns(curve, prompt_tokens);
}

double prefill_scale(const ModelProfile& model, std::int64_t tokens) {
  return prefill_scale(model.prompt_tokens, model.prefill_curve, tokens);
}

Bytes ModelProfile::total_param_bytes() const {
  Bytes total = 0;
  for (const auto& layer : layers) {
    if (__builtin_add_overflow(total, layer.param_bytes, &total)) {
      throw RangeError("out of range: the parameter bytes of model '" + name +
                       "' add up past the integer size range (int64 bytes, about 9.2 EB)");
    }
  }
  return total;
}

}  // namespace psw
