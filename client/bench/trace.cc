#include "client/bench/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gdn::client::bench {
namespace {

constexpr const char* kFields[] = {"arrival_s", "prefill_tokens", "decode_steps"};

absl::Status LineError(int line, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("trace line ", line, ": ", why));
}

absl::StatusOr<TraceRecord> MakeRecord(const std::map<std::string, std::string>& fields,
                                       int line) {
  double v[3];
  for (int i = 0; i < 3; ++i) {
    auto it = fields.find(kFields[i]);
    if (it == fields.end()) return LineError(line, absl::StrCat("no ", kFields[i]));
    if (!absl::SimpleAtod(it->second, &v[i]) || !std::isfinite(v[i]) || v[i] < 0) {
      return LineError(line, absl::StrCat(kFields[i], " '", it->second,
                                          "' is not a number >= 0"));
    }
  }
  if (v[1] != std::floor(v[1]) || v[2] != std::floor(v[2]) || v[1] + v[2] == 0) {
    return LineError(line, "prefill_tokens and decode_steps must be integers, not both 0");
  }
  return TraceRecord{v[0], static_cast<int>(v[1]), static_cast<int>(v[2])};
}

// The flat object of one JSONL line: "key": number pairs (other values are
// kept as text and ignored unless they are one of kFields).
absl::StatusOr<std::map<std::string, std::string>> ParseFlatJson(absl::string_view s, int line) {
  s = absl::StripAsciiWhitespace(s);
  if (!absl::ConsumePrefix(&s, "{") || !absl::ConsumeSuffix(&s, "}")) {
    return LineError(line, "not a JSON object");
  }
  std::map<std::string, std::string> out;
  for (absl::string_view pair : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits(':', 1));
    if (kv.size() != 2) return LineError(line, absl::StrCat("bad member '", pair, "'"));
    absl::string_view key = absl::StripAsciiWhitespace(kv[0]);
    if (!absl::ConsumePrefix(&key, "\"") || !absl::ConsumeSuffix(&key, "\"")) {
      return LineError(line, absl::StrCat("bad key '", kv[0], "'"));
    }
    out[std::string(key)] = std::string(absl::StripAsciiWhitespace(kv[1]));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<TraceRecord>> ParseTrace(const std::string& text, bool csv) {
  std::vector<TraceRecord> records;
  std::vector<std::string> header;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    std::map<std::string, std::string> fields;
    if (csv) {
      std::vector<std::string> cells = absl::StrSplit(line, ',');
      for (std::string& c : cells) c = std::string(absl::StripAsciiWhitespace(c));
      if (header.empty()) {
        header = cells;
        continue;
      }
      if (cells.size() != header.size()) {
        return LineError(line_number, absl::StrCat(cells.size(), " cells, header has ",
                                                   header.size()));
      }
      for (size_t i = 0; i < cells.size(); ++i) fields[header[i]] = cells[i];
    } else {
      absl::StatusOr<std::map<std::string, std::string>> parsed = ParseFlatJson(line, line_number);
      if (!parsed.ok()) return parsed.status();
      fields = std::move(*parsed);
    }
    absl::StatusOr<TraceRecord> record = MakeRecord(fields, line_number);
    if (!record.ok()) return record.status();
    records.push_back(*record);
  }
  if (records.empty()) return absl::InvalidArgumentError("trace has no records");
  std::stable_sort(records.begin(), records.end(),
                   [](const TraceRecord& a, const TraceRecord& b) { return a.arrival_s < b.arrival_s; });
  return records;
}

absl::StatusOr<std::vector<TraceRecord>> LoadTrace(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read trace file '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<std::vector<TraceRecord>> r =
      ParseTrace(text.str(), absl::EndsWithIgnoreCase(path, ".csv"));
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", r.status().message()));
  return r;
}

}  // namespace gdn::client::bench
