// ExportSession (server streaming) and ImportSession (client streaming).
//
// Export: the engine thread copies every layer state to host bytes
// (session_ops.h), then the reactor writes them one chunk at a time, each
// with at most max_message_bytes / 2 of data.
// Import: chunks are checked and collected as they arrive
// (session_transfer.h); at the end of the stream the engine thread creates
// the session and imports every layer, all or nothing.
//
// Lifetime: each reactor deletes itself in OnDone and finishes only after
// its engine command (if any) has run.
#ifndef GDN_SERVER_RPC_SESSION_STREAM_REACTORS_H_
#define GDN_SERVER_RPC_SESSION_STREAM_REACTORS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gdn/v1/gdn.grpc.pb.h"
#include "server/rpc/service_context.h"
#include "server/sessions/session_transfer.h"

namespace gdn {

class ExportSessionReactor
    : public grpc::ServerWriteReactor<gdn::v1::SessionChunk> {
 public:
  // `scope`: the caller's (an error ends the call with it at once).
  ExportSessionReactor(const ServiceContext* service, absl::StatusOr<TenantScope> scope,
                       std::string session_id);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void Exported(absl::StatusOr<SessionStates> states);  // engine thread
  void WriteNext();
  void FinishWith(const absl::Status& status);

  const ServiceContext* service_;
  const absl::Time start_;
  TenantScope scope_;
  std::string session_id_;  // internal (TenantScope::Inward)
  SessionStates states_;
  std::optional<ExportChunker> chunker_;
  gdn::v1::SessionChunk chunk_;
};

class ImportSessionReactor
    : public grpc::ServerReadReactor<gdn::v1::SessionChunk> {
 public:
  // The chunks carry the caller's ids; the session is created as its
  // tenant's, within its quotas.
  ImportSessionReactor(const ServiceContext* service, grpc::CallbackServerContext* context,
                       absl::StatusOr<TenantScope> scope,
                       gdn::v1::ImportSessionResponse* response);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  void FinishWith(const absl::Status& status);

  const ServiceContext* service_;
  grpc::CallbackServerContext* context_;
  const absl::Time start_;
  TenantScope scope_;
  gdn::v1::ImportSessionResponse* response_;
  ImportAssembler assembler_;
  gdn::v1::SessionChunk chunk_;
};

}  // namespace gdn

#endif  // GDN_SERVER_RPC_SESSION_STREAM_REACTORS_H_
