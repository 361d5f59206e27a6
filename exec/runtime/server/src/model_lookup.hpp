#pragma once
// The model a front end's call names, as the service lists it: shared by the gRPC and the REST
// front ends, so that both answer a wrong name or version alike. Internal to psw_server.

#include <string>
#include <vector>

#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

// The model `name` (and `version`, when given); INVALID_ARGUMENT for an empty name, NOT_FOUND
// for a model or version the service does not list.
ModelInfo find_served_model(InferenceService& service, const std::string& name, const std::string& version);

// Note [Repository index]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The model repository extension's index (Triton's RepositoryIndex; POST /v2/repository/index):
// every model the server knows, one entry per version, READY or UNAVAILABLE with the reason (its
// workers are still starting or loading it, or none can serve it now; or it was unloaded, or its
// load failed: Note [Repository load] in controller.hpp). The repository is the serve config
// and has no name: a request that names one is NOT_FOUND. `ready_only`: the READY entries. The
// entries are ModelIndexEntry (service.hpp).
std::vector<ModelIndexEntry> repository_index(InferenceService& service, const std::string& repository, bool ready_only);
// NOT_FOUND for a repository name: the one repository has none.
void check_repository_name(const std::string& repository);

}  // namespace psw::runtime
