// Page-id checks of the state pool (device code), the one definition for
// the recurrent kernels and the chunked prefill. A page id outside the pool
// (other than kZeroStatePage where a zero state is allowed) must never be
// read or written: the kernels then run the sequence on a NaN state (its o
// becomes NaN) and touch no page.
#ifndef GDN_KERNELS_CUDA_COMMON_PAGE_IDS_CUH_
#define GDN_KERNELS_CUDA_COMMON_PAGE_IDS_CUH_

#include "kernels/gdn_params.h"

// Macros rather than inline functions on purpose: written as function calls
// the same comparisons changed the register allocation of the kernels that
// use them (ptxas -v, issue 22: +-1-4 registers in the chunked state chain,
// a 16-byte stack frame in one instance); expanded in place they compile to
// exactly the code of the expressions they replaced.

// A page of the pool: 0 <= id < num_pages.
#define GDN_PAGE_IN_POOL(id, num_pages) ((id) >= 0 && (id) < (num_pages))

// An initial or prefix-state page: in the pool, or kZeroStatePage (a zero
// initial state; no prefix state stored).
#define GDN_PAGE_IN_POOL_OR_ZERO(id, num_pages) \
  ((id) == ::gdn::kZeroStatePage || GDN_PAGE_IN_POOL(id, num_pages))

#endif  // GDN_KERNELS_CUDA_COMMON_PAGE_IDS_CUH_
