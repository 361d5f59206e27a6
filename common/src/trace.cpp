// Request traces (trace.hpp): the project's CSV, the three public Azure formats, and the
// synthetic Poisson and bursty sources.
//
// Every reader streams: a std::ifstream read line by line, so memory does not grow with the
// trace. The two exceptions are small by construction: Azure Functions 2021 (a couple of
// hundred rows that must be re-sorted by their computed arrival) and the counts matrix of
// Azure Functions 2019 (functions x minutes; the arrivals themselves are generated one minute
// at a time). Every error is an InputError "<file>:<line>: <what is wrong>".
//
// Randomness: one std::mt19937_64 per source, seeded from the caller's seed. Uniform integers
// come from Lemire's multiply-shift rejection, uniform doubles from the top 53 bits and
// exponentials from -log(u); no std::*_distribution is used, so the sequences do not depend
// on the standard library (only on std::log, which is IEEE-accurate to within an ulp on every
// mainstream libm; the same build always gives the same sequence).
#include "psw/common/trace.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <string_view>
#include <utility>

#include "psw/common/error.hpp"

namespace psw {

namespace {

constexpr std::int64_t kNsPerSecond = 1'000'000'000;
constexpr std::int64_t kNsPerMinute = 60 * kNsPerSecond;
constexpr std::int64_t kNsPerDay = 86'400 * kNsPerSecond;
constexpr int kMinutesPerDay = 1440;

// ---------------------------------------------------------------------------------------
// Random numbers, independent of the standard library's distributions.

// Uniform integer in [0, n), n > 0, unbiased (Lemire 2019).
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n) {
  Uint128 m = static_cast<Uint128>(rng()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<Uint128>(rng()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

// Uniform double in [0, 1).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Standard exponential (mean 1): -log(u) with u in (0, 1].
double exponential1(std::mt19937_64& rng) {
  const double u = static_cast<double>((rng() >> 11) + 1) * 0x1.0p-53;
  return -std::log(u);
}

// ---------------------------------------------------------------------------------------
// Lines and fields.

std::string_view trim_cr(std::string_view s) {
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; });
}

// Splits a line at commas (the traces have no quoted fields).
void split_csv(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return;
    }
    fields.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

std::string join(const std::vector<std::string>& names, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += sep;
    out += names[i];
  }
  return out;
}

// Reads a text trace line by line: strips "\r" and a UTF-8 byte-order mark, skips `#`
// comments where the format allows them, accepts blank lines only at the end.
// Only regular files are read (a FIFO would block, /dev/zero never ends), and a line is at
// most kMaxLineBytes long: the longest real lines, Azure Functions 2019's 1444 columns of
// counts, are about 10 KiB.
class LineReader {
 public:
  static constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;  // 1 MiB

  LineReader(const std::filesystem::path& path, bool allow_comments)
      : name_(path.string()), allow_comments_(allow_comments) {
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) {
      throw InputError(detail::concat(name_, ": the trace file does not exist"));
    }
    if (std::filesystem::is_directory(status)) {
      throw InputError(detail::concat(name_, ": the trace path is a directory, not a file"));
    }
    if (!std::filesystem::is_regular_file(status)) {
      throw InputError(detail::concat(
          name_, ": the trace path is not a regular file (a device, FIFO or socket)"));
    }
    in_.open(path, std::ios::binary);
    if (!in_) throw InputError(detail::concat(name_, ": cannot open the trace file"));
  }

