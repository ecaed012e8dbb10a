#include "client/shared_memory_object.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gdn::client {

absl::StatusOr<std::unique_ptr<SharedMemoryObject>> SharedMemoryObject::Create(std::string key,
                                                                               size_t bytes) {
  std::unique_ptr<SharedMemoryObject> o(new SharedMemoryObject());
  o->key_ = std::move(key);
  const int fd = shm_open(o->key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("shm_open ", o->key_, ": ", std::strerror(errno)));
  }
  const bool sized = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
  void* p = sized ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int err = errno;
  close(fd);  // the mapping keeps the object open
  if (p == MAP_FAILED) {
    shm_unlink(o->key_.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("shm ", o->key_, " of ", bytes, " bytes: ", std::strerror(err)));
  }
  o->data_ = static_cast<char*>(p);
  o->bytes_ = bytes;
  return o;
}

SharedMemoryObject::~SharedMemoryObject() {
  if (data_ != nullptr) munmap(data_, bytes_);
  shm_unlink(key_.c_str());
}

}  // namespace gdn::client
