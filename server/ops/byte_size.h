// Byte sizes on the command line: "2GiB", "512MiB", "64KiB", "1G", "4096".
// Binary (KiB, MiB, GiB, TiB) and decimal (KB/K, MB/M, GB/G, TB/T) suffixes,
// case-insensitive; an optional fractional part ("1.5GiB"). Pure functions.
#ifndef GDN_SERVER_OPS_BYTE_SIZE_H_
#define GDN_SERVER_OPS_BYTE_SIZE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace gdn {

bool ParseByteSize(absl::string_view text, size_t* out);
// The largest exact binary unit: 2147483648 -> "2GiB", 1000 -> "1000B".
std::string FormatByteSize(size_t bytes);

// An absl flag type for byte sizes ("0" or "" = default).
struct ByteSize {
  size_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* out, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

}  // namespace gdn

#endif  // GDN_SERVER_OPS_BYTE_SIZE_H_