  // The next record (non-comment, non-blank line), or false at the end of the file.
  bool next(std::string_view& out) {
    while (read_line()) {
      ++line_;
      std::string_view text = trim_cr(buffer_);
      if (line_ == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
      if (is_blank(text)) {
        if (first_blank_ == 0) first_blank_ = line_;
        continue;
      }
      if (allow_comments_ && text.front() == '#') continue;
      if (first_blank_ != 0) {
        throw InputError(detail::concat(name_, ":", first_blank_,
                                        ": blank line inside the trace (blank lines are allowed "
                                        "only at the end)"));
      }
      out = text;
      return true;
    }
    if (in_.bad()) throw Error(detail::concat(name_, ":", line_, ": read error"));
    return false;
  }

  const std::string& name() const { return name_; }
  std::int64_t line() const { return line_; }

 private:
  // One line into buffer_ (without its '\n'); false at the end of the file.
  bool read_line() {
    buffer_.clear();
    std::streambuf* buf = in_.rdbuf();
    bool any = false;
    for (int c = buf->sbumpc(); c != std::char_traits<char>::eof(); c = buf->sbumpc()) {
      any = true;
      if (c == '\n') return true;
      if (buffer_.size() >= kMaxLineBytes) {
        throw InputError(detail::concat(name_, ":", line_ + 1, ": the line is longer than ",
                                        kMaxLineBytes >> 20, " MiB (not a trace?)"));
      }
      buffer_.push_back(static_cast<char>(c));
    }
    return any;
  }

 public:
  // "<file>:<line>: " for messages about the current record.
  std::string where() const { return detail::concat(name_, ":", line_, ": "); }

 private:
  std::string name_;
  bool allow_comments_;
  std::ifstream in_;
  std::string buffer_;
  std::int64_t line_ = 0;
  std::int64_t first_blank_ = 0;
};

// Reads the header (the first record) and checks it is exactly `expected`.
void expect_header(LineReader& reader, const std::vector<std::string>& expected,
                   std::vector<std::string_view>& fields) {
  std::string_view line;
  if (!reader.next(line)) {
    throw InputError(
        detail::concat(reader.name(), ": the trace has no requests (the file is empty)"));
  }
  split_csv(line, fields);
  bool ok = fields.size() == expected.size();
  for (std::size_t i = 0; ok && i < fields.size(); ++i) ok = fields[i] == expected[i];
  if (!ok) {
    std::string shown = expected.size() > 8
                            ? detail::concat(expected[0], ",", expected[1], ",", expected[2], ",",
                                             expected[3], ",", expected[4], ",", expected[5],
                                             ",...,", expected.back(), " (", expected.size(),
                                             " columns)")
                            : join(expected, ",");
    std::string detail_text;
    if (fields.size() != expected.size()) {
      detail_text = detail::concat("found ", fields.size(), " columns");
    } else {
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (fields[i] != expected[i]) {
          detail_text = detail::concat("column ", i + 1, " is '", fields[i], "', expected '",
                                       expected[i], "'");
          break;
        }
      }
    }
    throw InputError(detail::concat(reader.where(), "wrong header: expected the columns ", shown,
                                    "; ", detail_text));
  }
}

void expect_columns(const LineReader& reader, const std::vector<std::string_view>& fields,
                    std::size_t expected, const char* names) {
  if (fields.size() != expected) {
    throw InputError(detail::concat(reader.where(), "expected ", expected, " columns (", names,
                                    "), found ", fields.size()));
  }
}

// A non-negative integer column.
std::int64_t parse_count(const LineReader& reader, std::string_view field, const char* column) {
  if (field.empty()) throw InputError(detail::concat(reader.where(), "column '", column, "' is empty"));
  std::int64_t value = 0;
  const char* first = field.data();
  const char* last = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range) {
    throw InputError(detail::concat(reader.where(), "column '", column, "': '", field,
                                    "' is out of range"));
  }
  if (ec != std::errc() || ptr != last) {
    throw InputError(detail::concat(reader.where(), "column '", column, "': '", field,
                                    "' is not a non-negative integer"));
  }
  if (value < 0) {
    throw InputError(
        detail::concat(reader.where(), "column '", column, "' is negative (", field, ")"));
  }
  return value;
}

