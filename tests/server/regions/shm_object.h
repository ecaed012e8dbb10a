// A POSIX shared-memory object for tests: created with a unique name,
// mapped, unlinked and unmapped when it goes. What a same-host client does
// before RegisterRegion(REGION_SYSTEM).
#ifndef GDN_TESTS_SERVER_REGIONS_SHM_OBJECT_H_
#define GDN_TESTS_SERVER_REGIONS_SHM_OBJECT_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gdn::testing {

class ShmObject {
 public:
  explicit ShmObject(size_t bytes) : bytes_(bytes) {
    static std::atomic<int> next{0};
    name_ = absl::StrCat("/gdn-test-", getpid(), "-", next.fetch_add(1));
    const int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0) << "shm_open " << name_;
    if (fd < 0) return;
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    EXPECT_NE(p, MAP_FAILED);
    if (p != MAP_FAILED) data_ = static_cast<char*>(p);
  }
  ~ShmObject() {
    if (data_ != nullptr) munmap(data_, bytes_);
    shm_unlink(name_.c_str());
  }
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;

  const std::string& name() const { return name_; }
  char* data() { return data_; }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  std::string name_;
  char* data_ = nullptr;
};

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_REGIONS_SHM_OBJECT_H_
