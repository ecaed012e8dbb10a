#include "proto/session_file.h"

#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"

namespace gdn::wire {

void AppendSessionFileChunk(const v1::SessionChunk& chunk, std::string* out) {
  uint8_t length[10];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(chunk.ByteSizeLong()), length);
  out->append(reinterpret_cast<const char*>(length), end - length);
  chunk.AppendToString(out);
}

std::string EncodeSessionFile(const std::vector<v1::SessionChunk>& chunks) {
  std::string out(kSessionFileMagic);
  for (const v1::SessionChunk& c : chunks) AppendSessionFileChunk(c, &out);
  return out;
}

absl::StatusOr<std::vector<v1::SessionChunk>> DecodeSessionFile(
    absl::string_view data, absl::string_view name) {
  if (data.size() < kSessionFileMagic.size() ||
      data.substr(0, kSessionFileMagic.size()) != kSessionFileMagic) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is not a gdn session snapshot (no ", kSessionFileMagic,
        " magic)"));
  }
  const size_t body = data.size() - kSessionFileMagic.size();
  if (body > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": larger than 2 GiB, not a session snapshot"));
  }
  google::protobuf::io::CodedInputStream coded(
      reinterpret_cast<const uint8_t*>(data.data()) + kSessionFileMagic.size(),
      static_cast<int>(body));
  coded.SetTotalBytesLimit(static_cast<int>(body));
  std::vector<v1::SessionChunk> chunks;
  while (!coded.ExpectAtEnd()) {
    uint32_t size = 0;
    if (!coded.ReadVarint32(&size)) {
      return absl::DataLossError(
          absl::StrCat(name, ": truncated after chunk ", chunks.size()));
    }
    if (size > body) {
      return absl::DataLossError(absl::StrCat(
          name, ": chunk ", chunks.size(), " claims ", size,
          " bytes, more than the file holds (truncated or corrupt)"));
    }
    const auto limit = coded.PushLimit(static_cast<int>(size));
    v1::SessionChunk c;
    if (!c.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage() ||
        coded.BytesUntilLimit() != 0) {
      return absl::DataLossError(absl::StrCat(
          name, ": chunk ", chunks.size(), " is truncated or corrupt"));
    }
    coded.PopLimit(limit);
    chunks.push_back(std::move(c));
  }
  return chunks;
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream buffer;
  buffer << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return std::move(buffer).str();
}

absl::Status WriteSessionFile(const std::string& path,
                              const std::vector<v1::SessionChunk>& chunks) {
  const std::string out = EncodeSessionFile(chunks);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.flush();
  if (!file) return absl::DataLossError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::SessionChunk>> ReadSessionFile(
    const std::string& path) {
  absl::StatusOr<std::string> data = ReadFileBytes(path);
  if (!data.ok()) return data.status();
  return DecodeSessionFile(*data, path);
}

}  // namespace gdn::wire