// A time in nanoseconds of a trace row (an arrival, an SLO): at most a year, as every span of
// an experiment config (check_span in experiment_config.cpp). A larger value (2^63 - 1) would
// overflow the simulation's sums later, where the row's file and line are no longer known.
std::int64_t parse_bounded_ns(const LineReader& reader, std::string_view field, const char* column) {
  constexpr std::int64_t kMaxNs = std::int64_t{86'400} * 365 * kNsPerSecond;
  const std::int64_t value = parse_count(reader, field, column);
  if (value > kMaxNs) {
    throw InputError(detail::concat(reader.where(), "column '", column, "': ", field,
                                    " ns is more than a year (", kMaxNs,
                                    " ns), the most simulated time a workload spans"));
  }
  return value;
}

// A non-negative decimal number of seconds ("57.15786004066467", "5e-05") to integer
// nanoseconds, exactly (round half up at the nanosecond), with no floating point.
std::int64_t parse_seconds_ns(const LineReader& reader, std::string_view field,
                              const char* column) {
  auto bad = [&]() {
    return InputError(detail::concat(reader.where(), "column '", column, "': '", field,
                                     "' is not a non-negative number of seconds"));
  };
  if (field.empty()) throw InputError(detail::concat(reader.where(), "column '", column, "' is empty"));
  std::size_t i = 0;
  if (field[0] == '-') {
    // Distinguish "-1.5" (a number, negative) from "-x" (not a number).
    const bool numeric = field.size() > 1 && (std::isdigit(static_cast<unsigned char>(field[1])) ||
                                              field[1] == '.');
    if (numeric) {
      throw InputError(
          detail::concat(reader.where(), "column '", column, "' is negative (", field, ")"));
    }
    throw bad();
  }
  std::string digits;  // significant digits, leading zeros dropped
  std::int64_t exponent = 0;
  bool any_digit = false;
  bool point = false;
  for (; i < field.size(); ++i) {
    const char c = field[i];
    if (c >= '0' && c <= '9') {
      any_digit = true;
      if (!(digits.empty() && c == '0')) digits.push_back(c);
      if (point) --exponent;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      break;
    }
  }
  if (!any_digit) throw bad();
  if (i < field.size()) {
    if (field[i] != 'e' && field[i] != 'E') throw bad();
    ++i;
    bool negative = false;
    if (i < field.size() && (field[i] == '+' || field[i] == '-')) negative = field[i++] == '-';
    if (i == field.size()) throw bad();
    std::int64_t e = 0;
    for (; i < field.size(); ++i) {
      if (field[i] < '0' || field[i] > '9') throw bad();
      e = std::min<std::int64_t>(e * 10 + (field[i] - '0'), 100'000);
    }
    exponent += negative ? -e : e;
  }
  if (digits.empty()) return 0;
  // value = digits * 10^exponent seconds = digits * 10^(exponent + 9) ns.
  const std::int64_t scale = exponent + 9;
  auto too_large = [&]() {
    return InputError(detail::concat(reader.where(), "column '", column, "': '", field,
                                     "' is too large"));
  };
  const std::int64_t keep = static_cast<std::int64_t>(digits.size()) + std::min<std::int64_t>(scale, 0);
  if (keep < 0) return 0;  // below half a nanosecond
  if (keep > 19) throw too_large();
  Uint128 value = 0;
  for (std::int64_t k = 0; k < keep; ++k) value = value * 10 + static_cast<unsigned>(digits[static_cast<std::size_t>(k)] - '0');
  if (scale < 0 && digits[static_cast<std::size_t>(keep)] >= '5') value += 1;
  const auto limit = static_cast<Uint128>(std::numeric_limits<std::int64_t>::max());
  for (std::int64_t k = 0; k < scale; ++k) {
    value *= 10;
    if (value > limit) throw too_large();
  }
  if (value > limit) throw too_large();
  return static_cast<std::int64_t>(value);
}

void check_batch_slo(const char* who, int batch, Duration slo) {
  if (batch < 1) throw InputError(detail::concat(who, ": batch must be at least 1, got ", batch));
  if (slo < Duration::zero()) {
    throw InputError(detail::concat(who, ": slo must be non-negative, got ", slo.ns(), " ns"));
  }
}

std::uint32_t map_function(const LineReader& reader, const TraceMapping& mapping,
                           std::string_view function, const char* column) {
  const auto it = mapping.function_model.find(std::string(function));
  if (it != mapping.function_model.end()) return it->second;
  if (mapping.default_model) return *mapping.default_model;
  throw InputError(detail::concat(reader.where(), "function '", function, "' (column '", column,
                                  "') is not in the function-to-model mapping and no default "
                                  "model is set"));
}

[[noreturn]] void throw_no_requests(const std::string& name, std::int64_t header_line) {
  throw InputError(detail::concat(name, ":", header_line, ": the trace has no requests (only the header)"));
}

// A source of one request per CSV row. The subclass's constructor reads the header and then
// calls read_first_row(), so that a trace with only its header is refused at construction;
// next() hands that first row out before reading on.
class RowSource : public RequestSource {
 public:
  std::optional<Request> next() final {
    if (first_) return std::exchange(first_, std::nullopt);
    return read_row();
  }

 protected:
  void read_first_row(const std::string& name, std::int64_t header_line) {
    first_ = read_row();
    if (!first_) throw_no_requests(name, header_line);
  }
  virtual std::optional<Request> read_row() = 0;

 private:
  std::optional<Request> first_;
};

// ---------------------------------------------------------------------------------------
// The project's CSV.

class ProjectCsvSource final : public RowSource {
 public:
  ProjectCsvSource(const std::filesystem::path& path,
                   const std::map<std::string, std::uint32_t>& model_index,
                   const std::vector<int>& model_batch)
      : reader_(path, /*allow_comments=*/true), model_index_(model_index), model_batch_(model_batch) {
    expect_header(reader_, {"arrival_ns", "model", "task", "batch", "slo_ns"}, fields_);
    read_first_row(reader_.name(), reader_.line());
  }

 private:
  std::optional<Request> read_row() override {
    std::string_view line;
    if (!reader_.next(line)) return std::nullopt;
    split_csv(line, fields_);
    expect_columns(reader_, fields_, 5, "arrival_ns,model,task,batch,slo_ns");
    Request r;
    r.arrival = nanoseconds(parse_bounded_ns(reader_, fields_[0], "arrival_ns"));
    if (r.arrival < previous_) {
      throw InputError(detail::concat(reader_.where(), "arrival_ns ", r.arrival.ns(),
                                      " is before ", previous_.ns(), " on line ", previous_line_,
                                      ": rows must be in non-decreasing arrival order"));
    }
    previous_ = r.arrival;
    previous_line_ = reader_.line();
    const auto model = model_index_.find(std::string(fields_[1]));
    if (model == model_index_.end()) {
      std::vector<std::string> known;
      for (const auto& [name, index] : model_index_) known.push_back(name);
      throw InputError(detail::concat(reader_.where(), "column 'model': unknown model '",
                                      fields_[1], "'; known models: ",
                                      known.empty() ? std::string("(none)") : join(known, ", ")));
    }
    r.model = model->second;
    if (fields_[2] == "inference") {
      r.task = Task::Inference;
    } else if (fields_[2] == "training") {
      r.task = Task::Training;
    } else {
      throw InputError(detail::concat(reader_.where(), "column 'task': unknown task '", fields_[2],
                                      "'; expected inference or training"));
    }
    const std::int64_t batch = parse_count(reader_, fields_[3], "batch");
    if (batch < 1 || batch > std::numeric_limits<int>::max()) {
      throw InputError(detail::concat(reader_.where(), "column 'batch': must be at least 1, got ",
                                      fields_[3]));
    }
    if (r.model < model_batch_.size() && batch != model_batch_[r.model]) {
      throw InputError(detail::concat(reader_.where(), "column 'batch': model '", fields_[1],
                                      "' is profiled at batch ", model_batch_[r.model],
                                      " only, so batch ", batch,
                                      " cannot be simulated (profile the model at that batch and list it as another model)"));
    }
    r.batch = static_cast<int>(batch);
    r.slo = nanoseconds(parse_bounded_ns(reader_, fields_[4], "slo_ns"));
    return r;
  }

  LineReader reader_;
  std::map<std::string, std::uint32_t> model_index_;
  std::vector<int> model_batch_;  // empty: any batch
  std::vector<std::string_view> fields_;
  Duration previous_ = Duration::zero();
  std::int64_t previous_line_ = 0;
};

// ---------------------------------------------------------------------------------------
// Azure Functions 2019: per-minute counts, spread within each minute.

class AzureFunctions2019Source final : public RequestSource {
 public:
  AzureFunctions2019Source(const std::filesystem::path& path, const TraceMapping& mapping,
                           SpreadKind spread, std::uint64_t seed, int first_minute, int minutes)
      : spread_(spread), rng_(seed), minutes_(minutes), batch_(mapping.batch), slo_(mapping.slo) {
    const std::string name = path.string();
    if (first_minute < 1 || first_minute > kMinutesPerDay) {
      throw InputError(detail::concat(name, ": first_minute must be in 1..1440, got ",
                                      first_minute));
    }
    if (minutes < 1 || minutes > kMinutesPerDay - first_minute + 1) {
      throw InputError(detail::concat(name, ": minutes must be in 1..",
                                      kMinutesPerDay - first_minute + 1, " (first_minute ",
                                      first_minute, " of 1440), got ", minutes));
    }
    check_batch_slo(name.c_str(), batch_, slo_);

    LineReader reader(path, /*allow_comments=*/false);
    std::vector<std::string> header = {"HashOwner", "HashApp", "HashFunction", "Trigger"};
    for (int m = 1; m <= kMinutesPerDay; ++m) header.push_back(std::to_string(m));
    std::vector<std::string_view> fields;
    expect_header(reader, header, fields);
    const std::int64_t header_line = reader.line();
    std::string_view line;
    while (reader.next(line)) {
      split_csv(line, fields);
      expect_columns(reader, fields, header.size(), "HashOwner,HashApp,HashFunction,Trigger,1..1440");
      if (models_.size() >= kMaxFunctions) {
        throw InputError(detail::concat(reader.where(), "more than ", kMaxFunctions,
                                        " functions"));
      }
      models_.push_back(map_function(reader, mapping, fields[2], "HashFunction"));
      for (int m = 0; m < minutes_; ++m) {
        const std::size_t column = 4 + static_cast<std::size_t>(first_minute - 1 + m);
        const std::int64_t count = parse_count(reader, fields[column], header[column].c_str());
        if (count > std::numeric_limits<std::uint32_t>::max()) {
          throw InputError(detail::concat(reader.where(), "column '", header[column], "': count ",
                                          count, " is too large"));
        }
        counts_.push_back(static_cast<std::uint32_t>(count));
      }
      // The other minutes are validated too, so a file is either good or rejected.
      for (std::size_t column = 4; column < fields.size(); ++column) {
        const auto m = static_cast<int>(column) - 4 - (first_minute - 1);
        if (m >= 0 && m < minutes_) continue;
        parse_count(reader, fields[column], header[column].c_str());
      }
    }
    if (models_.empty()) throw_no_requests(name, header_line);
  }

  std::optional<Request> next() override {
    while (pos_ == keys_.size()) {
      if (minute_ == minutes_) return std::nullopt;
      generate_minute();
    }
    const std::uint64_t key = keys_[pos_++];
    Request r;
    r.arrival = nanoseconds(minute_start_ + static_cast<std::int64_t>(key >> kFunctionBits));
    r.model = models_[key & (kMaxFunctions - 1)];
    r.batch = batch_;
    r.slo = slo_;
    return r;
  }

 private:
  // A minute's arrival is packed as (offset within the minute in ns) << 24 | function row,
  // so one integer sort orders them by time with ties broken by function row.
  static constexpr int kFunctionBits = 24;
  static constexpr std::size_t kMaxFunctions = std::size_t{1} << kFunctionBits;

  void generate_minute() {
    keys_.clear();
    pos_ = 0;
    const int m = minute_++;
    minute_start_ = static_cast<std::int64_t>(m) * kNsPerMinute;
    const std::size_t functions = models_.size();
    for (std::size_t f = 0; f < functions; ++f) {
      const std::uint32_t count = counts_[f * static_cast<std::size_t>(minutes_) + static_cast<std::size_t>(m)];
      if (count == 0) continue;
      if (spread_ == SpreadKind::Uniform) {
        // Exactly `count` arrivals, i.i.d. uniform over the minute's nanoseconds.
        for (std::uint32_t k = 0; k < count; ++k) {
          keys_.push_back(uniform_below(rng_, kNsPerMinute) << kFunctionBits | f);
        }
      } else {
        // A Poisson process of rate count/60 s restricted to the minute, generated from
        // exponential gaps (equivalently: a Poisson(count) number of arrivals placed
        // uniformly). The number of arrivals varies; its mean is `count`.
        const double mean_gap = static_cast<double>(kNsPerMinute) / count;
        double t = 0;
        while (true) {
          t += exponential1(rng_) * mean_gap;
          if (!(t < static_cast<double>(kNsPerMinute))) break;
          keys_.push_back(static_cast<std::uint64_t>(t) << kFunctionBits | f);
        }
      }
    }
    std::sort(keys_.begin(), keys_.end());
  }

  SpreadKind spread_;
  std::mt19937_64 rng_;
  int minutes_;
  int batch_;
  Duration slo_;
  std::vector<std::uint32_t> models_;  // per function row
  std::vector<std::uint32_t> counts_;  // [function][minute], the replayed minutes only
  int minute_ = 0;                     // the next minute to generate (0-based in the window)
  std::int64_t minute_start_ = 0;
  std::vector<std::uint64_t> keys_;  // the current minute's arrivals
  std::size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------
// Azure Functions 2021: one row per invocation; loaded whole and sorted by arrival.

class VectorSource final : public RequestSource {
 public:
  explicit VectorSource(std::vector<Request> requests) : requests_(std::move(requests)) {}
  std::optional<Request> next() override {
    if (pos_ == requests_.size()) return std::nullopt;
    return requests_[pos_++];
  }

 private:
  std::vector<Request> requests_;
  std::size_t pos_ = 0;
};

std::vector<Request> read_azure_functions_2021(const std::filesystem::path& path,
                                               const TraceMapping& mapping) {
  check_batch_slo(path.string().c_str(), mapping.batch, mapping.slo);
  LineReader reader(path, /*allow_comments=*/false);
  std::vector<std::string_view> fields;
  expect_header(reader, {"app", "func", "end_timestamp", "duration"}, fields);
  const std::int64_t header_line = reader.line();
  std::vector<Request> requests;
  std::string_view line;
  while (reader.next(line)) {
    split_csv(line, fields);
    expect_columns(reader, fields, 4, "app,func,end_timestamp,duration");
    const std::int64_t end = parse_seconds_ns(reader, fields[2], "end_timestamp");
    const std::int64_t duration = parse_seconds_ns(reader, fields[3], "duration");
    if (end < duration) {
      throw InputError(detail::concat(reader.where(), "end_timestamp ", fields[2],
                                      " is less than duration ", fields[3],
                                      ": the arrival (end_timestamp - duration) would be "
                                      "negative"));
    }
    Request r;
    r.arrival = nanoseconds(end - duration);
    r.model = map_function(reader, mapping, fields[1], "func");
    r.batch = mapping.batch;
    r.slo = mapping.slo;
    requests.push_back(r);
  }
  if (requests.empty()) throw_no_requests(reader.name(), header_line);
  // Stable: equal arrivals keep file order.
  std::stable_sort(requests.begin(), requests.end(),
                   [](const Request& a, const Request& b) { return a.arrival < b.arrival; });
  return requests;
}

// ---------------------------------------------------------------------------------------
// Azure LLM inference 2023.

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, std::int64_t m, std::int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool is_leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

struct Timestamp {
  std::int64_t day = 0;         // days since 1970-01-01
  std::int64_t ns_of_day = 0;   // nanoseconds since midnight
};

// "YYYY-MM-DD HH:MM:SS[.f{1,9}]"
Timestamp parse_timestamp(const LineReader& reader, std::string_view s) {
  auto bad = [&](const std::string& why) {
    return InputError(detail::concat(reader.where(), "column 'TIMESTAMP': '", s, "' ", why,
                                     " (expected YYYY-MM-DD HH:MM:SS with an optional fraction "
                                     "of up to 9 digits)"));
  };
  auto digits = [&](std::size_t at, std::size_t n) -> std::int64_t {
    std::int64_t v = 0;
    for (std::size_t k = at; k < at + n; ++k) {
      if (k >= s.size() || s[k] < '0' || s[k] > '9') throw bad("is not a valid timestamp");
      v = v * 10 + (s[k] - '0');
    }
    return v;
  };
  auto expect_char = [&](std::size_t at, char c) {
    if (at >= s.size() || s[at] != c) throw bad("is not a valid timestamp");
  };
  if (s.size() < 19) throw bad("is not a valid timestamp");
  const std::int64_t year = digits(0, 4);
  expect_char(4, '-');
  const std::int64_t month = digits(5, 2);
  expect_char(7, '-');
  const std::int64_t day = digits(8, 2);
  expect_char(10, ' ');
  const std::int64_t hour = digits(11, 2);
  expect_char(13, ':');
  const std::int64_t minute = digits(14, 2);
  expect_char(16, ':');
  const std::int64_t second = digits(17, 2);
  std::int64_t fraction_ns = 0;
  if (s.size() > 19) {
    expect_char(19, '.');
    const std::size_t n = s.size() - 20;
    if (n == 0) throw bad("has no digits after '.'");
    if (n > 9) throw bad("has a fraction of more than 9 digits");
    fraction_ns = digits(20, n);
    for (std::size_t k = n; k < 9; ++k) fraction_ns *= 10;
  }
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12) throw bad("has a month out of range");
  const std::int64_t month_days = kDays[static_cast<std::size_t>(month - 1)] + (month == 2 && is_leap(year) ? 1 : 0);
  if (day < 1 || day > month_days) throw bad("has a day out of range");
  if (hour > 23 || minute > 59 || second > 59) throw bad("has a time of day out of range");
  return {days_from_civil(year, month, day),
          ((hour * 60 + minute) * 60 + second) * kNsPerSecond + fraction_ns};
}

class AzureLlm2023Source final : public RowSource {
 public:
  AzureLlm2023Source(const std::filesystem::path& path, std::vector<TokenBucket> buckets,
                     int batch, Duration slo, bool decode)
      : reader_(path, /*allow_comments=*/false), buckets_(std::move(buckets)), batch_(batch),
        slo_(slo), decode_(decode) {
    const std::string name = path.string();
    if (buckets_.empty()) throw InputError(detail::concat(name, ": no token buckets given"));
    for (const TokenBucket& b : buckets_) {
      max_tokens_ = std::max(max_tokens_, b.max_context_tokens);
    }
    check_batch_slo(name.c_str(), batch_, slo_);
    expect_header(reader_, {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}, fields_);
    read_first_row(name, reader_.line());
  }

 private:
  std::optional<Request> read_row() override {
    std::string_view line;
    if (!reader_.next(line)) return std::nullopt;
    split_csv(line, fields_);
    expect_columns(reader_, fields_, 3, "TIMESTAMP,ContextTokens,GeneratedTokens");
    const Timestamp ts = parse_timestamp(reader_, fields_[0]);
    const std::int64_t context = parse_count(reader_, fields_[1], "ContextTokens");
    const std::int64_t generated = parse_count(reader_, fields_[2], "GeneratedTokens");
    if (!origin_) origin_ = ts;
    const std::int64_t days = ts.day - origin_->day;
    if (days > kMaxDays || days < -kMaxDays) {
      throw InputError(detail::concat(reader_.where(), "column 'TIMESTAMP': '", fields_[0],
                                      "' is more than ", kMaxDays, " days from the first row"));
    }
    const std::int64_t arrival = days * kNsPerDay + (ts.ns_of_day - origin_->ns_of_day);
    if (arrival < previous_) {
      throw InputError(detail::concat(reader_.where(), "TIMESTAMP ", fields_[0], " is before ",
                                      previous_text_, " on line ", previous_line_,
                                      ": rows must be in non-decreasing time order"));
    }
    previous_ = arrival;
    previous_text_ = std::string(fields_[0]);
    previous_line_ = reader_.line();
    const auto bucket = std::find_if(buckets_.begin(), buckets_.end(), [&](const TokenBucket& b) {
      return context <= b.max_context_tokens;
    });
    if (bucket == buckets_.end()) {
      throw InputError(detail::concat(reader_.where(), "column 'ContextTokens': ", context,
                                      " is larger than every bucket's max_context_tokens "
                                      "(the largest is ", max_tokens_, ")"));
    }
    Request r;
    r.arrival = nanoseconds(arrival);
    r.model = bucket->model;
    r.batch = batch_;
    r.slo = slo_;
    r.prompt_tokens = context;  // Note [Prefill curve]: a decoder's prefill costs by its prompt
    // Note [Decode in the simulator]: the first token comes with the prefill.
    if (decode_) r.decode_tokens = std::max<std::int64_t>(generated - 1, 0);
    return r;
  }

  static constexpr std::int64_t kMaxDays = 100'000;  // ~273 years: no int64 overflow in ns

  LineReader reader_;
  std::vector<TokenBucket> buckets_;
  std::int64_t max_tokens_ = std::numeric_limits<std::int64_t>::min();
  int batch_;
  Duration slo_;
  bool decode_;
  std::vector<std::string_view> fields_;
  std::optional<Timestamp> origin_;
  std::int64_t previous_ = 0;
  std::string previous_text_;
  std::int64_t previous_line_ = 0;
};

// ---------------------------------------------------------------------------------------
// Synthetic sources.

// Draws a model index from relative weights.
class ModelPicker {
 public:
  ModelPicker(const char* who, const std::vector<double>& weights) {
    if (weights.empty()) throw InputError(detail::concat(who, ": model_weights is empty"));
    double total = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const double w = weights[i];
      if (!std::isfinite(w) || w < 0) {
        throw InputError(detail::concat(who, ": model_weights[", i,
                                        "] must be a finite non-negative number, got ", w));
      }
      total += w;
      cumulative_.push_back(total);
      if (w > 0) last_positive_ = static_cast<std::uint32_t>(i);
    }
    if (!(total > 0) || !std::isfinite(total)) {
      throw InputError(detail::concat(who, ": model_weights are all zero"));
    }
  }

  std::uint32_t pick(std::mt19937_64& rng) const {
    const double u = uniform01(rng) * cumulative_.back();
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
    if (it == cumulative_.end()) return last_positive_;  // u rounded up to the total
    return static_cast<std::uint32_t>(it - cumulative_.begin());
  }

 private:
  std::vector<double> cumulative_;
  std::uint32_t last_positive_ = 0;
};

void check_rate(const char* who, const char* key, double rate) {
  if (!(rate > 0) || !std::isfinite(rate)) {
    throw InputError(detail::concat(who, ": ", key, " must be positive, got ", rate));
  }
}

void check_positive(const char* who, const char* key, Duration d) {
  if (d <= Duration::zero()) {
    throw InputError(detail::concat(who, ": ", key, " must be positive, got ", d.ns(), " ns"));
  }
}

// Each arrival draws its exponential gap, then its model. Times accumulate in double
// nanoseconds (exact to far below 1 ns for any duration under ~100 days) and are floored.
class PoissonSource final : public RequestSource {
 public:
  explicit PoissonSource(const PoissonSpec& spec)
      : picker_("poisson source", spec.model_weights), rng_(spec.seed),
        mean_gap_ns_(1e9 / spec.rate_per_second), duration_(spec.duration), batch_(spec.batch),
        slo_(spec.slo) {
    check_rate("poisson source", "rate_per_second", spec.rate_per_second);
    check_positive("poisson source", "duration", spec.duration);
    check_batch_slo("poisson source", spec.batch, spec.slo);
  }

  std::optional<Request> next() override {
    if (done_) return std::nullopt;
    t_ += exponential1(rng_) * mean_gap_ns_;
    if (!(t_ < static_cast<double>(duration_.ns()))) {
      done_ = true;
      return std::nullopt;
    }
    Request r;
    r.arrival = nanoseconds(static_cast<std::int64_t>(t_));
    r.model = picker_.pick(rng_);
    r.batch = batch_;
    r.slo = slo_;
    return r;
  }

 private:
  ModelPicker picker_;
  std::mt19937_64 rng_;
  double mean_gap_ns_;
  Duration duration_;
  int batch_;
  Duration slo_;
  double t_ = 0;
  bool done_ = false;
};

// Two-state MMPP. Starts in the high state with an exponential sojourn (mean mean_high);
// within a state, arrivals are Poisson at that state's rate. By memorylessness, a gap that
// would cross the end of the sojourn is discarded and redrawn at the next state's rate
// from the switch time.
class BurstySource final : public RequestSource {
 public:
  explicit BurstySource(const BurstySpec& spec)
      : picker_("bursty source", spec.model_weights), rng_(spec.seed), spec_(spec) {
    check_rate("bursty source", "high_rate_per_second", spec.high_rate_per_second);
    check_rate("bursty source", "low_rate_per_second", spec.low_rate_per_second);
    check_positive("bursty source", "mean_high", spec.mean_high);
    check_positive("bursty source", "mean_low", spec.mean_low);
    check_positive("bursty source", "duration", spec.duration);
    check_batch_slo("bursty source", spec.batch, spec.slo);
    mean_gap_ns_[0] = 1e9 / spec.high_rate_per_second;
    mean_gap_ns_[1] = 1e9 / spec.low_rate_per_second;
    mean_sojourn_ns_[0] = static_cast<double>(spec.mean_high.ns());
    mean_sojourn_ns_[1] = static_cast<double>(spec.mean_low.ns());
    state_end_ = exponential1(rng_) * mean_sojourn_ns_[0];
  }

  std::optional<Request> next() override {
    const auto end = static_cast<double>(spec_.duration.ns());
    while (!done_) {
      const double candidate = t_ + exponential1(rng_) * mean_gap_ns_[state_];
      if (candidate < state_end_) {
        t_ = candidate;
        if (!(t_ < end)) break;
        Request r;
        r.arrival = nanoseconds(static_cast<std::int64_t>(t_));
        r.model = picker_.pick(rng_);
        r.batch = spec_.batch;
        r.slo = spec_.slo;
        return r;
      }
      t_ = state_end_;
      if (!(t_ < end)) break;
      state_ ^= 1;
      state_end_ = t_ + exponential1(rng_) * mean_sojourn_ns_[state_];
    }
    done_ = true;
    return std::nullopt;
  }

 private:
  ModelPicker picker_;
  std::mt19937_64 rng_;
  BurstySpec spec_;
  std::array<double, 2> mean_gap_ns_{};      // [high, low]
  std::array<double, 2> mean_sojourn_ns_{};  // [high, low]
  std::size_t state_ = 0;                    // 0 high, 1 low
  double state_end_ = 0;
  double t_ = 0;
  bool done_ = false;
};

}  // namespace

