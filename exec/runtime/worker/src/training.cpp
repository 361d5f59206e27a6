#include "psw/runtime/worker/training.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "psw/common/error.hpp"
#include "psw/common/plan.hpp"
#include "psw/common/random_streams.hpp"
#include "psw/common/safetensors.hpp"
#include "psw/exec/weights.hpp"

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
  // Note [TorchScript training]: the module's own input shape, as its entry states it.
  if (!config.torchscript_file.empty()) return x.contiguous().to(device);
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

// Note [Training checkpoint]: torch.optim's names of the optimizer's buffers, in the slot's order.
std::vector<std::string> optimizer_buffer_names(const TrainingJobConfig& config) {
  if (config.optimizer == TrainingOptimizer::Adam) return {"exp_avg", "exp_avg_sq"};
  return {"momentum_buffer"};
}

// One tensor of a checkpoint: its name, and where it lies in a slot (its model tensor's dtype
// and shape).
struct CheckpointTensor {
  std::string name;
  Bytes offset;
  torch::Tensor like;
};

// Every tensor of the job's slot, in the slot's order: the model's, then each optimizer buffer's
// trained parameters.
std::vector<CheckpointTensor> checkpoint_tensors(exec::ZooModel& model, const TrainingJobConfig& config,
                                                 const exec::PackedLayout& layout) {
  std::vector<CheckpointTensor> out;
  std::vector<CheckpointTensor> trained;
  std::size_t index = 0;
  for (const auto& layer : model.layers()) {
    PSW_CHECK(layer.tensor_names.size() == layer.tensors.size(), "layer ", layer.name, " has ", layer.tensors.size(),
              " tensors and ", layer.tensor_names.size(), " names");
    for (std::size_t i = 0; i < layer.tensors.size(); ++i) {
      const torch::Tensor& t = layer.tensors[i];
      // The zoo's names, as exec/weights.hpp's weight_names gives them.
      const CheckpointTensor entry{layer.name + "." + layer.tensor_names[i], layout.tensors.at(index).offset, t};
      out.push_back(entry);
      if (t.requires_grad()) trained.push_back(entry);
      ++index;
    }
  }
  const Bytes weights = layout.layout.total_bytes;
  const std::vector<std::string> buffers = optimizer_buffer_names(config);
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    for (const CheckpointTensor& t : trained) {
      out.push_back({"optimizer." + buffers[b] + "." + t.name, static_cast<Bytes>(1 + b) * weights + t.offset, t.like});
    }
  }
  return out;
}

// Note [Training objective]: the user's set, `inputs` and `labels`, checked against the job's
// input (a sample's dtype and shape at the config's input size), on the CPU.
std::pair<torch::Tensor, torch::Tensor> read_dataset(exec::ZooModel& model, const TrainingJobConfig& config) {
  const std::string origin = config.dataset.string() + ": ";
  const SafetensorsHeader file = read_safetensors_header(config.dataset);
  const torch::Tensor example = make_training_input(model, config, 0, torch::kCPU);
  const auto read = [&](const std::string& name, torch::ScalarType type, const std::vector<std::int64_t>& sample) {
    const SafetensorsEntry* entry = file.find(name);
    if (entry == nullptr) throw InputError(origin + "the dataset has no tensor '" + name + "'");
    const std::optional<TensorDtype> dtype = exec::safetensors_dtype(type);
    std::vector<std::int64_t> wanted = {entry->shape.empty() ? 0 : entry->shape[0]};
    wanted.insert(wanted.end(), sample.begin(), sample.end());
    if (!dtype || entry->dtype != *dtype || entry->shape != wanted || wanted[0] < 1) {
      std::string takes = "[N";
      for (const std::int64_t d : sample) takes += ", " + std::to_string(d);
      throw InputError(origin + "'" + name + "' is " + to_string(entry->dtype) + " " + shape_text(entry->shape) + "; " +
                       model.name() + "'s job takes " + (dtype ? to_string(*dtype) : "?") + " " + takes +
                       "] with N >= 1 (input_size " + std::to_string(config.input_size) + ")");
    }
    torch::Tensor t = torch::empty(wanted, torch::dtype(type));
    read_safetensors_tensor(config.dataset, file, *entry, t.data_ptr());
    return t;
  };
  const torch::Tensor inputs =
      read("inputs", example.scalar_type(), std::vector<std::int64_t>(example.sizes().begin() + 1, example.sizes().end()));
  const torch::Tensor labels = read("labels", torch::kInt64, {});
  if (labels.size(0) != inputs.size(0)) {
    throw InputError(origin + detail::concat(inputs.size(0), " inputs and ", labels.size(0), " labels"));
  }
  return {inputs, labels};
}

