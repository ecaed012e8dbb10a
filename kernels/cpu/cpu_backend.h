// The cpu backend: fp32 arithmetic, multithreaded over (sequence, value head)
// pairs; "device" memory is ordinary host memory. Used by the server where
// there is no GPU.
#ifndef GDN_KERNELS_CPU_CPU_BACKEND_H_
#define GDN_KERNELS_CPU_CPU_BACKEND_H_

#include <memory>

#include "kernels/backend.h"

namespace gdn {

// threads <= 0: one per hardware thread.
std::unique_ptr<Backend> CreateCpuBackend(int threads);

}  // namespace gdn

#endif  // GDN_KERNELS_CPU_CPU_BACKEND_H_
