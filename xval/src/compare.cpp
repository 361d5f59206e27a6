#include "psw/xval/compare.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"
#include "psw/common/input_file.hpp"
#include "psw/common/output.hpp"

namespace psw::xval {

namespace fs = std::filesystem;

namespace {

std::string json_text(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// A JSON member that must be a finite number >= 0.
double non_negative_number(const nlohmann::json& object, const std::string& key, const fs::path& path,
                           const std::string& where) {
  if (!object.contains(key)) throw InputError(path.string() + ": " + where + ": missing '" + key + "'");
  const nlohmann::json& v = object.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    throw InputError(path.string() + ": " + where + "." + key + ": expected a non-negative number, got " +
                     json_text(v));
  }
  return v.get<double>();
}

// ---- CSV -------------------------------------------------------------------------------

struct CsvRecord {
  std::size_t line = 0;  // where the record starts
  std::vector<std::string> fields;
};

// RFC 4180 records: fields split at commas, a quoted field may hold commas, doubled quotes and
// newlines; CRLF line ends are accepted. Blank lines are skipped.
std::vector<CsvRecord> csv_records(const std::string& text, const fs::path& path) {
  std::vector<CsvRecord> records;
  CsvRecord current;
  std::string field;
  bool quoted = false;
  bool field_was_quoted = false;
  std::size_t line = 1;
  current.line = 1;
  auto end_field = [&] {
    current.fields.push_back(std::move(field));
    field.clear();
    field_was_quoted = false;
  };
  auto end_record = [&] {
    end_field();
    const bool blank = current.fields.size() == 1 && current.fields[0].empty();
    if (!blank) records.push_back(std::move(current));
    current = CsvRecord{};
    current.line = line;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      if (!field.empty() || field_was_quoted) {
        throw InputError(path.string() + ":" + std::to_string(line) + ": a quote inside an unquoted field");
      }
      quoted = true;
      field_was_quoted = true;
    } else if (c == ',') {
      end_field();
    } else if (c == '\n') {
      ++line;
      end_record();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      // CRLF: the '\n' ends the record
    } else {
      field += c;
    }
  }
  if (quoted) {
    throw InputError(path.string() + ":" + std::to_string(current.line) + ": a quoted field is not closed");
  }
  if (!field.empty() || !current.fields.empty() || field_was_quoted) end_record();
  return records;
}

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// The one model of a `workload.models` value ("[resnet152]", YAML flow text).
std::optional<std::string> single_model(const std::string& value) {
  std::string v = trim(value);
  if (v.size() >= 2 && v.front() == '[' && v.back() == ']') v = trim(v.substr(1, v.size() - 2));
  if (v.empty() || v.find(',') != std::string::npos || v.find_first_of("[]{}") != std::string::npos) {
    return std::nullopt;
  }
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) {
    v = v.substr(1, v.size() - 2);
  }
  if (v.empty()) return std::nullopt;
  return v;
}

// CSV numbers as psw writes them: shortest round-trip doubles, whole numbers for counts.
template <typename T>
T csv_number(const std::string& text, const fs::path& path, std::size_t line, const std::string& column) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  bool ok = !text.empty() && ec == std::errc() && ptr == end;
  if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(v);
  if (!ok || v < 0) {
    throw InputError(path.string() + ":" + std::to_string(line) + ": column '" + column +
                     "': expected a non-negative number, got '" + text + "'");
  }
  return v;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string to_string(ComparisonStatus status) {
  switch (status) {
    case ComparisonStatus::Both: return "ok";
    case ComparisonStatus::NoPrediction: return "no-prediction";
    case ComparisonStatus::NoMeasurement: return "no-measurement";
  }
  return "?";
}

ComparisonStatus ComparisonRow::status() const {
  if (!predicted) return ComparisonStatus::NoPrediction;
  if (!measured) return ComparisonStatus::NoMeasurement;
  return ComparisonStatus::Both;
}

std::optional<double> ComparisonRow::p50_relative_error() const {
  if (!measured || !predicted || !(measured->median_ms > 0)) return std::nullopt;
  return (predicted->p50_ms - measured->median_ms) / measured->median_ms;
}

