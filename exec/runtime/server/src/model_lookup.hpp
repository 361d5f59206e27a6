#pragma once
// The model a front end's call names, as the service lists it: shared by the gRPC and the REST
// front ends, so that both answer a wrong name or version alike. Internal to psw_server.

#include <string>

#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

// The model `name` (and `version`, when given); INVALID_ARGUMENT for an empty name, NOT_FOUND
// for a model or version the service does not list.
ModelInfo find_served_model(InferenceService& service, const std::string& name, const std::string& version);

}  // namespace psw::runtime
