// FUZZ_CHECK: a property of the code under test that must hold for every
// input. A violation aborts, which libFuzzer reports as a crash and saves
// the input (a real defect: fix it and add a unit test, README Development).
#ifndef GDN_TESTS_FUZZ_FUZZ_CHECK_H_
#define GDN_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                      \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

#endif  // GDN_TESTS_FUZZ_FUZZ_CHECK_H_
