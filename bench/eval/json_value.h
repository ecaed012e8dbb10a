// A small JSON value for gdn-eval's report: null, bool, number, string, array
// and object (keys kept in insertion order so the report reads top-down).
// Writing only; the report is read back by Python (plot_eval.py, the ctest
// checker). Non-finite numbers are written as null (JSON has no NaN / Inf).
#ifndef GDN_BENCH_EVAL_JSON_VALUE_H_
#define GDN_BENCH_EVAL_JSON_VALUE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gdn::eval {

class Json {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;  // null
  Json(bool b) : kind_(Kind::kBool), bool_(b) {}
  Json(double d) : kind_(Kind::kNumber), number_(d) {}
  Json(int i) : Json(static_cast<double>(i)) {}
  Json(int64_t i) : Json(static_cast<double>(i)) {}
  Json(uint64_t i) : Json(static_cast<double>(i)) {}
  Json(const char* s) : kind_(Kind::kString), string_(s) {}
  Json(std::string s) : kind_(Kind::kString), string_(std::move(s)) {}

  static Json Array() { Json j; j.kind_ = Kind::kArray; return j; }
  static Json Object() { Json j; j.kind_ = Kind::kObject; return j; }

  // Object: sets (or replaces) key. Array: appends. Returns *this.
  Json& Set(const std::string& key, Json value);
  Json& Push(Json value);

  Kind kind() const { return kind_; }
  size_t size() const { return kind_ == Kind::kArray ? items_.size() : members_.size(); }

  // Compact when indent < 0, else pretty-printed with that many spaces.
  std::string Dump(int indent = 2) const;

 private:
  void DumpTo(std::string* out, int indent, int depth) const;

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> items_;                           // kArray
  std::vector<std::pair<std::string, Json>> members_;  // kObject
};

// JSON string literal of s, quotes included.
std::string JsonQuote(const std::string& s);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_JSON_VALUE_H_
