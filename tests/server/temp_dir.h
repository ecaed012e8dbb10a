// A fresh directory under /tmp for one test (snapshot directories, drained
// files), removed with everything in it when the object goes: a test
// fixture's member lives exactly as long as its test.
#ifndef GDN_TESTS_SERVER_TEMP_DIR_H_
#define GDN_TESTS_SERVER_TEMP_DIR_H_

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "gtest/gtest.h"

namespace gdn::testing {

class TempDir {
 public:
  // /tmp/<prefix>_XXXXXX; a failure is reported to the running test.
  explicit TempDir(const std::string& prefix = "gdn_test") {
    std::string pattern = "/tmp/" + prefix + "_XXXXXX";
    const char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
    path_ = made != nullptr ? std::string(made) : std::string();
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // File names in the directory, sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::vector<std::string> NamesEndingIn(const std::string& suffix) const {
    std::vector<std::string> out;
    for (const std::string& n : Names()) {
      if (n.size() >= suffix.size() &&
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
        out.push_back(n);
      }
    }
    return out;
  }

 private:
  std::string path_;
};

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_TEMP_DIR_H_
