// Note [Server policy]: every mechanism's decisions on scripted events, and the decision log's
// replay (Note [Decision log]).
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "input_error.hpp"
#include "psw/common/server_policy.hpp"

namespace psw {
// A named namespace, not an anonymous one: the unity build compiles the test files together,
// and their helpers' names (ready, started, expect_input_error) would meet.
namespace server_policy_test {

// The InputError `work` throws must contain `part`.
template <typename Work>
void expect_input_error(Work&& work, const std::string& part) {
  const std::string message = test_support::input_error_of(std::forward<Work>(work));
  EXPECT_NE(message.find(part), std::string::npos) << message;
}

using A = PolicyAction::Kind;
using E = PolicyEvent::Kind;

PolicyConfig config_of(Mechanism mechanism, int workers, bool training = true) {
  PolicyConfig c;
  c.mechanism = mechanism;
  c.workers = workers;
  c.training = training;
  c.model_bytes = {100, 200, 300};
  return c;
}

PolicyEvent ready(int worker) { return PolicyEvent{.kind = E::WorkerReady, .worker = worker}; }
PolicyEvent arrived(std::uint64_t request, int model) {
  return PolicyEvent{.kind = E::RequestArrived, .worker = -1, .request = request, .model = model};
}
PolicyEvent finished(int worker, std::uint64_t request) {
  return PolicyEvent{.kind = E::WorkerFinished, .worker = worker, .request = request};
}
PolicyEvent stopped(int worker, TrainingStop how, std::int64_t completed = 0) {
  PolicyEvent e = PolicyEvent{.kind = E::TrainingStopped, .worker = worker};
  e.stop = how;
  e.steps = completed;
  return e;
}
PolicyEvent train_to(std::int64_t target) { return PolicyEvent{.kind = E::TrainingStartRequested, .steps = target}; }
PolicyEvent lost(int worker, const std::string& why) {
  PolicyEvent e = PolicyEvent{.kind = E::WorkerLost, .worker = worker};
  e.code = StatusCode::Unavailable;
  e.text = why;
  return e;
}

// The actions as short strings ("dispatch r1 w1 transfer"), so that a test reads as a script.
std::vector<std::string> brief(const std::vector<PolicyAction>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) {
    std::string s = to_string(a.kind);
    if (a.request != 0) s += " r" + std::to_string(a.request);
    if (a.worker >= 0) s += " w" + std::to_string(a.worker);
    if (a.kind == A::Dispatch && a.transfer) s += " transfer";
    if (a.kind == A::StopTraining) s += a.mode == StopMode::Pause ? " pause" : " abort";
    if (a.kind == A::RestartWorker && a.fault) s += " fault";
    out.push_back(s);
  }
  return out;
}
using Script = std::vector<std::string>;

// A policy with every worker ready and the training job started (when configured).
ServerPolicy started(const PolicyConfig& config, std::vector<PolicyAction>* start = nullptr) {
  ServerPolicy p(config);
  for (int w = 0; w < config.workers; ++w) EXPECT_TRUE(brief(p.handle(ready(w))).empty());
  auto actions = p.handle(PolicyEvent{.kind = E::TrainingStartRequested});
  if (start) *start = actions;
  return p;
}

TEST(ServerPolicy, PipeSwitchPausesTrainingInPlaceAndServesOnTheStandbyWorker) {
  std::vector<PolicyAction> start;
  ServerPolicy p = started(config_of(Mechanism::PipeSwitch, 2), &start);
  EXPECT_EQ(brief(start), (Script{"start_training w0"}));
  EXPECT_TRUE(p.training_running());
  // The stop and the dispatch at once: the switch overlaps the training's last layer.
  EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"stop_training r1 w0 pause", "dispatch r1 w1 transfer"}));
  EXPECT_TRUE(p.awaiting_answer(0));  // told to stop: the watchdog waits for its answer
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Paused))), Script{});
  EXPECT_EQ(p.worker_state(0), WorkerState::Paused);
  // A second request queues behind the first; cache off: every request transfers.
  EXPECT_EQ(brief(p.handle(arrived(2, 0))), Script{});
  EXPECT_EQ(brief(p.handle(finished(1, 1))), (Script{"complete r1 w1", "dispatch r2 w1 transfer"}));
  EXPECT_EQ(brief(p.handle(finished(1, 2))), (Script{"complete r2 w1", "resume_training w0"}));
  EXPECT_TRUE(p.training_running());
}