std::vector<MeasuredLatency> parse_bench_serve_report(const std::string& text, const fs::path& path,
                                                      const std::string& mechanism) {
  const nlohmann::json report = parse_json_object(text, path, "a psw bench-serve report");
  if (report.contains("mechanism")) {
    const nlohmann::json& named = report.at("mechanism");
    if (!named.is_string() || named.get<std::string>() != mechanism) {
      throw InputError(path.string() + ": its 'mechanism' " + json_text(named) + " differs from its file name's '" +
                       mechanism + "'");
    }
  }
  if (!report.contains("cold_latency_ms")) {
    throw InputError(path.string() + ": no 'cold_latency_ms' (not a psw bench-serve report)");
  }
  const nlohmann::json& cold = report.at("cold_latency_ms");
  if (!cold.is_object()) throw InputError(path.string() + ": cold_latency_ms: expected an object of models");
  std::vector<MeasuredLatency> out;
  for (const auto& [model, s] : cold.items()) {
    const std::string where = "cold_latency_ms." + model;
    if (!s.is_object()) throw InputError(path.string() + ": " + where + ": expected an object");
    if (!s.contains("count")) throw InputError(path.string() + ": " + where + ": missing 'count'");
    const nlohmann::json& count = s.at("count");
    if (!count.is_number_integer() || count.get<std::int64_t>() < 0) {
      throw InputError(path.string() + ": " + where + ".count: expected a non-negative whole number, got " +
                       json_text(count));
    }
    if (count.get<std::int64_t>() == 0) continue;  // no cold requests: no measurement
    MeasuredLatency m;
    m.mechanism = mechanism;
    m.model = model;
    m.requests = count.get<std::int64_t>();
    m.median_ms = non_negative_number(s, "median_ms", path, where);
    m.p99_ms = non_negative_number(s, "p99_ms", path, where);
    m.source = path;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<MeasuredLatency> load_measured_serve(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(dir.string() + ": not a folder (expected the folder of psw bench-serve's mechanism-<name>.json)");
  }
  const std::string prefix = "mechanism-";
  const std::string suffix = ".json";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() + suffix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      files.push_back(entry.path());
    }
  }
  if (files.empty()) throw InputError(dir.string() + ": no mechanism-<name>.json (psw bench-serve reports) here");
  std::sort(files.begin(), files.end());
  std::vector<MeasuredLatency> out;
  for (const auto& file : files) {
    const std::string name = file.filename().string();
    const std::string mechanism = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    for (auto& m : parse_bench_serve_report(read_input(file, "a psw bench-serve report (JSON)"), file, mechanism)) {
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::vector<PredictedLatency> parse_sweep_predictions(const std::string& text, const fs::path& path) {
  const std::vector<CsvRecord> records = csv_records(text, path);
  if (records.empty()) throw InputError(path.string() + ": empty (expected a psw sweep CSV with a header)");
  const std::vector<std::string>& header = records.front().fields;
  // The last column of a name: a grid over `mechanism` adds a column of that name before the
  // summary's own `mechanism`; both hold the same value, the summary's is always there.
  const auto column = [&](const std::string& name) {
    for (std::size_t c = header.size(); c-- > 0;) {
      if (header[c] == name) return c;
    }
    std::string message = path.string() + ":1: no column '" + name + "'";
    if (name == "workload.models") {
      message += ": the comparison needs each point's model (a sweep whose grid has workload.models, one model "
                 "per point, as configs/experiments/h200-serve.yaml)";
    } else {
      message += " (not a psw sweep CSV?)";
    }
    throw InputError(message);
  };
  const std::size_t mechanism_col = column("mechanism");
  const std::size_t models_col = column("workload.models");
  const std::size_t requests_col = column("requests");
  const std::size_t mean_col = column("mean_ms");
  const std::size_t p50_col = column("p50_ms");
  const std::size_t p99_col = column("p99_ms");

  std::vector<PredictedLatency> out;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    const std::string at = path.string() + ":" + std::to_string(rec.line);
    if (rec.fields.size() != header.size()) {
      throw InputError(at + ": " + std::to_string(rec.fields.size()) + " fields, the header has " +
                       std::to_string(header.size()));
    }
    PredictedLatency p;
    p.mechanism = rec.fields[mechanism_col];
    if (p.mechanism.empty()) throw InputError(at + ": column 'mechanism' is empty");
    const std::optional<std::string> model = single_model(rec.fields[models_col]);
    if (!model) {
      throw InputError(at + ": column 'workload.models' is '" + rec.fields[models_col] +
                       "': the comparison needs exactly one model per point");
    }
    p.model = *model;
    p.requests = csv_number<std::int64_t>(rec.fields[requests_col], path, rec.line, "requests");
    p.mean_ms = csv_number<double>(rec.fields[mean_col], path, rec.line, "mean_ms");
    p.p50_ms = csv_number<double>(rec.fields[p50_col], path, rec.line, "p50_ms");
    p.p99_ms = csv_number<double>(rec.fields[p99_col], path, rec.line, "p99_ms");
    p.source = path;
    p.line = rec.line;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<PredictedLatency> load_predicted_sweep(const fs::path& path) {
  std::error_code ec;
  const fs::path csv = fs::is_directory(path, ec) ? path / "sweep.csv" : path;
  return parse_sweep_predictions(read_input(csv, "a psw sweep CSV"), csv);
}

std::vector<ComparisonRow> compare_serve(const std::vector<MeasuredLatency>& measured,
                                         const std::vector<PredictedLatency>& predicted) {
  using Key = std::pair<std::string, std::string>;  // mechanism, model
  std::map<Key, const PredictedLatency*> predictions;
  std::vector<std::string> mechanism_order;
  std::vector<std::string> model_order;
  const auto note = [](std::vector<std::string>& order, const std::string& name) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  };
  for (const auto& p : predicted) {
    const auto [it, fresh] = predictions.emplace(Key{p.mechanism, p.model}, &p);
    if (!fresh) {
      throw InputError(p.source.string() + ":" + std::to_string(p.line) + ": a second point for " + p.mechanism +
                       " and " + p.model + " (the first at line " + std::to_string(it->second->line) +
                       "): the comparison needs one point per mechanism and model");
    }
    note(mechanism_order, p.mechanism);
    note(model_order, p.model);
  }
  std::map<Key, const MeasuredLatency*> measurements;
  std::set<std::string> measured_only_mechanisms;
  std::set<std::string> measured_only_models;
  for (const auto& m : measured) {
    const auto [it, fresh] = measurements.emplace(Key{m.mechanism, m.model}, &m);
    if (!fresh) {
      throw InputError(m.source.string() + ": a second measurement of " + m.mechanism + " and " + m.model +
                       " (the first in " + it->second->source.string() + ")");
    }
    if (std::find(mechanism_order.begin(), mechanism_order.end(), m.mechanism) == mechanism_order.end()) {
      measured_only_mechanisms.insert(m.mechanism);
    }
    if (std::find(model_order.begin(), model_order.end(), m.model) == model_order.end()) {
      measured_only_models.insert(m.model);
    }
  }
  mechanism_order.insert(mechanism_order.end(), measured_only_mechanisms.begin(), measured_only_mechanisms.end());
  model_order.insert(model_order.end(), measured_only_models.begin(), measured_only_models.end());

  std::vector<ComparisonRow> rows;
  for (const auto& mechanism : mechanism_order) {
    for (const auto& model : model_order) {
      const Key key{mechanism, model};
      const auto p = predictions.find(key);
      const auto m = measurements.find(key);
      if (p == predictions.end() && m == measurements.end()) continue;
      ComparisonRow row;
      row.mechanism = mechanism;
      row.model = model;
      if (p != predictions.end()) row.predicted = *p->second;
      if (m != measurements.end()) row.measured = *m->second;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

ComparisonSummary summarize(const std::vector<ComparisonRow>& rows) {
  ComparisonSummary s;
  s.rows = rows.size();
  for (const auto& r : rows) {
    switch (r.status()) {
      case ComparisonStatus::Both: ++s.compared; break;
      case ComparisonStatus::NoPrediction: ++s.no_prediction; break;
      case ComparisonStatus::NoMeasurement: ++s.no_measurement; break;
    }
    if (const auto e = r.p50_relative_error()) {
      if (std::abs(*e) <= 0.05) ++s.within_5_percent;
      if (std::abs(*e) <= 0.15) ++s.within_15_percent;
    }
  }
  return s;
}

namespace {

// The cells of one table row, in the columns of comparison_csv; `format` writes one number.
template <typename Format>
std::vector<std::string> row_cells(const ComparisonRow& r, Format format) {
  std::vector<std::string> cells = {r.mechanism, r.model, to_string(r.status())};
  const auto add = [&cells](std::optional<std::string> v) { cells.push_back(v.value_or(std::string())); };
  const bool m = r.measured.has_value();
  const bool p = r.predicted.has_value();
  add(m ? std::optional(format(r.measured->median_ms)) : std::nullopt);
  add(m ? std::optional(format(r.measured->p99_ms)) : std::nullopt);
  add(m ? std::optional(std::to_string(r.measured->requests)) : std::nullopt);
  add(p ? std::optional(format(r.predicted->mean_ms)) : std::nullopt);
  add(p ? std::optional(format(r.predicted->p50_ms)) : std::nullopt);
  add(p ? std::optional(format(r.predicted->p99_ms)) : std::nullopt);
  add(p ? std::optional(std::to_string(r.predicted->requests)) : std::nullopt);
  return cells;
}

std::string join(const std::vector<std::string>& cells, const std::string& separator) {
  std::string out;
  for (std::size_t c = 0; c < cells.size(); ++c) {
    if (c > 0) out += separator;
    out += cells[c];
  }
  return out;
}

}  // namespace

std::string comparison_csv(const std::vector<ComparisonRow>& rows) {
  std::string out =
      "mechanism,model,status,measured_median_ms,measured_p99_ms,measured_requests,predicted_mean_ms,"
      "predicted_p50_ms,predicted_p99_ms,predicted_requests,p50_relative_error\n";
  for (const auto& r : rows) {
    std::vector<std::string> cells = row_cells(r, shortest_number);
    for (auto& c : cells) c = csv_field(c);
    const auto e = r.p50_relative_error();
    cells.push_back(e ? shortest_number(*e) : std::string());
    out += join(cells, ",");
    out += '\n';
  }
  return out;
}

std::string comparison_markdown(const std::vector<ComparisonRow>& rows) {
  std::string out =
      "| mechanism | model | status | measured median (ms) | measured p99 (ms) | measured requests | "
      "predicted mean (ms) | predicted p50 (ms) | predicted p99 (ms) | predicted requests | p50 error |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const auto ms = [](double v) { return fixed(v, 3); };
  for (const auto& r : rows) {
    std::vector<std::string> cells = row_cells(r, ms);
    for (auto& c : cells) {
      if (c.empty()) c = "-";
    }
    const auto e = r.p50_relative_error();
    std::string error = "-";
    if (e) {
      error = *e >= 0 ? "+" : "";
      error += fixed(100 * *e, 1);
      error += '%';
    }
    cells.push_back(error);
    out += "| ";
    out += join(cells, " | ");
    out += " |\n";
  }
  const ComparisonSummary s = summarize(rows);
  out += "\n";
  out += std::to_string(s.compared);
  out += " pairs compared (predicted p50 against measured median): ";
  out += std::to_string(s.within_5_percent);
  out += " within 5%, ";
  out += std::to_string(s.within_15_percent);
  out += " within 15%";
  if (s.no_prediction > 0) {
    out += "; ";
    out += std::to_string(s.no_prediction);
    out += " measured without a prediction";
  }
  if (s.no_measurement > 0) {
    out += "; ";
    out += std::to_string(s.no_measurement);
    out += " predicted without a measurement";
  }
  out += ".\n";
  return out;
}

}  // namespace psw::xval
