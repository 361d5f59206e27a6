// The system shared memory extension against the fake service (fake_inference_service.hpp):
// registering, listing and unregistering regions, inputs and outputs through regions with the
// bytes checked, every protocol error, a region unregistered while a request reads it, an object
// shrunk under the server, the TCP endpoint refusing, and nothing left in /dev/shm.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_inference_service.hpp"
#include "grpc_test_support.hpp"
#include "grpc_service.grpc.pb.h"
#include "psw/common/error.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"

namespace psw::runtime {
namespace {

namespace fs = std::filesystem;
using Code = ServiceError::Code;
using namespace grpc_test_support;

std::vector<float> floats_at(const char* data, std::size_t count) {
  std::vector<float> values(count);
  std::memcpy(values.data(), data, count * sizeof(float));
  return values;
}

void put_floats(char* data, const std::vector<float>& values) {
  std::memcpy(data, values.data(), values.size() * sizeof(float));
}

// Names in /dev/shm that this process made (the tests' and the client's prefixes).
std::vector<std::string> own_shm_names() {
  std::vector<std::string> names;
  const std::string pid = std::to_string(::getpid());
  for (const auto& entry : fs::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.find("-" + pid + "-") != std::string::npos &&
        (name.rfind("psw-test", 0) == 0 || name.rfind("psw-client", 0) == 0)) {
      names.push_back(name);
    }
  }
  return names;
}

template <typename Tensor>
void place(Tensor* tensor, const std::string& region, std::int64_t byte_size, std::int64_t offset = 0) {
  auto& parameters = *tensor->mutable_parameters();
  parameters["shared_memory_region"].set_string_param(region);
  parameters["shared_memory_byte_size"].set_int64_param(byte_size);
  if (offset != 0) parameters["shared_memory_offset"].set_int64_param(offset);
}

class SharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/psw-shm-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    server_ = std::make_unique<GrpcFrontEnd>(service_, Endpoint{(dir_ / "psw.sock").string(), ""}, kMaxMessage);
    client_ = std::make_unique<Client>(server_->target());
    object_ = std::make_unique<SharedMemoryObject>(unique_shared_memory_key("psw-test"), 4096);
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
    object_.reset();
    fs::remove_all(dir_);
    // Every object a test made, and every one the client made, is gone with its owner.
    EXPECT_EQ(own_shm_names(), std::vector<std::string>{});
  }

  grpc::Status send(const inference::ModelInferRequest& request, inference::ModelInferResponse* response) {
    auto stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->ModelInfer(&context, request, response);
  }

  // "double" on a [2, 4] FP32 input in region `region` at `offset`.
  static inference::ModelInferRequest placed_request(const std::string& region, std::int64_t offset,
                                                     std::int64_t byte_size = 32) {
    inference::ModelInferRequest request;
    request.set_model_name("double");
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(2);
    input->add_shape(4);
    place(input, region, byte_size, offset);
    return request;
  }

  fs::path dir_;
  testing::FakeInferenceService service_;
  std::unique_ptr<GrpcFrontEnd> server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<SharedMemoryObject> object_;
};

const std::vector<float> kInput = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 8.0f, 0.0f, -1.0f};

TEST_F(SharedMemoryTest, RegisterStatusUnregister) {
  Client& c = *client_;
  EXPECT_TRUE(c.system_shared_memory_status().empty());
  c.register_system_shared_memory("in", object_->key(), 1024, 128);
  c.register_system_shared_memory("out", object_->key(), 64);
  const auto all = c.system_shared_memory_status();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "in");
  EXPECT_EQ(all[0].key, object_->key());
  EXPECT_EQ(all[0].offset, 128u);
  EXPECT_EQ(all[0].byte_size, 1024u);
  EXPECT_EQ(all[1].name, "out");
  const auto one = c.system_shared_memory_status("out");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].byte_size, 64u);

  std::string message;
  EXPECT_EQ(error_code_of([&] { c.system_shared_memory_status("nope"); }, &message), Code::NotFound);
  EXPECT_NE(message.find("no shared memory region 'nope'"), std::string::npos) << message;
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("in", object_->key(), 8); }, &message),
            Code::AlreadyExists);
  EXPECT_NE(message.find("'in' is already registered"), std::string::npos) << message;

  c.unregister_system_shared_memory("in");
  ASSERT_EQ(c.system_shared_memory_status().size(), 1u);
  c.unregister_system_shared_memory("never-registered");  // no error, as Triton
  c.register_system_shared_memory("in", object_->key(), 8);  // the name is free again
  c.unregister_system_shared_memory();                      // all
  EXPECT_TRUE(c.system_shared_memory_status().empty());
}

