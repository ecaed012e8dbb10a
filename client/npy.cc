#include "client/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/dtype_convert.h"

namespace gdn::client {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// The text after `'key':` in the header dict (either quote style), or npos.
size_t FindValue(absl::string_view header, absl::string_view key) {
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = absl::StrCat(std::string(1, quote), key, std::string(1, quote));
    size_t at = header.find(quoted);
    if (at == absl::string_view::npos) continue;
    at = header.find(':', at + quoted.size());
    if (at == absl::string_view::npos) return at;
    at = header.find_first_not_of(" \t", at + 1);
    return at;
  }
  return absl::string_view::npos;
}

absl::Status ParseHeader(absl::string_view header, NpyArray* out) {
  // 'descr': '<f4'
  size_t at = FindValue(header, "descr");
  if (at == absl::string_view::npos || (header[at] != '\'' && header[at] != '"')) {
    return absl::InvalidArgumentError(absl::StrCat("npy header has no descr: ", header));
  }
  const size_t end = header.find(header[at], at + 1);
  if (end == absl::string_view::npos) {
    return absl::InvalidArgumentError("npy header: unterminated descr");
  }
  const absl::string_view descr = header.substr(at + 1, end - at - 1);
  if (descr == "<f4") {
    out->dtype = NpyDType::kF32;
  } else if (descr == "<f2") {
    out->dtype = NpyDType::kF16;
  } else if (descr == "<u2" || descr == "|V2" || descr == "<V2") {
    out->dtype = NpyDType::kBF16;  // bf16 bit patterns (see npy.h)
  } else if (descr == "<f8") {
    out->dtype = NpyDType::kF64;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "npy dtype '", descr,
        "' not supported (little-endian <f4, <f2, <f8, or <u2 holding bf16)"));
  }
  // 'fortran_order': False
  at = FindValue(header, "fortran_order");
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError("npy header has no fortran_order");
  }
  if (absl::StartsWith(header.substr(at), "True")) {
    return absl::InvalidArgumentError(
        "npy file is in Fortran order; save it with np.ascontiguousarray");
  }
  if (!absl::StartsWith(header.substr(at), "False")) {
    return absl::InvalidArgumentError("npy header: bad fortran_order");
  }
  // 'shape': (3, 4,)
  at = FindValue(header, "shape");
  if (at == absl::string_view::npos || header[at] != '(') {
    return absl::InvalidArgumentError("npy header has no shape tuple");
  }
  const size_t close = header.find(')', at);
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("npy header: unterminated shape");
  }
  out->shape.clear();
  for (absl::string_view dim : absl::StrSplit(header.substr(at + 1, close - at - 1), ',')) {
    dim = absl::StripAsciiWhitespace(dim);
    if (dim.empty()) continue;
    if (absl::EndsWith(dim, "L")) dim.remove_suffix(1);  // Python 2 longs
    int64_t d = 0;
    if (!absl::SimpleAtoi(dim, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("npy header: bad dimension '", dim, "'"));
    }
    out->shape.push_back(d);
  }
  return absl::OkStatus();
}

void AppendLittleEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

size_t NpyDTypeSize(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::kF32:
      return 4;
    case NpyDType::kF64:
      return 8;
    case NpyDType::kF16:
    case NpyDType::kBF16:
      return 2;
  }
  return 0;
}

absl::string_view NpyDescr(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::kF32:
      return "<f4";
    case NpyDType::kF16:
      return "<f2";
    case NpyDType::kBF16:
      return "<u2";
    case NpyDType::kF64:
      return "<f8";
  }
  return "";
}

int64_t NpyArray::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes) {
  if (bytes.size() < kMagicSize + 4 || bytes.substr(0, kMagicSize) != absl::string_view(kMagic, kMagicSize)) {
    return absl::InvalidArgumentError("not a .npy file (no \\x93NUMPY magic)");
  }
  const uint8_t major = static_cast<uint8_t>(bytes[kMagicSize]);
  size_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError("truncated .npy header");
    for (int i = 0; i < 4; ++i) {
      header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    }
    header_start = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(".npy format version ", major, " not supported"));
  }
  if (bytes.size() < header_start + header_len) {
    return absl::InvalidArgumentError("truncated .npy header");
  }
  NpyArray array;
  absl::Status status = ParseHeader(bytes.substr(header_start, header_len), &array);
  if (!status.ok()) return status;
  const absl::string_view data = bytes.substr(header_start + header_len);
  const size_t want = static_cast<size_t>(array.num_elements()) * NpyDTypeSize(array.dtype);
  if (data.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        ".npy data has ", data.size(), " bytes, shape (", absl::StrJoin(array.shape, ", "),
        ") of ", NpyDescr(array.dtype), " needs ", want));
  }
  array.data = std::string(data);
  return array;
}

std::string SerializeNpy(const NpyArray& array) {
  std::string shape = absl::StrJoin(array.shape, ", ");
  if (array.shape.size() == 1) shape += ",";  // a 1-tuple in Python
  std::string header = absl::StrCat("{'descr': '", NpyDescr(array.dtype),
                                    "', 'fortran_order': False, 'shape': (", shape, "), }");
  // magic (6) + version (2) + length (2) + header + '\n', a multiple of 64.
  const size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, kMagicSize);
  out.push_back(1);
  out.push_back(0);
  AppendLittleEndian(&out, header.size(), 2);
  out += header;
  out += array.data;
  return out;
}

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream buffer;
  buffer << file.rdbuf();
  absl::StatusOr<NpyArray> array = ParseNpy(buffer.str());
  if (!array.ok()) {
    return absl::Status(array.status().code(), absl::StrCat(path, ": ", array.status().message()));
  }
  return array;
}

absl::Status WriteNpyFile(const std::string& path, const NpyArray& array) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  const std::string bytes = SerializeNpy(array);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) return absl::DataLossError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

std::vector<float> NpyToFloats(const NpyArray& array) {
  const size_t n = array.data.size() / NpyDTypeSize(array.dtype);
  std::vector<float> out(n);
  switch (array.dtype) {
    case NpyDType::kF32:
      std::memcpy(out.data(), array.data.data(), n * sizeof(float));
      break;
    case NpyDType::kF64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, array.data.data() + i * 8, 8);
        out[i] = static_cast<float>(d);
      }
      break;
    case NpyDType::kF16:
      ConvertToFloat(array.data.data(), DType::kF16, n, out.data());
      break;
    case NpyDType::kBF16:
      ConvertToFloat(array.data.data(), DType::kBF16, n, out.data());
      break;
  }
  return out;
}

NpyArray NpyFromFloats(NpyDType dtype, std::vector<int64_t> shape,
                       const std::vector<float>& values) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.data.resize(values.size() * NpyDTypeSize(dtype));
  switch (dtype) {
    case NpyDType::kF32:
      std::memcpy(array.data.data(), values.data(), values.size() * sizeof(float));
      break;
    case NpyDType::kF64:
      for (size_t i = 0; i < values.size(); ++i) {
        const double d = values[i];
        std::memcpy(array.data.data() + i * 8, &d, 8);
      }
      break;
    case NpyDType::kF16:
      ConvertFromFloat(values.data(), values.size(), DType::kF16, array.data.data());
      break;
    case NpyDType::kBF16:
      ConvertFromFloat(values.data(), values.size(), DType::kBF16, array.data.data());
      break;
  }
  return array;
}

}  // namespace gdn::client
