// POSIX shared memory opened by name and mapped read-write: the memory of a
// SYSTEM region (region.h).
#ifndef GDN_SERVER_REGIONS_SHARED_MEMORY_H_
#define GDN_SERVER_REGIONS_SHARED_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdn {

struct SharedMemoryMapping {
  std::shared_ptr<void> mapping;  // munmap when the last holder lets go
  char* data = nullptr;           // byte `offset` of the object
};

// Maps bytes [offset, offset + bytes) of the shm object `key` ("/name", as
// given to shm_open). NotFound when no such object; InvalidArgument when
// the range lies past its end; PermissionDenied when it cannot be opened
// read-write.
absl::StatusOr<SharedMemoryMapping> MapSharedMemory(absl::string_view key, int64_t offset,
                                                    int64_t bytes);

}  // namespace gdn

#endif  // GDN_SERVER_REGIONS_SHARED_MEMORY_H_
