#include "psw/runtime/worker/training.hpp"

#include <cmath>

#include "psw/common/error.hpp"
#include "psw/common/random_streams.hpp"

namespace psw::runtime {

namespace {

// The one-group layout of the training weights (momentum uses the same offsets).
exec::PackedLayout training_layout(exec::ZooModel& model) {
  return exec::pack_layout(model, single_group(model.layers().size()));
}

torch::Tensor view_bytes(const torch::Tensor& region, Bytes offset, const torch::Tensor& like) {
  return region.narrow(0, offset, static_cast<std::int64_t>(like.nbytes())).view(like.scalar_type()).view(like.sizes());
}

torch::Tensor make_training_input(exec::ZooModel& model, const TrainingJobConfig& config, std::int64_t k,
                                  torch::Device device) {
  torch::Tensor x = model.example_input(config.batch, config.seed * 1'000'003ULL + static_cast<std::uint64_t>(k));
  const std::int64_t size = config.input_size;
  if (x.dim() == 2) {  // token ids: N x sequence
    if (size > x.size(1)) throw InputError("training.input_size: at most " + std::to_string(x.size(1)) + " tokens");
    x = x.narrow(1, 0, size);
  } else {
    if (size > x.size(2)) throw InputError("training.input_size: at most " + std::to_string(x.size(2)) + " pixels");
    x = x.narrow(2, 0, size).narrow(3, 0, size);
  }
  return x.contiguous().to(device);
}


// Optimizer buffers per trained parameter: momentum (sgd), the two moments (adam).
int optimizer_buffers(const TrainingJobConfig& config) { return config.optimizer == TrainingOptimizer::Adam ? 2 : 1; }

// The job's fingerprint: the model's layers and the optimizer (a state of momentum is not Adam's).
std::uint64_t job_fingerprint(exec::ZooModel& model, const TrainingJobConfig& config) {
  return exec::layer_fingerprint(model) ^ (config.optimizer == TrainingOptimizer::Adam ? 0x9E3779B97F4A7C15ULL : 0);
}

}  // namespace

Bytes TrainingJob::state_bytes(exec::ZooModel& model, const TrainingJobConfig& config) {
  return 2 * (1 + optimizer_buffers(config)) * training_layout(model).layout.total_bytes;
}

void TrainingJob::initialize(exec::ZooModel& model, const TrainingJobConfig& config, const torch::Tensor& state,
                             TrainingHeader* header) {
  const exec::PackedLayout layout = training_layout(model);
  const Bytes weights = layout.layout.total_bytes;
  const Bytes slot = (1 + optimizer_buffers(config)) * weights;
  PSW_CHECK(state.numel() >= 2 * slot, "training state too small");
  // Slot 0: the weights packed on the CPU, a zero optimizer state, then copied to wherever the
  // state lives.
  exec::ParameterStore packed = exec::ParameterStore::over(torch::zeros({slot}, torch::kUInt8), true);
  packed.pack(model, layout);
  state.narrow(0, 0, slot).copy_(packed.bytes());
  header->slot_loss[0] = 0;
  header->slot_loss[1] = 0;
  header->weights_bytes = weights;
  header->slot_bytes = slot;
  header->fingerprint = job_fingerprint(model, config);
  __atomic_store_n(&header->completed_steps, 0, __ATOMIC_RELEASE);
}

torch::Tensor TrainingJob::committed_state(const torch::Tensor& state, const TrainingHeader& header) {
  return state.narrow(0, (committed_steps(header) % 2) * header.slot_bytes, header.slot_bytes);
}

TrainingJob::TrainingJob(exec::ZooModel& model, const TrainingJobConfig& config, const torch::Tensor& state,
                         TrainingHeader* header)
    : model_(model), config_(config), header_(header), device_(state.device()) {
  const exec::PackedLayout layout = training_layout(model_);
  const Bytes weights = layout.layout.total_bytes;
  const int buffers = optimizer_buffers(config_);
  const Bytes slot = (1 + buffers) * weights;
  if (header_->fingerprint != job_fingerprint(model_, config_) || header_->weights_bytes != weights ||
      header_->slot_bytes != slot) {
    throw InputError("the training segment holds another job than " + model_.name() + " trained with " +
                     to_string(config_.optimizer));
  }
  PSW_CHECK(state.numel() >= 2 * slot, "training state too small");
  for (int k = 0; k < 2; ++k) {
    Slot& s = slots_[k];
    s.bytes = state.narrow(0, k * slot, slot);
    s.moments.resize(static_cast<std::size_t>(buffers));
  }
  torch::NoGradGuard no_grad;
  std::size_t index = 0;
  for (auto& layer : model_.layers()) {
    for (auto& t : layer.tensors) {
      const Bytes offset = layout.tensors.at(index++).offset;
      model_tensors_.push_back(t);
      if (t.requires_grad()) parameters_.push_back(t);
      for (Slot& s : slots_) {
        s.tensors.push_back(view_bytes(s.bytes, offset, t));
        if (!t.requires_grad()) continue;
        for (int b = 0; b < buffers; ++b) s.moments[b].push_back(view_bytes(s.bytes, (1 + b) * weights + offset, t));
      }
    }
  }
  bind(static_cast<int>(committed_steps(*header_) % 2));
  for (std::int64_t d = 0; d < kDataPool; ++d) data_.push_back(make_training_input(model_, config_, d, device_));
  // Backward boundaries: a gradient hook on every parameter (the zoo's gates cover the forward).
  for (auto& p : parameters_) {
    p.register_hook([this](torch::Tensor grad) {
      if (stop_ != nullptr) boundary();
      return grad;
    });
  }
}

void TrainingJob::bind(int slot) {
  if (bound_slot_ == slot) return;
  torch::NoGradGuard no_grad;
  const Slot& s = slots_[slot];
  for (std::size_t i = 0; i < model_tensors_.size(); ++i) model_tensors_[i].set_data(s.tensors[i]);
  bound_slot_ = slot;
}

void TrainingJob::check_config(exec::ZooModel& model, const TrainingJobConfig& config) {
  const torch::Tensor x = model.example_input(1, 0);
  const std::int64_t limit = x.dim() == 2 ? x.size(1) : x.size(2);
  if (config.input_size > limit) {
    throw InputError(detail::concat("training.input_size: at most ", limit, x.dim() == 2 ? " tokens" : " pixels", " for ",
                                    model.name(), ", got ", config.input_size));
  }
}

torch::Tensor TrainingJob::input_of_step(std::int64_t step) const { return data_.at(static_cast<std::size_t>(step % kDataPool)); }

torch::Tensor TrainingJob::labels_of_step(std::int64_t step, std::int64_t classes) const {
  PSW_CHECK(classes > 0, "a model output of no classes");
  if (label_classes_ != classes) {  // made at the first step
    labels_.clear();
    for (std::int64_t d = 0; d < kDataPool; ++d) {
      torch::Tensor labels = torch::empty({config_.batch}, torch::kInt64);
      auto* out = labels.data_ptr<std::int64_t>();
      for (std::int64_t i = 0; i < config_.batch; ++i) {
        // splitmix64 (random_streams.hpp): seeded labels, independent of LibTorch's generator.
        const std::uint64_t z = splitmix64(splitmix64(config_.seed * 1'000'003ULL + static_cast<std::uint64_t>(d)) +
                                           static_cast<std::uint64_t>(i));
        out[i] = static_cast<std::int64_t>(z % static_cast<std::uint64_t>(classes));
      }
      labels_.push_back(labels.to(device_));
    }
    label_classes_ = classes;
  }
  return labels_.at(static_cast<std::size_t>(step % kDataPool));
}

void TrainingJob::boundary() {
  if (boundary_hook_) boundary_hook_();
  const std::uint32_t s = stop_->load(std::memory_order_acquire);
  if (s == kStopNone) return;
  if (s == kStopPause && pause_ && pause_()) return;
  throw Preempted{};
}

void TrainingJob::update(const std::atomic<std::uint32_t>& stop, std::int64_t step) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  grads.reserve(parameters_.size());
  for (auto& p : parameters_) {
    PSW_CHECK(p.grad().defined(), "a parameter of ", model_.name(), " got no gradient");
    grads.push_back(p.grad());
  }
  // Pause points inside the update (Note [Preemption without loss]): waiting here loses
  // nothing; an abort is honoured only after the commit.
  auto update_boundary = [&stop, this] {
    if (boundary_hook_) boundary_hook_();
    if (stop.load(std::memory_order_acquire) == kStopPause && pause_) pause_();
  };
  std::vector<std::vector<torch::Tensor>>& moments = slots_[bound_slot_].moments;
  if (config_.optimizer == TrainingOptimizer::Sgd) {
    // torch.optim.SGD with momentum, dampening 0: m = momentum * m + g; p -= lr * m.
    at::_foreach_mul_(moments[0], config_.momentum);
    update_boundary();
    at::_foreach_add_(moments[0], grads);
    update_boundary();
    at::_foreach_add_(parameters_, moments[0], -config_.learning_rate);
  } else {
    // torch.optim.Adam (foreach, no weight decay, not amsgrad) at its step t = step:
    // m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    // p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    constexpr double kBeta1 = 0.9;
    constexpr double kBeta2 = 0.999;
    constexpr double kEps = 1e-8;
    const double t = static_cast<double>(step);
    const double bias1 = 1.0 - std::pow(kBeta1, t);
    const double bias2 = 1.0 - std::pow(kBeta2, t);
    at::_foreach_mul_(moments[0], kBeta1);
    at::_foreach_add_(moments[0], grads, 1.0 - kBeta1);
    update_boundary();
    at::_foreach_mul_(moments[1], kBeta2);
    at::_foreach_addcmul_(moments[1], grads, grads, 1.0 - kBeta2);
    update_boundary();
    std::vector<torch::Tensor> denominator = at::_foreach_sqrt(moments[1]);
    at::_foreach_div_(denominator, std::sqrt(bias2));
    at::_foreach_add_(denominator, kEps);
    update_boundary();
    at::_foreach_addcdiv_(parameters_, moments[0], denominator, -config_.learning_rate / bias1);
  }
  for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
}

