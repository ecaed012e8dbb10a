// gdn.v1.GdnService on the gRPC callback API. Handlers check what needs no
// state, hand the work to the engine and return; they never wait on a
// kernel: the reactor finishes from the engine's side when the work
// completes. Errors are absl::Status, turned into grpc::Status only by
// ToGrpcStatus (grpc_status.h).
//
// Forward and ForwardStream are raw byte-buffer methods: the request's
// tensors are read in place from gRPC's slices and packed, checked, straight
// into the engine's I/O memory (forward_request_reader.h), and the response
// is sent from the engine's output blocks (forward_response.h). The wire
// format is gdn.v1's as ever; the other methods use the generated messages.
//
// Threading: handlers run on gRPC's threads and touch only the immutable
// ServiceContext and the engine's thread-safe entry points.
#ifndef GDN_SERVER_RPC_GDN_SERVICE_H_
#define GDN_SERVER_RPC_GDN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gdn/v1/gdn.grpc.pb.h"
#include "server/rpc/service_context.h"

namespace gdn {

// Forward and ForwardStream raw, every other method typed (the generated
// CallbackService with the two Forward methods swapped for raw ones).
using GdnV1 = gdn::v1::GdnService;
using GdnServiceBase = GdnV1::WithCallbackMethod_CommitDraft<GdnV1::WithRawCallbackMethod_Forward<
    GdnV1::WithRawCallbackMethod_ForwardStream<GdnV1::WithCallbackMethod_CreateSession<
        GdnV1::WithCallbackMethod_CloseSession<GdnV1::WithCallbackMethod_ForkSession<
            GdnV1::WithCallbackMethod_DescribeSession<GdnV1::WithCallbackMethod_ListSessions<
                GdnV1::WithCallbackMethod_ExportSession<GdnV1::WithCallbackMethod_ImportSession<
                    GdnV1::WithCallbackMethod_GetServerInfo<
                        GdnV1::WithCallbackMethod_RegisterRegion<
                            GdnV1::WithCallbackMethod_UnregisterRegion<
                                GdnV1::WithCallbackMethod_ListRegions<
                                    GdnV1::WithCallbackMethod_OpenChannel<
                                        GdnV1::WithCallbackMethod_CloseChannel<
                                            GdnV1::Service>>>>>>>>>>>>>>>>;

class GdnServiceImpl final : public GdnServiceBase {
 public:
  // `context` must outlive the service.
  explicit GdnServiceImpl(const ServiceContext* context) : service_(context) {}

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ForwardStream(
      grpc::CallbackServerContext* context) override;

  grpc::ServerUnaryReactor* CreateSession(
      grpc::CallbackServerContext* context,
      const gdn::v1::CreateSessionRequest* request,
      gdn::v1::CreateSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(
      grpc::CallbackServerContext* context,
      const gdn::v1::CloseSessionRequest* request,
      gdn::v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* ForkSession(
      grpc::CallbackServerContext* context,
      const gdn::v1::ForkSessionRequest* request,
      gdn::v1::ForkSessionResponse* response) override;
  grpc::ServerUnaryReactor* DescribeSession(
      grpc::CallbackServerContext* context,
      const gdn::v1::DescribeSessionRequest* request,
      gdn::v1::DescribeSessionResponse* response) override;
  grpc::ServerUnaryReactor* ListSessions(
      grpc::CallbackServerContext* context,
      const gdn::v1::ListSessionsRequest* request,
      gdn::v1::ListSessionsResponse* response) override;
  grpc::ServerWriteReactor<gdn::v1::SessionChunk>* ExportSession(
      grpc::CallbackServerContext* context,
      const gdn::v1::ExportSessionRequest* request) override;
  grpc::ServerReadReactor<gdn::v1::SessionChunk>* ImportSession(
      grpc::CallbackServerContext* context,
      gdn::v1::ImportSessionResponse* response) override;

  // Speculative drafts (draft_methods.cc).
  grpc::ServerUnaryReactor* CommitDraft(grpc::CallbackServerContext* context,
                                        const gdn::v1::CommitDraftRequest* request,
                                        gdn::v1::CommitDraftResponse* response) override;

  grpc::ServerUnaryReactor* GetServerInfo(
      grpc::CallbackServerContext* context,
      const gdn::v1::ServerInfoRequest* request,
      gdn::v1::ServerInfoResponse* response) override;

  // Same-host regions (region_methods.cc).
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const gdn::v1::RegisterRegionRequest* request,
                                           gdn::v1::RegisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* context,
                                             const gdn::v1::UnregisterRegionRequest* request,
                                             gdn::v1::UnregisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const gdn::v1::ListRegionsRequest* request,
                                        gdn::v1::ListRegionsResponse* response) override;

  // Same-host Forward channels (channel_methods.cc).
  grpc::ServerUnaryReactor* OpenChannel(grpc::CallbackServerContext* context,
                                        const gdn::v1::OpenChannelRequest* request,
                                        gdn::v1::OpenChannelResponse* response) override;
  grpc::ServerUnaryReactor* CloseChannel(grpc::CallbackServerContext* context,
                                         const gdn::v1::CloseChannelRequest* request,
                                         gdn::v1::CloseChannelResponse* response) override;

 private:
  // Records the request metric and finishes `reactor` with `status` as the
  // caller may see it (TenantScope::Outward).
  void FinishUnary(grpc::ServerUnaryReactor* reactor, const char* method, absl::Time start,
                   const absl::Status& status, const TenantScope& scope = TenantScope()) const;

  // The caller's scope (service_context.h); false when it has none, with
  // `reactor` finished UNAUTHENTICATED.
  bool Authenticate(const grpc::CallbackServerContext& context, grpc::ServerUnaryReactor* reactor,
                    const char* method, absl::Time start, TenantScope* scope) const;

  const ServiceContext* service_;
};

}  // namespace gdn

#endif  // GDN_SERVER_RPC_GDN_SERVICE_H_
