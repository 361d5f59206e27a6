#pragma once
// The profiler: per-layer forward times of a zoo model on a backend, and the host-to-device
// link, as measured profiles (DESIGN.md §5, `psw profile`).

#include <vector>

#include "psw/common/link_fit.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"

namespace psw::exec {

// Median per-layer forward time over `repeats` runs with the model resident (its tensors
// on the backend's device). A layer's time runs from its gate to the next running layer's
// gate, so parameterless operations fold into the layer before them, as in the analytic
// profiles. Layers that do not run (training_only in inference) get zero. On a backend
// with graphs, the timed forward is a replayed graph, so host dispatch is not counted.
std::vector<Duration> profile_forward(Backend& backend, ZooModel& model, const torch::Tensor& input, int repeats);

// Copies of 4 KiB, 16 KiB, ..., up to `max_bytes` (x4 steps), `repeats` each, median.
std::vector<CopySample> profile_link(Backend& backend, bool pinned, Bytes max_bytes, int repeats);

}  // namespace psw::exec
