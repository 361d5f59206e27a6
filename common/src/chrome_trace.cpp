#include "psw/common/chrome_trace.hpp"

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"
#include "psw/common/output.hpp"

namespace psw {

// Note [One Chrome trace writer] ----------------------------------------------------------

namespace chrome_trace_writer {
constexpr std::size_t kFlushAt = std::size_t{1} << 20;
constexpr const char* kHead = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
}  // namespace chrome_trace_writer

ChromeTraceWriter::ChromeTraceWriter(const std::filesystem::path& path, std::size_t max_slices)
    : out_(std::make_unique<OutputFile>(path)), max_slices_(max_slices) {
  buffer_ = chrome_trace_writer::kHead;
}

ChromeTraceWriter::ChromeTraceWriter(std::size_t max_slices) : max_slices_(max_slices) {
  buffer_ = chrome_trace_writer::kHead;
}

ChromeTraceWriter::~ChromeTraceWriter() = default;

void ChromeTraceWriter::event(const std::string& text) {
  PSW_CHECK(!finished_, "a Chrome trace written after its end");
  if (!first_) buffer_ += ",\n";
  first_ = false;
  buffer_ += text;
  if (out_ && buffer_.size() >= chrome_trace_writer::kFlushAt) flush();
}

void ChromeTraceWriter::flush() {
  out_->write(buffer_);
  buffer_.clear();
}

void ChromeTraceWriter::process_name(int pid, std::string_view name) {
  event(nlohmann::json{{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}}.dump());
}

void ChromeTraceWriter::thread_name(int pid, int tid, std::string_view name) {
  event(nlohmann::json{{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}}
            .dump());
}

void ChromeTraceWriter::slice(std::string_view name, std::string_view category, int pid, int tid, Duration start,
                              Duration end, const nlohmann::json* args) {
  PSW_CHECK(end >= start, "a Chrome trace slice '", name, "' ends before it starts");
  if (written_ >= max_slices_) {
    ++dropped_;
    return;
  }
  ++written_;
  // Times as exact decimals (chrome_trace_us): written into the text, not through a double.
  std::string text = "{\"name\":" + nlohmann::json(name).dump();
  if (!category.empty()) text += ",\"cat\":" + nlohmann::json(category).dump();
  text += ",\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
          ",\"ts\":" + chrome_trace_us(start) + ",\"dur\":" + chrome_trace_us(end - start);
  if (args != nullptr && !args->is_null()) text += ",\"args\":" + args->dump();
  text += "}";
  event(text);
}

std::string ChromeTraceWriter::finish(const nlohmann::json* other) {
  PSW_CHECK(!finished_, "a Chrome trace finished twice");
  nlohmann::json data = other != nullptr && other->is_object() ? *other : nlohmann::json::object();
  data["events_dropped"] = dropped_;
  buffer_ += "\n],\"otherData\":" + data.dump() + "}\n";
  finished_ = true;
  if (!out_) return std::move(buffer_);
  flush();
  out_->close();
  return {};
}

std::string chrome_trace_us(Duration d) {
  const std::int64_t ns = d.ns();
  // Magnitude in unsigned arithmetic: -INT64_MIN does not fit an int64.
  const std::uint64_t magnitude = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  const auto thousandths = static_cast<unsigned>(magnitude % 1000);
  const char fraction[4] = {static_cast<char>('0' + thousandths / 100), static_cast<char>('0' + thousandths / 10 % 10),
                            static_cast<char>('0' + thousandths % 10), '\0'};
  std::string out = ns < 0 ? "-" : "";
  out += std::to_string(magnitude / 1000);
  out += '.';
  out += fraction;
  return out;
}

std::string timeline_to_chrome_trace(const Timeline& timeline, const std::string& title) {
  return timelines_to_chrome_trace({{title, timeline}});
}

std::string timelines_to_chrome_trace(const std::vector<std::pair<std::string, Timeline>>& timelines) {
  using nlohmann::json;
  PSW_CHECK(!timelines.empty(), "a Chrome trace needs at least one timeline");
  constexpr int kCopyTrack = 1;
  constexpr int kComputeTrack = 2;
  ChromeTraceWriter trace;
  json totals = json::array();
  for (std::size_t k = 0; k < timelines.size(); ++k) {
    const auto& [title, timeline] = timelines[k];
    const int pid = static_cast<int>(k) + 1;
    trace.process_name(pid, title);
    trace.thread_name(pid, kCopyTrack, "PCIe copy (host to device)");
    trace.thread_name(pid, kComputeTrack, "GPU compute");
    for (std::size_t g = 0; g < timeline.groups.size(); ++g) {
      const auto& t = timeline.groups[g];
      const json args = {{"group", g}, {"first_layer", t.group.first}, {"last_layer", t.group.last}, {"bytes", t.bytes}};
      trace.slice("copy group " + std::to_string(g), "transfer", pid, kCopyTrack, t.transfer_start, t.transfer_end,
                  &args);
      trace.slice("compute group " + std::to_string(g), "compute", pid, kComputeTrack, t.compute_start, t.compute_end,
                  &args);
    }
    totals.push_back({{"title", title},
                      {"total_ns", timeline.total.ns()},
                      {"startup_ns", timeline.startup.ns()},
                      {"overhead_ns", timeline.overhead.ns()},
                      {"ready_ns", timeline.ready.ns()}});
  }
  json other = totals[0];
  other["timelines"] = totals;
  return trace.finish(&other);
}

}  // namespace psw
