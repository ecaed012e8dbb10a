#include "tests/client/e2e/mini_json.h"

#include <cctype>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace gdn::e2e {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  absl::StatusOr<JsonValue> ParseAll() {
    JsonValue v;
    if (!Value(&v)) return absl::InvalidArgumentError(absl::StrCat("bad JSON at byte ", i_));
    Space();
    if (i_ != s_.size()) return absl::InvalidArgumentError(absl::StrCat("trailing data at ", i_));
    return v;
  }

 private:
  void Space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Literal(const char* word) {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        const char e = s_[i_++];
        if (e == 'n') c = '\n';
        else if (e == 't') c = '\t';
        else if (e == 'u') {
          if (i_ + 4 > s_.size()) return false;
          c = static_cast<char>(std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16));
          i_ += 4;
        } else c = e;
      }
      out->push_back(c);
    }
    return i_ < s_.size() && s_[i_++] == '"';
  }
  bool Value(JsonValue* v) {
    Space();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v->kind = JsonValue::Kind::kObject;
      if (Eat('}')) return true;
      do {
        std::string key;
        JsonValue member;
        if (!String(&key) || !Eat(':') || !Value(&member)) return false;
        v->object[key] = std::move(member);
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      ++i_;
      v->kind = JsonValue::Kind::kArray;
      if (Eat(']')) return true;
      do {
        JsonValue item;
        if (!Value(&item)) return false;
        v->array.push_back(std::move(item));
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') {
      v->kind = JsonValue::Kind::kString;
      return String(&v->string);
    }
    if (Literal("true") || Literal("false")) {
      v->kind = JsonValue::Kind::kBool;
      v->boolean = s_[i_ - 1] == 'e' && s_[i_ - 2] == 'u';
      return true;
    }
    if (Literal("null")) return true;
    const char* start = s_.c_str() + i_;
    char* end = nullptr;
    v->number = std::strtod(start, &end);
    if (end == start) return false;
    v->kind = JsonValue::Kind::kNumber;
    i_ += end - start;
    return true;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(const std::vector<std::string>& path) const {
  const JsonValue* v = this;
  for (const std::string& key : path) {
    if (v->kind != Kind::kObject) return nullptr;
    auto it = v->object.find(key);
    if (it == v->object.end()) return nullptr;
    v = &it->second;
  }
  return v;
}

absl::StatusOr<JsonValue> ParseJson(const std::string& text) { return Parser(text).ParseAll(); }

}  // namespace gdn::e2e
