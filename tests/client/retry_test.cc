#include "client/retry.h"

#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gdn::client {
namespace {

RetryPolicy Fast() {
  RetryPolicy p;
  p.initial_backoff = absl::Milliseconds(1);
  p.max_backoff = absl::Milliseconds(4);
  return p;
}

TEST(RetryTest, RetriesUnavailableUntilSuccess) {
  int calls = 0;
  std::vector<int> observed;
  absl::Status s = CallWithRetry(
      Fast(), [&](absl::string_view method, const absl::Status& st, int attempt) {
        EXPECT_EQ(method, "Forward");
        EXPECT_TRUE(absl::IsUnavailable(st));
        observed.push_back(attempt);
      },
      "Forward", [&](int attempt) {
        EXPECT_EQ(attempt, ++calls);
        return calls < 3 ? absl::UnavailableError("draining") : absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(observed, (std::vector<int>{1, 2}));
}

TEST(RetryTest, OtherCodesAreNotRetried) {
  for (absl::Status err : {absl::FailedPreconditionError("p"), absl::NotFoundError("n"),
                           absl::DeadlineExceededError("d"), absl::InvalidArgumentError("i")}) {
    int calls = 0;
    absl::Status s = CallWithRetry(Fast(), nullptr, "Forward", [&](int) {
      ++calls;
      return err;
    });
    EXPECT_EQ(s, err);
    EXPECT_EQ(calls, 1);
  }
}

TEST(RetryTest, BoundedByAttemptsAndTime) {
  RetryPolicy p = Fast();
  p.max_attempts = 4;
  int calls = 0;
  absl::Status s = CallWithRetry(p, nullptr, "m", [&](int) {
    ++calls;
    return absl::UnavailableError("down");
  });
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(calls, 4);

  p.max_attempts = 1000;
  p.max_total = absl::Milliseconds(50);
  calls = 0;
  const absl::Time t0 = absl::Now();
  s = CallWithRetry(p, nullptr, "m", [&](int) {
    ++calls;
    return absl::UnavailableError("down");
  });
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(500));
  EXPECT_GT(calls, 5);
  EXPECT_LT(calls, 1000);
}

TEST(RetryTest, BackoffGrowsToItsCap) {
  RetryPolicy p;
  EXPECT_EQ(RetryBackoff(p, 1), absl::Milliseconds(50));
  EXPECT_EQ(RetryBackoff(p, 2), absl::Milliseconds(100));
  EXPECT_EQ(RetryBackoff(p, 3), absl::Milliseconds(200));
  EXPECT_EQ(RetryBackoff(p, 30), absl::Seconds(2));
}

}  // namespace
}  // namespace gdn::client
