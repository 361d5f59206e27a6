// Note [Remote access]: the bearer token's file and comparison, and every TCP listener (gRPC, REST,
// metrics) refusing a call without the token, or with another, before the service sees it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fake_inference_service.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/client/load_generator.hpp"
#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/server/http_server.hpp"
#include "psw/runtime/server/metrics_http.hpp"
#include "../common/input_error.hpp"

namespace psw::runtime {
// Named, not anonymous: the unity build compiles the test files together.
namespace remote_access_test {

namespace fs = std::filesystem;
using test_support::input_error_of;

constexpr const char* kToken = "0123456789abcdef-token";

// An answer's HTTP status, or -1 when none came (the connection failed).
int status_of(const httplib::Result& r) { return r ? r->status : -1; }

class RemoteAccessTest : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove_all(dir_); }
  fs::path token_file(const std::string& text, fs::perms mode = fs::perms::owner_read | fs::perms::owner_write) {
    fs::create_directories(dir_);
    const fs::path file = dir_ / ("token-" + std::to_string(++files_));
    std::ofstream(file) << text;
    fs::permissions(file, mode);
    return file;
  }
  const fs::path dir_ = fs::temp_directory_path() / ("psw-remote-access-" + std::to_string(::getpid()));
  int files_ = 0;
};

TEST_F(RemoteAccessTest, TheTokenComesFromAFileOnlyItsOwnerReads) {
  const AccessToken token = AccessToken::from_file(token_file(std::string(kToken) + "\n"));
  EXPECT_EQ(token.value(), kToken);
  EXPECT_TRUE(token.admits(std::string("Bearer ") + kToken));
  EXPECT_FALSE(token.admits(std::string("Bearer ") + kToken + "x"));
  EXPECT_FALSE(token.admits(std::string("bearer ") + kToken));
  EXPECT_FALSE(token.admits("Bearer 0123456789abcdef-tokeN"));
  EXPECT_FALSE(token.admits(""));
  EXPECT_NE(input_error_of([&] { AccessToken::from_file(token_file(kToken, fs::perms::owner_all | fs::perms::group_read)); })
                .find("group or others may read or write it (chmod 600"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { AccessToken::from_file(token_file("short")); }).find("has 5 characters; at least 16"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { AccessToken::from_file(token_file("0123456789 abcdef")); }).find("printable ASCII"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { AccessToken::from_file(dir_ / "absent"); }).find("no such file"), std::string::npos);
}

TEST_F(RemoteAccessTest, EveryTcpListenerRefusesACallWithoutTheToken) {
  const AccessToken token = AccessToken::from_file(token_file(kToken));
  testing::FakeInferenceService service;
  Endpoint endpoint;
  endpoint.tcp_address = "127.0.0.1:0";
  endpoint.token = &token;
  GrpcFrontEnd grpc_server(service, endpoint, 1 << 20);
  Client anonymous(grpc_server.target());
  try {
    anonymous.server_live();
    ADD_FAILURE() << "a call without the token was answered";
  } catch (const ServiceError& e) {
    EXPECT_NE(std::string(e.what()).find("UNAUTHENTICATED: this server takes calls with a bearer token only"),
              std::string::npos)
        << e.what();
  }
  Client impostor(grpc_server.target());
  impostor.set_token("another-token-of-some-length");
  EXPECT_THROW(impostor.training_status("trainer"), ServiceError);
  Client owner(grpc_server.target());
  owner.set_token(kToken);
  EXPECT_TRUE(owner.server_live());
  EXPECT_EQ(owner.training_status("trainer").model, "trainer");
  // The tools' further connections (psw profile-serving's, psw load's senders) carry the token.
  Client second = owner.another_connection();
  EXPECT_TRUE(second.server_live());
  LoadOptions load;
  load.target = grpc_server.target();
  EXPECT_THROW(connect_to_server(load).server_live(), ServiceError);
  load.token = kToken;
  EXPECT_TRUE(connect_to_server(load).server_live());

  HttpFrontEnd rest(service, "127.0.0.1:0", 1 << 20, &token);
  httplib::Client http(rest.url());
  const httplib::Result refused = http.Get("/v2/health/live");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(refused->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_NE(refused->body.find("bearer token"), std::string::npos) << refused->body;
  EXPECT_EQ(status_of(http.Get("/v2/health/live", {{"Authorization", "Bearer wrong-token-0123456789"}})), 401);
  EXPECT_EQ(status_of(http.Get("/v2/health/live", {{"Authorization", std::string("Bearer ") + kToken}})), 200);
  EXPECT_EQ(status_of(http.Post("/v2/models/double/infer", R"({"inputs": []})", "application/json")), 401);
  EXPECT_EQ(service.requests_received("double"), 0);

  MetricsHttpServer metrics([] { return std::string("psw_up 1\n"); }, "127.0.0.1:0", &token);
  const std::string url = metrics.url();  // http://HOST:PORT/metrics
  httplib::Client scraper(url.substr(0, url.rfind("/metrics")));
  EXPECT_EQ(status_of(scraper.Get("/metrics")), 401);
  const httplib::Result scraped = scraper.Get("/metrics", {{"authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(scraped) << httplib::to_string(scraped.error());
  EXPECT_EQ(scraped->status, 200);
  EXPECT_EQ(scraped->body, "psw_up 1\n");
}

}  // namespace remote_access_test
}  // namespace psw::runtime
