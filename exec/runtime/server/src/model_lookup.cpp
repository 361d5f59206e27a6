#include "model_lookup.hpp"

#include <algorithm>
#include <utility>

namespace psw::runtime {

ModelInfo find_served_model(InferenceService& service, const std::string& name, const std::string& version) {
  if (name.empty()) throw ServiceError(ServiceError::Code::InvalidArgument, "the model name is empty");
  for (ModelInfo& model : service.models()) {
    if (model.name != name) continue;
    if (!version.empty() && std::find(model.versions.begin(), model.versions.end(), version) == model.versions.end()) {
      throw ServiceError(ServiceError::Code::NotFound, "model '" + name + "' has no version '" + version + "'");
    }
    return std::move(model);
  }
  throw ServiceError(ServiceError::Code::NotFound, "unknown model '" + name + "'");
}

void check_repository_name(const std::string& repository) {
  if (!repository.empty()) {
    throw ServiceError(ServiceError::Code::NotFound,
                       "unknown repository '" + repository + "': this server's one repository, its serve config, has no name");
  }
}

std::vector<ModelIndexEntry> repository_index(InferenceService& service, const std::string& repository, bool ready_only) {
  check_repository_name(repository);
  std::vector<ModelIndexEntry> index;
  for (const ModelInfo& model : service.models()) {
    if (ready_only && !model.ready) continue;
    const std::vector<std::string> versions = model.versions.empty() ? std::vector<std::string>{""} : model.versions;
    for (const std::string& version : versions) {
      index.push_back({model.name, version, model.ready ? "READY" : "UNAVAILABLE",
                       model.ready ? "" : "not ready: its workers are starting or loading it, or none can serve it now"});
    }
  }
  if (!ready_only) {
    for (ModelIndexEntry& entry : service.unloaded_models()) index.push_back(std::move(entry));
  }
  return index;
}

}  // namespace psw::runtime