TEST_F(SharedMemoryTest, RegisterRefusesBadKeysAndRanges) {
  Client& c = *client_;
  std::string message;
  for (const std::string key : {"no-slash", "/", "/a/b", "/..", "/.", "/dev/shm/x", "../etc/passwd"}) {
    EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", key, 8); }, &message), Code::InvalidArgument)
        << key;
    EXPECT_NE(message.find("is not a POSIX shared memory name"), std::string::npos) << key << ": " << message;
  }
  const std::string missing = unique_shared_memory_key("psw-test-missing");
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", missing, 8); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("cannot open the object read-write: No such file or directory"), std::string::npos) << message;

  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", object_->key(), 4097); }, &message),
            Code::InvalidArgument);
  EXPECT_NE(message.find("past the end of the object, which has 4096 bytes"), std::string::npos) << message;
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", object_->key(), 8, 4090); }), Code::InvalidArgument);
  // offset + byte_size wrapping around 2^64 is still past the end.
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", object_->key(), 16, ~std::uint64_t{0} - 7); }),
            Code::InvalidArgument);
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", object_->key(), 0); }, &message),
            Code::InvalidArgument);
  EXPECT_NE(message.find("byte_size is 0"), std::string::npos) << message;
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("", object_->key(), 8); }), Code::InvalidArgument);

  // Something in /dev/shm that is not a shared memory object.
  const std::string fifo = unique_shared_memory_key("psw-test-fifo");
  ASSERT_EQ(::mkfifo(("/dev/shm" + fifo).c_str(), 0600), 0);
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", fifo, 8); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("not a shared memory object"), std::string::npos) << message;
  ::unlink(("/dev/shm" + fifo).c_str());
  EXPECT_TRUE(c.system_shared_memory_status().empty());  // nothing half-registered
}