// The samples of step `step` of a set of `n`: step * batch .. + batch - 1, modulo n.
torch::Tensor dataset_rows(std::int64_t step, std::int64_t batch, std::int64_t n) {
  return (torch::arange(batch, torch::kInt64) + (step % n) * (batch % n)).remainder(n);
}

// Note [Training checkpoint]: `path`'s state into `slot` (uint8 on the CPU, one slot); the
// completed steps and the loss it was written at.
std::pair<std::int64_t, double> read_checkpoint(exec::ZooModel& model, const TrainingJobConfig& config,
                                                const exec::PackedLayout& layout, const std::filesystem::path& path,
                                                torch::Tensor& slot) {
  const std::string origin = path.string() + ": ";
  const SafetensorsHeader file = read_safetensors_header(path);
  const auto meta = [&](const std::string& key) -> std::string {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) {
      throw InputError(origin + "not a training checkpoint (its metadata has no " + key + "; psw writes " +
                       kTrainingCheckpointFormat + ")");
    }
    return it->second;
  };
  if (meta("psw_format") != kTrainingCheckpointFormat) {
    throw InputError(origin + "a checkpoint of format '" + meta("psw_format") + "', not " + kTrainingCheckpointFormat);
  }
  if (meta("psw_model") != model.name()) {
    throw InputError(origin + "a checkpoint of model '" + meta("psw_model") + "', not of '" + model.name() + "'");
  }
  if (meta("psw_optimizer") != to_string(config.optimizer)) {
    throw InputError(origin + "a checkpoint of a job trained with " + meta("psw_optimizer") + ", not " +
                     to_string(config.optimizer));
  }
  if (meta("psw_fingerprint") != fingerprint_hex(job_fingerprint(model, config))) {
    throw InputError(origin + "a checkpoint of another " + model.name() + " (its layers' fingerprint " +
                     meta("psw_fingerprint") + ", the job's " + fingerprint_hex(job_fingerprint(model, config)) + ")");
  }
  std::int64_t steps = 0;
  double loss = 0;
  try {
    std::size_t used = 0;
    steps = std::stoll(meta("psw_completed_steps"), &used);
    if (used != meta("psw_completed_steps").size() || steps < 0) throw std::invalid_argument("steps");
    loss = std::stod(meta("psw_loss"));
  } catch (const std::logic_error&) {
    throw InputError(origin + "its psw_completed_steps '" + meta("psw_completed_steps") + "' or psw_loss '" +
                     meta("psw_loss") + "' is not a number");
  }
  const std::vector<CheckpointTensor> wanted = checkpoint_tensors(model, config, layout);
  for (const CheckpointTensor& t : wanted) {
    const SafetensorsEntry* entry = file.find(t.name);
    if (entry == nullptr) throw InputError(origin + "the checkpoint lacks tensor " + t.name);
    const std::vector<std::int64_t> shape(t.like.sizes().begin(), t.like.sizes().end());
    const std::optional<TensorDtype> dtype = exec::safetensors_dtype(t.like.scalar_type());
    if (!dtype || entry->dtype != *dtype || entry->shape != shape) {
      throw InputError(origin + "tensor " + t.name + " is " + to_string(entry->dtype) + " " + shape_text(entry->shape) +
                       ", the job's is " + (dtype ? to_string(*dtype) : "?") + " " + shape_text(shape));
    }
    PSW_CHECK(t.offset + static_cast<Bytes>(entry->bytes()) <= slot.numel(), "a checkpoint tensor outside the slot");
    read_safetensors_tensor(path, file, *entry, slot.data_ptr<std::uint8_t>() + t.offset);
  }
  if (file.tensors.size() != wanted.size()) {
    for (const SafetensorsEntry& e : file.tensors) {
      const bool known = std::any_of(wanted.begin(), wanted.end(), [&](const CheckpointTensor& t) { return t.name == e.name; });
      if (!known) throw InputError(origin + "the checkpoint holds tensor " + e.name + ", which the job does not have");
    }
  }
  return {steps, loss};
}

}  // namespace

