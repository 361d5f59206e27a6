// The gRPC front end and the client against a fake service (fake_inference_service.hpp) on a
// Unix socket in a fresh private directory: the protocol's answers and errors, and the
// endpoint rules of DESIGN.md §5 (socket mode, directory ownership, stale sockets, wildcards).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_inference_service.hpp"
#include "grpc_test_support.hpp"
#include "grpc_service.grpc.pb.h"
#include "psw/common/error.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/server/starting_service.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"
#include "../common/input_error.hpp"

namespace psw::runtime {
namespace {

namespace fs = std::filesystem;
using Code = ServiceError::Code;
using namespace grpc_test_support;

std::vector<float> bytes_to_floats(const std::string& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

InferRequest double_request(std::int64_t batch, const std::string& model = "double") {
  std::vector<float> values(static_cast<std::size_t>(batch * 4));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 1.0f;
  return InferRequest{model, "", "request-7", {TensorData{"x", "FP32", {batch, 4}, floats_to_bytes(values)}}};
}

using test_support::input_error_of;

class GrpcFrontEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/psw-grpc-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;  // mkdtemp makes it 0700, as a socket directory must be
    socket_ = (dir_ / "psw.sock").string();
  }

  void TearDown() override {
    server_.reset();
    std::error_code ignored;
    fs::permissions(dir_, fs::perms::owner_all, ignored);
    fs::remove_all(dir_, ignored);
  }

  void start() { server_ = std::make_unique<GrpcFrontEnd>(service_, Endpoint{socket_, ""}, kMaxMessage); }
  Client client() { return Client(server_->target()); }

  // A raw protocol stub, for requests the C++ Client never builds.
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub() {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  inference::ModelInferRequest raw_double_request() {
    inference::ModelInferRequest request;
    request.set_model_name("double");
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(2);
    input->add_shape(4);
    request.add_raw_input_contents(floats_to_bytes(std::vector<float>(8, 1.5f)));
    return request;
  }

  grpc::Status send(const inference::ModelInferRequest& request, inference::ModelInferResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub()->ModelInfer(&context, request, response);
  }

  fs::path dir_;
  std::string socket_;
  testing::FakeInferenceService service_;
  std::unique_ptr<GrpcFrontEnd> server_;
};

TEST_F(GrpcFrontEndTest, HealthMetadataAndInferRoundTrip) {
  start();
  EXPECT_EQ(server_->target(), "unix:" + socket_);
  Client c = client();
  EXPECT_TRUE(c.server_live());
  EXPECT_TRUE(c.server_ready());
  const ServerInfo server = c.server_metadata();
  EXPECT_EQ(server.name, "psw");
  EXPECT_EQ(server.version, "0.1");
  EXPECT_EQ(server.extensions, std::vector<std::string>{"system_shared_memory"});  // on the Unix socket

  EXPECT_TRUE(c.model_ready("double"));
  EXPECT_FALSE(c.model_ready("unready"));
  const ModelInfo model = c.model_metadata("double");
  EXPECT_EQ(model.name, "double");
  EXPECT_EQ(model.platform, "pytorch_libtorch");
  EXPECT_EQ(model.versions, std::vector<std::string>{"1"});
  ASSERT_EQ(model.inputs.size(), 1u);
  EXPECT_EQ(model.inputs[0].name, "x");
  EXPECT_EQ(model.inputs[0].datatype, "FP32");
  EXPECT_EQ(model.inputs[0].shape, (std::vector<std::int64_t>{-1, 4}));
  ASSERT_EQ(model.outputs.size(), 1u);
  EXPECT_EQ(model.outputs[0].name, "y");
  EXPECT_TRUE(model.ready);

  const InferRequest request = double_request(3);
  const InferResponse response = c.infer(request);
  EXPECT_EQ(response.model, "double");
  EXPECT_EQ(response.version, "1");
  EXPECT_EQ(response.id, "request-7");
  ASSERT_EQ(response.outputs.size(), 1u);
  EXPECT_EQ(response.outputs[0].name, "y");
  EXPECT_EQ(response.outputs[0].datatype, "FP32");
  EXPECT_EQ(response.outputs[0].shape, (std::vector<std::int64_t>{3, 4}));
  const std::vector<float> in = bytes_to_floats(request.inputs[0].bytes);
  const std::vector<float> out = bytes_to_floats(response.outputs[0].bytes);
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], 2 * in[i]) << "element " << i;
}

