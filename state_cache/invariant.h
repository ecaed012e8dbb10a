// A broken invariant of the state cache's bookkeeping is a bug in the cache,
// never an ordinary outcome (those are absl::Status): it stops the process
// with a message rather than corrupting states that clients rely on.
#ifndef GDN_STATE_CACHE_INVARIANT_H_
#define GDN_STATE_CACHE_INVARIANT_H_

namespace gdn {

[[noreturn]] void StateCacheInvariantFailed(const char* file, int line,
                                            const char* condition);

#define GDN_CACHE_INVARIANT(condition)                                  \
  do {                                                                  \
    if (!(condition)) {                                                 \
      ::gdn::StateCacheInvariantFailed(__FILE__, __LINE__, #condition); \
    }                                                                   \
  } while (false)

}  // namespace gdn

#endif  // GDN_STATE_CACHE_INVARIANT_H_
