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
  ExportSessionReactor(const ServiceContext* service, std::string session_id);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void Exported(absl::StatusOr<SessionStates> states);  // engine thread
  void WriteNext();
  void FinishWith(const absl::Status& status);

  const ServiceContext* service_;
  const absl::Time start_;
  std::string session_id_;
  SessionStates states_;
  std::optional<ExportChunker> chunker_;
  gdn::v1::SessionChunk chunk_;
};

class ImportSessionReactor
    : public grpc::ServerReadReactor<gdn::v1::SessionChunk> {
 public:
  ImportSessionReactor(const ServiceContext* service,
                       grpc::CallbackServerContext* context,
                       gdn::v1::ImportSessionResponse* response);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  void FinishWith(const absl::Status& status);

  const ServiceContext* service_;
  grpc::CallbackServerContext* context_;
  const absl::Time start_;
  gdn::v1::ImportSessionResponse* response_;
  ImportAssembler assembler_;
  gdn::v1::SessionChunk chunk_;
};

}  // namespace gdn

#endif  // GDN_SERVER_RPC_SESSION_STREAM_REACTORS_H_
