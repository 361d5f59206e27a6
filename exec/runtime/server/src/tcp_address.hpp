#pragma once
// TCP addresses the runtime listens on (the gRPC front end, the metrics endpoint): parsed and
// checked in one place. Internal to psw_server.

#include <string>

namespace psw::runtime {

struct HostPort {
  std::string host;  // without brackets
  bool bracketed = false;
  int port = 0;
};

// "HOST:PORT" or "[IPV6]:PORT"; InputError naming the address otherwise.
HostPort parse_tcp_address(const std::string& address);

// InputError for a host that means every interface (Note in tcp_address.cpp).
void check_tcp_host(const std::string& address, const HostPort& parsed);

}  // namespace psw::runtime
