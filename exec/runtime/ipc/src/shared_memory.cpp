// The system shared memory extension: the server's registry of mapped regions, the client's
// owner of an object, and the SIGBUS-safe copy both sides of a request go through.
#include "psw/runtime/ipc/shared_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>

#include "psw/common/error.hpp"
#include "psw/runtime/ipc/ipc.hpp"

namespace psw::runtime {

namespace {

// (Appended piecewise: GCC 12 warns falsely, -Wrestrict, about "literal" + std::string(view).)
std::string in_quotes(std::string_view text) {
  std::string result(1, '\'');
  result.append(text);
  result += '\'';
  return result;
}

[[noreturn]] void invalid(const std::string& message) {
  throw ServiceError(ServiceError::Code::InvalidArgument, message);
}

// --- the registry's mappings -----------------------------------------------------------------

std::string errno_text(int error) { return std::strerror(error); }

// Every region's id, a client's or the server's own (InputStaging): process-wide, not per
// registry, since a service may see regions of several registries (tests); never reused.
std::uint64_t next_region_id() {
  static std::atomic<std::uint64_t> next{1};
  return next++;
}

}  // namespace

bool is_shared_memory_key(std::string_view key) {
  if (key.size() < 2 || key.size() > 255 || key[0] != '/') return false;
  const std::string_view name = key.substr(1);
  if (name == "." || name == "..") return false;
  return name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

struct SharedMemoryRegistry::Region {
  SharedMemoryRegionInfo info;
  UniqueFd fd;                 // kept, to check the object's size before each use
  void* base = MAP_FAILED;     // the mapping, from the page holding `info.offset`
  std::size_t length = 0;
  char* data = nullptr;        // the region's first byte in it
  SharedRegionHandle handle;   // what borrowed ranges of it point to

  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() {
    if (base != MAP_FAILED) ::munmap(base, length);
  }
};

SharedMemoryRegistry::SharedMemoryRegistry() = default;
SharedMemoryRegistry::~SharedMemoryRegistry() = default;

BorrowedBytes SharedMemoryRegistry::register_region(const std::string& name, const std::string& key,
                                                    std::uint64_t offset, std::uint64_t byte_size) {
  if (name.empty()) invalid("the shared memory region's name is empty");
  if (!is_shared_memory_key(key)) {
    invalid("shared memory key " + in_quotes(key) +
            " is not a POSIX shared memory name: expected '/name' with no other '/' (the server opens "
            "only shared memory objects, never other files)");
  }
  if (byte_size == 0) invalid("shared memory region " + in_quotes(name) + ": byte_size is 0; a region holds at least one byte");
  const std::string where = "shared memory region " + in_quotes(name) + " (key " + in_quotes(key) + ")";
  {
    std::lock_guard lock(mutex_);
    if (regions_.count(name) != 0) {
      throw ServiceError(ServiceError::Code::AlreadyExists,
                         "shared memory region " + in_quotes(name) + " is already registered; unregister it first");
    }
  }
  auto region = std::make_shared<Region>();
  region->info = {name, key, offset, byte_size};
  // O_RDWR: outputs may be written there; never O_CREAT: the client owns the object.
  region->fd = UniqueFd(::shm_open(key.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!region->fd) {
    const int error = errno;
    invalid(where + ": cannot open the object read-write: " + errno_text(error) +
            (error == ENOENT ? " (create it with shm_open before registering)" : ""));
  }
  struct stat info {};
  if (::fstat(region->fd.get(), &info) != 0) invalid(where + ": fstat: " + errno_text(errno));
  if (!S_ISREG(info.st_mode)) invalid(where + ": not a shared memory object (a FIFO, device or directory)");
  const auto object_size = static_cast<std::uint64_t>(info.st_size);
  if (offset > object_size || byte_size > object_size - offset) {
    invalid(where + ": offset " + std::to_string(offset) + " + byte_size " + std::to_string(byte_size) +
            " is past the end of the object, which has " + std::to_string(object_size) + " bytes");
  }
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t map_offset = offset / page * page;
  const std::uint64_t length = byte_size + (offset - map_offset);
  if (length > std::numeric_limits<std::size_t>::max() ||
      map_offset > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
    invalid(where + ": too large to map");
  }
  region->base = ::mmap(nullptr, static_cast<std::size_t>(length), PROT_READ | PROT_WRITE, MAP_SHARED,
                        region->fd.get(), static_cast<off_t>(map_offset));
  if (region->base == MAP_FAILED) invalid(where + ": cannot map it: " + errno_text(errno));
  region->length = static_cast<std::size_t>(length);
  region->data = static_cast<char*>(region->base) + (offset - map_offset);
  region->handle = SharedRegionHandle{next_region_id(), region->fd.get(), offset, byte_size, region->data};
  BorrowedBytes whole{region, region->data, static_cast<std::size_t>(byte_size), &region->handle};
  std::lock_guard lock(mutex_);
  // Checked again: another call may have registered the name while this one mapped.
  if (!regions_.emplace(name, std::move(region)).second) {
    throw ServiceError(ServiceError::Code::AlreadyExists,
                       "shared memory region " + in_quotes(name) + " is already registered; unregister it first");
  }
  return whole;
}

void SharedMemoryRegistry::unregister(const std::string& name) {
  std::map<std::string, std::shared_ptr<Region>> dropped;  // unmapped outside the lock
  std::lock_guard lock(mutex_);
  if (name.empty()) {
    dropped.swap(regions_);
  } else if (auto it = regions_.find(name); it != regions_.end()) {
    dropped.emplace(it->first, std::move(it->second));
    regions_.erase(it);
  }
}

std::vector<SharedMemoryRegionInfo> SharedMemoryRegistry::status(const std::string& name) const {
  std::lock_guard lock(mutex_);
  std::vector<SharedMemoryRegionInfo> list;
  if (name.empty()) {
    for (const auto& [region_name, region] : regions_) list.push_back(region->info);
    return list;
  }
  const auto it = regions_.find(name);
  if (it == regions_.end()) {
    throw ServiceError(ServiceError::Code::NotFound, "no shared memory region " + in_quotes(name) + " is registered");
  }
  list.push_back(it->second->info);
  return list;
}

BorrowedBytes SharedMemoryRegistry::range(const std::string& name, std::int64_t offset, std::int64_t byte_size,
                                          const std::string& what) const {
  std::shared_ptr<Region> region;
  {
    std::lock_guard lock(mutex_);
    const auto it = regions_.find(name);
    if (it == regions_.end()) {
      throw ServiceError(ServiceError::Code::NotFound,
                         what + ": no shared memory region " + in_quotes(name) + " is registered");
    }
    region = it->second;
  }
  const std::uint64_t size = region->info.byte_size;
  if (offset < 0 || byte_size < 0 || static_cast<std::uint64_t>(offset) > size ||
      static_cast<std::uint64_t>(byte_size) > size - static_cast<std::uint64_t>(offset)) {
    invalid(what + ": shared_memory_offset " + std::to_string(offset) + " and shared_memory_byte_size " +
            std::to_string(byte_size) + " are outside region " + in_quotes(name) + ", which has " +
            std::to_string(size) + " bytes");
  }
  // The owner may have shrunk the object since; reading past its end would raise SIGBUS. A
  // shrink after this check is still caught by copy_guarded.
  struct stat info {};
  if (::fstat(region->fd.get(), &info) != 0 ||
      static_cast<std::uint64_t>(info.st_size) < region->info.offset + region->info.byte_size) {
    invalid(what + ": the object " + in_quotes(region->info.key) + " of shared memory region " + in_quotes(name) +
            " has shrunk to " + std::to_string(info.st_size) + " bytes since it was registered; register it again");
  }
  char* data = region->data + offset;
  const SharedRegionHandle* handle = &region->handle;
  return BorrowedBytes{std::shared_ptr<void>(std::move(region)), data, static_cast<std::size_t>(byte_size), handle};
}

// --- the server's staging of raw inputs (Note [Raw inputs received in place]) -----------------

struct InputStaging::Shared {
  UniqueFd fd;
  void* base = MAP_FAILED;
  std::size_t slot_bytes = 0;
  std::size_t length = 0;
  SharedRegionHandle handle;
  std::mutex mutex;
  std::vector<char> taken;  // per slot

  Shared() = default;
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  ~Shared() {
    if (base != MAP_FAILED) ::munmap(base, length);
  }
};

InputStaging::InputStaging(std::size_t slots, std::size_t slot_bytes) : shared_(std::make_shared<Shared>()) {
  if (slots == 0 || slot_bytes == 0) {
    throw InputError("the input staging needs at least one slot of at least one byte, not " + std::to_string(slots) +
                     " of " + std::to_string(slot_bytes));
  }
  if (slot_bytes > std::numeric_limits<std::size_t>::max() / slots ||
      slots * slot_bytes > static_cast<std::size_t>(std::numeric_limits<off_t>::max())) {
    throw InputError("the input staging of " + std::to_string(slots) + " slots of " + std::to_string(slot_bytes) +
                     " bytes is too large to map");
  }
  Shared& s = *shared_;
  s.slot_bytes = slot_bytes;
  s.length = slots * slot_bytes;
  s.taken.assign(slots, 0);
  s.fd = UniqueFd(::memfd_create("psw-input-staging", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!s.fd) throw Error("cannot create the input staging (memfd_create): " + errno_text(errno));
  if (::ftruncate(s.fd.get(), static_cast<off_t>(s.length)) != 0) {
    throw Error("cannot size the input staging to " + std::to_string(s.length) + " bytes: " + errno_text(errno));
  }
  // Its size fixed for good: the readers' mappings can never fault past its end.
  if (::fcntl(s.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    throw Error("cannot seal the input staging's size: " + errno_text(errno));
  }
  s.base = ::mmap(nullptr, s.length, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd.get(), 0);
  if (s.base == MAP_FAILED) throw Error("cannot map the input staging of " + std::to_string(s.length) + " bytes: " + errno_text(errno));
  s.handle = SharedRegionHandle{next_region_id(), s.fd.get(), 0, s.length, static_cast<char*>(s.base)};
}

InputStaging::~InputStaging() = default;

std::optional<BorrowedBytes> InputStaging::acquire(std::size_t bytes) {
  Shared& s = *shared_;
  if (bytes > s.slot_bytes) return std::nullopt;
  std::size_t slot = 0;
  {
    std::lock_guard lock(s.mutex);
    const auto free = std::find(s.taken.begin(), s.taken.end(), 0);
    if (free == s.taken.end()) return std::nullopt;
    *free = 1;
    slot = static_cast<std::size_t>(free - s.taken.begin());
  }
  char* data = static_cast<char*>(s.base) + slot * s.slot_bytes;
  // The owner shares the staging's own count (a weak copy of it expires only with the staging);
  // the lease, a count of its own, gives the slot back.
  std::shared_ptr<void> owner(shared_, data);
  std::shared_ptr<void> lease(data, [shared = shared_, slot](void*) {
    std::lock_guard lock(shared->mutex);
    shared->taken[slot] = 0;
  });
  return BorrowedBytes{std::move(owner), data, bytes, &s.handle, std::move(lease)};
}

std::size_t InputStaging::slots() const { return shared_->taken.size(); }

std::size_t InputStaging::slots_free() const {
  std::lock_guard lock(shared_->mutex);
  return static_cast<std::size_t>(std::count(shared_->taken.begin(), shared_->taken.end(), 0));
}

BorrowedBytes InputStaging::whole() const {
  char* data = static_cast<char*>(shared_->base);
  return BorrowedBytes{std::shared_ptr<void>(shared_, data), data, shared_->length, &shared_->handle};
}

// --- the client's object -----------------------------------------------------------------------

SharedMemoryObject::SharedMemoryObject(const std::string& key, std::size_t byte_size) : key_(key) {
  if (!is_shared_memory_key(key)) {
    throw InputError("shared memory key " + in_quotes(key) + " is not a POSIX shared memory name ('/name')");
  }
  if (byte_size == 0) throw InputError("a shared memory object of 0 bytes cannot be mapped");
  UniqueFd fd(::shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) throw InputError("cannot create the shared memory object " + in_quotes(key) + ": " + errno_text(errno));
  linked_ = true;
  if (::ftruncate(fd.get(), static_cast<off_t>(byte_size)) != 0) {
    const int error = errno;
    unlink_name();
    throw InputError("cannot size the shared memory object " + in_quotes(key) + " to " + std::to_string(byte_size) +
                     " bytes: " + errno_text(error));
  }
  void* base = ::mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    unlink_name();
    throw InputError("cannot map the shared memory object " + in_quotes(key) + ": " + errno_text(error));
  }
  // The descriptor can go: the mapping keeps the object.
  data_ = static_cast<char*>(base);
  size_ = byte_size;
}

SharedMemoryObject::~SharedMemoryObject() {
  if (data_ != nullptr) ::munmap(data_, size_);
  unlink_name();
}

void SharedMemoryObject::unlink_name() noexcept {
  if (linked_) ::shm_unlink(key_.c_str());
  linked_ = false;
}

std::string unique_shared_memory_key(std::string_view prefix) {
  static std::atomic<std::uint64_t> counter{0};
  std::string key(1, '/');
  key.append(prefix);
  key += '-';
  key += std::to_string(::getpid());
  key += '-';
  key += std::to_string(counter++);
  return key;
}

}  // namespace psw::runtime
