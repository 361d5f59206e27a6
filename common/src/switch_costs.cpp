#include "psw/common/switch_costs.hpp"

#include <algorithm>
#include <limits>

#include "psw/common/error.hpp"

namespace psw {

SwitchCosts::SwitchCosts(std::vector<Bytes> layer_bytes, std::vector<Duration> layer_compute,
                         LinkCost link, Duration group_sync, Duration tail,
                         Duration gpu_free_at)
    : layer_bytes_(std::move(layer_bytes)),
      layer_compute_(std::move(layer_compute)),
      link_(link),
      group_sync_(group_sync),
      tail_(tail),
      gpu_free_at_(gpu_free_at) {
  if (layer_bytes_.empty()) throw InputError("a switch needs at least one layer");
  if (layer_bytes_.size() != layer_compute_.size()) {
    throw InputError(detail::concat("layer bytes (", layer_bytes_.size(),
                                    ") and compute times (", layer_compute_.size(),
                                    ") differ in length"));
  }
  if (link_.bandwidth.bytes_per_second() <= 0) throw InputError("link bandwidth must be positive");
  if (link_.copy_fixed < Duration::zero() || group_sync_ < Duration::zero() ||
      tail_ < Duration::zero() || gpu_free_at_ < Duration::zero()) {
    throw InputError("copy_fixed, group_sync, tail and gpu_free_at must be non-negative");
  }
  bytes_prefix_.reserve(layer_bytes_.size() + 1);
  compute_prefix_.reserve(layer_bytes_.size() + 1);
  bytes_prefix_.push_back(0);
  compute_prefix_.push_back(Duration::zero());
  for (std::size_t i = 0; i < layer_bytes_.size(); ++i) {
    if (layer_bytes_[i] < 0) throw InputError(detail::concat("layer ", i, " has negative bytes"));
    if (layer_compute_[i] < Duration::zero()) {
      throw InputError(detail::concat("layer ", i, " has a negative compute time"));
    }
    Bytes total = 0;
    if (__builtin_add_overflow(bytes_prefix_.back(), layer_bytes_[i], &total)) {
      throw RangeError(detail::concat("out of range: the layers' bytes up to layer ", i,
                                      " add up past the integer size range (int64 bytes)"));
    }
    bytes_prefix_.push_back(total);
    compute_prefix_.push_back(compute_prefix_.back() + layer_compute_[i]);
  }
}

SwitchCosts SwitchCosts::with_compute_scaled(double factor) const {
  if (!(factor >= 0.0)) throw InputError(detail::concat("a compute scale must be non-negative, not ", factor));
  std::vector<Duration> compute;
  compute.reserve(layer_compute_.size());
  for (const Duration c : layer_compute_) {
    compute.push_back(Duration::from_ns_truncated(static_cast<double>(c.ns()) * factor + 0.5));
  }
  return SwitchCosts(layer_bytes_, std::move(compute), link_, group_sync_, tail_, gpu_free_at_);
}

namespace {

// ceil(amount * 1e9 / per_second) ns; `what` names the quantity when it is past int64 ns.
Duration ceil_div_time(std::int64_t amount, std::int64_t per_second, const char* what) {
  if (amount < 0 || per_second <= 0) units_detail::throw_overflow(what);
  const auto num = static_cast<Uint128>(amount) * 1'000'000'000u;
  const auto den = static_cast<Uint128>(per_second);
  const Uint128 ns = (num + den - 1) / den;
  if (ns > static_cast<Uint128>(std::numeric_limits<std::int64_t>::max())) units_detail::throw_overflow(what);
  return Duration::from_ns(static_cast<std::int64_t>(ns));
}

Duration roofline(const std::string& kind, std::int64_t flops, Bytes memory_bytes,
                  const ComputeModel& compute) {
  if (flops == 0 && memory_bytes == 0) return Duration::zero();
  const std::int64_t rate = kind == "conv" ? compute.conv_flops_per_second : compute.flops_per_second;
  // Each named as what it is: a compute time is no transfer (RangeError, Note [Checked units]).
  const Duration math = ceil_div_time(flops, rate, "compute time (FLOPs over the hardware's FLOP rate)");
  const Duration memory = ceil_div_time(memory_bytes, compute.memory_bandwidth.bytes_per_second(),
                                        "memory time (bytes over the hardware's memory bandwidth)");
  return max(math, memory) + compute.kernel_overhead;
}

}  // namespace

Duration forward_time(const LayerProfile& layer, const ModelProfile& model,
                      const HardwareProfile& hardware, Task task) {
  if (layer.training_only && task == Task::Inference) return Duration::zero();
  if (model.source.kind == ProfileSource::Measured) {
    PSW_CHECK(layer.forward_time.has_value(), "measured layer '", layer.name, "' has no forward time");
    return *layer.forward_time;
  }
  return roofline(layer.kind, layer.forward_flops, layer.forward_memory_bytes, hardware.compute);
}

Duration backward_time(const LayerProfile& layer, const ModelProfile& model,
                       const HardwareProfile& hardware) {
  if (model.source.kind == ProfileSource::Measured) {
    return layer.backward_time.value_or(Duration::zero());
  }
  return roofline(layer.kind, layer.backward_flops, layer.backward_memory_bytes, hardware.compute);
}

bool has_training_times(const ModelProfile& model) {
  return model.source.kind != ProfileSource::Measured ||
         std::all_of(model.layers.begin(), model.layers.end(),
                     [](const LayerProfile& layer) { return layer.backward_time.has_value(); });
}

SwitchCosts make_switch_costs(const ModelProfile& model, const HardwareProfile& hardware,
                              Task task, HostMemory memory, const std::vector<bool>& host_mapped) {
  if (!host_mapped.empty() && host_mapped.size() != model.layers.size()) {
    throw InputError(detail::concat("placement of ", host_mapped.size(), " layers for model '", model.name,
                                    "' with ", model.layers.size()));
  }
  if (task == Task::Training && model.source.kind == ProfileSource::Measured) {
    for (const auto& layer : model.layers) {
      if (!layer.backward_time) {
        throw InputError("model '" + model.name + "' has no measured backward time for layer '" +
                         layer.name + "': it cannot be planned for training");
      }
    }
  }
  std::vector<Bytes> bytes;
  std::vector<Duration> compute;
  bytes.reserve(model.layers.size());
  compute.reserve(model.layers.size());
  Duration tail = Duration::zero();
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerProfile& layer = model.layers[i];
    Duration forward = forward_time(layer, model, hardware, task);
    if (!host_mapped.empty() && host_mapped[i]) {
      if (layer.host_read_bytes <= 0) {
        throw InputError("layer '" + layer.name + "' of model '" + model.name +
                         "' cannot be read in place from host memory (no host_read_bytes)");
      }
      if (!hardware.mapped) {
        throw InputError("hardware profile '" + hardware.name +
                         "' has no link.mapped (the cost of reading pinned host memory in place)");
      }
      if (memory == HostMemory::Pageable) throw InputError("only pinned host memory can be read in place");
      bytes.push_back(0);
      compute.push_back(forward + hardware.mapped->copy_time(layer.host_read_bytes));
    } else {
      bytes.push_back(layer.param_bytes);
      compute.push_back(forward);
    }
    if (task == Task::Training) tail += backward_time(layer, model, hardware);
  }
  // The layers' bytes add up checked, naming the model (SwitchCosts' own check cannot).
  Bytes total_bytes = 0;
  for (const Bytes b : bytes) {
    if (__builtin_add_overflow(total_bytes, b, &total_bytes)) {
      throw RangeError("out of range: the parameter bytes of model '" + model.name +
                       "' add up past the integer size range (int64 bytes, about 9.2 EB)");
    }
  }
  const LinkCost link = memory == HostMemory::Pinned ? hardware.pinned : hardware.pageable;
  return SwitchCosts(std::move(bytes), std::move(compute), link, hardware.group_sync, tail);
}

}  // namespace psw
