// psw compare: every strategy for every (model, hardware) pair, as one table.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/timeline.hpp"

namespace psw::cli {

namespace {

struct CompareOptions {
  std::vector<std::string> model_paths;
  std::vector<std::string> hardware_paths;
  std::vector<std::string> tasks{"inference"};
  std::string format = "table";
  std::string out_path;
};

std::string ms(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", d.ms());
  return buf;
}

void run_compare(const CompareOptions& o) {
  if (o.format != "table" && o.format != "markdown" && o.format != "csv") {
    throw InputError("unknown --format '" + o.format + "': expected table, markdown or csv");
  }
  std::vector<ModelProfile> models;
  for (const auto& p : o.model_paths) models.push_back(load_model_profile(p));
  std::vector<HardwareProfile> hardware;
  for (const auto& p : o.hardware_paths) hardware.push_back(load_hardware_profile(p));
  std::vector<Task> tasks;
  for (const auto& t : o.tasks) tasks.push_back(parse_task(t));

  const std::vector<std::string> header = {
      "model", "hardware", "task", "ready_ms", "bound_ms", "single_ms", "per_layer_ms",
      "pipeswitch_ms", "optimal_ms", "early_start_ms", "groups", "startup_ms", "overhead_ms",
      "early_start/bound", "planner_us"};
  std::vector<std::vector<std::string>> rows;
  for (std::size_t h = 0; h < hardware.size(); ++h) {
    const HardwareProfile& hw = hardware[h];
    for (std::size_t m = 0; m < models.size(); ++m) {
      const ModelProfile& model = models[m];
      for (Task task : tasks) with_range_context(o.model_paths[m] + " on " + o.hardware_paths[h], [&] {
        const SwitchCosts costs = make_switch_costs(model, hw, task);
        const PlanResult single = plan_single(costs);
        const PlanResult per_layer = plan_per_layer(costs);
        const PlanResult pipeswitch = plan_pipeswitch(costs);
        const auto started = std::chrono::steady_clock::now();
        const PlanResult optimal = plan_optimal(costs);
        const auto planner_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::steady_clock::now() - started)
                                    .count();
        // What the executor and the simulator run: Note [Early start].
        const PlanResult early = prefer_early_start(costs, optimal);
        const Timeline timeline = evaluate_timeline(costs, early.groups);
        const Duration bound = pipeline_bound(costs);
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.3f",
                      static_cast<double>(timeline.total.ns()) / static_cast<double>(bound.ns()));
        rows.push_back({model.name, hw.name, to_string(task), ms(timeline.ready), ms(bound),
                        ms(single.total), ms(per_layer.total), ms(pipeswitch.total),
                        ms(optimal.total), ms(early.total), std::to_string(early.groups.size()),
                        ms(timeline.startup), ms(timeline.overhead), ratio,
                        std::to_string(planner_us)});
      });
    }
  }

  std::ostringstream text;
  if (o.format == "csv") {
    for (std::size_t c = 0; c < header.size(); ++c) text << (c ? "," : "") << header[c];
    text << "\n";
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c) text << (c ? "," : "") << row[c];
      text << "\n";
    }
  } else if (o.format == "markdown") {
    text << "|";
    for (const auto& h : header) text << " " << h << " |";
    text << "\n|";
    for (std::size_t c = 0; c < header.size(); ++c) text << (c < 3 ? "---|" : "---:|");
    text << "\n";
    for (const auto& row : rows) {
      text << "|";
      for (const auto& cell : row) text << " " << cell << " |";
      text << "\n";
    }
  } else {
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
      width[c] = header[c].size();
      for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
      for (std::size_t c = 0; c < cells.size(); ++c) {
        const std::string pad(width[c] - cells[c].size(), ' ');
        text << (c ? "  " : "") << (c < 3 ? cells[c] + pad : pad + cells[c]);
      }
      text << "\n";
    };
    line(header);
    for (const auto& row : rows) line(row);
  }
  if (o.out_path.empty()) {
    std::cout << text.str();
  } else {
    save_text(o.out_path, text.str());
  }
}

}  // namespace

Action add_compare_command(CLI::App& app) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Plan every model on every hardware profile with every strategy, as one table");
  cmd->add_option("--model", options->model_paths, "Model profile YAML files")->required();
  cmd->add_option("--hardware", options->hardware_paths, "Hardware profile YAML files")->required();
  cmd->add_option("--task", options->tasks, "inference and/or training")->capture_default_str();
  cmd->add_option("--format", options->format, "table | markdown | csv")->capture_default_str();
  cmd->add_option("--out", options->out_path, "Write to this file instead of standard output");
  return [options] { run_compare(*options); };
}

}  // namespace psw::cli
