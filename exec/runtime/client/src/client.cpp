#include "psw/runtime/client/client.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "grpc_service.grpc.pb.h"
#include "psw/common/error.hpp"
#include "psw/runtime/client/client_tools.hpp"
#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/ipc/tensor_bytes.hpp"
#include "psw_control.grpc.pb.h"

namespace psw::runtime {

namespace {

ServiceError::Code to_service_code(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return ServiceError::Code::InvalidArgument;
    case grpc::StatusCode::NOT_FOUND: return ServiceError::Code::NotFound;
    case grpc::StatusCode::UNAVAILABLE: return ServiceError::Code::Unavailable;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return ServiceError::Code::ResourceExhausted;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return ServiceError::Code::DeadlineExceeded;
    case grpc::StatusCode::ALREADY_EXISTS: return ServiceError::Code::AlreadyExists;
    case grpc::StatusCode::CANCELLED: return ServiceError::Code::Cancelled;
    case grpc::StatusCode::FAILED_PRECONDITION: return ServiceError::Code::FailedPrecondition;
    default: return ServiceError::Code::Internal;
  }
}

std::string status_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "status " + std::to_string(static_cast<int>(code));
  }
}

TrainingStatus from_proto(const psw::control::TrainingStatusResponse& response) {
  TrainingStatus status;
  status.model = response.model();
  status.running = response.running();
  status.stopped = response.stopped();
  status.active = response.active();
  status.completed_steps = response.completed_steps();
  status.target_steps = response.target_steps();
  status.preemptions = response.preemptions();
  status.held_ns = response.held_ns();
  status.last_loss = response.last_loss();
  return status;
}

TensorSpec from_proto(const inference::ModelMetadataResponse::TensorMetadata& tensor) {
  return {tensor.name(), tensor.datatype(), {tensor.shape().begin(), tensor.shape().end()}};
}

// Note [Raw inputs sent in place].
constexpr const char* kModelInferMethod = "/inference.GRPCInferenceService/ModelInfer";

}  // namespace

struct Client::Impl {
  std::string target;
  std::int64_t max_message_bytes = 0;
  std::string authorization;  // Note [Remote access]: "Bearer TOKEN", or empty
  std::chrono::milliseconds timeout{60'000};
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference;
  std::unique_ptr<psw::control::Control::Stub> control;
  std::unique_ptr<grpc::internal::RpcMethod> model_infer;  // Note [Raw inputs sent in place]

  // Makes one call with a fresh context (a context serves a single call) and turns a failure
  // into a ServiceError.
  template <typename Call>
  void call(const char* what, Call&& rpc) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    const grpc::Status status = rpc(&context);
    if (status.ok()) return;
    const grpc::StatusCode code = status.error_code();
    std::string message = status.error_message();
    // UNAVAILABLE comes both from the transport (no server) and from a server that answers it
    // (a crashed worker): only the first is about reaching the server, and only then is the
    // channel not connected.
    if (code == grpc::StatusCode::UNAVAILABLE && channel->GetState(false) != GRPC_CHANNEL_READY) {
      message = "cannot reach the server at " + target + " (" + what + "): " + message;
    } else if (code == grpc::StatusCode::DEADLINE_EXCEEDED) {
      message = std::string(what) + ": no answer within " + std::to_string(timeout.count()) + " ms";
    } else if (to_service_code(code) == ServiceError::Code::Internal && code != grpc::StatusCode::INTERNAL) {
      message = status_name(code) + ": " + message;
    }
    throw ServiceError(to_service_code(code), message);
  }
};

Client::Client(const std::string& target, std::int64_t max_message_bytes) : impl_(std::make_unique<Impl>()) {
  if (target.empty()) throw InputError("the server target is empty (expected unix:/path or host:port)");
  if (max_message_bytes < 1 || max_message_bytes > INT_MAX) {
    throw InputError("max message size " + std::to_string(max_message_bytes) + " bytes is outside [1, " +
                     std::to_string(INT_MAX) + "] (gRPC's limit)");
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  arguments.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  // As the server (grpc_server.cpp): large frames and a large stream window for tensors.
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);
  arguments.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20);
  impl_->target = target;
  impl_->max_message_bytes = max_message_bytes;
  impl_->channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
  impl_->inference = inference::GRPCInferenceService::NewStub(impl_->channel);
  impl_->control = psw::control::Control::NewStub(impl_->channel);
  impl_->model_infer = std::make_unique<grpc::internal::RpcMethod>(
      kModelInferMethod, grpc::internal::RpcMethod::NORMAL_RPC, impl_->channel);
}

Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

