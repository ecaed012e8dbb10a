// A small reader / writer of NumPy .npy files (format versions 1.0 to 3.0 on
// read, 1.0 on write), enough for gdn-cli's tensors: little-endian, C order,
// element types fp32 ('<f4'), fp16 ('<f2'), fp64 ('<f8', read only, for
// convenience) and bf16.
//
// NumPy has no bf16 dtype: bf16 tensors are stored as their raw 16-bit
// patterns with descr '<u2' (uint16), and a file with '<u2' (or ml_dtypes'
// '|V2') is read as bf16. In Python: `np.load(f).view(ml_dtypes.bfloat16)`,
// or `(x.astype(np.uint32) << 16).view(np.float32)` without ml_dtypes.
#ifndef GDN_CLIENT_NPY_H_
#define GDN_CLIENT_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdn::client {

enum class NpyDType { kF32, kF16, kBF16, kF64 };

// Bytes per element; its descr ("<f4", "<f2", "<u2", "<f8").
size_t NpyDTypeSize(NpyDType dtype);
absl::string_view NpyDescr(NpyDType dtype);

struct NpyArray {
  NpyDType dtype = NpyDType::kF32;
  std::vector<int64_t> shape;  // empty: a scalar (one element)
  std::string data;            // raw little-endian elements, C order

  int64_t num_elements() const;
};

// Parses a whole .npy file's bytes. InvalidArgument (saying what) for a bad
// magic or header, Fortran order, big-endian or unsupported dtypes, or a data
// size that does not match the shape.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);
// A version 1.0 file (header padded so the data start 64-byte aligned).
std::string SerializeNpy(const NpyArray& array);

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);
absl::Status WriteNpyFile(const std::string& path, const NpyArray& array);

// Every element as fp32 (fp64 rounds once; bf16 / fp16 exact).
std::vector<float> NpyToFloats(const NpyArray& array);
// An array of `dtype` from fp32 values (rounded once to nearest even).
NpyArray NpyFromFloats(NpyDType dtype, std::vector<int64_t> shape,
                       const std::vector<float>& values);

}  // namespace gdn::client

#endif  // GDN_CLIENT_NPY_H_
