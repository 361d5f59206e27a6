#pragma once
// psw validate: one experiment config driving both engines: the simulator predicts
// the workload, psw load sends the same workload (the simulator's own arrivals) to a live psw
// serve, and xval/validation.hpp compares the two summaries.
//
// Before anything runs, the server must be the case the config describes (Note [Validating the
// same case]), so that a difference in the report is the simulator's error, not a mismatch.
//
// Note [Validating the same case]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Checked against the live server, each an InputError naming the config file:
//  - the mechanism: the server's psw_server_info metric names the one it runs;
//  - the models: psw load's own check (every model the workload sends is served);
//  - the training job: a config with `training:` needs the server's job of that model running
//    when the load starts (the simulator's job trains throughout); a config without one needs a
//    server that is not training. A job between tasks (TrainingStatus::active but not running:
//    preempted by the last request, or, under stop-and-start, resuming in a fresh process,
//    which takes seconds) is waited for, up to kTrainingResumePatience, before it counts as not
//    running; one stopped, finished or never started is not waited for. Back-to-back
//    validations of one server (gpu-serve.sh's Figure 6: one per cycle) start while the last
//    one's job resumes. Without `training:`, a job between tasks is refused as a running one.
//    The measured progress is the job's completed steps from the workload clock's start to its
//    last answer, over that wall time (the warm-up outside it).
// Not checked (the server does not say): batch sizes, the hardware profile's numbers (that is
// what validation measures), the planner's grouping.

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "psw/common/experiment_config.hpp"
#include "psw/common/serving_profile.hpp"
#include "psw/common/output.hpp"
#include "psw/runtime/client/load_generator.hpp"
#include "psw/runtime/ipc/service.hpp"
#include "psw/xval/validation.hpp"

namespace psw::xval {

struct ValidationRun {
  nlohmann::json simulated;  // psw sim's summary.json
  runtime::LoadReport measured;       // psw load's report (of a recorded run: its summary only)
  std::optional<MeasuredTraining> training;
  ValidationReport report;
  // Note [Validating again]: the psw validate folder whose measurement this run reuses.
  std::optional<std::filesystem::path> recorded;
};

// How long psw validate waits for a server's training job that is between tasks (Note
// [Validating the same case]): a fresh process's start and CUDA context take seconds.
inline constexpr std::chrono::seconds kTrainingResumePatience{60};

// The job's status once it runs or is no longer active (stopped, done), or `patience` has
// passed: polls `status` every 5 ms while the job is active but not running (between tasks),
// saying once through `progress` that it waits. Throws what `status` throws.
runtime::TrainingStatus wait_while_between_tasks(const std::function<runtime::TrainingStatus()>& status, std::chrono::milliseconds patience,
                                        const std::function<void(const std::string&)>& progress);

// The labels of a gauge in Prometheus text (`name{a="x",b="y"} 1`); empty when `name` has no
// sample. Used for psw_server_info.
std::map<std::string, std::string> metric_labels(const std::string& metrics_text, const std::string& name);

// Checks the server against the config (Note [Validating the same case]), runs the simulator,
// then the load, and compares. `sim_out`: where psw sim's outputs go (empty: none). With a
// training job and `training_alone` > 0, the job's rate alone is measured over that long before
// the workload and again after it, with no requests (Note [Training share] in xval/validation.hpp).
ValidationRun run_validation(const ExperimentConfig& config, const runtime::LoadOptions& options,
                             const std::filesystem::path& sim_out,
                             std::chrono::milliseconds training_alone = std::chrono::milliseconds(0));

// Note [Validating again]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A folder psw validate wrote holds a measurement (measured/: psw load's files; validation.json:
// the mechanism and the training job's steps and seconds, alone too where measured) that the
// simulator can be compared with again, without the server: after a recalibration (another
// serving profile, Note [Request path]), or to validate a profile fitted on one run against
// another run. The case must be the one measured: the same mechanism, a training job on both sides or on neither, and the same
// number of requests in the workload (but for cycles, whose count is the server's pace);
// otherwise InputError naming the folder.
ValidationRun revalidate(const ExperimentConfig& config, const std::filesystem::path& recorded,
                         const std::filesystem::path& sim_out);

// What a recorded folder's validation.json says of the measurement (the rows aside): its
// mechanism and, beside a training job, the job's steps and seconds (`training`). validation.json
// is written by ValidationOutput::write and read by this one reader: revalidate and psw
// profile-serving --training-from-validation use it. InputError naming the file and the key.
struct RecordedValidation {
  std::string mechanism;
  std::optional<MeasuredTraining> training;
};
RecordedValidation read_recorded_validation(const std::filesystem::path& folder);
// The training step a psw validate run measured alone (training.alone_steps over
// training.alone_seconds: the --training-alone windows), as the serving profile's entry of
// `model` at `batch`: a run whose server trained at another batch than the one calibrated
// (Note [MPS contention]) brings its own step. InputError naming `origin` without those numbers.
TrainingStepCost training_step_alone(const RecordedValidation& recorded, const std::string& origin,
                                     const std::string& model, int batch);

// The outputs of psw validate --out DIR, written atomically (Note [Atomic output folders]):
// simulated/ (psw sim's files: pass simulated_dir() to run_validation), measured/ (psw load's),
// validation.csv, validation.json and config.resolved.yaml. Nothing reaches DIR unless write()
// completes.
class ValidationOutput {
 public:
  explicit ValidationOutput(const std::filesystem::path& out_dir);
  std::filesystem::path simulated_dir() const;
  void write(const ExperimentConfig& config, const ValidationRun& run);  // then commits

 private:
  StagedFolder folder_;
};

}  // namespace psw::xval
