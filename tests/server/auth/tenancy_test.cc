// Tenant isolation end to end, in process: with a tokens file every RPC
// (sessions, Forward, ForwardStream, the same-host channel, regions,
// export / import, drafts, listing) sees only the caller's tenant, and an
// id of another tenant is NOT_FOUND exactly as an id nobody has.
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/forward_channel.h"
#include "gtest/gtest.h"
#include "tests/server/auth/tenant_fixture.h"
#include "tests/server/regions/shm_object.h"
#include "tests/server/server_harness.h"

namespace gdn::testing {
namespace {

using Stub = gdn::v1::GdnService::Stub;

grpc::Status Create(Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  gdn::v1::CreateSessionRequest request;
  request.set_session_id(id);
  gdn::v1::CreateSessionResponse response;
  return stub.CreateSession(&context, request, &response);
}

grpc::Status Describe(Stub& stub, const std::string& id,
                      gdn::v1::DescribeSessionResponse* response = nullptr) {
  grpc::ClientContext context;
  gdn::v1::DescribeSessionRequest request;
  request.set_session_id(id);
  gdn::v1::DescribeSessionResponse ignored;
  return stub.DescribeSession(&context, request, response != nullptr ? response : &ignored);
}

grpc::Status Forward(Stub& stub, const gdn::v1::ForwardRequest& request) {
  grpc::ClientContext context;
  gdn::v1::ForwardResponse response;
  return stub.Forward(&context, request, &response);
}

std::vector<std::string> List(Stub& stub) {
  grpc::ClientContext context;
  gdn::v1::ListSessionsResponse response;
  EXPECT_TRUE(stub.ListSessions(&context, gdn::v1::ListSessionsRequest(), &response).ok());
  return {response.session_ids().begin(), response.session_ids().end()};
}

std::vector<gdn::v1::SessionChunk> Export(Stub& stub, const std::string& id,
                                          grpc::Status* status) {
  grpc::ClientContext context;
  gdn::v1::ExportSessionRequest request;
  request.set_session_id(id);
  std::unique_ptr<grpc::ClientReader<gdn::v1::SessionChunk>> reader =
      stub.ExportSession(&context, request);
  std::vector<gdn::v1::SessionChunk> chunks;
  gdn::v1::SessionChunk chunk;
  while (reader->Read(&chunk)) chunks.push_back(chunk);
  *status = reader->Finish();
  return chunks;
}

grpc::Status Import(Stub& stub, std::vector<gdn::v1::SessionChunk> chunks, const std::string& id) {
  grpc::ClientContext context;
  gdn::v1::ImportSessionResponse response;
  std::unique_ptr<grpc::ClientWriter<gdn::v1::SessionChunk>> writer =
      stub.ImportSession(&context, &response);
  for (gdn::v1::SessionChunk& chunk : chunks) {
    chunk.set_session_id(id);
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (s.ok()) EXPECT_EQ(response.session_id(), id);
  return s;
}

void ExpectNotFoundLikeNobodysId(const grpc::Status& s, const std::string& id) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(s.error_message().find("alice"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find("/"), std::string::npos) << s.error_message();
  (void)id;
}

class TenancyTest : public ::testing::Test {
 protected:
  TenancyTest()
      : server_(ThreeTenants()),
        alice_(server_.Stub(kAliceToken)),
        bob_(server_.Stub(kBobToken)) {}

  TenantServer server_;
  std::unique_ptr<Stub> alice_;
  std::unique_ptr<Stub> bob_;
};

TEST_F(TenancyTest, CallsWithoutAKnownTokenAreUnauthenticated) {
  for (const std::string& token : {std::string(), std::string("not-a-known-token-000")}) {
    std::unique_ptr<Stub> stranger = server_.Stub(token);
    EXPECT_EQ(Create(*stranger, "s").error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Describe(*stranger, "s").error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Forward(*stranger, OneTokenForward(server_.config(), "s", 0)).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext list_context;
    gdn::v1::ListSessionsResponse listed;
    EXPECT_EQ(stranger->ListSessions(&list_context, {}, &listed).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext info_context;
    gdn::v1::ServerInfoResponse info;
    EXPECT_EQ(stranger->GetServerInfo(&info_context, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    grpc::Status exported;
    Export(*stranger, "s", &exported);
    EXPECT_EQ(exported.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Import(*stranger, {}, "s").error_code(), grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext stream_context;
    auto stream = stranger->ForwardStream(&stream_context);
    stream->WritesDone();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext region_context;
    gdn::v1::RegisterRegionRequest region;
    region.set_name("r");
    gdn::v1::RegisterRegionResponse registered;
    EXPECT_EQ(stranger->RegisterRegion(&region_context, region, &registered).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    absl::StatusOr<std::unique_ptr<client::ForwardChannel>> channel =
        client::ForwardChannel::Open(server_.Channel(token), "ch", {});
    EXPECT_EQ(channel.status().code(), absl::StatusCode::kUnauthenticated);
  }
  // Health probes need no token.
  EXPECT_EQ(HealthCheck(*server_.Channel(""), ""), 1);
}

TEST_F(TenancyTest, SessionsOfAnotherTenantDoNotExistForIt) {
  ASSERT_TRUE(Create(*alice_, "s").ok());
  ASSERT_TRUE(Forward(*alice_, OneTokenForward(server_.config(), "s", 0)).ok());

  // Every way of naming alice's "s" is NOT_FOUND for bob, as "nobody" is.
  grpc::Status nobody = Describe(*bob_, "nobody");
  ASSERT_EQ(nobody.error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status described = Describe(*bob_, "s");
  ExpectNotFoundLikeNobodysId(described, "s");
  EXPECT_EQ(described.error_message(),
            absl::StrReplaceAll(nobody.error_message(), {{"nobody", "s"}}));
  ExpectNotFoundLikeNobodysId(Forward(*bob_, OneTokenForward(server_.config(), "s", 1)), "s");
  {
    grpc::ClientContext context;
    gdn::v1::ForkSessionRequest fork;
    fork.set_parent_id("s");
    fork.set_child_id("mine");
    gdn::v1::ForkSessionResponse forked;
    ExpectNotFoundLikeNobodysId(bob_->ForkSession(&context, fork, &forked), "s");
  }
  {
    grpc::Status exported;
    EXPECT_TRUE(Export(*bob_, "s", &exported).empty());
    ExpectNotFoundLikeNobodysId(exported, "s");
  }
  {
    grpc::ClientContext context;
    gdn::v1::CommitDraftRequest commit;
    commit.set_session_id("s");
    commit.set_position(1);
    gdn::v1::CommitDraftResponse committed;
    ExpectNotFoundLikeNobodysId(bob_->CommitDraft(&context, commit, &committed), "s");
  }
  {
    grpc::ClientContext context;
    auto stream = bob_->ForwardStream(&context);
    ASSERT_TRUE(stream->Write(OneTokenForward(server_.config(), "s", 1)));
    gdn::v1::ForwardResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.error_code(), grpc::StatusCode::NOT_FOUND) << response.error_message();
    EXPECT_EQ(response.error_message().find("alice"), std::string::npos);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    grpc::ClientContext context;
    gdn::v1::CloseSessionRequest close;
    close.set_session_id("s");
    gdn::v1::CloseSessionResponse closed;
    ExpectNotFoundLikeNobodysId(bob_->CloseSession(&context, close, &closed), "s");
  }
  // Bob's own "s" is another session: no ALREADY_EXISTS, no shared state.
  ASSERT_TRUE(Create(*bob_, "s").ok());
  gdn::v1::DescribeSessionResponse alices, bobs;
  ASSERT_TRUE(Describe(*alice_, "s", &alices).ok());
  ASSERT_TRUE(Describe(*bob_, "s", &bobs).ok());
  EXPECT_EQ(alices.session_id(), "s");
  EXPECT_EQ(bobs.session_id(), "s");
  EXPECT_EQ(alices.layers(0).position(), 1);
  EXPECT_EQ(bobs.layers(0).position(), 0);

  EXPECT_EQ(List(*alice_), std::vector<std::string>{"s"});
  EXPECT_EQ(List(*bob_), std::vector<std::string>{"s"});
  EXPECT_TRUE(List(*server_.Stub(kCarolToken)).empty());
}

TEST_F(TenancyTest, ExportCarriesTheCallersIdsAndImportScopesThem) {
  ASSERT_TRUE(Create(*alice_, "s").ok());
  ASSERT_TRUE(Forward(*alice_, OneTokenForward(server_.config(), "s", 0)).ok());
  grpc::Status exported;
  std::vector<gdn::v1::SessionChunk> chunks = Export(*alice_, "s", &exported);
  ASSERT_TRUE(exported.ok()) << exported.error_message();
  ASSERT_FALSE(chunks.empty());
  for (const auto& chunk : chunks) EXPECT_EQ(chunk.session_id(), "s");

  // Bob imports alice's bytes as his own "s": his, not alice's.
  ASSERT_TRUE(Import(*bob_, chunks, "s").ok());
  EXPECT_EQ(Import(*bob_, chunks, "s").error_code(), grpc::StatusCode::ALREADY_EXISTS);
  gdn::v1::DescribeSessionResponse bobs;
  ASSERT_TRUE(Describe(*bob_, "s", &bobs).ok());
  EXPECT_EQ(bobs.layers(0).position(), 1);
  grpc::ClientContext context;
  gdn::v1::CloseSessionRequest close;
  close.set_session_id("s");
  gdn::v1::CloseSessionResponse closed;
  ASSERT_TRUE(bob_->CloseSession(&context, close, &closed).ok());
  EXPECT_TRUE(Describe(*alice_, "s").ok());  // alice's is untouched
}

TEST_F(TenancyTest, ForksStayInTheTenant) {
  ASSERT_TRUE(Create(*alice_, "p").ok());
  grpc::ClientContext context;
  gdn::v1::ForkSessionRequest fork;
  fork.set_parent_id("p");
  gdn::v1::ForkSessionResponse forked;
  ASSERT_TRUE(alice_->ForkSession(&context, fork, &forked).ok());
  EXPECT_EQ(forked.session_id().rfind("s-", 0), 0u) << forked.session_id();
  EXPECT_TRUE(Describe(*alice_, forked.session_id()).ok());
  EXPECT_EQ(Describe(*bob_, forked.session_id()).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext create_context;
  gdn::v1::CreateSessionResponse created;
  ASSERT_TRUE(bob_->CreateSession(&create_context, {}, &created).ok());
  EXPECT_EQ(created.session_id().find('/'), std::string::npos);
  EXPECT_EQ(List(*bob_), std::vector<std::string>{created.session_id()});
}

TEST_F(TenancyTest, RegionsBelongToTheirTenant) {
  ShmObject shm(1 << 20);
  grpc::ClientContext register_context;
  gdn::v1::RegisterRegionRequest region;
  region.set_name("r");
  region.set_kind(gdn::v1::REGION_SYSTEM);
  region.set_key(shm.name());
  region.set_byte_size(1 << 20);
  gdn::v1::RegisterRegionResponse registered;
  ASSERT_TRUE(alice_->RegisterRegion(&register_context, region, &registered).ok());

  grpc::ClientContext list_context;
  gdn::v1::ListRegionsResponse listed;
  ASSERT_TRUE(bob_->ListRegions(&list_context, {}, &listed).ok());
  EXPECT_EQ(listed.regions_size(), 0);
  grpc::ClientContext alice_list;
  gdn::v1::ListRegionsResponse alices;
  ASSERT_TRUE(alice_->ListRegions(&alice_list, {}, &alices).ok());
  EXPECT_EQ(alices.regions_size(), 1);

  // Bob's Forward naming alice's region: the region does not exist for him.
  ASSERT_TRUE(Create(*bob_, "b").ok());
  gdn::v1::ForwardRequest by_ref = OneTokenForward(server_.config(), "b", 0);
  gdn::v1::Tensor* q = by_ref.mutable_q();
  const int64_t bytes = static_cast<int64_t>(q->data().size());
  q->mutable_ref()->set_region("r");
  q->mutable_ref()->set_offset(0);
  q->mutable_ref()->set_byte_size(bytes);
  EXPECT_EQ(Forward(*bob_, by_ref).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext unregister_context;
  gdn::v1::UnregisterRegionRequest unregister;
  unregister.set_name("r");
  gdn::v1::UnregisterRegionResponse unregistered;
  EXPECT_EQ(bob_->UnregisterRegion(&unregister_context, unregister, &unregistered).error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext again;
  EXPECT_TRUE(alice_->UnregisterRegion(&again, unregister, &unregistered).ok());
}

TEST_F(TenancyTest, ChannelCallsAreTheOpenersTenants) {
  ASSERT_TRUE(Create(*alice_, "a").ok());
  ASSERT_TRUE(Create(*bob_, "b").ok());
  absl::StatusOr<std::unique_ptr<client::ForwardChannel>> channel =
      client::ForwardChannel::Open(server_.Channel(kAliceToken), "ch", {});
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto encode = [](const gdn::v1::ForwardRequest& r) {
    grpc::Slice slice(r.SerializeAsString());
    return grpc::ByteBuffer(&slice, 1);
  };
  absl::StatusOr<client::RawForwardResponse> mine =
      (*channel)->Forward(0, encode(OneTokenForward(server_.config(), "a", 0)));
  EXPECT_TRUE(mine.ok()) << mine.status();
  absl::StatusOr<client::RawForwardResponse> theirs =
      (*channel)->Forward(0, encode(OneTokenForward(server_.config(), "b", 0)));
  EXPECT_EQ(theirs.status().code(), absl::StatusCode::kNotFound) << theirs.status();
  EXPECT_EQ(theirs.status().message().find("alice"), std::string::npos);
  gdn::v1::DescribeSessionResponse bobs;
  ASSERT_TRUE(Describe(*bob_, "b", &bobs).ok());
  EXPECT_EQ(bobs.layers(0).position(), 0);  // untouched
  // Bob cannot close alice's channel (it is not his).
  grpc::ClientContext context;
  gdn::v1::CloseChannelRequest close;
  close.set_name("ch");
  gdn::v1::CloseChannelResponse closed;
  EXPECT_FALSE(bob_->CloseChannel(&context, close, &closed).ok());
}

TEST_F(TenancyTest, ReloadSwapsTokensAndKeepsSessions) {
  ASSERT_TRUE(Create(*alice_, "kept").ok());
  const std::string dave = "dave-token-0123456789x";
  server_.WriteTokens(absl::StrCat("alice another-alice-token-0001\ndave ", dave, "\n"));
  ASSERT_TRUE(server_.server().ReloadTokens().ok());
  EXPECT_EQ(Describe(*alice_, "kept").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Create(*bob_, "x").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Describe(*server_.Stub("another-alice-token-0001"), "kept").ok());
  EXPECT_TRUE(Create(*server_.Stub(dave), "d").ok());
  // A broken file changes nothing.
  server_.WriteTokens("dave short\n");
  EXPECT_FALSE(server_.server().ReloadTokens().ok());
  EXPECT_TRUE(Create(*server_.Stub(dave), "d2").ok());
  const std::string metrics = ScrapeMetrics(server_.server().metrics_port());
  EXPECT_EQ(MetricValue(metrics, "gdn_tokens_reloads_total", {"result=\"ok\""}), 1);
  EXPECT_EQ(MetricValue(metrics, "gdn_tokens_reloads_total", {"result=\"error\""}), 1);
}

TEST_F(TenancyTest, MetricsCountByTenantWithoutSessionIds) {
  ASSERT_TRUE(Create(*alice_, "secret-session-name").ok());
  EXPECT_EQ(Describe(*bob_, "secret-session-name").error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string metrics = ScrapeMetrics(server_.server().metrics_port());
  EXPECT_EQ(MetricValue(metrics, "gdn_tenant_requests_total",
                        {"tenant=\"alice\"", "method=\"CreateSession\"", "code=\"OK\""}),
            1);
  EXPECT_EQ(MetricValue(metrics, "gdn_tenant_requests_total",
                        {"tenant=\"bob\"", "method=\"DescribeSession\"", "code=\"NOT_FOUND\""}),
            1);
  EXPECT_EQ(metrics.find("secret-session-name"), std::string::npos);
}

TEST_F(TenancyTest, ListSessionsPagesThroughTheTenantsOwn) {
  for (const char* id : {"e", "a", "d", "b", "c"}) ASSERT_TRUE(Create(*alice_, id).ok());
  for (const char* id : {"a0", "bb", "zz"}) ASSERT_TRUE(Create(*bob_, id).ok());
  std::vector<std::vector<std::string>> pages;
  std::string token;
  do {
    grpc::ClientContext context;
    gdn::v1::ListSessionsRequest request;
    request.set_page_size(2);
    request.set_page_token(token);
    gdn::v1::ListSessionsResponse response;
    ASSERT_TRUE(alice_->ListSessions(&context, request, &response).ok());
    pages.emplace_back(response.session_ids().begin(), response.session_ids().end());
    token = response.next_page_token();
  } while (!token.empty() && pages.size() < 10);
  EXPECT_EQ(pages, (std::vector<std::vector<std::string>>{{"a", "b"}, {"c", "d"}, {"e"}}));
  grpc::ClientContext context;
  gdn::v1::ListSessionsRequest bad;
  bad.set_page_size(-1);
  gdn::v1::ListSessionsResponse response;
  EXPECT_EQ(alice_->ListSessions(&context, bad, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(OpenServer, ListSessionsIsPaginatedToo) {
  ServerHarness harness(SmallServerConfig());
  for (int i = 0; i < 3; ++i) harness.CreateSession(absl::StrCat("s", i));
  grpc::ClientContext context;
  gdn::v1::ListSessionsRequest request;
  request.set_page_size(2);
  gdn::v1::ListSessionsResponse response;
  ASSERT_TRUE(harness.stub().ListSessions(&context, request, &response).ok());
  EXPECT_EQ(response.session_ids_size(), 2);
  EXPECT_EQ(response.next_page_token(), "s1");
  grpc::ClientContext next_context;
  request.set_page_token(response.next_page_token());
  ASSERT_TRUE(harness.stub().ListSessions(&next_context, request, &response).ok());
  EXPECT_EQ(std::vector<std::string>(response.session_ids().begin(), response.session_ids().end()),
            std::vector<std::string>{"s2"});
  EXPECT_EQ(response.next_page_token(), "");
}

}  // namespace
}  // namespace gdn::testing