TEST_F(SharedMemoryTest, InputAndOutputThroughRegionsGiveTheRawBytes) {
  // Input at 256 in region "io" (which starts at 64 in the object), output at 1024 of "io".
  client_->register_system_shared_memory("io", object_->key(), 2048, 64);
  put_floats(object_->data() + 64 + 256, kInput);
  for (const bool service_writes : {true, false}) {
    SCOPED_TRACE(service_writes ? "the service writes the output region" : "the front end writes it");
    service_.write_output_destinations = service_writes;
    std::memset(object_->data() + 64 + 1024, 0, 32);
    inference::ModelInferRequest request = placed_request("io", 256);
    place(request.add_outputs(), "io", 32, 1024);
    request.mutable_outputs(0)->set_name("y");
    inference::ModelInferResponse response;
    const grpc::Status status = send(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(service_.last_input_borrowed());  // the service read the region, not a copy
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_EQ(response.outputs(0).name(), "y");
    EXPECT_EQ(response.outputs(0).datatype(), "FP32");
    EXPECT_EQ(std::vector<std::int64_t>(response.outputs(0).shape().begin(), response.outputs(0).shape().end()),
              (std::vector<std::int64_t>{2, 4}));
    // As Triton: an entry per output, empty for one in shared memory.
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_TRUE(response.raw_output_contents(0).empty());
    const std::vector<float> out = floats_at(object_->data() + 64 + 1024, 8);
    for (std::size_t i = 0; i < kInput.size(); ++i) EXPECT_EQ(out[i], 2 * kInput[i]) << i;
  }

  // The input in a region, the output raw: the same bytes as a request that carries them.
  inference::ModelInferRequest mixed = placed_request("io", 256);
  inference::ModelInferResponse from_region;
  ASSERT_TRUE(send(mixed, &from_region).ok());
  inference::ModelInferRequest raw;
  raw.set_model_name("double");
  auto* input = raw.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(2);
  input->add_shape(4);
  raw.add_raw_input_contents(floats_to_bytes(kInput));
  inference::ModelInferResponse from_message;
  ASSERT_TRUE(send(raw, &from_message).ok());
  ASSERT_EQ(from_region.raw_output_contents_size(), 1);
  EXPECT_EQ(from_region.raw_output_contents(0), from_message.raw_output_contents(0));
  EXPECT_EQ(from_region.raw_output_contents(0).size(), 32u);
}

TEST_F(SharedMemoryTest, ClientStagingMatchesRawRequests) {
  const ModelInfo model = client_->model_metadata("double");
  InferRequest request{"double", "", "staged", {TensorData{"x", "FP32", {2, 4}, floats_to_bytes(kInput)}}};
  const InferResponse raw = client_->infer(request);
  {
    SharedMemoryStaging staging(*client_, model, request);
    EXPECT_EQ(client_->system_shared_memory_status().size(), 1u);
    EXPECT_EQ(own_shm_names(), std::vector<std::string>{object_->key().substr(1)})
        << "the staging object's name is unlinked once registered";
    ASSERT_EQ(staging.placement().outputs.size(), 1u);
    ASSERT_TRUE(staging.placement().outputs[0].shared_memory.has_value());
    EXPECT_EQ(staging.placement().outputs[0].shared_memory->byte_size, 32);
    EXPECT_EQ(staging.placement().outputs[0].shared_memory->offset, 64);  // after the input, aligned
    InferResponse placed = client_->infer(request, staging.placement());
    ASSERT_EQ(placed.outputs.size(), 1u);
    EXPECT_TRUE(placed.outputs[0].bytes.empty());  // not in the message
    staging.read_outputs(placed);
    EXPECT_EQ(placed.outputs[0].bytes, raw.outputs[0].bytes);
    EXPECT_EQ(placed.outputs[0].shape, raw.outputs[0].shape);
    // A second request through the same region, with other values.
    request.inputs[0].bytes = floats_to_bytes(std::vector<float>(8, 0.5f));
    staging.write_inputs(request);
    placed = client_->infer(request, staging.placement());
    staging.read_outputs(placed);
    EXPECT_EQ(placed.outputs[0].bytes, floats_to_bytes(std::vector<float>(8, 1.0f)));
    request.inputs[0].shape = {3, 4};
    request.inputs[0].bytes = floats_to_bytes(std::vector<float>(12, 0.5f));
    EXPECT_THROW(staging.write_inputs(request), InputError);  // not the size laid out
  }
  EXPECT_TRUE(client_->system_shared_memory_status().empty());  // unregistered by the destructor
}

TEST_F(SharedMemoryTest, ProtocolErrorsNameWhatIsWrong) {
  client_->register_system_shared_memory("r", object_->key(), 64);
  put_floats(object_->data(), kInput);
  inference::ModelInferResponse response;
  auto expect = [&](const inference::ModelInferRequest& request, grpc::StatusCode code, const std::string& text) {
    const grpc::Status status = send(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_NE(status.error_message().find(text), std::string::npos) << status.error_message();
  };

  expect(placed_request("nope", 0), grpc::StatusCode::NOT_FOUND,
         "input 'x': no shared memory region 'nope' is registered");
  expect(placed_request("r", 0, 28), grpc::StatusCode::INVALID_ARGUMENT,
         "input 'x': shared_memory_byte_size is 28, but FP32 [2, 4] needs 32");
  expect(placed_request("r", 40), grpc::StatusCode::INVALID_ARGUMENT,
         "input 'x': shared_memory_offset 40 and shared_memory_byte_size 32 are outside region 'r', which has 64 bytes");

  inference::ModelInferRequest both = placed_request("r", 0);
  both.add_raw_input_contents(floats_to_bytes(kInput));
  expect(both, grpc::StatusCode::INVALID_ARGUMENT,
         "input 'x' is in shared memory region 'r', yet raw_input_contents has 1 entries for the 0 inputs not in "
         "shared memory");

  inference::ModelInferRequest typed = placed_request("r", 0);
  for (int i = 0; i < 8; ++i) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
  expect(typed, grpc::StatusCode::INVALID_ARGUMENT, "also carries typed `contents`; give a tensor's bytes one way only");

  // Two inputs, one in a region, the other with no raw entry.
  inference::ModelInferRequest missing = placed_request("r", 0);
  auto* z = missing.add_inputs();
  z->set_name("z");
  z->set_datatype("FP32");
  z->add_shape(1);
  expect(missing, grpc::StatusCode::INVALID_ARGUMENT,
         "the request has 1 inputs not in shared memory but 0 raw_input_contents entries");

  inference::ModelInferRequest no_size = placed_request("r", 0);
  no_size.mutable_inputs(0)->mutable_parameters()->erase("shared_memory_byte_size");
  expect(no_size, grpc::StatusCode::INVALID_ARGUMENT, "given without shared_memory_byte_size");

  inference::ModelInferRequest no_region = placed_request("r", 0);
  no_region.mutable_inputs(0)->mutable_parameters()->erase("shared_memory_region");
  no_region.add_raw_input_contents(floats_to_bytes(kInput));
  expect(no_region, grpc::StatusCode::INVALID_ARGUMENT, "given without shared_memory_region");

  inference::ModelInferRequest string_size = placed_request("r", 0);
  (*string_size.mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_string_param("32");
  expect(string_size, grpc::StatusCode::INVALID_ARGUMENT, "'shared_memory_byte_size' must be an int64_param");

  inference::ModelInferRequest negative = placed_request("r", 0);
  (*negative.mutable_inputs(0)->mutable_parameters())["shared_memory_offset"].set_int64_param(-8);
  expect(negative, grpc::StatusCode::INVALID_ARGUMENT, "'shared_memory_offset' is -8, negative");

  inference::ModelInferRequest small_output = placed_request("r", 0);
  small_output.add_outputs()->set_name("y");
  place(small_output.mutable_outputs(0), "r", 16, 32);
  expect(small_output, grpc::StatusCode::INVALID_ARGUMENT,
         "output 'y' has 32 bytes (FP32 [2, 4]), but its shared memory range holds only 16");

  inference::ModelInferRequest unknown_output_region = placed_request("r", 0);
  unknown_output_region.add_outputs()->set_name("y");
  place(unknown_output_region.mutable_outputs(0), "elsewhere", 32);
  expect(unknown_output_region, grpc::StatusCode::NOT_FOUND,
         "output 'y': no shared memory region 'elsewhere' is registered");

  EXPECT_TRUE(client_->server_live());
}

TEST_F(SharedMemoryTest, UnregisteringDuringARequestKeepsItsMemoryMapped) {
  service_.slow_delay = std::chrono::milliseconds(500);
  client_->register_system_shared_memory("r", object_->key(), 64);
  put_floats(object_->data(), kInput);
  object_->unlink_name();  // the server's mapping is all that is left besides ours
  inference::ModelInferRequest request = placed_request("r", 0);
  request.set_model_name("slow");
  request.add_outputs()->set_name("y");
  place(request.mutable_outputs(0), "r", 32, 32);
  inference::ModelInferResponse response;
  auto reply = std::async(std::launch::async, [&] { return send(request, &response); });
  // Wait until the request is in the service (it then sleeps there for slow_delay).
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (service_.requests_received("slow") == 0 && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(service_.requests_received("slow"), 1);
  client_->unregister_system_shared_memory();
  EXPECT_TRUE(client_->system_shared_memory_status().empty());
  const grpc::Status status = reply.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::vector<float> out = floats_at(object_->data() + 32, 8);
  for (std::size_t i = 0; i < kInput.size(); ++i) EXPECT_EQ(out[i], 2 * kInput[i]) << i;
  // And now the region is gone for new requests.
  EXPECT_EQ(send(placed_request("r", 0), &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SharedMemoryTest, ShrunkObjectIsAnErrorNotACrash) {
  client_->register_system_shared_memory("r", object_->key(), 4096);
  {
    const int fd = ::shm_open(object_->key().c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 16), 0);
    ::close(fd);
  }
  inference::ModelInferResponse response;
  const grpc::Status status = send(placed_request("r", 0), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("has shrunk to 16 bytes since it was registered"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(client_->server_live());
}

TEST(SharedMemoryCopy, GuardedCopySurvivesAShrunkObjectTwice) {
  SharedMemoryObject object(unique_shared_memory_key("psw-test-guard"), 3 * 4096);
  const int fd = ::shm_open(object.key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  std::vector<char> buffer(3 * 4096);
  std::memset(object.data(), 7, object.size());
  EXPECT_TRUE(copy_guarded(buffer.data(), object.data(), object.size()));
  EXPECT_EQ(buffer[3 * 4096 - 1], 7);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);  // the last two pages are gone: touching them is SIGBUS
  ::close(fd);
  EXPECT_FALSE(copy_guarded(buffer.data(), object.data(), object.size()));
  EXPECT_FALSE(copy_guarded(object.data() + 2 * 4096, buffer.data(), 16));  // a write, and a second fault
  EXPECT_TRUE(copy_guarded(buffer.data(), object.data(), 4096));           // what is left still reads
}

TEST(SharedMemoryKeys, OnlyPosixSharedMemoryNames) {
  EXPECT_TRUE(is_shared_memory_key("/psw-input"));
  EXPECT_TRUE(is_shared_memory_key("/a"));
  EXPECT_TRUE(is_shared_memory_key("/" + std::string(254, 'x')));
  EXPECT_FALSE(is_shared_memory_key("/" + std::string(255, 'x')));
  for (const char* key : {"", "/", "a", "/a/b", "//a", "/.", "/..", "/tmp/x"}) EXPECT_FALSE(is_shared_memory_key(key)) << key;
  EXPECT_FALSE(is_shared_memory_key(std::string("/a\0b", 4)));
}

TEST(SharedMemoryObjects, CreateExclusivelyAndUnlinkOnDestruction) {
  const std::string key = unique_shared_memory_key("psw-test-own");
  {
    SharedMemoryObject object(key, 100);
    EXPECT_EQ(object.size(), 100u);
    struct stat info {};
    ASSERT_EQ(::stat(("/dev/shm" + key).c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u);
    EXPECT_THROW(SharedMemoryObject(key, 100), InputError);  // O_EXCL: never someone else's
  }
  EXPECT_FALSE(fs::exists("/dev/shm" + key));
  EXPECT_THROW(SharedMemoryObject("not-a-key", 100), InputError);
  EXPECT_THROW(SharedMemoryObject(unique_shared_memory_key("psw-test-own"), 0), InputError);
}

// Note [Raw inputs received in place]: each slot is lent to one holder at a time and comes back
// when the last copy of its lease is gone; an input larger than a slot, or one more holder than
// slots, gets none. The owner it comes with outlives the lease (a service's weak copy stays
// valid), and a second mapping of the object (what a worker makes) sees the bytes written.
TEST(InputStaging, SlotsAreLentOnceAndComeBackWithTheirLastHolder) {
  InputStaging staging(2, 4096);
  EXPECT_EQ(staging.slots(), 2u);
  EXPECT_EQ(staging.slots_free(), 2u);
  EXPECT_FALSE(staging.acquire(4097).has_value());
  std::optional<BorrowedBytes> a = staging.acquire(4096);
  std::optional<BorrowedBytes> b = staging.acquire(1);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->data, b->data);
  EXPECT_EQ(a->size, 4096u);
  EXPECT_EQ(a->region, b->region);
  EXPECT_EQ(a->region->id, staging.whole().region->id);
  EXPECT_EQ(staging.slots_free(), 0u);
  EXPECT_FALSE(staging.acquire(1).has_value());

  const std::weak_ptr<void> owner = a->owner;
  BorrowedBytes copy = *a;  // as a request copied by the service
  char* lent = a->data;
  a.reset();
  EXPECT_EQ(staging.slots_free(), 0u);  // the copy still holds it
  copy = BorrowedBytes{};
  EXPECT_EQ(staging.slots_free(), 1u);
  EXPECT_FALSE(owner.expired());
  std::optional<BorrowedBytes> again = staging.acquire(16);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->data, lent);
}

TEST(InputStaging, ItsObjectIsSealedAtItsSizeAndSharedWithAnotherMapping) {
  InputStaging staging(3, 8192);
  const BorrowedBytes whole = staging.whole();
  ASSERT_NE(whole.region, nullptr);
  EXPECT_EQ(whole.size, 3u * 8192u);
  EXPECT_EQ(whole.region->byte_size, 3u * 8192u);
  struct stat info {};
  ASSERT_EQ(::fstat(whole.region->fd, &info), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(info.st_size), 3u * 8192u);
  EXPECT_NE(::ftruncate(whole.region->fd, 100), 0);  // sealed: nobody shrinks it under a reader

  void* other = ::mmap(nullptr, whole.size, PROT_READ, MAP_SHARED, whole.region->fd, 0);
  ASSERT_NE(other, MAP_FAILED);
  std::optional<BorrowedBytes> slot = staging.acquire(5);
  ASSERT_TRUE(slot);
  std::memcpy(slot->data, "bytes", 5);
  const std::size_t at = static_cast<std::size_t>(slot->data - whole.data);
  EXPECT_EQ(std::string(static_cast<const char*>(other) + at, 5), "bytes");
  ::munmap(other, whole.size);

  std::weak_ptr<void> kept;
  {
    InputStaging gone(1, 64);
    kept = gone.whole().owner;
    EXPECT_FALSE(kept.expired());
  }
  EXPECT_TRUE(kept.expired());  // the service sees it gone with its staging
}

TEST(InputStaging, RefusesNoSlotsAndEmptySlots) {
  EXPECT_THROW(InputStaging(0, 64), InputError);
  EXPECT_THROW(InputStaging(2, 0), InputError);
}

TEST(SharedMemoryOverTcp, IsNotOffered) {
  testing::FakeInferenceService service;
  GrpcFrontEnd tcp(service, Endpoint{"", "127.0.0.1:0"}, kMaxMessage);
  Client c(tcp.target());
  SharedMemoryObject object(unique_shared_memory_key("psw-test-tcp"), 64);
  std::string message;
  EXPECT_EQ(error_code_of([&] { c.register_system_shared_memory("r", object.key(), 64); }, &message), Code::Internal);
  EXPECT_NE(message.find("UNIMPLEMENTED: system shared memory is offered only on the server's Unix socket"),
            std::string::npos)
      << message;
  InferRequest request{"double", "", "", {TensorData{"x", "FP32", {2, 4}, {}}}};
  SharedMemoryPlacement placement;
  placement.inputs["x"] = {"r", 0, 32};
  EXPECT_EQ(error_code_of([&] { c.infer(request, placement); }, &message), Code::InvalidArgument);
  EXPECT_NE(message.find("offers system shared memory only on its Unix socket"), std::string::npos) << message;
}

}  // namespace
}  // namespace psw::runtime
