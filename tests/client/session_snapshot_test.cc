#include "client/session_snapshot.h"

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace gdn::client {
namespace {

SessionSnapshot RandomSnapshot(uint64_t seed) {
  std::mt19937_64 rng(seed);
  SessionSnapshot s;
  s.session_id = "snap-" + std::to_string(seed);
  s.config.set_num_layers(3);
  s.config.set_num_v_heads(4);
  s.config.set_state_dtype("fp32");
  for (int layer = 0; layer < 3; ++layer) {
    SessionSnapshot::Layer l;
    l.layer = layer;
    l.position = layer == 1 ? 0 : 10 + static_cast<int64_t>(rng() % 100);
    if (layer != 1) {  // layer 1 never written: zero state
      l.bytes.resize(1000 + rng() % 3000);
      for (char& c : l.bytes) c = static_cast<char>(rng());
    }
    s.layers.push_back(l);
  }
  return s;
}

void ExpectSame(const SessionSnapshot& a, const SessionSnapshot& b) {
  EXPECT_EQ(a.session_id, b.session_id);
  EXPECT_EQ(a.config.SerializeAsString(), b.config.SerializeAsString());
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].layer, b.layers[i].layer);
    EXPECT_EQ(a.layers[i].position, b.layers[i].position);
    EXPECT_EQ(a.layers[i].bytes, b.layers[i].bytes);
  }
}

TEST(SessionSnapshotTest, ChunksRoundTrip) {
  const SessionSnapshot s = RandomSnapshot(1);
  const std::vector<v1::SessionChunk> chunks = SnapshotToChunks(s, 512);
  ASSERT_GT(chunks.size(), 4u);
  EXPECT_TRUE(chunks[0].has_config());
  for (size_t i = 1; i < chunks.size(); ++i) EXPECT_FALSE(chunks[i].has_config());
  for (const v1::SessionChunk& c : chunks) EXPECT_LE(c.data().size(), 512u);
  absl::StatusOr<SessionSnapshot> back = SnapshotFromChunks(chunks);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(s, *back);
}

TEST(SessionSnapshotTest, RenamesOnRequest) {
  const SessionSnapshot s = RandomSnapshot(2);
  for (const v1::SessionChunk& c : SnapshotToChunks(s, 700, "other")) {
    EXPECT_EQ(c.session_id(), "other");
  }
}

TEST(SessionSnapshotTest, RejectsMissingOrReorderedPieces) {
  std::vector<v1::SessionChunk> chunks = SnapshotToChunks(RandomSnapshot(3), 256);
  std::vector<v1::SessionChunk> missing = chunks;
  missing.erase(missing.begin() + 1);
  EXPECT_FALSE(SnapshotFromChunks(missing).ok());
  std::vector<v1::SessionChunk> swapped = chunks;
  std::swap(swapped[1], swapped[2]);
  EXPECT_FALSE(SnapshotFromChunks(swapped).ok());
  std::vector<v1::SessionChunk> truncated(chunks.begin(), chunks.end() - 1);
  EXPECT_FALSE(SnapshotFromChunks(truncated).ok());
}

TEST(SessionSnapshotTest, FileRoundTripAndCorruption) {
  const std::string path = ::testing::TempDir() + "/snapshot_test.gdnsnap";
  const SessionSnapshot s = RandomSnapshot(4);
  ASSERT_TRUE(WriteSnapshotFile(path, s).ok());
  absl::StatusOr<SessionSnapshot> back = ReadSnapshotFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(s, *back);

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), bytes.size() - 7);  // cut the last chunk short
  }
  EXPECT_FALSE(ReadSnapshotFile(path).ok());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << "NOTASNAPSHOT";
  }
  EXPECT_EQ(ReadSnapshotFile(path).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gdn::client
