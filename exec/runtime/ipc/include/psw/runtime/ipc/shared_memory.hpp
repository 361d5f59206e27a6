#pragma once
// The system shared memory extension of the open inference protocol (KServe v2, as Triton
// defines it): a client on the same host puts a tensor in a POSIX shared memory object,
// registers the object (or a range of it) with the server once under a region name, and each
// request then names the region instead of carrying the bytes over gRPC. For inputs of
// megabytes this saves the HTTP/2 framing, flow control, protobuf parsing and copies of every
// request; outputs can come back the same way.
//
// Both sides are here, with no gRPC type: the server's registry of mapped regions (used by the
// gRPC front end, grpc_server.cpp) and the client's owner of an object it creates.
//
// Security. The server runs as its user and opens what a client names with that user's rights,
// read-write, so whoever can call the server can make it read and write that user's shared memory
// objects. Only POSIX shared memory names ("/name", no further '/') are accepted as keys, so no
// other file can be named; only regular files (not FIFOs or devices) are mapped; and the front
// end offers the extension only on its Unix socket (mode 0600, its owner only), never over TCP,
// where every local user who reaches the port could call it.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

// Whether `key` is a POSIX shared memory object name this project accepts: '/' followed by 1 to
// 254 characters, none of them '/' or NUL, and not "." or "..".
bool is_shared_memory_key(std::string_view key);

// memcpy that survives the memory going away under it. A mapping of a shared memory object
// raises SIGBUS on access past the object's end (its owner may shrink it with ftruncate at any
// time) or on a write fault when /dev/shm is full; a server must not die of a client doing so.
// Returns false, having copied some prefix, when the copy met SIGBUS. The first call installs a
// process-wide SIGBUS handler that only catches faults inside copy_guarded and otherwise lets
// the signal take its default action.
bool copy_guarded(void* destination, const void* source, std::size_t bytes) noexcept;

struct SharedMemoryRegionInfo {
  std::string name;
  std::string key;
  std::uint64_t offset = 0;     // in the object, where the region starts
  std::uint64_t byte_size = 0;  // of the region
};

// The server's registered regions: name -> a read-write mapping of [offset, offset + byte_size)
// of the object `key`. Thread-safe. Every error is a ServiceError the front end sends as is.
class SharedMemoryRegistry {
 public:
  SharedMemoryRegistry();
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Opens `key` (O_RDWR, never created), checks that it is a regular object holding
  // [offset, offset + byte_size), and maps that range. AlreadyExists for a name in use;
  // InvalidArgument for an empty name, a key that is not a shared memory name, an object that
  // does not exist or cannot be opened read-write or is not a shared memory object, a zero
  // byte_size, or a range outside the object. Returns the whole region (its handle has the
  // registration's id), for InferenceService::shared_memory_registered.
  BorrowedBytes register_region(const std::string& name, const std::string& key, std::uint64_t offset,
                       std::uint64_t byte_size);

  // Forgets region `name`, or every region when `name` is empty. A name that is not registered
  // is no error (as Triton). Requests in flight keep their ranges mapped until they finish.
  void unregister(const std::string& name);

  // Every region (name empty), sorted by name, or the one named: NotFound when unknown.
  std::vector<SharedMemoryRegionInfo> status(const std::string& name) const;

  // [offset, offset + byte_size) of region `name` (offsets within the region), keeping the
  // mapping alive for as long as the result lives. NotFound for an unknown region;
  // InvalidArgument, naming `what` (e.g. "input 'x'"), for a range outside the region or an
  // object that has shrunk below the region since it was registered.
  BorrowedBytes range(const std::string& name, std::int64_t offset, std::int64_t byte_size,
                      const std::string& what) const;

 private:
  struct Region;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Region>> regions_;
};

// A POSIX shared memory object this process creates and owns, mapped read-write: created with
// O_CREAT | O_EXCL and mode 0600 (never someone else's object, readable only by its user), and
// unmapped and unlinked when destroyed, so nothing is left in /dev/shm. The name is only needed
// until the server has mapped the object: unlink_name() right after registering leaves nothing
// behind even if this process is killed, while both mappings stay valid.
class SharedMemoryObject {
 public:
  // Throws psw::InputError for a key that is not a shared memory name, a zero size, or when the
  // object cannot be created (it exists already, /dev/shm is full, ...).
  SharedMemoryObject(const std::string& key, std::size_t byte_size);
  ~SharedMemoryObject();
  SharedMemoryObject(const SharedMemoryObject&) = delete;
  SharedMemoryObject& operator=(const SharedMemoryObject&) = delete;

  // Removes the name from /dev/shm now (idempotent); the object lives on while it is mapped.
  void unlink_name() noexcept;

  const std::string& key() const { return key_; }
  char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::string key_;
  char* data_ = nullptr;
  std::size_t size_ = 0;
  bool linked_ = false;
};

// "/<prefix>-<pid>-<n>": a name no other process and no earlier call of this one uses.
std::string unique_shared_memory_key(std::string_view prefix);

// Note [Raw inputs received in place] (grpc_server.cpp): where the front end puts a request's raw
// input as it takes it out of the received message, so that the service reads it in place as it
// reads a client's registered region (Note [Inputs read in place] in controller.hpp) instead of
// copying it once more. `slots` slots of `slot_bytes` each in one anonymous shared memory object
// (memfd, sealed at its size, so nobody can shrink it under a reader), mapped read-write, with a
// region handle of its own (an id from the registry's sequence). Thread-safe.
class InputStaging {
 public:
  // Throws psw::Error when the object cannot be created or mapped; psw::InputError for zero
  // slots or a zero slot size.
  InputStaging(std::size_t slots, std::size_t slot_bytes);
  ~InputStaging();
  InputStaging(const InputStaging&) = delete;
  InputStaging& operator=(const InputStaging&) = delete;

  // The first `bytes` of a free slot, borrowed: `owner` keeps the mapping (a service that notes
  // the region keeps it mapped for as long as this staging lives), `lease` holds the slot, free
  // again once the last copy of the result is gone. nullopt when `bytes` is more than a slot
  // holds or every slot is taken: the caller keeps the bytes itself.
  std::optional<BorrowedBytes> acquire(std::size_t bytes);

  // Every slot, borrowed with no lease (for InferenceService::shared_memory_registered).
  BorrowedBytes whole() const;

  std::size_t slots() const;
  std::size_t slots_free() const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace psw::runtime
