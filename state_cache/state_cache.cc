// StateCache::Create: checks the config, sizes the tiers and allocates them.
#include "state_cache/state_cache.h"

#include <time.h>

#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "state_cache/paged_state_cache.h"
#include "state_cache/tiered_page_store.h"

namespace gdn {

absl::Time CoarseNow() {
  timespec ts;
  if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0) return absl::Now();
  return absl::TimeFromTimespec(ts);
}

absl::StatusOr<std::unique_ptr<StateCache>> StateCache::Create(
    const StateCacheConfig& config, Backend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("backend is null");
  if (config.num_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_layers must be >= 1, got ", config.num_layers));
  }
  const StatePageLayout& layout = config.layout;
  const size_t page_bytes = layout.page_bytes;
  if (page_bytes == 0 || page_bytes % 256 != 0 ||
      page_bytes < layout.state_bytes + layout.scales_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_bytes ", page_bytes, " must be a non-zero multiple of 256 that "
        "holds state_bytes ", layout.state_bytes, " + scales_bytes ",
        layout.scales_bytes));
  }
  const size_t device_pages = config.device_budget_bytes / page_bytes;
  const size_t host_pages = config.host_budget_bytes / page_bytes;
  if (device_pages == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device budget of ", config.device_budget_bytes,
        " bytes holds no state page of ", page_bytes, " bytes"));
  }
  // State ids count pages of both tiers in one int32.
  constexpr size_t kMaxPages = std::numeric_limits<int32_t>::max();
  if (device_pages > kMaxPages || host_pages > kMaxPages - device_pages) {
    return absl::InvalidArgumentError(absl::StrCat(
        device_pages, " device + ", host_pages, " host pages exceed ",
        kMaxPages));
  }
  StateCacheConfig kept = config;
  if (!kept.clock) kept.clock = CoarseNow;
  absl::StatusOr<std::unique_ptr<TieredPageStore>> store =
      TieredPageStore::Create(backend, static_cast<int64_t>(page_bytes),
                              static_cast<int32_t>(device_pages),
                              static_cast<int32_t>(host_pages),
                              config.state_dtype);
  if (!store.ok()) return store.status();
  return std::unique_ptr<StateCache>(
      new PagedStateCache(kept, *std::move(store)));
}

}  // namespace gdn