TrainingCheckpoint TrainingJob::save_checkpoint(exec::ZooModel& model, const TrainingJobConfig& config,
                                                const torch::Tensor& state, const TrainingHeader& header,
                                                const std::filesystem::path& path) {
  const exec::PackedLayout layout = training_layout(model);
  const Bytes slot_bytes = (1 + optimizer_buffers(config)) * layout.layout.total_bytes;
  PSW_CHECK(header.slot_bytes == slot_bytes && header.fingerprint == job_fingerprint(model, config),
            "the training state is another job's than ", model.name());
  // Note [Training checkpoint]: read until no commit happened during the read.
  torch::Tensor slot = torch::empty({slot_bytes}, torch::kUInt8);
  TrainingCheckpoint done;
  for (int attempt = 0;; ++attempt) {
    const std::int64_t steps = committed_steps(header);
    const double loss = header.slot_loss[steps % 2];
    slot.copy_(state.narrow(0, (steps % 2) * slot_bytes, slot_bytes));
    if (committed_steps(header) == steps) {
      done.completed_steps = steps;
      done.loss = loss;
      break;
    }
    if (attempt == 100) throw Error("the training job committed a step during each of 100 reads of its state");
  }
  std::vector<SafetensorsTensor> tensors;
  for (const CheckpointTensor& t : checkpoint_tensors(model, config, layout)) {
    const std::optional<TensorDtype> dtype = exec::safetensors_dtype(t.like.scalar_type());
    PSW_CHECK(dtype.has_value(), "tensor ", t.name, " has a dtype safetensors cannot hold");
    const auto* data = reinterpret_cast<const char*>(slot.data_ptr<std::uint8_t>() + t.offset);
    tensors.emplace_back(t.name, *dtype, std::vector<std::int64_t>(t.like.sizes().begin(), t.like.sizes().end()),
                         std::string(data, t.like.nbytes()));
  }
  std::ostringstream loss_text;
  loss_text.precision(17);
  loss_text << done.loss;
  const std::string bytes = write_safetensors(tensors, {{"psw_format", kTrainingCheckpointFormat},
                                                        {"psw_model", model.name()},
                                                        {"psw_optimizer", to_string(config.optimizer)},
                                                        {"psw_fingerprint", fingerprint_hex(job_fingerprint(model, config))},
                                                        {"psw_completed_steps", std::to_string(done.completed_steps)},
                                                        {"psw_loss", loss_text.str()}});
  // Written beside the target and renamed over it: a reader never sees half a checkpoint.
  const std::filesystem::path partial = path.string() + ".partial-" + std::to_string(::getpid());
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  std::error_code ec;
  if (!out) {
    std::filesystem::remove(partial, ec);
    throw InputError(path.string() + ": cannot write the training checkpoint");
  }
  std::filesystem::rename(partial, path, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    throw InputError(path.string() + ": cannot write the training checkpoint (" + ec.message() + ")");
  }
  done.bytes = static_cast<Bytes>(bytes.size());
  return done;
}