TEST(ServerPolicy, DispatchAfterStopWaitsForTheLayerBoundary) {
  PolicyConfig c = config_of(Mechanism::PipeSwitch, 2);
  c.dispatch = DispatchPolicy::AfterStop;
  ServerPolicy p = started(c);
  EXPECT_EQ(brief(p.handle(arrived(1, 2))), (Script{"stop_training r1 w0 pause"}));
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Paused))), (Script{"dispatch r1 w1 transfer"}));
}

TEST(ServerPolicy, WithoutAnotherWorkerTheJobAbandonsItsStepAndItsWorkerCleansUp) {
  ServerPolicy p = started(config_of(Mechanism::OneProcess, 1));
  EXPECT_EQ(brief(p.handle(arrived(7, 1))), (Script{"stop_training r7 w0 abort"}));
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Abandoned))), (Script{"cleanup w0"}));
  EXPECT_TRUE(p.awaiting_answer(0));
  EXPECT_EQ(brief(p.handle(PolicyEvent{.kind = E::WorkerCleanedUp, .worker = 0})), (Script{"dispatch r7 w0 transfer"}));
  EXPECT_EQ(brief(p.handle(finished(0, 7))), (Script{"complete r7 w0", "start_training w0"}));
}

TEST(ServerPolicy, StopAndStartGivesEveryTaskAFreshProcess) {
  for (Mechanism m : {Mechanism::StopAndStart, Mechanism::TwoProcesses}) {
    SCOPED_TRACE(to_string(m));
    ServerPolicy p = started(config_of(m, 2));
    // Never paused in place: the job resumes later in a new process.
    EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"stop_training r1 w0 abort", "dispatch r1 w1 transfer"}));
    EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Abandoned))), Script{});  // no cleanup: it is replaced
    EXPECT_TRUE(p.worker_used(0));
    // Both processes are used: the job waits for one started afresh.
    EXPECT_EQ(brief(p.handle(finished(1, 1))), (Script{"complete r1 w1", "restart_worker w0"}));
    EXPECT_EQ(p.worker_state(0), WorkerState::Starting);
    EXPECT_EQ(brief(p.handle(ready(0))), (Script{"start_training w0"}));
    // The next request takes the other used process's successor: one start at a time.
    EXPECT_EQ(brief(p.handle(arrived(2, 1))), (Script{"stop_training r2 w0 abort", "restart_worker w1"}));
    EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Abandoned))), Script{});
    EXPECT_EQ(brief(p.handle(ready(1))), (Script{"dispatch r2 w1 transfer"}));
  }
}

TEST(ServerPolicy, MpsAndTimeSlicingRunRequestsBesideTheJob) {
  for (Mechanism m : {Mechanism::Mps, Mechanism::TimeSliced}) {
    SCOPED_TRACE(to_string(m));
    ServerPolicy p = started(config_of(m, 2));
    EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"dispatch r1 w1 transfer"}));
    EXPECT_TRUE(p.training_running());
    EXPECT_EQ(brief(p.handle(finished(1, 1))), (Script{"complete r1 w1"}));
    // Every model stays resident once loaded.
    EXPECT_EQ(brief(p.handle(arrived(2, 0))), (Script{"dispatch r2 w1"}));
  }
}

TEST(ServerPolicy, ReadyKeepsEveryModelAndLruKeepsWhatFits) {
  ServerPolicy ready_policy = started(config_of(Mechanism::Ready, 2, false));
  EXPECT_EQ(brief(ready_policy.handle(arrived(1, 0))), (Script{"dispatch r1 w0 transfer"}));
  ready_policy.handle(finished(0, 1));
  EXPECT_EQ(brief(ready_policy.handle(arrived(2, 1))), (Script{"dispatch r2 w0 transfer"}));
  ready_policy.handle(finished(0, 2));
  EXPECT_EQ(brief(ready_policy.handle(arrived(3, 0))), (Script{"dispatch r3 w0"}));

  PolicyConfig lru = config_of(Mechanism::PipeSwitch, 2, false);
  lru.cache = CachePolicy::Lru;
  lru.cache_bytes = 300;  // models 0 (100) and 1 (200) fit together; 2 (300) alone
  ServerPolicy p = started(lru);
  std::uint64_t r = 0;
  auto serve = [&](int model) {
    auto actions = p.handle(arrived(++r, model));
    p.handle(finished(actions.front().worker, r));
    return actions.front().transfer;
  };
  EXPECT_TRUE(serve(0));
  EXPECT_TRUE(serve(1));
  EXPECT_FALSE(serve(0));
  EXPECT_FALSE(serve(1));
  EXPECT_TRUE(serve(2));  // evicts both
  EXPECT_TRUE(serve(0));
  EXPECT_EQ(p.resident(), (std::list<int>{0}));
}

