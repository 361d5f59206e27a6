#include "psw/runtime/worker/training.hpp"

#include "psw/common/error.hpp"

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


}  // namespace

Bytes TrainingJob::state_bytes(exec::ZooModel& model) { return 2 * training_layout(model).layout.total_bytes; }

void TrainingJob::initialize(exec::ZooModel& model, const torch::Tensor& state, TrainingHeader* header) {
  const exec::PackedLayout layout = training_layout(model);
  const Bytes weights = layout.layout.total_bytes;
  PSW_CHECK(state.numel() >= 2 * weights, "training state too small");
  // Packed on the CPU, then copied to wherever the state lives.
  exec::ParameterStore packed = exec::ParameterStore::over(torch::zeros({2 * weights}, torch::kUInt8), true);
  packed.pack(model, layout);
  state.narrow(0, 0, 2 * weights).copy_(packed.bytes());
  header->completed_steps = 0;
  header->last_loss = 0;
  header->weights_bytes = weights;
  header->fingerprint = exec::layer_fingerprint(model);
}

TrainingJob::TrainingJob(exec::ZooModel& model, const TrainingJobConfig& config, const torch::Tensor& state,
                         TrainingHeader* header)
    : model_(model), config_(config), header_(header), device_(state.device()) {
  const exec::PackedLayout layout = training_layout(model_);
  const Bytes weights = layout.layout.total_bytes;
  if (header_->fingerprint != exec::layer_fingerprint(model_) || header_->weights_bytes != weights) {
    throw InputError("the training segment holds another model than " + model_.name());
  }
  PSW_CHECK(state.numel() >= 2 * weights, "training state too small");
  const torch::Tensor weights_region = state.narrow(0, 0, weights);
  const torch::Tensor momentum_region = state.narrow(0, weights, weights);
  torch::NoGradGuard no_grad;
  std::size_t k = 0;
  for (auto& layer : model_.layers()) {
    for (auto& t : layer.tensors) {
      const Bytes offset = layout.tensors.at(k++).offset;
      t.set_data(view_bytes(weights_region, offset, t));
      if (t.requires_grad()) {
        parameters_.push_back(t);
        momentum_.push_back(view_bytes(momentum_region, offset, t));
      } else {
        buffers_.push_back(t);
      }
    }
  }
  for (const auto& b : buffers_) (b.is_floating_point() ? float_buffers_ : other_buffers_).push_back(b);
  for (std::int64_t d = 0; d < kDataPool; ++d) data_.push_back(make_training_input(model_, config_, d, device_));
  // Backward boundaries: a gradient hook on every parameter (the zoo's gates cover the forward).
  for (auto& p : parameters_) {
    p.register_hook([this](torch::Tensor grad) {
      if (stop_ != nullptr) boundary();
      return grad;
    });
  }
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


void TrainingJob::boundary() {
  if (boundary_hook_) boundary_hook_();
  const std::uint32_t s = stop_->load(std::memory_order_acquire);
  if (s == kStopNone) return;
  if (s == kStopPause && pause_ && pause_()) return;
  throw Preempted{};
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
  while (target_steps == 0 || header_->completed_steps < target_steps) {
    if (stopped()) return {Outcome::Preempted, header_->completed_steps, header_->last_loss};
    const torch::Tensor input = input_of_step(header_->completed_steps);
    // The statistics as they were, for an abandoned step (a multi-tensor copy of the floating
    // ones: a few kernels, not one per buffer). A model without them (BERT-base) has nothing to
    // save, and the multi-tensor kernels refuse an empty list.
    std::vector<torch::Tensor> saved = float_buffers_.empty() ? std::vector<torch::Tensor>{}
                                                              : at::_foreach_mul(float_buffers_, 1.0);
    std::vector<torch::Tensor> saved_other;
    for (const auto& b : other_buffers_) saved_other.push_back(b.clone());
    double loss_value = 0;
    try {
      torch::Tensor loss = model_.training_loss(input, [this](std::size_t) { boundary(); });
      loss.backward();
      loss_value = loss.item<double>();
    } catch (...) {
      // A stopped step leaves no trace (Note [Preemption without loss]). An exception from a
      // gradient hook may reach here wrapped by autograd, so the flag decides what it was.
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < float_buffers_.size(); ++i) float_buffers_[i].copy_(saved[i]);
      for (std::size_t i = 0; i < other_buffers_.size(); ++i) other_buffers_[i].copy_(saved_other[i]);
      for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
      if (stop.load(std::memory_order_acquire) == kStopNone) throw;
      return {Outcome::Preempted, header_->completed_steps, header_->last_loss};
    }
    {
      torch::NoGradGuard no_grad;
      // SGD with momentum (dampening 0, as torch.optim.SGD): m = momentum * m + g; p -= lr * m;
      // in a few multi-tensor kernels rather than three per parameter.
      std::vector<torch::Tensor> grads;
      grads.reserve(parameters_.size());
      for (auto& p : parameters_) {
        PSW_CHECK(p.grad().defined(), "a parameter of ", model_.name(), " got no gradient");
        grads.push_back(p.grad());
      }
      // Pause points inside the update (Note [Preemption without loss]): waiting here loses
      // nothing; an abort is honoured only after the update, where the step is complete.
      auto update_boundary = [&stop, this] {
        if (boundary_hook_) boundary_hook_();
        if (stop.load(std::memory_order_acquire) == kStopPause && pause_) pause_();
      };
      at::_foreach_mul_(momentum_, config_.momentum);
      update_boundary();
      at::_foreach_add_(momentum_, grads);
      update_boundary();
      at::_foreach_add_(parameters_, momentum_, -config_.learning_rate);
      for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
    }
    header_->last_loss = loss_value;
    header_->completed_steps += 1;
    if (on_step && !on_step(header_->completed_steps, loss_value)) {
      return {Outcome::Preempted, header_->completed_steps, header_->last_loss};
    }
  }
  return {Outcome::ReachedTarget, header_->completed_steps, header_->last_loss};
}

}  // namespace psw::runtime
