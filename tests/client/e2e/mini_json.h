// A small strict JSON parser for checking gdn-bench's report in tests
// (objects, arrays, strings with simple escapes, numbers, true/false/null).
#ifndef GDN_TESTS_CLIENT_E2E_MINI_JSON_H_
#define GDN_TESTS_CLIENT_E2E_MINI_JSON_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gdn::e2e {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  // The member at a path of keys, or nullptr.
  const JsonValue* Find(const std::vector<std::string>& path) const;
};

// The whole text must be one JSON value (whitespace around it allowed).
absl::StatusOr<JsonValue> ParseJson(const std::string& text);

}  // namespace gdn::e2e

#endif  // GDN_TESTS_CLIENT_E2E_MINI_JSON_H_
