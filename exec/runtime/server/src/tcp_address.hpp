#pragma once
// TCP addresses the runtime listens on (the gRPC front end, the metrics endpoint): parsed and
// checked in one place. Internal to psw_server.

#include <string>
#include <utility>
#include <vector>

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

// Whether every address the host of `address` resolves to is a loopback one (127.0.0.0/8, ::1).
bool is_loopback_tcp_address(const std::string& address);

// Note [Remote access] (psw/runtime/ipc/access_token.hpp): InputError, naming the flag and the
// address, for a listener (flag, "HOST:PORT"; empty: none) that other hosts can reach unless
// `allow_remote` and a token are given.
void check_remote_access(const std::vector<std::pair<std::string, std::string>>& listeners, bool allow_remote,
                         bool has_token);

}  // namespace psw::runtime