// Note [Repository load]: a model loaded while the server runs is known by its bytes and not
// resident until a request transfers it; one unloaded is forgotten by residency, and a request
// of it still waiting fails NOT_FOUND. Both events go through the decision log unchanged.
TEST(ServerPolicy, ModelsLoadedAndUnloadedWhileServing) {
  PolicyConfig lru = config_of(Mechanism::PipeSwitch, 2, false);
  lru.cache = CachePolicy::Lru;
  lru.cache_bytes = 500;
  ServerPolicy p = started(lru);
  PolicyEvent loaded{.kind = E::ModelLoaded, .model = 4};
  loaded.bytes = 400;
  EXPECT_TRUE(p.handle(loaded).empty());
  EXPECT_EQ(p.config().model_bytes, (std::vector<Bytes>{100, 200, 300, 0, 400}));
  std::uint64_t r = 0;
  auto serve = [&](int model) {
    auto actions = p.handle(arrived(++r, model));
    EXPECT_EQ(actions.size(), 1u);
    p.handle(finished(actions.front().worker, r));
    return actions.front().transfer;
  };
  EXPECT_TRUE(serve(4));
  EXPECT_TRUE(serve(0));   // 100 + 400 bytes fit in 500
  EXPECT_FALSE(serve(4));
  EXPECT_TRUE(serve(1));   // 200 + 400 + 100 do not fit: the least recent go until they do
  EXPECT_EQ(p.resident(), (std::list<int>{1}));
  EXPECT_FALSE(serve(1));
  EXPECT_TRUE(serve(4));
  EXPECT_EQ(p.resident(), (std::list<int>{4}));
  const PolicyEvent unloaded{.kind = E::ModelUnloaded, .model = 4};
  EXPECT_TRUE(p.handle(unloaded).empty());
  EXPECT_TRUE(p.resident().empty());
  // A request runs, one of model 2 waits behind it: model 2 is in use until it is answered or
  // its model unloaded, which fails it.
  EXPECT_EQ(brief(p.handle(arrived(++r, 0))).size(), 1u);
  const std::uint64_t waiting = ++r;
  EXPECT_TRUE(p.handle(arrived(waiting, 2)).empty());
  EXPECT_TRUE(p.model_in_use(0));
  EXPECT_TRUE(p.model_in_use(2));
  EXPECT_FALSE(p.model_in_use(1));
  const std::vector<PolicyAction> failed = p.handle(PolicyEvent{.kind = E::ModelUnloaded, .model = 2});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].kind, A::FailRequest);
  EXPECT_EQ(failed[0].request, waiting);
  EXPECT_EQ(failed[0].code, StatusCode::NotFound);
  EXPECT_FALSE(p.model_in_use(2));
  for (const PolicyEvent& e : {loaded, unloaded}) EXPECT_EQ(policy_event_from_json(to_json(e), "x"), e);
  PolicyEvent negative = loaded;
  negative.bytes = -1;
  expect_input_error([&] { policy_event_from_json(to_json(negative), "d.jsonl:3"); }, "d.jsonl:3: 'bytes' must not be negative");
}

// Note [Server policy as the simulator runs it]: the paper's active worker keeps the model of
// the last task until another task runs.
TEST(ServerPolicy, ActiveKeepsTheLastTasksModelUntilTrainingRuns) {
  PolicyConfig c = config_of(Mechanism::PipeSwitch, 2);
  c.cache = CachePolicy::Active;
  ServerPolicy p = started(c);
  EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"stop_training r1 w0 pause", "dispatch r1 w1 transfer"}));
  p.handle(stopped(0, TrainingStop::Paused));
  EXPECT_EQ(brief(p.handle(arrived(2, 0))), Script{});
  EXPECT_EQ(brief(p.handle(finished(1, 1))), (Script{"complete r1 w1", "dispatch r2 w1"}));  // resident
  EXPECT_EQ(brief(p.handle(arrived(3, 1))), Script{});
  EXPECT_EQ(brief(p.handle(finished(1, 2))), (Script{"complete r2 w1", "dispatch r3 w1 transfer"}));
  EXPECT_EQ(p.resident(), (std::list<int>{1}));
  EXPECT_EQ(brief(p.handle(finished(1, 3))), (Script{"complete r3 w1", "resume_training w0"}));
  EXPECT_TRUE(p.resident().empty());  // the training job ran: no model is the active one
  EXPECT_EQ(brief(p.handle(arrived(4, 1))), (Script{"stop_training r4 w0 pause", "dispatch r4 w1 transfer"}));
}

