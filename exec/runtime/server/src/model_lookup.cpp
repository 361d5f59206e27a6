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

}  // namespace psw::runtime
