// Note [Scheduling]: inference first, FIFO; training stopped for a request, resumed when idle.
#include <gtest/gtest.h>

#include <vector>

#include "psw/common/scheduling.hpp"

namespace psw {
namespace {

std::vector<SchedulerAction> decide(const SchedulerView& v) {
  InferenceFirstPolicy policy;
  SchedulerAction out[2];
  int count = 0;
  policy.decide(v, out, count);
  return {out, out + count};
}

TEST(Scheduling, ARequestStopsTrainingAndGoesToAFreeWorkerAtOnce) {
  SchedulerView v;
  v.request_waiting = true;
  v.worker_free = true;
  v.training_wanted = true;
  v.training_running = true;
  EXPECT_EQ(decide(v), (std::vector{SchedulerAction::StopTraining, SchedulerAction::DispatchRequest}));
  v.dispatch_after_stop = true;  // waits for the stop
  EXPECT_EQ(decide(v), (std::vector{SchedulerAction::StopTraining}));
  v.training_running = false;
  v.training_stopping = true;
  EXPECT_TRUE(decide(v).empty());
  v.training_stopping = false;
  v.training_paused = true;
  EXPECT_EQ(decide(v), (std::vector{SchedulerAction::DispatchRequest}));
}

TEST(Scheduling, TrainingResumesOnlyWhenNoRequestWaitsOrRuns) {
  SchedulerView v;
  v.training_wanted = true;
  v.training_paused = true;
  EXPECT_EQ(decide(v), (std::vector{SchedulerAction::ResumeTraining}));
  v.request_running = true;
  EXPECT_TRUE(decide(v).empty());
  v.request_running = false;
  v.training_paused = false;
  EXPECT_TRUE(decide(v).empty());  // no worker to train on
  v.worker_free = true;
  EXPECT_EQ(decide(v), (std::vector{SchedulerAction::ResumeTraining}));
  v.training_wanted = false;
  EXPECT_TRUE(decide(v).empty());
}

TEST(Scheduling, MpsNeverStopsTrainingAndRunsBesideIt) {
  SchedulerView v;
  v.share_device = true;
  v.request_waiting = true;
  v.worker_free = true;
  v.training_wanted = true;
  v.training_running = true;
  EXPECT_EQ(decide(v), (std::vector{SchedulerAction::DispatchRequest}));
  v.request_waiting = false;
  v.request_running = true;
  v.training_running = false;
  EXPECT_EQ(decide(v), (std::vector{SchedulerAction::ResumeTraining}));  // beside the request
}

TEST(Scheduling, OneRequestAtATime) {
  SchedulerView v;
  v.request_waiting = true;
  v.request_running = true;
  v.worker_free = true;
  EXPECT_TRUE(decide(v).empty());
}

}  // namespace
}  // namespace psw