TEST(ServerPolicy, ModelsResidentAtStartNeverTransfer) {
  for (Mechanism m : {Mechanism::Ready, Mechanism::Mps}) {
    SCOPED_TRACE(to_string(m));
    PolicyConfig c = config_of(m, 2, false);
    c.resident_at_start = true;
    ServerPolicy p = started(c);
    EXPECT_EQ(p.resident(), (std::list<int>{0, 1, 2}));
    EXPECT_EQ(brief(p.handle(arrived(1, 2))), (Script{"dispatch r1 w0"}));
  }
}

// The paper's stop-and-start: a process per switch, not per task.
TEST(ServerPolicy, AFreshProcessPerSwitchKeepsTheProcessForTheSameModel) {
  PolicyConfig c = config_of(Mechanism::StopAndStart, 1);
  c.cache = CachePolicy::Active;
  c.fresh_process_per_task = false;
  ServerPolicy p = started(c);
  EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"stop_training r1 w0 abort"}));
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Abandoned))), (Script{"restart_worker w0"}));
  EXPECT_EQ(brief(p.handle(ready(0))), (Script{"dispatch r1 w0 transfer"}));
  EXPECT_EQ(brief(p.handle(arrived(2, 0))), Script{});
  // The same model again: the process that ran it goes on, with nothing to transfer.
  EXPECT_EQ(brief(p.handle(finished(0, 1))), (Script{"complete r1 w0", "dispatch r2 w0"}));
  EXPECT_EQ(brief(p.handle(arrived(3, 1))), Script{});
  // Another model: a fresh process.
  EXPECT_EQ(brief(p.handle(finished(0, 2))), (Script{"complete r2 w0", "restart_worker w0"}));
  EXPECT_EQ(brief(p.handle(ready(0))), (Script{"dispatch r3 w0 transfer"}));
  // Per task (psw serve), the same model gets a fresh process too.
  c.fresh_process_per_task = true;
  ServerPolicy per_task = started(c);
  per_task.handle(arrived(1, 0));
  per_task.handle(stopped(0, TrainingStop::Abandoned));
  per_task.handle(ready(0));
  per_task.handle(arrived(2, 0));
  EXPECT_EQ(brief(per_task.handle(finished(0, 1))), (Script{"complete r1 w0", "restart_worker w0"}));
}

// Note [Processes a server starts with]: workers a warm-up used take no task of their own.
TEST(ServerPolicy, WorkersUsedAtStartAreRestartedBeforeATask) {
  PolicyConfig c = config_of(Mechanism::StopAndStart, 2, false);
  c.used_at_start = 1;
  ServerPolicy p = started(c);
  EXPECT_FALSE(p.worker_used(0));
  EXPECT_TRUE(p.worker_used(1));
  EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"dispatch r1 w0 transfer"}));
  EXPECT_EQ(brief(p.handle(arrived(2, 0))), (Script{"restart_worker w1"}));
  c.used_at_start = 3;
  expect_input_error([&] { ServerPolicy bad(c); }, "used_at_start is 3, the server has 2 workers");
}

TEST(ServerPolicy, ALostWorkerFailsItsRequestAndTheNextGoesElsewhere) {
  ServerPolicy p = started(config_of(Mechanism::PipeSwitch, 2, false));
  EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"dispatch r1 w0 transfer"}));
  EXPECT_EQ(brief(p.handle(arrived(2, 0))), Script{});
  const auto actions = p.handle(lost(0, "exited"));
  EXPECT_EQ(brief(actions), (Script{"fail_request r1 w0", "restart_worker w0 fault", "dispatch r2 w1 transfer"}));
  EXPECT_EQ(actions[0].code, StatusCode::Unavailable);
  EXPECT_EQ(actions[0].text, "worker 0 exited while running the request; it was replaced");
  // A replacement that fails to start is dead; one that starts takes tasks again.
  EXPECT_EQ(brief(p.handle(ready(0))), Script{});
  EXPECT_EQ(brief(p.handle(finished(0, 1))), Script{});  // stale: r1 was answered
  EXPECT_EQ(p.worker_state(0), WorkerState::Standby);
}

