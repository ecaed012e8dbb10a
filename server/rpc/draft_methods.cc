// CommitDraft: speculative drafts committed without a Forward call
// (server/sessions/draft_ops.h), as a session command on the engine thread,
// after the session's running calls.
#include "server/rpc/gdn_service.h"
#include "server/sessions/draft_ops.h"
#include "server/sessions/session_id.h"

namespace gdn {

grpc::ServerUnaryReactor* GdnServiceImpl::CommitDraft(grpc::CallbackServerContext* context,
                                                      const gdn::v1::CommitDraftRequest* request,
                                                      gdn::v1::CommitDraftResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "CommitDraft", start, &scope)) return reactor;
  if (absl::Status s = scope.ValidateRequiredId(request->session_id(), "session_id"); !s.ok()) {
    FinishUnary(reactor, "CommitDraft", start, s, scope);
    return reactor;
  }
  if (absl::Status s = service_->EnterCall(); !s.ok()) {
    FinishUnary(reactor, "CommitDraft", start, s, scope);
    return reactor;
  }
  auto scoped = std::make_shared<gdn::v1::CommitDraftRequest>(*request);
  scoped->set_session_id(scope.Inward(request->session_id()));
  service_->engine->RunSessionCommand(
      scoped->session_id(), [this, reactor, scoped, response, start, scope](StateCache& cache) {
        absl::StatusOr<gdn::v1::CommitDraftResponse> committed = CommitDraftOp(cache, *scoped);
        if (committed.ok()) *response = std::move(*committed);
        FinishUnary(reactor, "CommitDraft", start, committed.status(), scope);
        service_->LeaveCall();
      });
  return reactor;
}

}  // namespace gdn
