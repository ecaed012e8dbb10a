// A POSIX shared-memory object this process creates (shm_open O_EXCL, mode
// 0600: the server runs as the same user), sizes and maps read-write; it is
// unmapped and unlinked when the object goes. What a same-host client hands
// the server by name: a SYSTEM region (RegisterRegion) or a Forward channel
// (OpenChannel). Untouched pages cost no memory.
#ifndef GDN_CLIENT_SHARED_MEMORY_OBJECT_H_
#define GDN_CLIENT_SHARED_MEMORY_OBJECT_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gdn::client {

class SharedMemoryObject {
 public:
  // `key`: "/name" as shm_open takes it. Internal when it cannot be
  // created (e.g. the name exists); ResourceExhausted when it cannot be
  // sized or mapped.
  static absl::StatusOr<std::unique_ptr<SharedMemoryObject>> Create(std::string key,
                                                                    size_t bytes);
  ~SharedMemoryObject();
  SharedMemoryObject(const SharedMemoryObject&) = delete;
  SharedMemoryObject& operator=(const SharedMemoryObject&) = delete;

  const std::string& key() const { return key_; }
  char* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  SharedMemoryObject() = default;
  std::string key_;
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace gdn::client

#endif  // GDN_CLIENT_SHARED_MEMORY_OBJECT_H_
