#include "server/auth/tokens_file.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gdn {
namespace {

bool IsB64TokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
         c == '_' || c == '~' || c == '+' || c == '/';
}

absl::Status ValidateToken(absl::string_view token) {
  if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a token has ", kMinTokenBytes, "..",
                                                   kMaxTokenBytes, " characters, got ",
                                                   token.size()));
  }
  size_t i = 0;
  while (i < token.size() && IsB64TokenChar(token[i])) ++i;
  if (i == 0) return absl::InvalidArgumentError("a token starts with [A-Za-z0-9-._~+/]");
  while (i < token.size() && token[i] == '=') ++i;
  if (i != token.size()) {
    return absl::InvalidArgumentError(
        "a token is made of [A-Za-z0-9-._~+/] and trailing '=' (RFC 6750)");
  }
  return absl::OkStatus();
}

// Quotas seen so far for one tenant: each set at most once, or consistently.
struct QuotaLines {
  std::optional<int64_t> max_sessions;
  std::optional<int64_t> max_state_pages;
};

absl::Status SetQuota(std::optional<int64_t>* slot, int64_t value, absl::string_view key) {
  if (slot->has_value() && **slot != value) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, "=", value, " disagrees with ", key, "=", **slot,
                     " given on an earlier line of the same tenant"));
  }
  *slot = value;
  return absl::OkStatus();
}

absl::Status ParseLine(const std::vector<absl::string_view>& fields, QuotaLines* quotas) {
  for (size_t i = 2; i < fields.size(); ++i) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(fields[i], absl::MaxSplits('=', 1));
    int64_t value = 0;
    if (!absl::SimpleAtoi(kv.second, &value) || value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", fields[i], "': expected KEY=N with N >= 0"));
    }
    if (kv.first == "max_sessions") {
      if (absl::Status s = SetQuota(&quotas->max_sessions, value, kv.first); !s.ok()) return s;
    } else if (kv.first == "max_state_pages") {
      if (absl::Status s = SetQuota(&quotas->max_state_pages, value, kv.first); !s.ok()) {
        return s;
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown quota '", kv.first, "' (max_sessions, max_state_pages)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string TokenDigest(absl::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text,
                                             const TenantQuotas& defaults) {
  absl::flat_hash_map<std::string, QuotaLines> quotas;  // tenant -> given quotas
  std::vector<std::pair<std::string, std::string>> tokens;  // digest, tenant
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    auto fail = [line_number](const absl::Status& s) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line_number, ": ", s.message()));
    };
    if (fields.size() < 2) {
      return fail(absl::InvalidArgumentError("expected TENANT TOKEN [QUOTA=N ...]"));
    }
    if (absl::Status s = ValidateTenantName(fields[0]); !s.ok()) return fail(s);
    if (absl::Status s = ValidateToken(fields[1]); !s.ok()) return fail(s);
    QuotaLines& tenant_quotas = quotas[fields[0]];
    if (absl::Status s = ParseLine(fields, &tenant_quotas); !s.ok()) return fail(s);
    tokens.emplace_back(TokenDigest(fields[1]), std::string(fields[0]));
  }
  TokenTable table;
  for (const auto& [name, given] : quotas) {
    auto tenant = std::make_shared<Tenant>();
    tenant->name = name;
    tenant->quotas.max_sessions = given.max_sessions.value_or(defaults.max_sessions);
    tenant->quotas.max_state_pages = given.max_state_pages.value_or(defaults.max_state_pages);
    table.tenants_[name] = std::move(tenant);
  }
  for (auto& [digest, name] : tokens) {
    if (!table.by_digest_.emplace(digest, table.tenants_[name]).second) {
      return absl::InvalidArgumentError(
          "tokens file: a token appears twice (each token belongs to one tenant)");
    }
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Read(const std::string& path,
                                            const TenantQuotas& defaults) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string why = absl::StrCat("tokens file ", path, ": ", std::strerror(error));
    return error == EACCES ? absl::PermissionDeniedError(why) : absl::NotFoundError(why);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return Parse(text.str(), defaults);
}

std::shared_ptr<const Tenant> TokenTable::Find(absl::string_view token) const {
  auto it = by_digest_.find(TokenDigest(token));
  return it == by_digest_.end() ? nullptr : it->second;
}

std::vector<std::string> TokenTable::TenantNames() const {
  std::vector<std::string> names;
  for (const auto& [name, tenant] : tenants_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace gdn