void Client::set_token(std::string token) { impl_->authorization = token.empty() ? "" : bearer(token); }

Client Client::another_connection() const {
  Client other(impl_->target, impl_->max_message_bytes);
  other.impl_->authorization = impl_->authorization;
  other.impl_->timeout = impl_->timeout;
  return other;
}

void Client::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) throw InputError("a call timeout must be positive");
  impl_->timeout = timeout;
}

std::chrono::milliseconds Client::timeout() const { return impl_->timeout; }

const std::string& Client::target() const { return impl_->target; }

bool Client::server_live() {
  inference::ServerLiveResponse response;
  impl_->call("ServerLive", [&](grpc::ClientContext* context) {
    return impl_->inference->ServerLive(context, inference::ServerLiveRequest{}, &response);
  });
  return response.live();
}

bool Client::server_ready() {
  inference::ServerReadyResponse response;
  impl_->call("ServerReady", [&](grpc::ClientContext* context) {
    return impl_->inference->ServerReady(context, inference::ServerReadyRequest{}, &response);
  });
  return response.ready();
}

bool Client::model_ready(const std::string& model, const std::string& version) {
  inference::ModelReadyRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelReadyResponse response;
  impl_->call("ModelReady", [&](grpc::ClientContext* context) {
    return impl_->inference->ModelReady(context, request, &response);
  });
  return response.ready();
}

std::vector<ModelIndexEntry> Client::repository_index(bool ready_only) {
  inference::RepositoryIndexRequest request;
  request.set_ready(ready_only);
  inference::RepositoryIndexResponse response;
  impl_->call("RepositoryIndex", [&](grpc::ClientContext* context) {
    return impl_->inference->RepositoryIndex(context, request, &response);
  });
  std::vector<ModelIndexEntry> index;
  for (const auto& model : response.models()) index.push_back({model.name(), model.version(), model.state(), model.reason()});
  return index;
}

void Client::load_model(const std::string& name, const std::string& config) {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(name);
  if (!config.empty()) (*request.mutable_parameters())["config"].set_string_param(config);
  inference::RepositoryModelLoadResponse response;
  impl_->call("RepositoryModelLoad", [&](grpc::ClientContext* context) {
    return impl_->inference->RepositoryModelLoad(context, request, &response);
  });
}

void Client::unload_model(const std::string& name) {
  inference::RepositoryModelUnloadRequest request;
  request.set_model_name(name);
  inference::RepositoryModelUnloadResponse response;
  impl_->call("RepositoryModelUnload", [&](grpc::ClientContext* context) {
    return impl_->inference->RepositoryModelUnload(context, request, &response);
  });
}

ServerInfo Client::server_metadata() {
  inference::ServerMetadataResponse response;
  impl_->call("ServerMetadata", [&](grpc::ClientContext* context) {
    return impl_->inference->ServerMetadata(context, inference::ServerMetadataRequest{}, &response);
  });
  return {response.name(), response.version(), {response.extensions().begin(), response.extensions().end()}};
}

ModelInfo Client::model_metadata(const std::string& model, const std::string& version) {
  inference::ModelMetadataRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  impl_->call("ModelMetadata", [&](grpc::ClientContext* context) {
    return impl_->inference->ModelMetadata(context, request, &response);
  });
  ModelInfo info;
  info.name = response.name();
  info.platform = response.platform();
  info.versions.assign(response.versions().begin(), response.versions().end());
  for (const auto& input : response.inputs()) info.inputs.push_back(from_proto(input));
  for (const auto& output : response.outputs()) info.outputs.push_back(from_proto(output));
  info.ready = model_ready(model, version);
  return info;
}

InferResponse Client::infer(const InferRequest& request) { return infer(request, SharedMemoryPlacement{}); }

