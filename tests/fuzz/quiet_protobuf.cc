// libFuzzer's initialization hook for the targets that parse with protobuf:
// protobuf logs every string field that is not UTF-8 to stderr, noise (and
// time) for a fuzzer that sends such bytes on purpose.
#include "google/protobuf/stubs/logging.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}