void TrainingJob::commit(std::int64_t steps, double loss) {
  crash_point();
  // Note [Committed slot]: the slot is whole on the device before the header names it.
  if (device_fence_) device_fence_();
  header_->slot_loss[steps % 2] = loss;
  __atomic_store_n(&header_->completed_steps, steps, __ATOMIC_RELEASE);
}

TrainingJob::Result TrainingJob::run(std::int64_t target_steps, const std::atomic<std::uint32_t>& stop,
                                     const std::function<bool(std::int64_t, double)>& on_step,
                                     const std::function<bool()>& pause) {
  stop_ = &stop;
  pause_ = pause;
  // A pause asked for between steps is honoured there too (nothing of a step in flight).
  auto stopped = [&stop, this] {
    const std::uint32_t s = stop.load(std::memory_order_acquire);
    if (s == kStopNone) return false;
    return !(s == kStopPause && pause_ && pause_());
  };
  auto result = [this](Outcome outcome) {
    return Result{outcome, committed_steps(*header_), committed_loss(*header_)};
  };
  while (target_steps == 0 || committed_steps(*header_) < target_steps) {
    if (stopped()) return result(Outcome::Preempted);
    const std::int64_t done = committed_steps(*header_);
    // Note [Committed slot]: the step runs in the other slot, a copy of the committed one.
    const int working = static_cast<int>((done + 1) % 2);
    slots_[working].bytes.copy_(slots_[1 - working].bytes);
    bind(working);
    crash_point();
    const torch::Tensor input = input_of_step(done);
    double loss_value = 0;
    try {
      const std::vector<torch::Tensor> outs = model_.training_outputs(input, [this](std::size_t) { boundary(); });
      const torch::Tensor labels = labels_of_step(done, outs.at(0).size(1));
      torch::Tensor loss = torch::nn::functional::cross_entropy(outs[0].to(torch::kFloat32), labels);
      for (std::size_t i = 1; i < outs.size(); ++i) {
        loss = loss + 0.4 * torch::nn::functional::cross_entropy(outs[i].to(torch::kFloat32), labels);
      }
      loss.backward();
      loss_value = loss.item<double>();
    } catch (...) {
      // A stopped step leaves no trace (Note [Preemption without loss]): its writes are in the
      // working slot, which the next step copies over. An exception from a gradient hook may reach
      // here wrapped by autograd, so the flag decides what it was.
      for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
      if (stop.load(std::memory_order_acquire) == kStopNone) throw;
      return result(Outcome::Preempted);
    }
    update(stop, done + 1);
    commit(done + 1, loss_value);
    if (on_step && !on_step(done + 1, loss_value)) return result(Outcome::Preempted);
  }
  return result(Outcome::ReachedTarget);
}

}  // namespace psw::runtime