namespace {

// The extension's tensor parameters, as tritonclient sets them.
template <typename Tensor>
void set_shared_memory_parameters(Tensor* tensor, const SharedMemoryRef& where) {
  auto& parameters = *tensor->mutable_parameters();
  parameters["shared_memory_region"].set_string_param(where.region);
  parameters["shared_memory_byte_size"].set_int64_param(where.byte_size);
  if (where.offset != 0) parameters["shared_memory_offset"].set_int64_param(where.offset);
}

// Note [Raw inputs sent in place]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A raw input travels inside the ModelInfer message (raw_input_contents, field 7). Put into the
// message and serialised as usual, its bytes were copied twice in the client before the socket:
// into the message's string, then into gRPC's send buffer (ResNet-152's 4.8 MB input: two copies
// of 4.8 MB per request). Protobuf's encoding lets a message be written in pieces, a repeated
// field's entries appended after the rest in their order, so the request is sent as the
// serialised message without its raw contents, then per raw input the field's key and length
// and a slice that points at the caller's bytes, which the transport writes to the socket
// from where they are. The server parses the same message. The call is the one the generated
// stub makes (gRPC's blocking unary call, which generated code calls by its internal name), with
// the bytes as its request: gRPC's generic stub, the public way to send bytes, completes a call
// in two batches on a queue of its own and cost a small request 5-30% more.

// The serialised `message` followed by `raw` as its raw_input_contents entries, in order; the
// bytes of `raw` are not copied, so they must outlive the call.
grpc::ByteBuffer request_with_raw_contents(const inference::ModelInferRequest& message,
                                           const std::vector<std::string_view>& raw) {
  using google::protobuf::io::CodedOutputStream;
  std::vector<grpc::Slice> slices;
  slices.emplace_back(message.SerializeAsString());
  constexpr std::uint32_t kKey = (inference::ModelInferRequest::kRawInputContentsFieldNumber << 3) | 2;  // bytes
  for (const std::string_view bytes : raw) {
    std::uint8_t prefix[16];
    std::uint8_t* end = CodedOutputStream::WriteVarint32ToArray(kKey, prefix);
    end = CodedOutputStream::WriteVarint64ToArray(bytes.size(), end);
    slices.emplace_back(prefix, static_cast<std::size_t>(end - prefix));  // copied: a few bytes
    if (!bytes.empty()) slices.emplace_back(bytes.data(), bytes.size(), grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace

InferResponse Client::infer(const InferRequest& request, const SharedMemoryPlacement& placement) {
  inference::ModelInferRequest message;
  message.set_model_name(request.model);
  message.set_model_version(request.version);
  message.set_id(request.id);
  std::vector<std::string_view> raw;
  for (const TensorData& input : request.inputs) {
    auto* tensor = message.add_inputs();
    tensor->set_name(input.name);
    tensor->set_datatype(input.datatype);
    for (const std::int64_t dim : input.shape) tensor->add_shape(dim);
    if (const auto placed = placement.inputs.find(input.name); placed != placement.inputs.end()) {
      set_shared_memory_parameters(tensor, placed->second);  // no raw entry: the protocol's rule
      continue;
    }
    raw.push_back(input.contents());  // Note [Raw inputs sent in place]: not copied
  }
  for (const auto& output : placement.outputs) {
    auto* wanted = message.add_outputs();
    wanted->set_name(output.name);
    if (output.shared_memory) set_shared_memory_parameters(wanted, *output.shared_memory);
  }
  inference::ModelInferResponse response;
  const grpc::ByteBuffer sent = request_with_raw_contents(message, raw);
  const std::int64_t sent_ns = steady_now_ns();  // Note [Protocol split]
  impl_->call("ModelInfer", [&](grpc::ClientContext* context) {
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, inference::ModelInferResponse, grpc::ByteBuffer,
                                             google::protobuf::MessageLite>(impl_->channel.get(), *impl_->model_infer,
                                                                            context, sent, &response);
  });
  if (response.raw_output_contents_size() != response.outputs_size()) {
    throw ServiceError(ServiceError::Code::Internal,
                       "the server answered " + std::to_string(response.outputs_size()) + " outputs with " +
                           std::to_string(response.raw_output_contents_size()) +
                           " raw_output_contents entries; this client reads raw contents only");
  }
  InferResponse result;
  result.model = response.model_name();
  result.version = response.model_version();
  result.id = response.id();
  // Note [Request path]: the server's times, where it sends them (int64 as it writes them).
  const auto& parameters = response.parameters();
  auto time_parameter = [&parameters](const char* key) -> std::int64_t {
    const auto it = parameters.find(key);
    return it != parameters.end() && it->second.parameter_choice_case() == inference::InferParameter::kInt64Param
               ? it->second.int64_param()
               : 0;
  };
  result.server_ns = time_parameter("psw_server_ns");
  result.engine_ns = time_parameter("psw_engine_ns");
  result.front_end_received_ns = time_parameter("psw_received_ns");
  result.front_end_replied_ns = time_parameter("psw_replied_ns");
  result.client_sent_ns = sent_ns;
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& output = response.outputs(i);
    result.outputs.push_back(TensorData{output.name(), output.datatype(),
                                        {output.shape().begin(), output.shape().end()},
                                        std::move(*response.mutable_raw_output_contents(i))});
  }
  return result;
}

TrainingStatus Client::start_training(const std::string& model, std::int64_t steps) {
  psw::control::StartTrainingRequest request;
  request.set_model(model);
  request.set_steps(steps);
  psw::control::TrainingStatusResponse response;
  impl_->call("StartTraining", [&](grpc::ClientContext* context) {
    return impl_->control->StartTraining(context, request, &response);
  });
  return from_proto(response);
}

TrainingStatus Client::stop_training(const std::string& model) {
  psw::control::StopTrainingRequest request;
  request.set_model(model);
  psw::control::TrainingStatusResponse response;
  impl_->call("StopTraining", [&](grpc::ClientContext* context) {
    return impl_->control->StopTraining(context, request, &response);
  });
  return from_proto(response);
}

TrainingCheckpointStatus Client::checkpoint_training(const std::string& model, const std::string& path) {
  psw::control::CheckpointTrainingRequest request;
  request.set_model(model);
  request.set_path(path);
  psw::control::CheckpointTrainingResponse response;
  impl_->call("CheckpointTraining", [&](grpc::ClientContext* context) {
    return impl_->control->CheckpointTraining(context, request, &response);
  });
  return {response.model(), response.path(), response.completed_steps(), response.loss(), response.bytes()};
}

GenerateResponse Client::generate(const GenerateRequest& request, const TokenSink& on_token) {
  psw::control::GenerateRequest call;
  call.set_model(request.model);
  call.set_id(request.id);
  for (const std::int64_t id : request.input_ids) call.add_input_ids(id);
  call.set_max_tokens(request.max_tokens);
  GenerateResponse answer;
  bool done = false;
  impl_->call("Generate", [&](grpc::ClientContext* context) {
    std::unique_ptr<grpc::ClientReader<psw::control::GenerateResponse>> reader =
        impl_->control->Generate(context, call);
    psw::control::GenerateResponse message;
    while (reader->Read(&message)) {
      if (!message.done()) {
        if (on_token) on_token({message.index(), message.output_id()});
        continue;
      }
      done = true;
      answer = {message.model(),         message.id(),       {message.output_ids().begin(), message.output_ids().end()},
                message.prompt_bucket(), message.switched(), message.ttft_ns(),
                message.tpot_ns(),       message.server_ns(),       message.worker()};
    }
    return reader->Finish();
  });
  if (!done) throw ServiceError(ServiceError::Code::Internal, "the server ended the generation without its answer");
  return answer;
}

TrainingStatus Client::training_status(const std::string& model) {
  psw::control::TrainingStatusRequest request;
  request.set_model(model);
  psw::control::TrainingStatusResponse response;
  impl_->call("TrainingStatus", [&](grpc::ClientContext* context) {
    return impl_->control->TrainingStatus(context, request, &response);
  });
  return from_proto(response);
}

void Client::register_system_shared_memory(const std::string& name, const std::string& key, std::uint64_t byte_size,
                                           std::uint64_t offset) {
  inference::SystemSharedMemoryRegisterRequest request;
  request.set_name(name);
  request.set_key(key);
  request.set_offset(offset);
  request.set_byte_size(byte_size);
  inference::SystemSharedMemoryRegisterResponse response;
  impl_->call("SystemSharedMemoryRegister", [&](grpc::ClientContext* context) {
    return impl_->inference->SystemSharedMemoryRegister(context, request, &response);
  });
}

void Client::unregister_system_shared_memory(const std::string& name) {
  inference::SystemSharedMemoryUnregisterRequest request;
  request.set_name(name);
  inference::SystemSharedMemoryUnregisterResponse response;
  impl_->call("SystemSharedMemoryUnregister", [&](grpc::ClientContext* context) {
    return impl_->inference->SystemSharedMemoryUnregister(context, request, &response);
  });
}

std::vector<SharedMemoryRegionInfo> Client::system_shared_memory_status(const std::string& name) {
  inference::SystemSharedMemoryStatusRequest request;
  request.set_name(name);
  inference::SystemSharedMemoryStatusResponse response;
  impl_->call("SystemSharedMemoryStatus", [&](grpc::ClientContext* context) {
    return impl_->inference->SystemSharedMemoryStatus(context, request, &response);
  });
  std::vector<SharedMemoryRegionInfo> regions;
  for (const auto& [name_, region] : response.regions()) {
    regions.push_back({region.name(), region.key(), region.offset(), region.byte_size()});
  }
  std::sort(regions.begin(), regions.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return regions;
}

std::string Client::metrics() {
  psw::control::MetricsResponse response;
  impl_->call("Metrics", [&](grpc::ClientContext* context) {
    return impl_->control->Metrics(context, psw::control::MetricsRequest{}, &response);
  });
  return std::move(*response.mutable_text());
}

// --- SharedMemoryStaging -------------------------------------------------------------------------

namespace {

constexpr std::size_t kAlignment = 64;  // a cache line: no tensor shares one with another

std::size_t aligned(std::size_t offset) { return (offset + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

SharedMemoryStaging::SharedMemoryStaging(Client& client, const ModelInfo& model, const InferRequest& request)
    : client_(client), region_(unique_shared_memory_key("psw-client").substr(1)) {
  std::size_t end = 0;
  std::int64_t batch = 1;
  for (const TensorData& input : request.inputs) {
    const std::size_t size = input.contents().size();
    placement_.inputs[input.name] = {region_, static_cast<std::int64_t>(end), static_cast<std::int64_t>(size)};
    end = aligned(end + size);
  }
  // The batch of the outputs: that of the first input, where the model leaves it free.
  if (!model.inputs.empty() && !model.inputs[0].shape.empty() && model.inputs[0].shape[0] < 0 &&
      !request.inputs.empty() && !request.inputs[0].shape.empty()) {
    batch = request.inputs[0].shape[0];
  }
  for (const TensorSpec& spec : model.outputs) {
    SharedMemoryPlacement::Output output{spec.name, std::nullopt};
    std::optional<std::int64_t> bytes;
    try {
      bytes = tensor_byte_count("output '" + spec.name + "'", spec.datatype, concrete_shape(spec, batch));
    } catch (const std::exception&) {
      bytes.reset();  // a size the metadata does not fix: the output comes back raw
    }
    if (bytes && *bytes > 0) {
      output.shared_memory = SharedMemoryRef{region_, static_cast<std::int64_t>(end), *bytes};
      end = aligned(end + static_cast<std::size_t>(*bytes));
    }
    placement_.outputs.push_back(std::move(output));
  }
  object_ = std::make_unique<SharedMemoryObject>("/" + region_, std::max<std::size_t>(end, 1));
  client_.register_system_shared_memory(region_, object_->key(), object_->size());
  object_->unlink_name();  // the server has it mapped: the name is no longer needed
  try {
    write_inputs(request);
  } catch (...) {
    client_.unregister_system_shared_memory(region_);
    throw;
  }
}

SharedMemoryStaging::~SharedMemoryStaging() {
  try {
    client_.unregister_system_shared_memory(region_);
  } catch (...) {
    // The server may be gone or unreachable; it unmaps every region when it stops.
  }
}

void SharedMemoryStaging::write_inputs(const InferRequest& request) {
  for (const TensorData& input : request.inputs) {
    const auto placed = placement_.inputs.find(input.name);
    const std::string_view bytes = input.contents();
    if (placed == placement_.inputs.end() || static_cast<std::int64_t>(bytes.size()) != placed->second.byte_size) {
      throw InputError("input '" + input.name + "' of " + std::to_string(bytes.size()) +
                       " bytes does not fit the shared memory laid out for this model and batch");
    }
    std::memcpy(object_->data() + placed->second.offset, bytes.data(), bytes.size());
  }
}

void SharedMemoryStaging::read_outputs(InferResponse& response) const {
  for (TensorData& output : response.outputs) {
    for (const auto& placed : placement_.outputs) {
      if (placed.name != output.name || !placed.shared_memory) continue;
      const std::int64_t size = tensor_byte_count("output '" + output.name + "'", output.datatype, output.shape);
      if (size > placed.shared_memory->byte_size) {
        throw ServiceError(ServiceError::Code::Internal, "the server answered output '" + output.name + "' of " +
                                                             std::to_string(size) + " bytes, more than its region holds");
      }
      output.bytes.assign(object_->data() + placed.shared_memory->offset, static_cast<std::size_t>(size));
      break;
    }
  }
}

}  // namespace psw::runtime
