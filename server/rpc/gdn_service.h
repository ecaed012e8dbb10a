// gdn.v1.GdnService on the gRPC callback API. Handlers validate what needs
// no state (request_validation.h), hand the work to the engine and return;
// they never wait on a kernel: the reactor finishes from the engine thread
// when the work completes. Errors are absl::Status, turned into grpc::Status
// only by ToGrpcStatus (grpc_status.h).
//
// Threading: handlers run on gRPC's threads and touch only the immutable
// ServiceContext and the engine's thread-safe entry points.
#ifndef GDN_SERVER_RPC_GDN_SERVICE_H_
#define GDN_SERVER_RPC_GDN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gdn/v1/gdn.grpc.pb.h"
#include "server/rpc/service_context.h"

namespace gdn {

class GdnServiceImpl final : public gdn::v1::GdnService::CallbackService {
 public:
  // `context` must outlive the service.
  explicit GdnServiceImpl(const ServiceContext* context) : service_(context) {}

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* context,
                                    const gdn::v1::ForwardRequest* request,
                                    gdn::v1::ForwardResponse* response) override;
  grpc::ServerBidiReactor<gdn::v1::ForwardRequest, gdn::v1::ForwardResponse>*
  ForwardStream(grpc::CallbackServerContext* context) override;

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

  grpc::ServerUnaryReactor* GetServerInfo(
      grpc::CallbackServerContext* context,
      const gdn::v1::ServerInfoRequest* request,
      gdn::v1::ServerInfoResponse* response) override;

 private:
  // Records the request metric and finishes `reactor` with `status`.
  void FinishUnary(grpc::ServerUnaryReactor* reactor, const char* method,
                   absl::Time start, const absl::Status& status) const;

  const ServiceContext* service_;
};

}  // namespace gdn

#endif  // GDN_SERVER_RPC_GDN_SERVICE_H_