// A request that waits while its worker died and the job is paused on the other: the job gives
// up its step and its worker serves the request at once, instead of the request waiting seconds
// for the replacement process to start.
TEST(ServerPolicy, ALostWorkerBesideAPausedJobLeavesItsQueueToTheJobsWorker) {
  ServerPolicy p = started(config_of(Mechanism::PipeSwitch, 2));
  EXPECT_EQ(brief(p.handle(arrived(1, 0))), (Script{"stop_training r1 w0 pause", "dispatch r1 w1 transfer"}));
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Paused))), Script{});
  EXPECT_EQ(brief(p.handle(arrived(2, 1))), Script{});
  EXPECT_EQ(brief(p.handle(lost(1, "exited"))),
            (Script{"fail_request r1 w1", "restart_worker w1 fault", "stop_training r2 w0 abort"}));
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::Abandoned))), (Script{"cleanup w0"}));
  EXPECT_EQ(brief(p.handle(PolicyEvent{.kind = E::WorkerCleanedUp, .worker = 0})), (Script{"dispatch r2 w0 transfer"}));
  // Once the request is answered the job starts again from its last completed step.
  EXPECT_EQ(brief(p.handle(ready(1))), Script{});
  EXPECT_EQ(brief(p.handle(finished(0, 2))), (Script{"complete r2 w0", "start_training w0"}));
}

TEST(ServerPolicy, AWorkersFailureAnswersTheRequestWithItsCode) {
  ServerPolicy p = started(config_of(Mechanism::PipeSwitch, 2, false));
  p.handle(arrived(1, 0));
  PolicyEvent failed = finished(0, 1);
  failed.ok = false;
  failed.code = StatusCode::InvalidArgument;
  failed.text = "bad input";
  const auto actions = p.handle(failed);
  ASSERT_EQ(brief(actions), (Script{"fail_request r1 w0"}));
  EXPECT_EQ(actions[0].code, StatusCode::InvalidArgument);
  EXPECT_EQ(actions[0].text, "bad input");
}

TEST(ServerPolicy, AnAbortedDispatchLeavesTheWorkerStandbyAndTheModelNotResident) {
  PolicyConfig c = config_of(Mechanism::PipeSwitch, 2, false);
  c.cache = CachePolicy::Lru;
  c.cache_bytes = 1000;
  ServerPolicy p = started(c);
  p.handle(arrived(1, 0));
  PolicyEvent aborted = PolicyEvent{.kind = E::DispatchAborted, .worker = 0, .request = 1};
  aborted.code = StatusCode::InvalidArgument;
  aborted.text = "the input's shared memory object shrank";
  EXPECT_EQ(brief(p.handle(aborted)), (Script{"fail_request r1 w0"}));
  EXPECT_EQ(p.worker_state(0), WorkerState::Standby);
  EXPECT_EQ(brief(p.handle(arrived(2, 0))), (Script{"dispatch r2 w0 transfer"}));  // still transfers
}

TEST(ServerPolicy, TrainingStopsAtItsTargetAndOnAClientsStop) {
  ServerPolicy p(config_of(Mechanism::PipeSwitch, 2));
  p.handle(ready(0));
  p.handle(ready(1));
  EXPECT_EQ(brief(p.handle(train_to(5))), (Script{"start_training w0"}));
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::ReachedTarget, 5))), (Script{"cleanup w0"}));
  EXPECT_FALSE(p.training_wanted());
  EXPECT_EQ(brief(p.handle(PolicyEvent{.kind = E::WorkerCleanedUp, .worker = 0})), Script{});
  // A target raised while the job runs to the old one still holds when it stops there.
  EXPECT_EQ(brief(p.handle(train_to(8))), (Script{"start_training w0"}));
  EXPECT_EQ(brief(p.handle(train_to(12))), Script{});
  EXPECT_EQ(brief(p.handle(stopped(0, TrainingStop::ReachedTarget, 8))), (Script{"cleanup w0", "start_training w1"}));
  EXPECT_EQ(brief(p.handle(PolicyEvent{.kind = E::WorkerCleanedUp, .worker = 0})), Script{});
  // A client's stop abandons the step.
  EXPECT_EQ(brief(p.handle(PolicyEvent{.kind = E::TrainingStopRequested})), (Script{"stop_training w1 abort"}));
  EXPECT_EQ(brief(p.handle(stopped(1, TrainingStop::Abandoned, 10))), (Script{"cleanup w1"}));
  EXPECT_EQ(brief(p.handle(PolicyEvent{.kind = E::WorkerCleanedUp, .worker = 1})), Script{});
  // A job that fails on its worker is not restarted.
  EXPECT_EQ(brief(p.handle(train_to(0))), (Script{"start_training w1"}));
  PolicyEvent failed = finished(1, 0);
  failed.ok = false;
  failed.text = "out of memory";
  EXPECT_EQ(brief(p.handle(failed)), (Script{"log w1"}));
  EXPECT_FALSE(p.training_wanted());
}

