// DrainGate (server/sessions/drain_gate.h): calls enter until a drain begins,
// then are refused, and the drain waits for those already inside.
#include "server/sessions/drain_gate.h"

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

TEST(DrainGateTest, RefusesOnceDrainingAndWaitsForThoseInside) {
  DrainGate gate;
  ASSERT_TRUE(gate.Enter().ok());
  ASSERT_TRUE(gate.Enter().ok());
  gate.Leave();
  gate.BeginDrain();
  EXPECT_TRUE(gate.draining());
  const absl::Status refused = gate.Enter();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("draining"));
  EXPECT_FALSE(gate.WaitIdle(absl::Now() + absl::Milliseconds(20)));
  std::thread leaver([&] {
    absl::SleepFor(absl::Milliseconds(50));
    gate.Leave();
  });
  EXPECT_TRUE(gate.WaitIdle(absl::Now() + absl::Seconds(30)));
  leaver.join();
  EXPECT_EQ(gate.in_flight(), 0);
}

}  // namespace
}  // namespace gdn
