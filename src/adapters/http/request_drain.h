// Requests between arrival and answer, so a server can stop without a handler outliving the
// scheduler it uses.
//
// A listener admits each request before touching the handler. Admission counts two things:
//   - the call is open until its answer is written (answer() is idempotent: the first answer
//     wins);
//   - handler code is running until the Running token is released (the handler's synchronous
//     part: parsing, filter, prioritize, handing a bind to the scheduler or the binder).
// drain() stops admitting, waits up to a grace period for every open call to be answered and
// every handler to return, answers the calls still open itself (binds parked at a gang
// barrier, binds waiting on the API server), then waits for running handler code to return.
// A handler's late answer after that is dropped, so nothing reaches a closed connection twice.
//
// Thread-safe; the state is shared with the calls, which may outlive the drain's owner.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "adapters/http/extender_server.h"

namespace troupe::http {

class RequestDrain {
  struct State;

 public:
  // Hands the response to the connection; calls `sent` once it is written (or failed).
  using Send = std::function<void(const HttpResponse&, std::function<void()> sent)>;

  // One admitted request.
  class Call {
   public:
    Call(std::shared_ptr<State> state, uint64_t id, Send send, HttpResponse abandoned);
    // Sends `response` unless the call was answered already; true when this one was sent.
    bool answer(const HttpResponse& response);

   private:
    friend class RequestDrain;
    std::shared_ptr<State> state_;
    const uint64_t id_;
    Send send_;
    const HttpResponse abandoned_;  // what drain() sends when it gives up waiting
    bool answered_ = false;         // guarded by state_->mu
  };

  // Handler code in progress for an admitted call; release() (or destruction) ends it.
  class Running {
   public:
    explicit Running(std::shared_ptr<State> state) : state_(std::move(state)) {}
    ~Running() { release(); }
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    void release();

   private:
    std::shared_ptr<State> state_;
  };

  struct Admission {
    std::shared_ptr<Call> call;
    std::shared_ptr<Running> running;
  };

  struct Report {
    int answered_by_drain = 0;  // calls still open after the grace period
    bool handlers_returned = true;
  };

  RequestDrain();

  // Admits a request while the drain has not begun; nullopt after. `abandoned` is the answer
  // drain() sends if the handler has not answered by then.
  std::optional<Admission> admit(Send send, HttpResponse abandoned);

  // Stops admitting; see the file comment. `grace` bounds the wait for answers, `running_limit`
  // the wait for handler code that is still executing afterwards.
  Report drain(std::chrono::milliseconds grace, std::chrono::milliseconds running_limit);

  int open() const;
  int running() const;

 private:
  struct State {
    mutable std::mutex mu;
    std::condition_variable cv;
    bool admitting = true;
    uint64_t next_id = 0;
    int running = 0;
    std::map<uint64_t, std::shared_ptr<Call>> open;
  };
  std::shared_ptr<State> state_;
};

}  // namespace troupe::http
