#pragma once
// Byte arithmetic of the protocol's raw tensors (KServe v2 datatypes, row-major, little-endian,
// no padding), shared by the gRPC front end (it validates every request before the service sees
// it) and the client tools (they build requests and decode answers).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace psw::runtime {

// Bytes per element of a KServe v2 datatype with a fixed element size ("FP32" -> 4, "BOOL" -> 1,
// "BF16" -> 2); nullopt for a name the protocol does not define and for "BYTES", whose elements
// carry their own length and so cannot be sent as plain raw contents here.
std::optional<std::int64_t> datatype_element_bytes(std::string_view datatype);

// The number of elements of `shape`; nullopt when a dimension is negative or the product does
// not fit in int64 (a request must not be able to make the server's arithmetic wrap around).
std::optional<std::int64_t> element_count(const std::vector<std::int64_t>& shape);

// element_count(shape) x datatype_element_bytes(datatype). Throws ServiceError(InvalidArgument)
// naming `what` (e.g. "input 'x'") and the reason: unknown datatype, negative dimension, or a
// size that overflows int64.
std::int64_t tensor_byte_count(std::string_view what, std::string_view datatype,
                               const std::vector<std::int64_t>& shape);

}  // namespace psw::runtime
