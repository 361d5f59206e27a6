// Note [REST front end]: the protocol's HTTP binding against the fake service ("double": y = 2x),
// asked as curl or any HTTP client would: health, metadata, inference with JSON tensors and with
// the binary tensor extension, and the errors with their HTTP statuses.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_inference_service.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/server/http_server.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"
#include "../common/input_error.hpp"

namespace psw::runtime {
// Named, not anonymous: the unity build compiles the test files together.
namespace http_front_end_test {

std::string floats_as_bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

class HttpFrontEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<HttpFrontEnd>(service_, "127.0.0.1:0", 1 << 20);
    const std::string url = server_->url();
    ASSERT_EQ(url.rfind("http://127.0.0.1:", 0), 0u) << url;
    client_ = std::make_unique<httplib::Client>(url);
  }

  // The JSON body of an answer, or null when it has none.
  static nlohmann::json body_of(const httplib::Result& r) {
    return r && !r->body.empty() ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }

  // A POST to model `model`'s infer endpoint that must fail with `status` and a message holding `part`.
  void expect_refused(const std::string& model, const std::string& body, int status, const std::string& part) {
    const httplib::Result r = client_->Post(("/v2/models/" + model + "/infer").c_str(), body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_NE(body_of(r).value("error", std::string()).find(part), std::string::npos) << r->body;
  }

  testing::FakeInferenceService service_;
  std::unique_ptr<HttpFrontEnd> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpFrontEndTest, HealthAndMetadata) {
  EXPECT_EQ(client_->Get("/v2/health/live")->status, 200);
  EXPECT_EQ(client_->Get("/v2/health/ready")->status, 200);
  const nlohmann::json server = body_of(client_->Get("/v2"));
  EXPECT_EQ(server["name"], "psw");
  const httplib::Result model = client_->Get("/v2/models/double");
  ASSERT_EQ(model->status, 200);
  const nlohmann::json metadata = body_of(model);
  EXPECT_EQ(metadata["inputs"][0]["name"], "x");
  EXPECT_EQ(metadata["inputs"][0]["shape"], nlohmann::json::array({-1, 4}));
  EXPECT_EQ(metadata["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(client_->Get("/v2/models/double/versions/1")->status, 200);
  EXPECT_EQ(client_->Get("/v2/models/double/ready")->status, 200);
  EXPECT_EQ(client_->Get("/v2/models/unready/ready")->status, 400);
  const httplib::Result unknown = client_->Get("/v2/models/nope");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(body_of(unknown)["error"], "unknown model 'nope'");
  EXPECT_EQ(client_->Get("/v2/models/double/versions/7")->status, 404);
  const httplib::Result nowhere = client_->Get("/v3/whatever");
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_NE(body_of(nowhere).value("error", std::string()).find("no such endpoint"), std::string::npos);
}

// Note [Repository index] over REST: POST /v2/repository/index, optionally {"ready": true}.
TEST_F(HttpFrontEndTest, TheRepositoryIndex) {
  const httplib::Result all = client_->Post("/v2/repository/index", "", "application/json");
  ASSERT_EQ(all->status, 200);
  const nlohmann::json index = body_of(all);
  ASSERT_TRUE(index.is_array());
  ASSERT_EQ(index.size(), 5u);
  EXPECT_EQ(index[0], (nlohmann::json{{"name", "double"}, {"version", "1"}, {"state", "READY"}}));
  EXPECT_EQ(index[2]["state"], "UNAVAILABLE");
  EXPECT_TRUE(index[2].contains("reason"));
  EXPECT_EQ(body_of(client_->Post("/v2/repository/index", R"({"ready": true})", "application/json")).size(), 4u);
  const httplib::Result bad = client_->Post("/v2/repository/index", R"({"ready": "yes"})", "application/json");
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(body_of(bad).value("error", std::string()).find("{\"ready\": true|false}"), std::string::npos);
  EXPECT_EQ(client_->Post("/v2/repository/index", "not json", "application/json")->status, 400);
}

TEST_F(HttpFrontEndTest, InferWithJsonTensors) {
  const nlohmann::json request = {
      {"id", "r-7"},
      {"inputs", {{{"name", "x"}, {"shape", {2, 4}}, {"datatype", "FP32"},
                   {"data", {{0.5, 1, 1.5, 2}, {-1, -2, 0, 4}}}}}}};  // nested: row-major
  const httplib::Result r = client_->Post("/v2/models/double/infer", request.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const nlohmann::json answer = body_of(r);
  EXPECT_EQ(answer["id"], "r-7");
  EXPECT_EQ(answer["model_name"], "double");
  ASSERT_EQ(answer["outputs"].size(), 1u);
  EXPECT_EQ(answer["outputs"][0]["name"], "y");
  EXPECT_EQ(answer["outputs"][0]["shape"], nlohmann::json::array({2, 4}));
  EXPECT_EQ(answer["outputs"][0]["data"], nlohmann::json::array({1.0, 2.0, 3.0, 4.0, -2.0, -4.0, 0.0, 8.0}));
}

TEST_F(HttpFrontEndTest, InferWithTheBinaryTensorExtension) {
  const std::vector<float> x = {0.25f, 1, 2, 3, 4, 5, 6, 7};
  const nlohmann::json header = {
      {"inputs", {{{"name", "x"}, {"shape", {2, 4}}, {"datatype", "FP32"},
                   {"parameters", {{"binary_data_size", 32}}}}}},
      {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", true}}}}}}};
  const std::string json = header.dump();
  httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(json.size())}};
  const httplib::Result r =
      client_->Post("/v2/models/double/infer", headers, json + floats_as_bytes(x), "application/octet-stream");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(r->has_header("Inference-Header-Content-Length"));
  const std::size_t length = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  const nlohmann::json answer = nlohmann::json::parse(r->body.substr(0, length));
  EXPECT_EQ(answer["outputs"][0]["parameters"]["binary_data_size"], 32);
  EXPECT_FALSE(answer["outputs"][0].contains("data"));
  std::vector<float> doubled;
  for (float v : x) doubled.push_back(2 * v);
  EXPECT_EQ(r->body.substr(length), floats_as_bytes(doubled));
}

// Note [Raw inputs received in place]: with a staging, binary input data reaches the service in
// a slot of the region it was told of; values given as JSON `data` keep their own bytes.
TEST(HttpFrontEndStaging, BinaryInputsReachTheServiceInTheStaging) {
  testing::FakeInferenceService service;
  InputStaging staging(2, 4096);
  HttpFrontEnd server(service, "127.0.0.1:0", 1 << 20, nullptr, &staging);
  ASSERT_EQ(service.regions_told().size(), 1u);
  httplib::Client client(server.url());
  const std::vector<float> x = {0.25f, 1, 2, 3, 4, 5, 6, 7};
  const std::string json = nlohmann::json{{"inputs", {{{"name", "x"}, {"shape", {2, 4}}, {"datatype", "FP32"},
                                                       {"parameters", {{"binary_data_size", 32}}}}}}}
                               .dump();
  httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(json.size())}};
  const httplib::Result binary =
      client.Post("/v2/models/double/infer", headers, json + floats_as_bytes(x), "application/octet-stream");
  ASSERT_TRUE(binary);
  ASSERT_EQ(binary->status, 200) << binary->body;
  EXPECT_EQ(nlohmann::json::parse(binary->body)["outputs"][0]["data"],
            nlohmann::json({0.5, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_EQ(service.last_input_region(), service.regions_told()[0]);
  EXPECT_EQ(staging.slots_free(), 2u);  // given back with the answer

  const std::string as_json =
      nlohmann::json{{"inputs", {{{"name", "x"}, {"shape", {1, 4}}, {"datatype", "FP32"}, {"data", {1, 2, 3, 4}}}}}}
          .dump();
  const httplib::Result typed = client.Post("/v2/models/double/infer", as_json, "application/json");
  ASSERT_TRUE(typed);
  ASSERT_EQ(typed->status, 200) << typed->body;
  EXPECT_EQ(service.last_input_region(), 0u);
  server.shutdown();
}

TEST_F(HttpFrontEndTest, BadRequestsGetTheProtocolsErrorsAndStatuses) {
  const auto one = [](const nlohmann::json& input) { return nlohmann::json{{"inputs", {input}}}.dump(); };
  const nlohmann::json x = {{"name", "x"}, {"shape", {1, 4}}, {"datatype", "FP32"}, {"data", {1, 2, 3, 4}}};
  expect_refused("double", "{not json", 400, "the request is not JSON");
  expect_refused("double", nlohmann::json{{"id", "x"}}.dump(), 400, "the request has no `inputs`");
  nlohmann::json short_data = x;
  short_data["data"] = {1, 2, 3};
  expect_refused("double", one(short_data), 400, "input 'x': 3 values in `data`, but its shape holds 4");
  nlohmann::json strings = x;
  strings["data"] = {"a", 2, 3, 4};
  expect_refused("double", one(strings), 400, "FP32 data must be numbers");
  nlohmann::json too_big = x;
  too_big["datatype"] = "INT8";
  too_big["data"] = {1, 2, 300, 4};
  expect_refused("double", one(too_big), 400, "the value 300 does not fit INT8");
  nlohmann::json half = x;
  half["datatype"] = "FP16";
  expect_refused("double", one(half), 400, "FP16 tensors travel as binary data only");
  nlohmann::json misnamed = x;
  misnamed["name"] = "z";
  expect_refused("double", one(misnamed), 400, "takes one input 'x'");  // the service's own check
  expect_refused("nope", one(x), 404, "unknown model 'nope'");
  expect_refused("unavailable", one(x), 503, "worker 0 crashed");
  expect_refused("throws", one(x), 500, "boom in the service");
  // The binary extension's lengths are checked against the body.
  const nlohmann::json binary = {{"inputs", {{{"name", "x"}, {"shape", {1, 4}}, {"datatype", "FP32"},
                                              {"parameters", {{"binary_data_size", 16}}}}}}};
  const std::string json = binary.dump();
  httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(json.size())}};
  const httplib::Result short_tail =
      client_->Post("/v2/models/double/infer", headers, json + std::string(12, '\0'), "application/octet-stream");
  EXPECT_EQ(short_tail->status, 400);
  EXPECT_NE(body_of(short_tail).value("error", std::string()).find("ends 4 bytes short"), std::string::npos)
      << short_tail->body;
  headers = {{"Inference-Header-Content-Length", "99999"}};
  EXPECT_EQ(client_->Post("/v2/models/double/infer", headers, json, "application/octet-stream")->status, 400);
  // Larger than the server takes: 413.
  EXPECT_EQ(client_->Post("/v2/models/double/infer", std::string(2 << 20, ' '), "application/json")->status, 413);
}

// Note [Generate call] over REST: the answer, its streaming form as server-sent events, and the
// errors, before the first token as HTTP statuses and after it as the stream's last event.
TEST_F(HttpFrontEndTest, GenerateAndItsStream) {
  const std::string body = R"({"id": "g-1", "input_ids": [5, 6], "parameters": {"max_tokens": 3}})";
  const httplib::Result plain = client_->Post("/v2/models/double/generate", body, "application/json");
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  const nlohmann::json answer = body_of(plain);
  EXPECT_EQ(answer["model_name"], "double");
  EXPECT_EQ(answer["id"], "g-1");
  EXPECT_EQ(answer["output_ids"], nlohmann::json::array({7, 8, 9}));
  EXPECT_EQ(answer["prompt_bucket"], 16);
  EXPECT_EQ(answer["switched"], true);
  EXPECT_DOUBLE_EQ(answer["ttft_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(answer["tpot_ms"].get<double>(), 0.25);

  const httplib::Result stream = client_->Post("/v2/models/double/generate_stream", body, "application/json");
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->status, 200) << stream->body;
  EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(stream->body,
            "data: {\"index\":0,\"output_id\":7}\n\n"
            "data: {\"index\":1,\"output_id\":8}\n\n"
            "data: {\"index\":2,\"output_id\":9}\n\n"
            "event: end\ndata: " + answer.dump() + "\n\n");

  // A worker lost after the first token: the stream ends with an error event.
  const httplib::Result broken = client_->Post("/v2/models/unavailable/generate_stream", body, "application/json");
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 200);
  EXPECT_EQ(broken->body, "data: {\"index\":0,\"output_id\":7}\n\n"
                          "event: error\ndata: {\"error\":\"worker 0 crashed\",\"status\":503}\n\n");
  EXPECT_EQ(client_->Post("/v2/models/unavailable/generate", body, "application/json")->status, 503);

  // Refused before any token: an HTTP error, streaming or not.
  const auto expect_generate_refused = [&](const std::string& path, const std::string& request, int status,
                                           const std::string& part) {
    for (const char* suffix : {"/generate", "/generate_stream"}) {
      const httplib::Result r = client_->Post((path + suffix).c_str(), request, "application/json");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, status) << suffix << ": " << r->body;
      EXPECT_NE(body_of(r).value("error", std::string()).find(part), std::string::npos) << suffix << ": " << r->body;
    }
  };
  expect_generate_refused("/v2/models/unready", body, 503, "not ready");
  expect_generate_refused("/v2/models/nope", body, 404, "unknown model 'nope'");
  expect_generate_refused("/v2/models/double/versions/2", body, 404, "");
  expect_generate_refused("/v2/models/double", "[1, 2]", 400, "must be a JSON object");
  expect_generate_refused("/v2/models/double", "{", 400, "is not JSON");
  expect_generate_refused("/v2/models/double", R"({"parameters": {"max_tokens": 3}})", 400, "no `input_ids`");
  expect_generate_refused("/v2/models/double", R"({"input_ids": [1, "a"], "parameters": {"max_tokens": 3}})", 400,
                          "input_ids[1] must be a token id");
  expect_generate_refused("/v2/models/double", R"({"input_ids": [1]})", 400, "no `parameters` with max_tokens");
  expect_generate_refused("/v2/models/double", R"({"input_ids": [1], "parameters": {}})", 400, "no max_tokens");
  expect_generate_refused("/v2/models/double", R"({"input_ids": [1], "parameters": {"max_tokens": 0}})", 400,
                          "max_tokens must be a positive integer, got 0");
  expect_generate_refused("/v2/models/double", R"({"input_ids": [1], "parameters": {"max_tokens": 2.5}})", 400,
                          "max_tokens must be a positive integer, got 2.5");
  expect_generate_refused("/v2/models/double", R"({"input_ids": [1], "parameters": {"max_tokens": 2, "top_k": 5}})",
                          400, "unknown parameter 'top_k'");
  expect_generate_refused("/v2/models/double", R"({"prompt": "hi", "input_ids": [1], "parameters": {"max_tokens": 2}})",
                          400, "unknown key 'prompt'");
  expect_generate_refused("/v2/models/double", R"({"input_ids": [], "parameters": {"max_tokens": 2}})", 400,
                          "the prompt is empty");
}

// Note [Repository load]: Triton's load and unload bodies, both optional.
TEST(HttpFrontEnd, RepositoryBodiesParseAsTritonsOrAreRefusedSayingWhy) {
  EXPECT_EQ(parse_rest_repository_body("", true), "");
  EXPECT_EQ(parse_rest_repository_body("", false), "");
  EXPECT_EQ(parse_rest_repository_body(R"({"parameters": {"config": "{name: m, batch: 1}"}})", true), "{name: m, batch: 1}");
  EXPECT_EQ(parse_rest_repository_body(R"({"parameters": {}})", true), "");
  EXPECT_EQ(parse_rest_repository_body(R"({"parameters": {}})", false), "");
  const auto refusal = [](std::string_view body, bool load) {
    try {
      parse_rest_repository_body(body, load);
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), ServiceError::Code::InvalidArgument) << e.what();
      return std::string(e.what());
    }
    ADD_FAILURE() << "accepted: " << body;
    return std::string();
  };
  EXPECT_NE(refusal("not json", true).find("the body is not a JSON object"), std::string::npos);
  EXPECT_NE(refusal("[1]", false).find("the unload takes no body, or a JSON object {\"parameters\": {}}"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"config": "x"})", true).find("unknown key 'config'"), std::string::npos);
  EXPECT_NE(refusal(R"({"parameters": "x"})", true).find("'parameters' is not an object"), std::string::npos);
  EXPECT_NE(refusal(R"({"parameters": {"config": 3}})", true).find("'config' is not a string"), std::string::npos);
  EXPECT_NE(refusal(R"({"parameters": {"config": "x"}})", false).find("unknown parameter 'config'"), std::string::npos);
  EXPECT_NE(refusal(R"({"parameters": {"force": true}})", true).find("unknown parameter 'force'"), std::string::npos);
}

TEST(HttpFrontEnd, RefusesEveryInterfaceAndABusyPort) {
  testing::FakeInferenceService service;
  EXPECT_NE(test_support::input_error_of([&] { HttpFrontEnd(service, "0.0.0.0:0", 1024); }).find("every interface"),
            std::string::npos);
  HttpFrontEnd first(service, "127.0.0.1:0", 1024);
  const std::string port = first.url().substr(first.url().rfind(':') + 1);
  EXPECT_NE(test_support::input_error_of([&] { HttpFrontEnd(service, "127.0.0.1:" + port, 1024); }).find("in use"),
            std::string::npos);
}

}  // namespace http_front_end_test
}  // namespace psw::runtime
