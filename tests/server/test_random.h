// A fresh random seed per test (printed on failure so a run can be
// reproduced with GDN_TEST_SEED=<seed>).
#ifndef GDN_TESTS_SERVER_TEST_RANDOM_H_
#define GDN_TESTS_SERVER_TEST_RANDOM_H_

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace gdn::testing {

inline uint64_t FreshSeed() {
  if (const char* env = std::getenv("GDN_TEST_SEED")) {
    return std::strtoull(env, nullptr, 10);
  }
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_TEST_RANDOM_H_