Bytes TrainingJob::state_bytes(exec::ZooModel& model, const TrainingJobConfig& config) {
  return 2 * (1 + optimizer_buffers(config)) * training_layout(model).layout.total_bytes;
}

void TrainingJob::initialize(exec::ZooModel& model, const TrainingJobConfig& config, const torch::Tensor& state,
                             TrainingHeader* header) {
  const exec::PackedLayout layout = training_layout(model);
  const Bytes weights = layout.layout.total_bytes;
  const Bytes slot = (1 + optimizer_buffers(config)) * weights;
  PSW_CHECK(state.numel() >= 2 * slot, "training state too small");
  header->slot_loss[0] = 0;
  header->slot_loss[1] = 0;
  header->weights_bytes = weights;
  header->slot_bytes = slot;
  header->fingerprint = job_fingerprint(model, config);
  if (!config.resume_from.empty()) {
    // Note [Training checkpoint]: the file's state in the slot of its step count, committed.
    torch::Tensor loaded = torch::zeros({slot}, torch::kUInt8);
    const auto [steps, loss] = read_checkpoint(model, config, layout, config.resume_from, loaded);
    state.narrow(0, (steps % 2) * slot, slot).copy_(loaded);
    header->slot_loss[steps % 2] = loss;
    __atomic_store_n(&header->completed_steps, steps, __ATOMIC_RELEASE);
    return;
  }
  // Slot 0: the weights packed on the CPU, a zero optimizer state, then copied to wherever the
  // state lives.
  exec::ParameterStore packed = exec::ParameterStore::over(torch::zeros({slot}, torch::kUInt8), true);
  packed.pack(model, layout);
  state.narrow(0, 0, slot).copy_(packed.bytes());
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
  weights_bytes_ = weights;
  std::size_t index = 0;
  for (auto& layer : model_.layers()) {
    for (auto& t : layer.tensors) {
      tensor_offsets_.push_back(layout.tensors.at(index++).offset);
      model_tensors_.push_back(t);
      if (t.requires_grad()) parameters_.push_back(t);
    }
  }
  for (int k = 0; k < 2; ++k) slots_[k] = view_slot(state.narrow(0, k * slot, slot));
  torch::NoGradGuard no_grad;
  // Note [Update in pieces]: consecutive parameters, up to piece_bytes_ a piece (one at least).
  piece_bytes_ = config_.update_piece_mib > 0 ? Bytes{config_.update_piece_mib} << 20
                                              : std::numeric_limits<Bytes>::max();
  Bytes filled = 0;  // of the last piece
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Bytes b = parameters_[i].numel() * static_cast<Bytes>(parameters_[i].element_size());
    if (update_pieces_.empty() || filled + b > piece_bytes_) {
      update_pieces_.emplace_back(i, i);
      filled = 0;
    }
    update_pieces_.back().second = i + 1;
    filled += b;
  }
  bind(static_cast<int>(committed_steps(*header_) % 2));
  if (config_.dataset.empty()) {
    for (std::int64_t d = 0; d < kDataPool; ++d) data_.push_back(make_training_input(model_, config_, d, device_));
  } else {
    const auto [inputs, labels] = read_dataset(model_, config_);
    dataset_inputs_ = inputs.to(device_);
    dataset_labels_ = labels.to(device_);
  }
  // Backward boundaries: a gradient hook on every parameter (the zoo's gates cover the forward).
  for (auto& p : parameters_) {
    p.register_hook([this](torch::Tensor grad) {
      if (stop_ != nullptr) boundary(TrainingBoundary::Backward);
      return grad;
    });
  }
}

