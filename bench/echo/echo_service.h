// gdn.v1.GdnService as an echo: every method answers at once without a
// model, state or engine, so a client measured against it sees what the
// transport (and, in proto mode, protobuf) costs. Two services:
//   ProtoEchoService: Forward / ForwardStream through the generated protobuf
//     handlers (gRPC parses the request, serializes the response).
//   RawEchoService: Forward / ForwardStream as raw ByteBuffer methods
//     (WithRawCallbackMethod_*): scanned and encoded in place.
// Both answer the session methods the same way (EchoSessionMethods):
// GetServerInfo from the options, CreateSession echoes the id (or makes a
// fresh one), ForkSession likewise for the child, Close / Describe / List
// succeed with nothing in them. Export / Import are UNIMPLEMENTED.
//
// Threading: handlers run on gRPC's callback threads; the services hold only
// immutable state and an atomic id counter.
#ifndef GDN_BENCH_ECHO_ECHO_SERVICE_H_
#define GDN_BENCH_ECHO_ECHO_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>

#include "bench/echo/echo_options.h"
#include "gdn/v1/gdn.grpc.pb.h"

namespace gdn::echo {

// A fresh session id ("echo-<n>") for a create or fork that names none.
std::string NextEchoSessionId();

// The session methods and GetServerInfo, over any generated service base.
template <typename Base>
class EchoSessionMethods : public Base {
 public:
  explicit EchoSessionMethods(const EchoOptions& options)
      : info_(EchoServerInfo(options)) {}

  const v1::ServerInfoResponse& info() const { return info_; }

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::ServerInfoRequest*,
                                          v1::ServerInfoResponse* response) override {
    *response = info_;
    return Done(context);
  }
  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* context,
                                          const v1::CreateSessionRequest* request,
                                          v1::CreateSessionResponse* response) override {
    response->set_session_id(request->session_id().empty() ? NextEchoSessionId()
                                                            : request->session_id());
    return Done(context);
  }
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context,
                                         const v1::CloseSessionRequest*,
                                         v1::CloseSessionResponse*) override {
    return Done(context);
  }
  grpc::ServerUnaryReactor* ForkSession(grpc::CallbackServerContext* context,
                                        const v1::ForkSessionRequest* request,
                                        v1::ForkSessionResponse* response) override {
    response->set_session_id(request->child_id().empty() ? NextEchoSessionId()
                                                         : request->child_id());
    return Done(context);
  }
  grpc::ServerUnaryReactor* DescribeSession(grpc::CallbackServerContext* context,
                                            const v1::DescribeSessionRequest* request,
                                            v1::DescribeSessionResponse* response) override {
    response->set_session_id(request->session_id());
    return Done(context);
  }
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const v1::ListSessionsRequest*,
                                         v1::ListSessionsResponse*) override {
    return Done(context);
  }

 protected:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                                        const grpc::Status& status = grpc::Status::OK) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

 private:
  const v1::ServerInfoResponse info_;
};

class ProtoEchoService final : public EchoSessionMethods<v1::GdnService::CallbackService> {
 public:
  explicit ProtoEchoService(const EchoOptions& options);

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* context,
                                    const v1::ForwardRequest* request,
                                    v1::ForwardResponse* response) override;
  grpc::ServerBidiReactor<v1::ForwardRequest, v1::ForwardResponse>* ForwardStream(
      grpc::CallbackServerContext* context) override;
};

// CallbackService with Forward and ForwardStream raw: spelled out, because a
// raw ForwardStream over the typed one differs only in its return type.
using RawForwardBase = v1::GdnService::WithRawCallbackMethod_Forward<
    v1::GdnService::WithRawCallbackMethod_ForwardStream<
        v1::GdnService::WithCallbackMethod_CreateSession<
            v1::GdnService::WithCallbackMethod_CloseSession<
                v1::GdnService::WithCallbackMethod_ForkSession<
                    v1::GdnService::WithCallbackMethod_DescribeSession<
                        v1::GdnService::WithCallbackMethod_ListSessions<
                            v1::GdnService::WithCallbackMethod_ExportSession<
                                v1::GdnService::WithCallbackMethod_ImportSession<
                                    v1::GdnService::WithCallbackMethod_GetServerInfo<
                                        v1::GdnService::Service>>>>>>>>>>;

class RawEchoService final : public EchoSessionMethods<RawForwardBase> {
 public:
  explicit RawEchoService(const EchoOptions& options);

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ForwardStream(
      grpc::CallbackServerContext* context) override;
};

// The service of options.mode.
std::unique_ptr<grpc::Service> MakeEchoService(const EchoOptions& options);

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_ECHO_SERVICE_H_
