#pragma once
// The service the front end answers from while psw serve starts (run_server): live, not ready,
// its configured models listed but not ready, so that a client sees the model it asks for as
// not ready yet (an inference request for it is UNAVAILABLE, naming why) rather than unknown; a
// model the config does not serve is NOT_FOUND, as later. Once the controller is up, set() it
// and every call is forwarded to it.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "psw/common/serve_config.hpp"
#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

class StartingService final : public InferenceService {
 public:
  explicit StartingService(const ServeConfig& config);
  void set(InferenceService* service);  // nullptr: starting (or stopping) again

  bool live() override;
  bool ready() override;
  std::vector<ModelInfo> models() override;
  InferResponse infer(const InferRequest& request) override;
  GenerateResponse generate(const GenerateRequest& request, const TokenSink& on_token) override;
  TrainingStatus start_training(const std::string& model, std::int64_t steps) override;
  TrainingStatus stop_training(const std::string& model) override;
  TrainingStatus training_status(const std::string& model) override;
  TrainingCheckpointStatus checkpoint_training(const std::string& model, const std::string& path) override;
  void load_model(const std::string& name, const std::string& config) override;
  void unload_model(const std::string& name) override;
  std::vector<ModelIndexEntry> unloaded_models() override;
  std::string metrics_text() override;
  // Forwarded, or kept until set(): a region registered while the server starts (the front end's
  // input staging, Note [Raw inputs received in place]) is mapped by the workers before the
  // first request reads it.
  void shared_memory_registered(const BorrowedBytes& region) override;

 private:
  InferenceService* get();
  InferenceService& forward_to();
  // NOT_FOUND for a model the config lacks, else UNAVAILABLE (starting).
  [[noreturn]] void refuse_while_starting(const std::string& model) const;

  std::mutex mutex_;
  InferenceService* service_ = nullptr;
  std::vector<ModelInfo> starting_;  // the configured models, not ready
  // Registered before set(), weakly: one unregistered meanwhile is not told.
  struct EarlyRegion {
    std::weak_ptr<void> owner;
    BorrowedBytes bytes;  // without its owner
  };
  std::vector<EarlyRegion> early_regions_;
};

}  // namespace psw::runtime
