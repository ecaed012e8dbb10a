// Minimal JSON text building for the reports: values are formatted strings,
// objects keep their keys in the order given.
#ifndef GDN_CLIENT_BENCH_JSON_WRITER_H_
#define GDN_CLIENT_BENCH_JSON_WRITER_H_

#include <string>
#include <utility>
#include <vector>

namespace gdn::client::bench {

using JsonFields = std::vector<std::pair<std::string, std::string>>;

std::string JsonString(const std::string& s);
std::string JsonNumber(double x);  // non-finite -> 0
std::string JsonBool(bool b);
std::string JsonObject(const JsonFields& fields);
std::string JsonArray(const std::vector<std::string>& values);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_JSON_WRITER_H_
