// psw validate's wait for a server's training job that is between tasks (Note [Validating the
// same case] in validation_run.hpp): preempted, or resuming in a fresh process after a
// stop-and-start request, it is waited for; stopped by a client, done or never started, it is not.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "psw/runtime/validation_run.hpp"

namespace psw::runtime {
namespace {

using std::chrono::milliseconds;

// A job of `model` that is between tasks for the first `between` polls, then `after`.
struct ScriptedJob {
  int between = 0;
  TrainingStatus after;
  int polls = 0;

  TrainingStatus operator()() {
    ++polls;
    if (polls <= between) {
      TrainingStatus waiting;
      waiting.model = after.model;
      waiting.active = true;  // started, not running now
      return waiting;
    }
    return after;
  }
};

TrainingStatus running_job() {
  TrainingStatus s;
  s.model = "resnet152";
  s.running = true;
  s.active = true;
  return s;
}

TEST(ValidationWait, WaitsForAJobThatResumes) {
  ScriptedJob job{3, running_job()};
  std::vector<std::string> said;
  const TrainingStatus status = wait_while_between_tasks(std::ref(job), milliseconds(10'000),
                                                         [&](const std::string& line) { said.push_back(line); });
  EXPECT_TRUE(status.running);
  EXPECT_EQ(job.polls, 4);
  ASSERT_EQ(said.size(), 1U);  // said once, not once per poll
  EXPECT_NE(said[0].find("resnet152"), std::string::npos) << said[0];
}

TEST(ValidationWait, DoesNotWaitForAStoppedJobANeverStartedOneOrNone) {
  TrainingStatus stopped;
  stopped.model = "resnet152";
  stopped.stopped = true;
  ScriptedJob job{0, stopped};
  EXPECT_TRUE(wait_while_between_tasks(std::ref(job), milliseconds(10'000), nullptr).stopped);
  EXPECT_EQ(job.polls, 1);
  ScriptedJob none{0, TrainingStatus{}};  // the server has no training job
  EXPECT_TRUE(wait_while_between_tasks(std::ref(none), milliseconds(10'000), nullptr).model.empty());
  EXPECT_EQ(none.polls, 1);
  TrainingStatus idle;  // configured, never started
  idle.model = "resnet152";
  ScriptedJob never{0, idle};
  const TrainingStatus status = wait_while_between_tasks(std::ref(never), milliseconds(10'000), nullptr);
  EXPECT_FALSE(status.running);
  EXPECT_FALSE(status.active);
  EXPECT_EQ(never.polls, 1);
}

TEST(ValidationWait, GivesUpAfterItsPatience) {
  ScriptedJob job{1'000'000, running_job()};  // never resumes within the test
  const auto start = std::chrono::steady_clock::now();
  const TrainingStatus status = wait_while_between_tasks(std::ref(job), milliseconds(50), nullptr);
  EXPECT_FALSE(status.running);
  EXPECT_FALSE(status.stopped);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
  EXPECT_GT(job.polls, 1);
}

}  // namespace
}  // namespace psw::runtime