TrainingJob::Slot TrainingJob::view_slot(const torch::Tensor& bytes) const {
  torch::NoGradGuard no_grad;
  const int buffers = optimizer_buffers(config_);
  Slot s;
  s.bytes = bytes;
  s.moments.resize(static_cast<std::size_t>(buffers));
  for (std::size_t i = 0; i < model_tensors_.size(); ++i) {
    const torch::Tensor& t = model_tensors_[i];
    s.tensors.push_back(view_bytes(bytes, tensor_offsets_[i], t));
    if (!t.requires_grad()) continue;
    for (int b = 0; b < buffers; ++b) s.moments[b].push_back(view_bytes(bytes, (1 + b) * weights_bytes_ + tensor_offsets_[i], t));
  }
  return s;
}

// Note [Rehearsal]
// ~~~~~~~~~~~~~~~~
// A process's first training step pays for everything used for the first time: device memory
// for the activations and gradients (the caching allocator's blocks), the libraries' handles and
// workspaces, the kernels (loaded lazily). On H100s the job had not finished that step 0.26-0.5 s
// after it started, and a request that came during it waited 6-24 ms for the job to reach a
// layer boundary, against 0.1 ms later (results/gpu/README.md, "the first step's preemptions").
// So the worker rehearses one step at its start, before it is ready: on a scratch copy of the
// committed slot, so that neither slot of the state, which another worker may be training on, is
// written (a copy read while that worker writes is garbage, which a rehearsal does not mind);
// then it binds the committed slot again. The step's memory (activations, gradients) stays with
// the process's allocator for the real steps: every worker that may train holds it from its
// start, where before only the one that trained did. Whether the rehearsal takes the first
// step's stops back to 0.1 ms on a GPU is not measured yet.
void TrainingJob::rehearse(const torch::Tensor& scratch) {
  PSW_CHECK(scratch.scalar_type() == torch::kUInt8 && scratch.numel() >= slot_bytes() && scratch.device() == device_,
            "the rehearsal's scratch must be ", slot_bytes(), " bytes on ", device_.str());
  const std::int64_t done = committed_steps(*header_);
  const int committed = static_cast<int>(done % 2);
  {
    torch::NoGradGuard no_grad;
    slots_[kScratchSlot] = view_slot(scratch.narrow(0, 0, slot_bytes()));
    slots_[kScratchSlot].bytes.copy_(slots_[committed].bytes);
  }
  const std::atomic<std::uint32_t> never{kStopNone};
  stop_ = &never;
  auto restore = [&] {
    for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
    stop_ = nullptr;
    bind(committed);
    slots_[kScratchSlot] = Slot{};
  };
  try {
    bind(kScratchSlot);
    forward_backward(done);
    update(done + 1);
    if (device_fence_) device_fence_();
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void TrainingJob::bind(int slot) {
  if (bound_slot_ == slot) return;
  torch::NoGradGuard no_grad;
  const Slot& s = slots_[slot];
  for (std::size_t i = 0; i < model_tensors_.size(); ++i) model_tensors_[i].set_data(s.tensors[i]);
  bound_slot_ = slot;
}

std::vector<exec::InputSpec> torchscript_input_specs(const std::vector<TorchScriptInput>& inputs, int batch) {
  std::vector<exec::InputSpec> specs;
  for (const TorchScriptInput& input : inputs) {
    std::vector<std::int64_t> shape = {batch};
    shape.insert(shape.end(), input.shape.begin(), input.shape.end());
    specs.push_back({shape, exec::parse_input_dtype(input.dtype), inputs.size() > 1 ? input.name : ""});
  }
  return specs;
}

std::unique_ptr<exec::ZooModel> make_training_model(const TrainingJobConfig& config, std::uint64_t seed) {
  if (config.torchscript_file.empty()) return exec::make_model(config.model, seed);
  return exec::load_torchscript(config.torchscript_file, torchscript_input_specs(config.inputs, config.batch));
}

void TrainingJob::check_config(exec::ZooModel& model, const TrainingJobConfig& config) {
  const torch::Tensor x = model.example_input(1, 0);
  const std::int64_t limit = x.dim() == 2 ? x.size(1) : x.size(2);
  if (config.torchscript_file.empty() && config.input_size > limit) {
    throw InputError(detail::concat("training.input_size: at most ", limit, x.dim() == 2 ? " tokens" : " pixels", " for ",
                                    model.name(), ", got ", config.input_size));
  }
  if (config.dataset.empty()) return;
  const auto [inputs, labels] = read_dataset(model, config);
  torch::NoGradGuard no_grad;
  const std::int64_t classes = model.forward(inputs.narrow(0, 0, 1)).size(-1);
  const std::int64_t lowest = labels.min().item<std::int64_t>();
  const std::int64_t highest = labels.max().item<std::int64_t>();
  if (lowest < 0 || highest >= classes) {
    throw InputError(config.dataset.string() + ": " +
                     detail::concat("labels from ", lowest, " to ", highest, "; ", model.name(), "'s output has ", classes,
                                    " classes, so they must lie in [0, ", classes, ")"));
  }
}

torch::Tensor TrainingJob::input_of_step(std::int64_t step) const {
  if (dataset_inputs_.defined()) {
    return dataset_inputs_.index_select(0, dataset_rows(step, config_.batch, dataset_inputs_.size(0)).to(device_));
  }
  return data_.at(static_cast<std::size_t>(step % kDataPool));
}

torch::Tensor TrainingJob::labels_of_step(std::int64_t step, std::int64_t classes) const {
  PSW_CHECK(classes > 0, "a model output of no classes");
  if (dataset_labels_.defined()) {
    return dataset_labels_.index_select(0, dataset_rows(step, config_.batch, dataset_labels_.size(0)).to(device_));
  }
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

std::uint32_t TrainingJob::read_stop(TrainingBoundary where) {
  const std::uint32_t s = stop_->load(std::memory_order_acquire);
  if (s != kStopNone) stop_seen_ = StopSeen{where, monotonic_ns()};
  return s;
}

void TrainingJob::boundary(TrainingBoundary where) {
  if (boundary_hook_) boundary_hook_();
  const std::uint32_t s = read_stop(where);
  if (s == kStopNone) return;
  if (s == kStopPause && pause_ && pause_()) return;
  throw Preempted{};
}

void TrainingJob::update(std::int64_t step) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  grads.reserve(parameters_.size());
  for (auto& p : parameters_) {
    PSW_CHECK(p.grad().defined(), "a parameter of ", model_.name(), " got no gradient");
    grads.push_back(p.grad());
  }
  // Pause points inside the update (Note [Preemption without loss]): waiting here loses
  // nothing; an abort is honoured only after the commit.
  auto update_boundary = [this] {
    if (boundary_hook_) boundary_hook_();
    if (read_stop(TrainingBoundary::Update) == kStopPause && pause_) pause_();
  };
  std::vector<std::vector<torch::Tensor>>& moments = slots_[bound_slot_].moments;
  // Note [Update in pieces]: each operation on one piece of the parameters at a time, with a
  // pause point between pieces as between operations.
  using Range = std::pair<std::size_t, std::size_t>;
  auto piece = [](const std::vector<torch::Tensor>& all, const Range& range) {
    return std::vector<torch::Tensor>(all.begin() + static_cast<std::ptrdiff_t>(range.first),
                                      all.begin() + static_cast<std::ptrdiff_t>(range.second));
  };
  auto in_pieces = [&](const std::function<void(const Range&)>& operations) {
    for (std::size_t k = 0; k < update_pieces_.size(); ++k) {
      if (k > 0) update_boundary();
      operations(update_pieces_[k]);
    }
  };
  std::vector<torch::Tensor>& m = moments[0];
  if (config_.optimizer == TrainingOptimizer::Sgd) {
    // torch.optim.SGD with momentum, dampening 0: m = momentum * m + g; p -= lr * m.
    in_pieces([&](const Range& r) { at::_foreach_mul_(piece(m, r), config_.momentum); });
    update_boundary();
    in_pieces([&](const Range& r) { at::_foreach_add_(piece(m, r), piece(grads, r)); });
    update_boundary();
    in_pieces([&](const Range& r) { at::_foreach_add_(piece(parameters_, r), piece(m, r), -config_.learning_rate); });
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
    std::vector<torch::Tensor>& v = moments[1];
    in_pieces([&](const Range& r) {
      at::_foreach_mul_(piece(m, r), kBeta1);
      at::_foreach_add_(piece(m, r), piece(grads, r), 1.0 - kBeta1);
    });
    update_boundary();
    in_pieces([&](const Range& r) {
      at::_foreach_mul_(piece(v, r), kBeta2);
      at::_foreach_addcmul_(piece(v, r), piece(grads, r), piece(grads, r), 1.0 - kBeta2);
    });
    update_boundary();
    std::vector<torch::Tensor> denominator;
    denominator.reserve(parameters_.size());
    in_pieces([&](const Range& r) {
      std::vector<torch::Tensor> d = at::_foreach_sqrt(piece(v, r));
      at::_foreach_div_(d, std::sqrt(bias2));
      at::_foreach_add_(d, kEps);
      denominator.insert(denominator.end(), d.begin(), d.end());
    });
    update_boundary();
    in_pieces([&](const Range& r) {
      at::_foreach_addcdiv_(piece(parameters_, r), piece(m, r), piece(denominator, r), -config_.learning_rate / bias1);
    });
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

double TrainingJob::forward_backward(std::int64_t step) {
  const torch::Tensor input = input_of_step(step);
  const std::vector<torch::Tensor> outs =
      model_.training_outputs(input, [this](std::size_t) { boundary(TrainingBoundary::Forward); });
  const torch::Tensor labels = labels_of_step(step, outs.at(0).size(1));
  torch::Tensor loss = torch::nn::functional::cross_entropy(outs[0].to(torch::kFloat32), labels);
  for (std::size_t i = 1; i < outs.size(); ++i) {
    loss = loss + 0.4 * torch::nn::functional::cross_entropy(outs[i].to(torch::kFloat32), labels);
  }
  loss.backward();
  return loss.item<double>();
}

TrainingJob::Result TrainingJob::run(std::int64_t target_steps, const std::atomic<std::uint32_t>& stop,
                                     const std::function<bool(std::int64_t, double)>& on_step,
                                     const std::function<bool()>& pause) {
  stop_ = &stop;
  pause_ = pause;
  // A pause asked for between steps is honoured there too (nothing of a step in flight).
  auto stopped = [this] {
    const std::uint32_t s = read_stop(TrainingBoundary::StepStart);
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
    // Note [Update in pieces]: the copy in pieces, the stop read between them.
    const std::int64_t slot_bytes = slots_[working].bytes.numel();
    for (std::int64_t at = 0; at < slot_bytes;) {
      if (at > 0) {
        crash_point();
        if (stopped()) return result(Outcome::Preempted);
      }
      const std::int64_t n = std::min(piece_bytes_, slot_bytes - at);
      slots_[working].bytes.narrow(0, at, n).copy_(slots_[1 - working].bytes.narrow(0, at, n));
      at += n;
    }
    bind(working);
    crash_point();
    double loss_value = 0;
    try {
      loss_value = forward_backward(done);
    } catch (...) {
      // A stopped step leaves no trace (Note [Preemption without loss]): its writes are in the
      // working slot, which the next step copies over. An exception from a gradient hook may reach
      // here wrapped by autograd, so the flag decides what it was.
      for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
      if (stop.load(std::memory_order_acquire) == kStopNone) throw;
      return result(Outcome::Preempted);
    }
    update(done + 1);
    commit(done + 1, loss_value);
    if (on_step && !on_step(done + 1, loss_value)) return result(Outcome::Preempted);
  }
  return result(Outcome::ReachedTarget);
}

}  // namespace psw::runtime