TEST(ServerPolicy, ShutdownAnswersEverythingAndStopsTheJob) {
  ServerPolicy p = started(config_of(Mechanism::PipeSwitch, 2));
  p.handle(arrived(1, 0));
  p.handle(arrived(2, 0));
  PolicyEvent bye = PolicyEvent{.kind = E::Shutdown};
  bye.text = "the server is shutting down";
  EXPECT_EQ(brief(p.handle(bye)), (Script{"fail_request r2", "fail_request r1 w1", "stop_training w0 abort"}));
  EXPECT_EQ(brief(p.handle(arrived(3, 0))), (Script{"fail_request r3"}));
  EXPECT_EQ(brief(p.handle(lost(1, "exited"))), (Script{"kill_worker w1"}));
}

TEST(ServerPolicy, ABadEventNamesTheWorker) {
  ServerPolicy p(config_of(Mechanism::PipeSwitch, 2));
  expect_input_error([&] { p.handle(ready(5)); }, "worker_ready of worker 5: the server has 2 workers");
  expect_input_error([] { ServerPolicy bad(config_of(Mechanism::PipeSwitch, 0)); }, "at least one worker");
}

// A small driver that answers the policy's actions in a random order: for every mechanism,
// every request is answered exactly once, a task only goes to a standby worker, and a shared
// context never stops the job. The log it writes replays without a difference.
TEST(ServerPolicy, EveryMechanismAnswersEveryRequestOnceUnderRandomEvents) {
  for (Mechanism m : all_mechanisms()) {
    SCOPED_TRACE(to_string(m));
    const int workers = traits(m).process == ProcessModel::OneProcess ? 1 : 2;
    PolicyConfig c = config_of(m, workers);
    ServerPolicy p(c);
    std::mt19937_64 rng(42);
    std::string log = decision_header_line(c);
    std::deque<PolicyEvent> due;  // answers the workers owe, in random order
    std::map<std::uint64_t, int> answers;
    std::uint64_t next_request = 1;
    auto feed = [&](const PolicyEvent& e) {
      const auto actions = p.handle(e);
      log += decision_line(0, e, actions);
      for (const auto& a : actions) {
        switch (a.kind) {
          case A::Dispatch:
            due.push_back(finished(a.worker, a.request));
            break;
          case A::Complete:
          case A::FailRequest:
            ++answers[a.request];
            break;
          case A::StopTraining:
            EXPECT_NE(traits(m).process, ProcessModel::SharedContext);
            due.push_back(
                stopped(a.worker, a.mode == StopMode::Pause ? TrainingStop::Paused : TrainingStop::Abandoned));
            break;
          case A::Cleanup:
            due.push_back(PolicyEvent{.kind = E::WorkerCleanedUp, .worker = a.worker});
            break;
          case A::RestartWorker:
            due.push_back(ready(a.worker));
            break;
          default:
            break;
        }
      }
    };
    for (int w = 0; w < workers; ++w) feed(ready(w));
    feed(PolicyEvent{.kind = E::TrainingStartRequested});
    for (int step = 0; step < 400; ++step) {
      if (due.empty() || rng() % 3 == 0) {
        if (next_request <= 100) feed(arrived(next_request++, static_cast<int>(rng() % 3)));
        if (due.empty()) continue;
      }
      const std::size_t k = rng() % due.size();
      const PolicyEvent e = due[k];
      due.erase(due.begin() + static_cast<std::ptrdiff_t>(k));
      feed(e);
    }
    while (!due.empty()) {
      const PolicyEvent e = due.front();
      due.pop_front();
      feed(e);
    }
    EXPECT_EQ(answers.size(), next_request - 1);
    for (const auto& [request, count] : answers) EXPECT_EQ(count, 1) << "request " << request;
    const DecisionReplay replay = replay_decisions(log, "log.jsonl");
    EXPECT_TRUE(replay.identical) << describe_difference(replay);
    EXPECT_GT(replay.events, 100);
  }
}

