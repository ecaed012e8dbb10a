// Where the inputs of T tokens lie in a packed input block: a call's block in
// the I/O arena (packed by the request thread) and a batch's block in device
// memory (gathered by the engine) share this layout, so a batch of exactly
// one call is one copy of the whole block.
//
//   [q  T x Hqk x K | k  T x Hqk x K | v  T x Hv x V | g  T x Hv | beta  T x Hv]
//    activation dtype                                  fp32        fp32
//
// each region starting at a multiple of 256 bytes. Rows are contiguous, so
// the rows [r, r + n) of a tensor are one byte range.
#ifndef GDN_SERVER_ENGINE_INPUT_LAYOUT_H_
#define GDN_SERVER_ENGINE_INPUT_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "kernels/gdn_types.h"

namespace gdn {

struct InputLayout {
  // Bytes of one token's row of each tensor.
  size_t qk_row = 0;    // Hqk * K * sizeof(activation)
  size_t v_row = 0;     // Hv * V * sizeof(activation); also o's row
  size_t gate_row = 0;  // Hv * sizeof(float)
  // Byte offsets of the regions and the total.
  size_t q = 0, k = 0, v = 0, g = 0, beta = 0;
  size_t bytes = 0;

  static InputLayout For(const LayerShape& shape, DType activation, int64_t tokens) {
    InputLayout l;
    const size_t elem = DTypeSize(activation);
    l.qk_row = static_cast<size_t>(shape.num_qk_heads) * shape.head_dim_k * elem;
    l.v_row = static_cast<size_t>(shape.num_v_heads) * shape.head_dim_v * elem;
    l.gate_row = static_cast<size_t>(shape.num_v_heads) * sizeof(float);
    const size_t t = static_cast<size_t>(tokens);
    size_t at = 0;
    auto region = [&at, t](size_t row) {
      const size_t start = at;
      at = Align(start + t * row);
      return start;
    };
    l.q = region(l.qk_row);
    l.k = region(l.qk_row);
    l.v = region(l.v_row);
    l.g = region(l.gate_row);
    l.beta = region(l.gate_row);
    l.bytes = at;
    return l;
  }

  static size_t Align(size_t n) { return (n + 255) / 256 * 256; }
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_INPUT_LAYOUT_H_
