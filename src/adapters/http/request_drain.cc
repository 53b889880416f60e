#include "adapters/http/request_drain.h"

#include <vector>

namespace troupe::http {

RequestDrain::Call::Call(std::shared_ptr<State> state, uint64_t id, Send send, HttpResponse abandoned)
    : state_(std::move(state)), id_(id), send_(std::move(send)), abandoned_(std::move(abandoned)) {}

bool RequestDrain::Call::answer(const HttpResponse& response) {
  {
    std::lock_guard lock(state_->mu);
    if (answered_) return false;
    answered_ = true;
  }
  // The call leaves the open set once the answer is written, so drain() cannot return (and
  // the listener close the connection) while it is still on its way.
  send_(response, [state = state_, id = id_] {
    std::shared_ptr<Call> last;  // the open set may hold the last reference to the call
    {
      std::lock_guard lock(state->mu);
      auto it = state->open.find(id);
      if (it != state->open.end()) {
        last = std::move(it->second);
        state->open.erase(it);
      }
    }
    state->cv.notify_all();
  });
  return true;
}

void RequestDrain::Running::release() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mu);
    --state_->running;
  }
  state_->cv.notify_all();
  state_.reset();
}

RequestDrain::RequestDrain() : state_(std::make_shared<State>()) {}

std::optional<RequestDrain::Admission> RequestDrain::admit(Send send, HttpResponse abandoned) {
  std::lock_guard lock(state_->mu);
  if (!state_->admitting) return std::nullopt;
  const uint64_t id = ++state_->next_id;
  auto call = std::make_shared<Call>(state_, id, std::move(send), std::move(abandoned));
  state_->open.emplace(id, call);
  ++state_->running;
  return Admission{std::move(call), std::make_shared<Running>(state_)};
}

RequestDrain::Report RequestDrain::drain(std::chrono::milliseconds grace,
                                         std::chrono::milliseconds running_limit) {
  Report report;
  std::vector<std::shared_ptr<Call>> left;
  {
    std::unique_lock lock(state_->mu);
    state_->admitting = false;
    state_->cv.wait_for(lock, grace, [this] { return state_->open.empty() && state_->running == 0; });
    for (auto& [id, call] : state_->open) left.push_back(call);
  }
  for (const std::shared_ptr<Call>& call : left) {
    if (call->answer(call->abandoned_)) ++report.answered_by_drain;
  }
  std::unique_lock lock(state_->mu);
  // An empty open set also means no answer is still being sent (answer() leaves it after sending).
  report.handlers_returned = state_->cv.wait_for(
      lock, running_limit, [this] { return state_->running == 0 && state_->open.empty(); });
  return report;
}

int RequestDrain::open() const {
  std::lock_guard lock(state_->mu);
  return static_cast<int>(state_->open.size());
}

int RequestDrain::running() const {
  std::lock_guard lock(state_->mu);
  return state_->running;
}

}  // namespace troupe::http
