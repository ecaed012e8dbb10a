#include "state_cache/invariant.h"

#include <cstdio>
#include <cstdlib>

namespace gdn {

void StateCacheInvariantFailed(const char* file, int line,
                               const char* condition) {
  std::fprintf(stderr, "%s:%d: state cache invariant broken: %s\n", file, line,
               condition);
  std::abort();
}

}  // namespace gdn
