// The open connections of one listener, by what each has done so far, and the one to close
// when the listener is at its cap (limits.maxConnections). A slot is earned by sending a
// request, not by holding a socket: a connection that never completed a request is closed
// before one that did, and one whose request is being read, handled or answered never is.
//
// Eviction order (oldest first within each phase):
//   1. kNew: accepted, no byte of a request yet (a port scanner, an idle flood; TLS handshakes);
//   2. kStarted: part of a first request's header, never a whole request (slow headers);
//   3. kNew whose request is already waiting in the kernel, unread: during a flood the acceptor
//      outruns the reads, and a probe that sent its whole request at once must not lose its
//      slot to the silent connections accepted after it (Member::requestWaiting);
//   4. kIdle: kept alive between requests, the one idle longest first (a client that uses its
//      connection often, such as kube-scheduler, has the most recent use);
//   never kBusy: a request is being read past its header, handled or answered.
//
// Thread-safe: the acceptor evicts while the connections change phase on their own threads.
// An evicted connection leaves the table at once (its slot is free for the one being
// accepted); enter() then returns false so the connection stops instead of taking a request.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace troupe::http {

class ConnectionTable {
 public:
  enum class Phase { kNew, kStarted, kIdle, kBusy };
  // What the table can do to a connection: close it, from any thread.
  class Member {
   public:
    virtual ~Member() = default;
    virtual void close() = 0;
    // Bytes of a request have arrived and are not read yet (a peek at the socket; any thread).
    virtual bool requestWaiting() const { return false; }
  };
  using Id = uint64_t;
  struct Evicted {
    std::shared_ptr<Member> member;  // null when it was being destroyed anyway
    Phase phase;
  };

  // A new connection, in phase kNew; its id.
  Id add(std::weak_ptr<Member> member);
  // Moves `id` to `phase` (to the newest end of that phase's order). False when it is no longer
  // in the table (evicted): the caller closes it rather than go on.
  bool enter(Id id, Phase phase);
  // The connection is gone (closed, destroyed); nothing when it was evicted already.
  void remove(Id id);
  // Connections in the table (evicted ones are not).
  size_t size() const;
  size_t count(Phase phase) const;
  // Takes out the connection to close to make room (the order above); nullopt when every
  // connection is kBusy. The caller closes it.
  std::optional<Evicted> evictOne();
  // Every connection still in the table (stop() closes them).
  std::vector<std::shared_ptr<Member>> members() const;

 private:
  static constexpr size_t kOrdered = 3;  // kNew, kStarted, kIdle have an eviction order
  // How many of the oldest kNew connections evictOne peeks at for a silent one: a flood's
  // front is silent, and the bound keeps an accept O(1) when the reads fall far behind.
  static constexpr size_t kPeekNew = 64;
  struct Entry {
    std::weak_ptr<Member> member;
    Phase phase = Phase::kNew;
    std::list<Id>::iterator at;  // in order_[phase] unless kBusy
  };
  void unlink(Entry& e);
  void link(Id id, Entry& e);

  mutable std::mutex mu_;
  Id next_ = 0;
  std::unordered_map<Id, Entry> entries_;
  std::array<std::list<Id>, kOrdered> order_;  // front: the oldest in that phase
  size_t busy_ = 0;
};

}  // namespace troupe::http