SpreadKind parse_spread(const std::string& text) {
  if (text == "uniform") return SpreadKind::Uniform;
  if (text == "poisson") return SpreadKind::Poisson;
  throw InputError("unknown spread '" + text + "': expected one of uniform, poisson");
}

std::unique_ptr<RequestSource> open_project_csv(
    const std::filesystem::path& path, const std::map<std::string, std::uint32_t>& model_index,
    const std::vector<int>& model_batch) {
  return std::make_unique<ProjectCsvSource>(path, model_index, model_batch);
}

std::unique_ptr<RequestSource> open_azure_functions_2019(const std::filesystem::path& path,
                                                         const TraceMapping& mapping,
                                                         SpreadKind spread, std::uint64_t seed,
                                                         int first_minute, int minutes) {
  return std::make_unique<AzureFunctions2019Source>(path, mapping, spread, seed, first_minute,
                                                    minutes);
}

std::unique_ptr<RequestSource> open_azure_functions_2021(const std::filesystem::path& path,
                                                         const TraceMapping& mapping) {
  return std::make_unique<VectorSource>(read_azure_functions_2021(path, mapping));
}

std::unique_ptr<RequestSource> open_azure_llm_2023(const std::filesystem::path& path,
                                                   const std::vector<TokenBucket>& buckets,
                                                   int batch, Duration slo, bool decode) {
  return std::make_unique<AzureLlm2023Source>(path, buckets, batch, slo, decode);
}

std::unique_ptr<RequestSource> make_poisson_source(const PoissonSpec& spec) {
  return std::make_unique<PoissonSource>(spec);
}

std::unique_ptr<RequestSource> make_bursty_source(const BurstySpec& spec) {
  return std::make_unique<BurstySource>(spec);
}

}  // namespace psw
