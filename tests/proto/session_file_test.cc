// The session snapshot file's integrity (issue 21, defect 4): a file carries
// a checksum per chunk (so per layer and per piece of a layer), a flipped
// byte anywhere after the magic is DATA_LOSS, and files of the first
// version, which had none, still read.
#include "proto/session_file.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn::wire {
namespace {

using ::testing::HasSubstr;

// Three layers, a bit of config, payloads that are easy to find.
std::vector<v1::SessionChunk> Chunks() {
  std::vector<v1::SessionChunk> chunks(3);
  for (int i = 0; i < 3; ++i) {
    chunks[i].set_session_id("s");
    chunks[i].set_layer(i);
    chunks[i].set_position(10 * i + 1);
    chunks[i].set_layer_bytes(300 + i);
    chunks[i].set_data(std::string(300 + i, static_cast<char>('a' + i)));
  }
  chunks[0].mutable_config()->set_num_layers(3);
  return chunks;
}

// A version-1 file as it was written before checksums, built here by hand
// (not by the library): "GDNSNAP1", then varint length + chunk bytes.
std::string VersionOneFile(const std::vector<v1::SessionChunk>& chunks) {
  std::string out = "GDNSNAP1";
  for (const v1::SessionChunk& c : chunks) {
    const std::string bytes = c.SerializeAsString();
    size_t n = bytes.size();
    while (n >= 0x80) {
      out.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    out.push_back(static_cast<char>(n));
    out += bytes;
  }
  return out;
}

void ExpectSameChunks(const std::vector<v1::SessionChunk>& got,
                      const std::vector<v1::SessionChunk>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].SerializeAsString(), want[i].SerializeAsString()) << i;
  }
}

TEST(SessionFileTest, WritesTheCurrentVersionAndReadsItBack) {
  const std::string file = EncodeSessionFile(Chunks());
  EXPECT_EQ(file.substr(0, 8), "GDNSNAP2");
  EXPECT_EQ(kSessionFileMagic, "GDNSNAP2");
  absl::StatusOr<std::vector<v1::SessionChunk>> back = DecodeSessionFile(file, "f");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameChunks(*back, Chunks());
  // Chunk by chunk gives the same bytes (the drain writes that way).
  std::string appended(kSessionFileMagic);
  for (const auto& c : Chunks()) AppendSessionFileChunk(c, &appended);
  EXPECT_EQ(appended, file);
}

TEST(SessionFileTest, AFlippedPayloadByteIsDataLoss) {
  const std::string file = EncodeSessionFile(Chunks());
  // The middle of layer 1's payload ('b' bytes).
  const size_t at = file.find(std::string(301, 'b')) + 150;
  ASSERT_NE(at, std::string::npos + 150);
  std::string damaged = file;
  damaged[at] ^= 0x01;
  absl::StatusOr<std::vector<v1::SessionChunk>> back = DecodeSessionFile(damaged, "f.gdnsnap");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(back.status().message(), HasSubstr("f.gdnsnap"));
  EXPECT_THAT(back.status().message(), HasSubstr("chunk 1"));
  EXPECT_THAT(back.status().message(), HasSubstr("checksum"));
}

TEST(SessionFileTest, EveryFlippedBitAfterTheMagicIsDataLoss) {
  // The chunk headers too (layer, position, offset): a wrong position would
  // restore as silently as a wrong state.
  const std::string file = EncodeSessionFile(Chunks());
  for (size_t at = 8; at < file.size(); ++at) {
    for (int bit : {0, 7}) {
      std::string damaged = file;
      damaged[at] ^= static_cast<char>(1 << bit);
      const absl::StatusCode code = DecodeSessionFile(damaged, "f").status().code();
      ASSERT_EQ(code, absl::StatusCode::kDataLoss) << "byte " << at << " bit " << bit;
    }
  }
}

TEST(SessionFileTest, VersionOneFilesStillRead) {
  absl::StatusOr<std::vector<v1::SessionChunk>> back =
      DecodeSessionFile(VersionOneFile(Chunks()), "old");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameChunks(*back, Chunks());
  // Truncation is still caught there (there is no checksum to catch more).
  const std::string old = VersionOneFile(Chunks());
  EXPECT_EQ(DecodeSessionFile(old.substr(0, old.size() - 1), "old").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(SessionFileTest, TruncationAndUnknownMagicsAreRefused) {
  const std::string file = EncodeSessionFile(Chunks());
  for (size_t cut : {file.size() - 1, file.size() - 4, file.size() / 2, size_t{9}}) {
    EXPECT_EQ(DecodeSessionFile(file.substr(0, cut), "f").status().code(),
              absl::StatusCode::kDataLoss)
        << cut;
  }
  for (const char* magic : {"GDNSNAP3", "GDNSNAP", ""}) {
    EXPECT_EQ(DecodeSessionFile(magic, "f").status().code(), absl::StatusCode::kInvalidArgument)
        << magic;
  }
  for (const char* empty : {"GDNSNAP1", "GDNSNAP2"}) {
    absl::StatusOr<std::vector<v1::SessionChunk>> none = DecodeSessionFile(empty, "f");
    ASSERT_TRUE(none.ok()) << empty;
    EXPECT_TRUE(none->empty());
  }
}

}  // namespace
}  // namespace gdn::wire
