#pragma once
// An InferenceService with fixed, checkable behaviour, for testing the gRPC front end, the
// client and other protocol clients without the controller:
//   "double"     FP32 x [-1, 4] -> FP32 y [-1, 4], y = 2x
//   "slow"       like "double", after sleeping slow_delay (a client's deadline can expire)
//   "unready"    listed, not ready; infer answers Unavailable
//   "unavailable" infer throws ServiceError(Unavailable, "worker 0 crashed")
//   "throws"     infer throws std::runtime_error("boom in the service")
//   generate     "double" continues the prompt's last id (+1, +2, ...); "unavailable" fails
//                after its first token
//   "trainer"    the only training job; training_status advances completed_steps by one per call
//                while running, so a client sees it progress
// metrics_text() counts inference requests per model. Inputs may arrive in a client's shared
// memory (borrowed); an output wanted there is written there, as the controller does.

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime::testing {

class FakeInferenceService final : public InferenceService {
 public:
  std::chrono::milliseconds slow_delay{400};
  // Whether infer writes an output into the client's shared memory itself (as the controller
  // does) or leaves that to the front end.
  bool write_output_destinations = true;

  // Whether the last request's input reached the service as borrowed shared memory (not copied).
  bool last_input_borrowed() {
    std::lock_guard lock(mutex_);
    return last_input_borrowed_;
  }

  // Note [Deadlines]: the time the last request's caller had left on arrival (nullopt: no
  // deadline), and whether it came with a cancellation test.
  std::optional<std::chrono::steady_clock::duration> last_time_left() {
    std::lock_guard lock(mutex_);
    return last_time_left_;
  }
  bool last_cancellable() {
    std::lock_guard lock(mutex_);
    return last_cancellable_;
  }

  // The registered region the last request's input lay in (its id), 0 when none.
  std::uint64_t last_input_region() {
    std::lock_guard lock(mutex_);
    return last_input_region_;
  }

  // The regions the front end told of (InferenceService::shared_memory_registered), by id.
  std::vector<std::uint64_t> regions_told() {
    std::lock_guard lock(mutex_);
    return regions_told_;
  }

  void shared_memory_registered(const BorrowedBytes& region) override {
    std::lock_guard lock(mutex_);
    if (region.region != nullptr) regions_told_.push_back(region.region->id);
  }

  // Hold every "slow" request in infer() until release_slow() (a test's concurrent requests).
  void hold_slow() {
    std::lock_guard lock(mutex_);
    slow_held_ = true;
  }
  void release_slow() {
    {
      std::lock_guard lock(mutex_);
      slow_held_ = false;
    }
    slow_released_.notify_all();
  }

  // Requests whose input reached the service as borrowed shared memory, so far.
  std::int64_t borrowed_inputs() {
    std::lock_guard lock(mutex_);
    return borrowed_inputs_;
  }

  // Requests of `model` that reached infer() so far (a test waits on it rather than sleeping
  // for a request to arrive).
  std::int64_t requests_received(const std::string& model) {
    std::lock_guard lock(mutex_);
    const auto it = requests_.find(model);
    return it == requests_.end() ? 0 : it->second;
  }

  bool live() override { return true; }
  bool ready() override { return true; }

  std::vector<ModelInfo> models() override {
    std::vector<ModelInfo> list;
    for (const char* name : {"double", "slow", "unready", "unavailable", "throws"}) {
      ModelInfo model;
      model.name = name;
      model.platform = "pytorch_libtorch";
      model.versions = {"1"};
      model.inputs = {TensorSpec{"x", "FP32", {-1, 4}}};
      model.outputs = {TensorSpec{"y", "FP32", {-1, 4}}};
      model.ready = std::string(name) != "unready";
      list.push_back(model);
    }
    return list;
  }

  InferResponse infer(const InferRequest& request) override {
    {
      std::lock_guard lock(mutex_);
      ++requests_[request.model];
      last_time_left_.reset();
      if (request.deadline) last_time_left_ = *request.deadline - std::chrono::steady_clock::now();
      last_cancellable_ = static_cast<bool>(request.cancelled);
    }
    const std::string& model = request.model;
    if (model == "unavailable") throw ServiceError(ServiceError::Code::Unavailable, "worker 0 crashed");
    if (model == "throws") throw std::runtime_error("boom in the service");
    if (model == "unready") throw ServiceError(ServiceError::Code::Unavailable, "model 'unready' is not ready");
    if (model != "double" && model != "slow") {
      throw ServiceError(ServiceError::Code::NotFound, "unknown model '" + model + "'");
    }
    if (model == "slow") {
      std::unique_lock lock(mutex_);
      if (slow_held_) {
        slow_released_.wait(lock, [this] { return !slow_held_; });
      } else {
        lock.unlock();
        std::this_thread::sleep_for(slow_delay);
      }
    }
    if (request.inputs.size() != 1 || request.inputs[0].name != "x") {
      throw ServiceError(ServiceError::Code::InvalidArgument, "model '" + model + "' takes one input 'x'");
    }
    const TensorData& x = request.inputs[0];
    if (x.datatype != "FP32") {
      throw ServiceError(ServiceError::Code::InvalidArgument,
                         "input 'x' of model '" + model + "' is FP32, not " + x.datatype);
    }
    if (x.shape.size() != 2 || x.shape[1] != 4) {
      throw ServiceError(ServiceError::Code::InvalidArgument, "input 'x' must have shape [batch, 4]");
    }
    TensorData y{"y", "FP32", x.shape, std::string(x.contents())};
    for (std::size_t i = 0; i + sizeof(float) <= y.bytes.size(); i += sizeof(float)) {
      float value;
      std::memcpy(&value, y.bytes.data() + i, sizeof value);
      value *= 2;
      std::memcpy(y.bytes.data() + i, &value, sizeof value);
    }
    // As the controller does: an output the client wants in its shared memory goes straight
    // there when it fits.
    const BorrowedBytes* target = request.output_destination("y");
    if (write_output_destinations && target != nullptr && y.bytes.size() <= target->size) {
      std::memcpy(target->data, y.bytes.data(), y.bytes.size());
      y.borrowed = BorrowedBytes{target->owner, target->data, y.bytes.size()};
      y.bytes.clear();
    }
    {
      std::lock_guard lock(mutex_);
      last_input_borrowed_ = x.is_borrowed();
      last_input_region_ = x.is_borrowed() && x.borrowed.region != nullptr ? x.borrowed.region->id : 0;
      if (last_input_borrowed_) ++borrowed_inputs_;
    }
    return InferResponse{model, "1", request.id, {y}};
  }

  // Note [Generate call]: "double" generates the ids after the prompt's last, one by one, each
  // told to the sink; "unavailable" tells one token, then fails as a lost worker would; the
  // others fail as infer does before any token.
  GenerateResponse generate(const GenerateRequest& request, const TokenSink& on_token) override {
    const std::string& model = request.model;
    if (model == "unready") throw ServiceError(ServiceError::Code::Unavailable, "model 'unready' is not ready");
    if (model != "double" && model != "unavailable") {
      throw ServiceError(ServiceError::Code::InvalidArgument, "model '" + model + "' does not generate");
    }
    if (request.input_ids.empty()) throw ServiceError(ServiceError::Code::InvalidArgument, "the prompt is empty");
    GenerateResponse response{model, request.id, {}, 16, true, 1'000'000, 250'000, 2'000'000, 1};
    for (std::int64_t i = 0; i < request.max_tokens; ++i) {
      const std::int64_t id = request.input_ids.back() + 1 + i;
      if (on_token) on_token({i, id});
      if (model == "unavailable") throw ServiceError(ServiceError::Code::Unavailable, "worker 0 crashed");
      response.output_ids.push_back(id);
    }
    return response;
  }

  TrainingStatus start_training(const std::string& model, std::int64_t steps) override {
    std::lock_guard lock(mutex_);
    check_trainer(model);
    training_.running = true;
    training_.active = true;
    training_.stopped = false;
    training_.target_steps = steps;
    return training_;
  }

  TrainingStatus stop_training(const std::string& model) override {
    std::lock_guard lock(mutex_);
    check_trainer(model);
    training_.running = false;
    training_.active = false;
    training_.stopped = true;
    return training_;
  }

  // Note [Training checkpoint]: "trainer" answers where it would have written its state (nothing
  // is written); an empty path is refused as the controller refuses it without a configured one.
  TrainingCheckpointStatus checkpoint_training(const std::string& model, const std::string& path) override {
    std::lock_guard lock(mutex_);
    check_trainer(model);
    if (path.empty()) throw ServiceError(ServiceError::Code::InvalidArgument, "give the checkpoint's path");
    return {model, path, training_.completed_steps, training_.last_loss, 1234};
  }

  TrainingStatus training_status(const std::string& model) override {
    std::lock_guard lock(mutex_);
    check_trainer(model);
    if (training_.running) {
      ++training_.completed_steps;
      training_.last_loss = 1.0 / static_cast<double>(training_.completed_steps);
    }
    return training_;
  }

  std::string metrics_text() override {
    std::lock_guard lock(mutex_);
    std::string text = "# HELP psw_requests_total Inference requests received.\n"
                       "# TYPE psw_requests_total counter\n";
    for (const auto& [model, count] : requests_) {
      text += "psw_requests_total{model=\"" + model + "\"} " + std::to_string(count) + "\n";
    }
    return text;
  }

 private:
  void check_trainer(const std::string& model) {
    if (model != "trainer") throw ServiceError(ServiceError::Code::NotFound, "no training job for model '" + model + "'");
    training_.model = model;
  }

  std::mutex mutex_;
  std::map<std::string, std::int64_t> requests_;
  TrainingStatus training_;
  bool last_input_borrowed_ = false;
  std::uint64_t last_input_region_ = 0;
  std::vector<std::uint64_t> regions_told_;
  bool slow_held_ = false;
  std::condition_variable slow_released_;
  std::optional<std::chrono::steady_clock::duration> last_time_left_;
  bool last_cancellable_ = false;
  std::int64_t borrowed_inputs_ = 0;
};

}  // namespace psw::runtime::testing