std::string scripted_log() {
  const PolicyConfig c = config_of(Mechanism::PipeSwitch, 2);
  ServerPolicy p(c);
  std::string log = decision_header_line(c);
  for (const PolicyEvent& e : {ready(0), ready(1), PolicyEvent{.kind = E::TrainingStartRequested}, arrived(1, 0),
                               stopped(0, TrainingStop::Paused), finished(1, 1)}) {
    log += decision_line(0, e, p.handle(e));
  }
  return log;
}

TEST(DecisionReplay, AnUnchangedLogHasNoDifference) {
  const DecisionReplay r = replay_decisions(scripted_log(), "d.jsonl");
  EXPECT_TRUE(r.identical);
  EXPECT_EQ(r.events, 6);
  EXPECT_EQ(r.actions, 5);  // start, stop, dispatch, complete, resume
  EXPECT_EQ(describe_difference(r), "no difference");
}

TEST(DecisionReplay, ReportsTheFirstActionThatDiffers) {
  std::string log = scripted_log();
  // The logged server sent the request to worker 0 instead of the standby worker 1.
  const auto at = log.find(R"({"kind":"dispatch","request":1,"transfer":true,"worker":1})");
  ASSERT_NE(at, std::string::npos) << log;
  log.replace(at, 58, R"({"kind":"dispatch","request":1,"transfer":true,"worker":0})");
  const DecisionReplay r = replay_decisions(log, "d.jsonl");
  EXPECT_FALSE(r.identical);
  EXPECT_EQ(r.where, "d.jsonl:5");
  EXPECT_EQ(r.events, 3);
  EXPECT_EQ(r.logged.at(1).worker, 0);
  EXPECT_EQ(r.decided.at(1).worker, 1);
  EXPECT_NE(describe_difference(r).find("d.jsonl:5: after 3 identical events"), std::string::npos);
}

TEST(DecisionReplay, AMalformedLogNamesTheLine) {
  expect_input_error([] { replay_decisions("", "d.jsonl"); }, "d.jsonl: the decision log is empty");
  expect_input_error([] { replay_decisions("{\"event\":{}}\n", "d.jsonl"); }, "d.jsonl:1: a decision log starts with");
  const std::string header = decision_header_line(config_of(Mechanism::PipeSwitch, 2));
  expect_input_error([&] { replay_decisions(header + "not json\n", "d.jsonl"); }, "d.jsonl:2: not a JSON record");
  expect_input_error(
      [&] {
        replay_decisions(header + R"({"event":{"kind":"warp"},"actions":[]})"
                                  "\n",
                         "d.jsonl");
      },
      "d.jsonl:2: 'kind' is 'warp', expected one of request_arrived");
  expect_input_error(
      [&] {
        replay_decisions(header + R"({"event":{"kind":"worker_ready","worker":9},"actions":[]})"
                                  "\n",
                         "d.jsonl");
      },
      "d.jsonl:2: worker_ready of worker 9");
  expect_input_error(
      [&] {
        replay_decisions(header + R"({"event":{"kind":"worker_ready","worker":0}})"
                                  "\n",
                         "d.jsonl");
      },
      "d.jsonl:2: the record has no 'actions'");
  expect_input_error(
      [] {
        replay_decisions(
            R"({"policy":{"mechanism":"pipeswitch","workers":0,"dispatch":"overlap","cache":"off","model_bytes":[]}})"
            "\n",
            "d.jsonl");
      },
      "d.jsonl:1: 'workers' must lie in [1, 1024]");
}

TEST(DecisionReplay, TheConfigRoundTrips) {
  PolicyConfig c = config_of(Mechanism::NoPinnedMemory, 3);
  c.dispatch = DispatchPolicy::AfterStop;
  c.cache = CachePolicy::Lru;
  c.cache_bytes = 12345;
  c.resident_at_start = true;
  c.fresh_process_per_task = false;
  c.used_at_start = 2;
  const PolicyConfig back = policy_config_from_json(to_json(c), "x");
  EXPECT_EQ(to_json(back), to_json(c));
}

}  // namespace server_policy_test
}  // namespace psw
