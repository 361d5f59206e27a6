// A KServe v2 server over the fake service (fake_inference_service.hpp), for protocol clients in
// other languages (kserve_client.py): serves on --socket PATH (or --tcp HOST:PORT), prints
// "ready" and the target on stdout once listening, and stops cleanly on SIGTERM or SIGINT,
// removing its socket.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "fake_inference_service.hpp"
#include "psw/runtime/server/grpc_server.hpp"

int main(int argc, char** argv) {
  psw::runtime::Endpoint endpoint;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--socket") {
      endpoint.unix_path = argv[i + 1];
    } else if (option == "--tcp") {
      endpoint.tcp_address = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: %s --socket PATH | --tcp HOST:PORT\n", argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0 || endpoint.unix_path.empty() == endpoint.tcp_address.empty()) {
    std::fprintf(stderr, "usage: %s --socket PATH | --tcp HOST:PORT\n", argv[0]);
    return 2;
  }
  // Block the stop signals before gRPC starts its threads (they inherit the mask), so that only
  // sigwait below receives them and shutdown runs on an ordinary thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    psw::runtime::testing::FakeInferenceService service;
    psw::runtime::GrpcFrontEnd front_end(service, endpoint, std::int64_t{64} << 20);
    std::printf("ready %s\n", front_end.target().c_str());
    std::fflush(stdout);
    int received = 0;
    sigwait(&stop_signals, &received);
    front_end.shutdown();
    std::printf("stopped by signal %d\n", received);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_kserve_server: %s\n", e.what());
    return 1;
  }
}