// Note [Raw inputs sent in place] (client.cpp): the client appends a raw input to the message
// as slices of the caller's bytes; a large one (most of the server's 1 MiB limit, 15 of gRPC's
// 64 KB frames) arrives whole and in order, and the message's other fields with it.
TEST_F(GrpcFrontEndTest, ALargeRawInputSentInPlaceArrivesWhole) {
  start();
  Client c = client();
  const InferRequest request = double_request(60'000);  // 960,000 bytes of distinct values
  const InferResponse response = c.infer(request);
  EXPECT_EQ(response.id, "request-7");
  ASSERT_EQ(response.outputs.size(), 1u);
  EXPECT_EQ(response.outputs[0].shape, (std::vector<std::int64_t>{60'000, 4}));
  const std::vector<float> in = bytes_to_floats(request.inputs[0].bytes);
  const std::vector<float> out = bytes_to_floats(response.outputs[0].bytes);
  ASSERT_EQ(out.size(), in.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < in.size(); ++i) wrong += out[i] != 2 * in[i];
  EXPECT_EQ(wrong, 0u);
}

// How many of `response`'s output values are not twice `request`'s input values (the fake's
// "double"), or -1 when the sizes differ.
std::int64_t doubled_wrongly(const InferRequest& request, const InferResponse& response) {
  if (response.outputs.size() != 1) return -1;
  const std::vector<float> in = bytes_to_floats(request.inputs[0].bytes);
  const std::vector<float> out = bytes_to_floats(std::string(response.outputs[0].contents()));
  if (out.size() != in.size()) return -1;
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < in.size(); ++i) wrong += out[i] != 2 * in[i];
  return wrong;
}

// Note [Raw inputs received in place]: with a staging, a raw input reaches the service in a
// slot of the region the service was told of at start, whole; one larger than a slot keeps its
// own bytes.
TEST_F(GrpcFrontEndTest, RawInputsReachTheServiceInTheStagingItWasToldOf) {
  InputStaging staging(2, std::size_t{1} << 18);
  server_ = std::make_unique<GrpcFrontEnd>(service_, Endpoint{socket_, ""}, kMaxMessage, 0, &staging);
  const std::vector<std::uint64_t> told = service_.regions_told();
  ASSERT_EQ(told.size(), 1u);
  Client c = client();
  for (const std::int64_t batch : {3, 10'000, 16'384}) {  // 48 bytes, 160,000, exactly a slot (256 KiB)
    const InferRequest request = double_request(batch);
    EXPECT_EQ(doubled_wrongly(request, c.infer(request)), 0) << batch;
    EXPECT_EQ(service_.last_input_region(), told[0]) << batch;
  }
  for (const std::int64_t batch : {16'385, 60'000}) {  // 16 bytes more than a slot, 960,000 bytes
    const InferRequest large = double_request(batch);
    EXPECT_EQ(doubled_wrongly(large, c.infer(large)), 0) << batch;
    EXPECT_FALSE(service_.last_input_borrowed()) << batch;
    EXPECT_EQ(service_.last_input_region(), 0u) << batch;
  }  server_.reset();  // before its staging
}

// A request that finds every slot taken keeps its input's bytes itself, and a slot is free
// again once the request holding it has been answered.
TEST_F(GrpcFrontEndTest, ARequestFindingEverySlotTakenKeepsItsOwnBytes) {
  InputStaging one_slot(1, std::size_t{1} << 20);
  server_ = std::make_unique<GrpcFrontEnd>(service_, Endpoint{socket_, ""}, kMaxMessage, 0, &one_slot);
  const std::uint64_t staging = service_.regions_told().at(0);
  service_.hold_slow();
  const InferRequest slow = double_request(5, "slow");
  std::int64_t slow_wrong = -2;
  std::thread holder([&] {
    Client own(server_->target());
    slow_wrong = doubled_wrongly(slow, own.infer(slow));
  });
  for (int i = 0; i < 1000 && service_.requests_received("slow") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(service_.requests_received("slow"), 1);  // holding the only slot
  Client c = client();
  const InferRequest meanwhile = double_request(7);
  EXPECT_EQ(doubled_wrongly(meanwhile, c.infer(meanwhile)), 0);
  EXPECT_EQ(service_.last_input_region(), 0u);  // no slot: its own bytes
  service_.release_slow();
  holder.join();
  EXPECT_EQ(slow_wrong, 0);
  const InferRequest after = double_request(9);
  EXPECT_EQ(doubled_wrongly(after, c.infer(after)), 0);
  EXPECT_EQ(service_.last_input_region(), staging);  // the slot came back  server_.reset();  // before its staging
}

// The handler splits the message itself: raw contents before the other fields (any order is a
// valid message) still arrive whole; a truncated or garbled message is INVALID_ARGUMENT.
TEST_F(GrpcFrontEndTest, ModelInferMessagesAreSplitInAnyFieldOrderAndMalformedOnesRefused) {
  InputStaging staging(1, std::size_t{1} << 20);
  server_ = std::make_unique<GrpcFrontEnd>(service_, Endpoint{socket_, ""}, kMaxMessage, 0, &staging);
  inference::ModelInferRequest whole = raw_double_request();
  inference::ModelInferRequest raw_only;
  raw_only.add_raw_input_contents(whole.raw_input_contents(0));
  whole.clear_raw_input_contents();
  const std::string raw_first = raw_only.SerializeAsString() + whole.SerializeAsString();
  auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  const grpc::internal::RpcMethod method("/inference.GRPCInferenceService/ModelInfer",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  const auto call = [&](const std::string& bytes, inference::ModelInferResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice slice(bytes);
    const grpc::ByteBuffer request(&slice, 1);
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, inference::ModelInferResponse, grpc::ByteBuffer,
                                             google::protobuf::MessageLite>(channel.get(), method, &context, request,
                                                                            response);
  };
  inference::ModelInferResponse response;
  const grpc::Status ok = call(raw_first, &response);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(bytes_to_floats(response.raw_output_contents(0)), std::vector<float>(8, 3.0f));
  EXPECT_EQ(service_.last_input_region(), service_.regions_told().at(0));

  for (const std::string& bad : {raw_first.substr(0, raw_first.size() - 3),  // the last field cut short
                                 raw_first.substr(0, 10),                     // inside the raw entry
                                 std::string("\x0f\x01", 2),                // wire type 7
                                 std::string("\x00", 1)}) {                  // key 0
    inference::ModelInferResponse refused;
    const grpc::Status status = call(bad, &refused);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("not a valid message"), std::string::npos) << status.error_message();
  }
  const InferRequest still = double_request(2);  // the server is still up
  EXPECT_EQ(doubled_wrongly(still, client().infer(still)), 0);  server_.reset();  // before its staging
}

// Note [Repository index]: every listed model with its state; `ready` only the ready ones; a
// named repository is not this server's.
TEST_F(GrpcFrontEndTest, TheRepositoryIndexListsEveryModelWithItsState) {
  start();
  Client c = client();
  const std::vector<ModelIndexEntry> index = c.repository_index();
  ASSERT_EQ(index.size(), 5u);
  EXPECT_EQ(index[0], (ModelIndexEntry{"double", "1", "READY", ""}));
  EXPECT_EQ(index[2].name, "unready");
  EXPECT_EQ(index[2].state, "UNAVAILABLE");
  EXPECT_NE(index[2].reason.find("not ready"), std::string::npos) << index[2].reason;
  const std::vector<ModelIndexEntry> ready = c.repository_index(/*ready_only=*/true);
  ASSERT_EQ(ready.size(), 4u);
  for (const auto& e : ready) EXPECT_EQ(e.state, "READY") << e.name;
  // A raw call naming a repository: NOT_FOUND.
  auto channel = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  grpc::ClientContext context;
  inference::RepositoryIndexRequest request;
  request.set_repository_name("models");
  inference::RepositoryIndexResponse response;
  const grpc::Status status = stub->RepositoryIndex(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("unknown repository 'models'"), std::string::npos) << status.error_message();
}

// Note [Protocol split]: the front end stamps its handler's entry and its response's end on the
// host's steady clock, and the client its call's start; on one host they are in order.
TEST_F(GrpcFrontEndTest, TheResponseCarriesTheFrontEndsStampsInOrderWithTheClients) {
  start();
  Client c = client();
  const std::int64_t before = steady_now_ns();
  const InferResponse response = c.infer(double_request(3));
  const std::int64_t after = steady_now_ns();
  EXPECT_LE(before, response.client_sent_ns);
  EXPECT_LE(response.client_sent_ns, response.front_end_received_ns);
  EXPECT_LE(response.front_end_received_ns, response.front_end_replied_ns);
  EXPECT_LE(response.front_end_replied_ns, after);
  EXPECT_GT(response.front_end_received_ns, 0);
}

// Note [Generate call] over gRPC: the tokens in order as they are told, then the answer; an
// error before the first token is the call's status, one after it too (the tokens already
// heard stay heard).
TEST_F(GrpcFrontEndTest, GenerateStreamsTheTokensThenTheAnswer) {
  start();
  Client c = client();
  GenerateRequest request;
  request.model = "double";
  request.id = "g-1";
  request.input_ids = {3, 9};
  request.max_tokens = 4;
  std::vector<GeneratedToken> heard;
  const GenerateResponse r = c.generate(request, [&](const GeneratedToken& t) { heard.push_back(t); });
  EXPECT_EQ(r.model, "double");
  EXPECT_EQ(r.id, "g-1");
  EXPECT_EQ(r.output_ids, (std::vector<std::int64_t>{10, 11, 12, 13}));
  EXPECT_EQ(r.prompt_bucket, 16);
  EXPECT_TRUE(r.switched);
  EXPECT_EQ(r.ttft_ns, 1'000'000);
  EXPECT_EQ(r.tpot_ns, 250'000);
  EXPECT_EQ(r.worker, 1);
  ASSERT_EQ(heard.size(), 4u);
  for (std::size_t i = 0; i < heard.size(); ++i) {
    EXPECT_EQ(heard[i].index, static_cast<std::int64_t>(i));
    EXPECT_EQ(heard[i].id, r.output_ids[i]);
  }
  request.model = "gpt2";
  try {
    c.generate(request);
    ADD_FAILURE() << "a model that does not generate answered";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("model 'gpt2' does not generate"), std::string::npos) << e.what();
  }
  request.model = "unavailable";
  heard.clear();
  try {
    c.generate(request, [&](const GeneratedToken& t) { heard.push_back(t); });
    ADD_FAILURE() << "a generation that failed after its first token answered";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), Code::Unavailable);
    EXPECT_NE(std::string(e.what()).find("worker 0 crashed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(heard.size(), 1u);
}

TEST_F(GrpcFrontEndTest, UnknownModelIsNotFound) {
  start();
  Client c = client();
  std::string message;
  EXPECT_EQ(error_code_of([&] { c.model_metadata("nope"); }, &message), Code::NotFound);
  EXPECT_NE(message.find("unknown model 'nope'"), std::string::npos) << message;
  EXPECT_EQ(error_code_of([&] { c.model_ready("nope"); }), Code::NotFound);
  EXPECT_EQ(error_code_of([&] { c.model_metadata("double", "7"); }), Code::NotFound);
  EXPECT_EQ(error_code_of([&] { c.infer(double_request(1, "nope")); }), Code::NotFound);
}

TEST_F(GrpcFrontEndTest, MalformedTensorsAreInvalidArgument) {
  start();
  Client c = client();
  std::string message;

  InferRequest unknown_type = double_request(1);
  unknown_type.inputs[0].datatype = "FP99";
  EXPECT_EQ(error_code_of([&] { c.infer(unknown_type); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("unsupported datatype 'FP99'"), std::string::npos) << message;

  // A datatype the protocol knows but the model does not take: the service's refusal.
  InferRequest wrong_type = double_request(1);
  wrong_type.inputs[0].datatype = "INT32";
  EXPECT_EQ(error_code_of([&] { c.infer(wrong_type); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("FP32, not INT32"), std::string::npos) << message;

  InferRequest short_bytes = double_request(2);
  short_bytes.inputs[0].bytes.pop_back();
  EXPECT_EQ(error_code_of([&] { c.infer(short_bytes); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("31 bytes of raw contents, but FP32 [2, 4] needs 32"), std::string::npos) << message;

  InferRequest negative = double_request(1);
  negative.inputs[0].shape = {-1, 4};
  EXPECT_EQ(error_code_of([&] { c.infer(negative); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("negative dimension"), std::string::npos) << message;

  InferRequest overflowing = double_request(1);
  overflowing.inputs[0].shape = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  EXPECT_EQ(error_code_of([&] { c.infer(overflowing); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("overflows"), std::string::npos) << message;

  InferRequest no_model = double_request(1);
  no_model.model.clear();
  EXPECT_EQ(error_code_of([&] { c.infer(no_model); }), Code::InvalidArgument);
}

// Note [Typed contents]: a tensor's values sent typed are served as if sent raw; the wrong
// field, the wrong count, a value out of its datatype's range, a datatype without typed form and
// a mix of typed and raw are refused, naming the input.
TEST_F(GrpcFrontEndTest, TypedContentsAreServedAndMalformedOnesRefused) {
  start();
  inference::ModelInferResponse response;

  inference::ModelInferRequest typed = raw_double_request();
  typed.clear_raw_input_contents();
  for (int i = 0; i < 8; ++i) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.5f);
  grpc::Status status = send(typed, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(response.raw_output_contents(0), floats_to_bytes(std::vector<float>(8, 3.0f)));

  const auto refused = [&](const inference::ModelInferRequest& request, const std::string& part) {
    const grpc::Status refusal = send(request, &response);
    EXPECT_EQ(refusal.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << part;
    EXPECT_NE(refusal.error_message().find(part), std::string::npos) << refusal.error_message();
  };
  inference::ModelInferRequest both = typed;
  both.add_raw_input_contents(floats_to_bytes(std::vector<float>(8, 1.5f)));
  refused(both, "input 'x' carries typed `contents` and the request has raw_input_contents");

  inference::ModelInferRequest wrong_field = raw_double_request();
  wrong_field.clear_raw_input_contents();
  for (int i = 0; i < 8; ++i) wrong_field.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
  refused(wrong_field, "input 'x' is FP32 but carries int64_contents; its values go in fp32_contents");

  inference::ModelInferRequest short_of_one = typed;
  short_of_one.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents()->RemoveLast();
  refused(short_of_one, "input 'x': 7 values in fp32_contents, but its shape holds 8");

  inference::ModelInferRequest too_big = raw_double_request();
  too_big.clear_raw_input_contents();
  too_big.mutable_inputs(0)->set_datatype("INT8");
  for (int i = 0; i < 8; ++i) too_big.mutable_inputs(0)->mutable_contents()->add_int_contents(i == 5 ? 300 : 1);
  refused(too_big, "input 'x': the value 300 does not fit INT8");

  inference::ModelInferRequest half = raw_double_request();
  half.clear_raw_input_contents();
  half.mutable_inputs(0)->set_datatype("FP16");
  for (int i = 0; i < 8; ++i) half.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
  refused(half, "input 'x': the protocol has no typed contents for FP16");

  inference::ModelInferRequest missing = raw_double_request();
  missing.clear_raw_input_contents();
  status = send(missing, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("1 inputs but 0 raw_input_contents"), std::string::npos)
      << status.error_message();

  inference::ModelInferRequest unknown_output = raw_double_request();
  unknown_output.add_outputs()->set_name("z");
  status = send(unknown_output, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("no output 'z'"), std::string::npos) << status.error_message();

  // Asking for the same output twice answers it twice, with its bytes both times.
  inference::ModelInferRequest twice = raw_double_request();
  twice.add_outputs()->set_name("y");
  twice.add_outputs()->set_name("y");
  status = send(twice, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  EXPECT_EQ(response.raw_output_contents(0), floats_to_bytes(std::vector<float>(8, 3.0f)));
  EXPECT_EQ(response.raw_output_contents(1), response.raw_output_contents(0));
}

// Note [Deadlines]: the client's deadline and a way to see it cancel reach the service.
TEST_F(GrpcFrontEndTest, TheCallersDeadlineReachesTheService) {
  start();
  inference::ModelInferResponse response;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    ASSERT_TRUE(stub()->ModelInfer(&context, raw_double_request(), &response).ok());
  }
  ASSERT_TRUE(service_.last_time_left().has_value());
  EXPECT_GT(*service_.last_time_left(), std::chrono::seconds(25));
  // Not more than the caller gave, give or take gRPC's own clock: the server sets the deadline
  // from the timeout header on its cached time, which was seen 99 ms late in one run of this test.
  EXPECT_LE(*service_.last_time_left(), std::chrono::milliseconds(30'250));
  EXPECT_TRUE(service_.last_cancellable());
  {
    grpc::ClientContext context;  // no deadline
    ASSERT_TRUE(stub()->ModelInfer(&context, raw_double_request(), &response).ok());
  }
  EXPECT_FALSE(service_.last_time_left().has_value());
}

TEST_F(GrpcFrontEndTest, OversizedMessageIsResourceExhausted) {
  start();
  Client c = client();  // its own limit (256 MiB) lets the request leave; the server's is 1 MiB
  std::string message;
  EXPECT_EQ(error_code_of([&] { c.infer(double_request(70'000)); }, &message), Code::ResourceExhausted)
      << message;
  // The client's own limit refuses before sending.
  Client small(server_->target(), 1024);
  EXPECT_EQ(error_code_of([&] { small.infer(double_request(100)); }), Code::ResourceExhausted);
  EXPECT_TRUE(c.server_live());
}

TEST_F(GrpcFrontEndTest, ServiceErrorsReachTheClientWithCodeAndMessage) {
  start();
  Client c = client();
  std::string message;
  EXPECT_EQ(error_code_of([&] { c.infer(double_request(1, "unavailable")); }, &message), Code::Unavailable);
  EXPECT_EQ(message, "worker 0 crashed");
  EXPECT_EQ(error_code_of([&] { c.infer(double_request(1, "throws")); }, &message), Code::Internal);
  EXPECT_EQ(message, "boom in the service");
  EXPECT_TRUE(c.server_live());  // neither took the server down
}

TEST_F(GrpcFrontEndTest, ClientGivingUpMidRequestLeavesServerServing) {
  service_.slow_delay = std::chrono::milliseconds(500);
  start();
  Client impatient = client();
  impatient.set_timeout(std::chrono::milliseconds(50));
  std::string message;
  EXPECT_EQ(error_code_of([&] { impatient.infer(double_request(1, "slow")); }, &message), Code::DeadlineExceeded)
      << message;
  Client c = client();
  const InferResponse response = c.infer(double_request(2));
  ASSERT_EQ(response.outputs.size(), 1u);
  EXPECT_EQ(bytes_to_floats(response.outputs[0].bytes)[1], 2 * -0.75f);
}

TEST_F(GrpcFrontEndTest, TrainingControlAndMetrics) {
  start();
  Client c = client();
  TrainingStatus status = c.start_training("trainer", 100);
  EXPECT_EQ(status.model, "trainer");
  EXPECT_TRUE(status.running);
  EXPECT_EQ(status.target_steps, 100);
  status = c.training_status("trainer");
  status = c.training_status("trainer");
  EXPECT_EQ(status.completed_steps, 2);
  EXPECT_DOUBLE_EQ(status.last_loss, 0.5);
  status = c.stop_training("trainer");
  EXPECT_FALSE(status.running);
  EXPECT_TRUE(status.stopped);
  EXPECT_EQ(status.completed_steps, 2);
  EXPECT_EQ(error_code_of([&] { c.start_training("trainer", -1); }), Code::InvalidArgument);
  EXPECT_EQ(error_code_of([&] { c.training_status("nope"); }), Code::NotFound);
  const TrainingCheckpointStatus checkpoint = c.checkpoint_training("trainer", "/tmp/job.safetensors");
  EXPECT_EQ(checkpoint.model, "trainer");
  EXPECT_EQ(checkpoint.path, "/tmp/job.safetensors");
  EXPECT_EQ(checkpoint.completed_steps, 2);
  EXPECT_DOUBLE_EQ(checkpoint.loss, 0.5);
  EXPECT_EQ(checkpoint.bytes, 1234);
  EXPECT_EQ(error_code_of([&] { c.checkpoint_training("trainer"); }), Code::InvalidArgument);
  EXPECT_EQ(error_code_of([&] { c.checkpoint_training("nope", "/tmp/x"); }), Code::NotFound);

  c.infer(double_request(1));
  const std::string metrics = c.metrics();
  EXPECT_NE(metrics.find("# TYPE psw_requests_total counter"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("psw_requests_total{model=\"double\"} 1"), std::string::npos) << metrics;
}

TEST_F(GrpcFrontEndTest, UnreachableServerIsUnavailable) {
  Client c("unix:" + socket_);
  c.set_timeout(std::chrono::milliseconds(2000));
  std::string message;
  EXPECT_EQ(error_code_of([&] { c.server_live(); }, &message), Code::Unavailable);
  EXPECT_NE(message.find("cannot reach the server at unix:" + socket_), std::string::npos) << message;
}

TEST_F(GrpcFrontEndTest, SocketHasMode0600AndIsRemovedAfterShutdown) {
  start();
  struct stat info {};
  ASSERT_EQ(::stat(socket_.c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  server_->shutdown();
  EXPECT_FALSE(fs::exists(socket_));
  server_->shutdown();  // idempotent
  server_->wait();      // returns at once after a shutdown
}

TEST_F(GrpcFrontEndTest, SecondServerOnTheSameSocketIsRefused) {
  start();
  testing::FakeInferenceService other;
  const std::string message =
      input_error_of([&] { GrpcFrontEnd second(other, Endpoint{socket_, ""}, kMaxMessage); });
  EXPECT_NE(message.find("another server is already listening on " + socket_), std::string::npos) << message;
  EXPECT_TRUE(client().server_live());  // the first one still has its socket
}

TEST_F(GrpcFrontEndTest, StaleSocketIsReplaced) {
  // A socket file nobody listens on, as a crashed server leaves behind.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ::close(fd);
  ASSERT_TRUE(fs::is_socket(socket_));
  start();
  EXPECT_TRUE(client().server_live());
}

TEST_F(GrpcFrontEndTest, ExistingFileThatIsNotASocketIsKept) {
  std::ofstream(socket_) << "precious";
  const std::string message = input_error_of([&] { start(); });
  EXPECT_NE(message.find("is not a socket"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_regular_file(socket_));
}

TEST_F(GrpcFrontEndTest, GroupWritableSocketDirectoryIsRefused) {
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_all);
  const std::string message = input_error_of([&] { start(); });
  EXPECT_NE(message.find("socket directory " + dir_.string()), std::string::npos) << message;
  EXPECT_NE(message.find("writable by group or others"), std::string::npos) << message;
}

TEST_F(GrpcFrontEndTest, MissingSocketDirectoryIsCreatedPrivate) {
  socket_ = (dir_ / "sub" / "psw.sock").string();
  start();
  EXPECT_EQ(fs::status(dir_ / "sub").permissions(), fs::perms::owner_all);
  EXPECT_TRUE(client().server_live());
}

TEST_F(GrpcFrontEndTest, WildcardTcpAddressesAreRefused) {
  for (const char* address : {"0.0.0.0:0", "[::]:0", ":0", "*:0", "0:0", "[::0]:0"}) {
    const std::string message =
        input_error_of([&] { GrpcFrontEnd tcp(service_, Endpoint{"", address}, kMaxMessage); });
    EXPECT_NE(message.find("refusing to listen on every interface"), std::string::npos) << address << ": " << message;
  }
  for (const char* address : {"127.0.0.1", "::1:80", "[::1]", "127.0.0.1:99999", "127.0.0.1:x"}) {
    input_error_of([&] { GrpcFrontEnd tcp(service_, Endpoint{"", address}, kMaxMessage); });
  }
  input_error_of([&] { GrpcFrontEnd neither(service_, Endpoint{}, kMaxMessage); });
  input_error_of([&] { GrpcFrontEnd both(service_, Endpoint{socket_, "127.0.0.1:0"}, kMaxMessage); });
  input_error_of([&] { GrpcFrontEnd zero(service_, Endpoint{socket_, ""}, 0); });
}

TEST_F(GrpcFrontEndTest, LoopbackTcpServesAndRefusesAPortInUse) {
  GrpcFrontEnd tcp(service_, Endpoint{"", "127.0.0.1:0"}, kMaxMessage);
  const std::string target = tcp.target();
  ASSERT_EQ(target.rfind("127.0.0.1:", 0), 0u) << target;
  EXPECT_NE(target, "127.0.0.1:0");
  Client c(target);
  EXPECT_TRUE(c.server_live());
  EXPECT_EQ(c.infer(double_request(1)).outputs.size(), 1u);
  EXPECT_TRUE(c.server_metadata().extensions.empty());  // no shared memory over TCP
  const std::string message = input_error_of([&] { GrpcFrontEnd again(service_, Endpoint{"", target}, kMaxMessage); });
  EXPECT_NE(message.find("cannot listen on " + target), std::string::npos) << message;
  EXPECT_TRUE(c.server_live());
}

// While psw serve starts (StartingService in front of the controller to come): the configured
// models are listed and not ready, a request for one is UNAVAILABLE naming why, a model the config
// does not serve NOT_FOUND; once the controller is set, every call reaches it.
TEST_F(GrpcFrontEndTest, WhileTheServerStartsItsModelsAreKnownButNotReady) {
  StartingService starting(load_serve_config(std::string(PSW_SOURCE_DIR) + "/configs/serve/host-small.yaml"));
  server_ = std::make_unique<GrpcFrontEnd>(starting, Endpoint{socket_, ""}, kMaxMessage);
  Client c = client();
  EXPECT_TRUE(c.server_live());
  EXPECT_FALSE(c.server_ready());
  EXPECT_FALSE(c.model_ready("bert_base"));
  EXPECT_EQ(c.model_metadata("bert_base").inputs.front().name, "input_ids");
  std::string message;
  const InferRequest for_bert{"bert_base", "", "", {TensorData{"input_ids", "INT64", {1, 128}, std::string(1024, '\0')}}};
  EXPECT_EQ(error_code_of([&] { c.infer(for_bert); }, &message), Code::Unavailable);
  EXPECT_NE(message.find("model 'bert_base' is not ready: the server is starting its workers"), std::string::npos)
      << message;
  EXPECT_EQ(error_code_of([&] { c.model_metadata("double"); }), Code::NotFound);
  EXPECT_EQ(error_code_of([&] { c.infer(double_request(1)); }, &message), Code::NotFound);
  EXPECT_NE(message.find("model 'double' is not served here"), std::string::npos) << message;
  starting.set(&service_);
  EXPECT_TRUE(c.server_ready());
  const InferResponse answer = c.infer(double_request(2));
  EXPECT_EQ(bytes_to_floats(answer.outputs.front().bytes).size(), 8u);
  server_.reset();
}

// A region told while the server starts (the front end's staging, made before the controller)
// reaches the controller once it is set, unless it is gone by then; one told later goes straight.
TEST_F(GrpcFrontEndTest, RegionsToldWhileTheServerStartsReachTheServiceOnceSet) {
  StartingService starting(load_serve_config(std::string(PSW_SOURCE_DIR) + "/configs/serve/host-small.yaml"));
  InputStaging staging(1, 4096);
  server_ = std::make_unique<GrpcFrontEnd>(starting, Endpoint{socket_, ""}, kMaxMessage, 0, &staging);
  auto gone = std::make_unique<InputStaging>(1, 64);
  starting.shared_memory_registered(gone->whole());
  gone.reset();
  EXPECT_TRUE(service_.regions_told().empty());
  starting.set(&service_);
  ASSERT_EQ(service_.regions_told().size(), 1u);  // the front end's staging only
  InputStaging later(1, 64);
  starting.shared_memory_registered(later.whole());
  EXPECT_EQ(service_.regions_told().size(), 2u);
  EXPECT_EQ(service_.regions_told().back(), later.whole().region->id);
  const InferRequest request = double_request(4);
  EXPECT_EQ(doubled_wrongly(request, client().infer(request)), 0);
  EXPECT_EQ(service_.last_input_region(), service_.regions_told().front());
  server_.reset();
}

TEST(GrpcDefaultSocketPath, PrefersAPrivateXdgRuntimeDir) {
  char pattern[] = "/tmp/psw-grpc-xdg-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string runtime_dir = pattern;
  const char* saved = std::getenv("XDG_RUNTIME_DIR");
  const std::string previous = saved ? saved : "";
  ::setenv("XDG_RUNTIME_DIR", runtime_dir.c_str(), 1);
  EXPECT_EQ(default_socket_path(), runtime_dir + "/psw/psw.sock");
  EXPECT_EQ(fs::status(runtime_dir + "/psw").permissions(), fs::perms::owner_all);
  ::setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
  EXPECT_EQ(default_socket_path(), "/tmp/psw-" + std::to_string(::geteuid()) + "/psw.sock");
  if (saved) {
    ::setenv("XDG_RUNTIME_DIR", previous.c_str(), 1);
  } else {
    ::unsetenv("XDG_RUNTIME_DIR");
  }
  fs::remove_all(runtime_dir);
}

}  // namespace
}  // namespace psw::runtime
