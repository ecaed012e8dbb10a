#include "server/ops/byte_size.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gdn {

bool ParseByteSize(absl::string_view text, size_t* out) {
  text = absl::StripAsciiWhitespace(text);
  size_t split = 0;
  while (split < text.size() &&
         (absl::ascii_isdigit(text[split]) || text[split] == '.')) {
    ++split;
  }
  if (split == 0) return false;
  const absl::string_view number = text.substr(0, split);
  const std::string suffix =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(text.substr(split)));
  double multiplier;
  if (suffix.empty() || suffix == "b") multiplier = 1;
  else if (suffix == "kib") multiplier = 1024.0;
  else if (suffix == "mib") multiplier = 1024.0 * 1024;
  else if (suffix == "gib") multiplier = 1024.0 * 1024 * 1024;
  else if (suffix == "tib") multiplier = 1024.0 * 1024 * 1024 * 1024;
  else if (suffix == "k" || suffix == "kb") multiplier = 1e3;
  else if (suffix == "m" || suffix == "mb") multiplier = 1e6;
  else if (suffix == "g" || suffix == "gb") multiplier = 1e9;
  else if (suffix == "t" || suffix == "tb") multiplier = 1e12;
  else return false;
  double value;
  if (!absl::SimpleAtod(number, &value) || !(value >= 0)) return false;
  const double bytes = std::floor(value * multiplier);
  if (bytes > 9.0e18) return false;
  *out = static_cast<size_t>(bytes);
  return true;
}

std::string FormatByteSize(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return absl::StrCat(bytes, kUnits[unit]);
}

bool AbslParseFlag(absl::string_view text, ByteSize* out, std::string* error) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    out->bytes = 0;
    return true;
  }
  if (!ParseByteSize(text, &out->bytes)) {
    *error = "expected a byte size such as 2GiB, 512MiB, 1G or 4096";
    return false;
  }
  return true;
}

std::string AbslUnparseFlag(ByteSize size) {
  return FormatByteSize(size.bytes);
}

}  // namespace gdn
