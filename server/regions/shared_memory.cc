#include "server/regions/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace gdn {

absl::StatusOr<SharedMemoryMapping> MapSharedMemory(absl::string_view key, int64_t offset,
                                                    int64_t bytes) {
  const std::string name(key);
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key: a POSIX shm name is '/' and 1..254 characters without another '/', got '", name,
        "'"));
  }
  if (offset < 0 || bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset must be >= 0 and byte_size > 0, got ", offset, " and ", bytes));
  }
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int err = errno;
    const std::string why = absl::StrCat("shm_open('", name, "'): ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(why);
    if (err == EACCES) return absl::PermissionDeniedError(why);
    return absl::InvalidArgumentError(why);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("fstat of shm '", name, "': ", std::strerror(err)));
  }
  if (offset > st.st_size || bytes > st.st_size - offset) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        // The end in uint64: offset near 2^63 is the client's to send, and
        // both are >= 0 here, so the sum cannot wrap.
        "byte_size: [", offset, ", ", static_cast<uint64_t>(offset) + static_cast<uint64_t>(bytes),
        ") lies past the end of shm '", name,
        "' (", st.st_size, " bytes)"));
  }
  // mmap's offset must be a multiple of the page size.
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t start = offset / page * page;
  const size_t length = static_cast<size_t>(offset + bytes - start);
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, start);
  const int err = errno;
  close(fd);  // the mapping keeps the object open
  if (base == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("mmap of shm '", name, "': ", std::strerror(err)));
  }
  SharedMemoryMapping m;
  m.mapping.reset(base, [length](void* p) { munmap(p, length); });
  m.data = static_cast<char*>(base) + (offset - start);
  return m;
}

}  // namespace gdn
