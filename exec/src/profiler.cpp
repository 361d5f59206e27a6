#include "psw/exec/profiler.hpp"

#include <algorithm>

#include "psw/common/error.hpp"

namespace psw::exec {

namespace {
// Mark slots used by the profiler, above the pipeline engine's.
constexpr std::size_t kFirstMark = 16;
constexpr std::size_t kProfileGraph = 2;
}  // namespace

std::vector<Duration> profile_forward(Backend& backend, ZooModel& model, const torch::Tensor& input, int repeats) {
  if (repeats < 1) throw InputError("the profiler needs at least one repetition");
  torch::NoGradGuard no_grad;
  const std::size_t n = model.layers().size();
  std::vector<std::size_t> ran;  // layers gated in the last forward, in order
  auto body = [&] {
    ran.clear();
    model.forward(input, [&](std::size_t layer) {
      backend.mark(kFirstMark + layer);
      ran.push_back(layer);
    });
    backend.mark(kFirstMark + n);
  };
  // Warm up (library handles, kernel selection), then capture if the backend can.
  body();
  backend.synchronize();
  const bool graph = backend.supports_graphs();
  if (graph) backend.capture(kProfileGraph, body);
  std::vector<std::vector<Duration>> samples(n);
  for (int r = 0; r < repeats; ++r) {
    if (graph) {
      backend.replay(kProfileGraph);
    } else {
      body();
    }
    backend.synchronize();
    for (std::size_t k = 0; k < ran.size(); ++k) {
      const std::size_t next = k + 1 < ran.size() ? kFirstMark + ran[k + 1] : kFirstMark + n;
      samples[ran[k]].push_back(backend.elapsed(kFirstMark + ran[k], next));
    }
  }
  std::vector<Duration> times(n, Duration::zero());
  for (std::size_t i = 0; i < n; ++i) {
    auto& s = samples[i];
    if (s.empty()) continue;
    std::sort(s.begin(), s.end());
    times[i] = s[s.size() / 2];
  }
  return times;
}

std::vector<CopySample> profile_link(Backend& backend, bool pinned, Bytes max_bytes, int repeats) {
  std::vector<CopySample> samples;
  for (Bytes b = 4 * kKiB; b <= max_bytes; b *= 4) samples.push_back({b, backend.time_copy(b, pinned, repeats)});
  return samples;
}

}  // namespace psw::exec
