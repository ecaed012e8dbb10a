#include "bench/eval/json_value.h"

#include <cmath>
#include <cstdio>

namespace gdn::eval {

Json& Json::Set(const std::string& key, Json value) {
  kind_ = Kind::kObject;
  for (auto& member : members_) {
    if (member.first == key) {
      member.second = std::move(value);
      return *this;
    }
  }
  members_.emplace_back(key, std::move(value));
  return *this;
}

Json& Json::Push(Json value) {
  kind_ = Kind::kArray;
  items_.push_back(std::move(value));
  return *this;
}

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

void Newline(std::string* out, int indent, int depth) {
  if (indent < 0) return;
  *out += '\n';
  out->append(static_cast<size_t>(indent * depth), ' ');
}

}  // namespace

void Json::DumpTo(std::string* out, int indent, int depth) const {
  switch (kind_) {
    case Kind::kNull: *out += "null"; return;
    case Kind::kBool: *out += bool_ ? "true" : "false"; return;
    case Kind::kNumber: {
      if (!std::isfinite(number_)) {
        *out += "null";
        return;
      }
      char buf[32];
      // Integers exactly, everything else with 6 significant digits (enough
      // for times, rates and error ratios; keeps the report small).
      if (number_ == std::floor(number_) && std::fabs(number_) < 1e15) {
        std::snprintf(buf, sizeof(buf), "%.0f", number_);
      } else {
        std::snprintf(buf, sizeof(buf), "%.6g", number_);
      }
      *out += buf;
      return;
    }
    case Kind::kString: *out += JsonQuote(string_); return;
    case Kind::kArray: {
      // Arrays of scalars stay on one line.
      bool scalars = true;
      for (const Json& item : items_) {
        scalars &= item.kind_ != Kind::kArray && item.kind_ != Kind::kObject;
      }
      *out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) *out += scalars ? ", " : ",";
        if (!scalars) Newline(out, indent, depth + 1);
        items_[i].DumpTo(out, indent, depth + 1);
      }
      if (!scalars && !items_.empty()) Newline(out, indent, depth);
      *out += ']';
      return;
    }
    case Kind::kObject: {
      *out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i > 0) *out += ',';
        Newline(out, indent, depth + 1);
        *out += JsonQuote(members_[i].first);
        *out += indent < 0 ? ":" : ": ";
        members_[i].second.DumpTo(out, indent, depth + 1);
      }
      if (!members_.empty()) Newline(out, indent, depth);
      *out += '}';
      return;
    }
  }
}

std::string Json::Dump(int indent) const {
  std::string out;
  DumpTo(&out, indent, 0);
  return out;
}

}  // namespace gdn::eval
