#pragma once
// The metrics of `psw serve` over plain HTTP, where Prometheus scrapes them:
// `GET /metrics` answers the text exposition format (version 0.0.4); anything else is 404.
// Only on an explicit TCP address (`psw serve --metrics-listen 127.0.0.1:9464`), never every
// interface (the same check as the gRPC front end's). One small thread; one request per
// connection; a client that sends nothing within two seconds is dropped.

#include <functional>
#include <memory>
#include <string>

#include "psw/runtime/ipc/access_token.hpp"

namespace psw::runtime {

class MetricsHttpServer {
 public:
  // Listening when constructed; InputError for a bad or wildcard address or a port in use.
  // Note [Remote access]: with `token`, a scrape must carry `Authorization: Bearer TOKEN` (else
  // 401); it must outlive the server.
  MetricsHttpServer(std::function<std::string()> metrics, const std::string& address,
                    const AccessToken* token = nullptr);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // "http://HOST:PORT/metrics", with the port chosen when the address asked for port 0.
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace psw::runtime
