// The gang manager: plans a gang whole, holds its GPUs, steers each member to its slot, lets
// waiting gangs take turns (and drains nodes for one that starves), releases all members
// together at the bind barrier, and gives everything back when the barrier times out, nobody
// claims the plan, or the gang's pods are gone. Holds are allocations on the nodes of the
// cluster model (uid "gang-hold/<gang>@<incarnation>#<slot>") that no pod record points at,
// so every other placement sees those GPUs as taken. The lifecycle is in
// docs/gang-lifecycle.md.
//
// Not thread-safe: the Scheduler calls it under its model lock (exclusive for what changes the
// book, shared for the const queries). It never calls out: binds to answer are handed back as
// Completions and pod Events queued as notices, both delivered by the caller once it has
// released the lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/sched/cluster/cluster_state.h"
#include "troupe/sched/cluster/cluster_summary.h"
#include "troupe/sched/filter/filter_result.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/gang/gang_planner.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

using Clock = std::chrono::steady_clock;

// Called exactly once with the pod's allocation or the reason it was refused; never under
// the Scheduler's locks, possibly on another thread (a gang's last member releases them all).
using BindCallback = std::function<void(Result<model::Allocation>)>;
// A bind to answer once the lock is released.
using Completion = std::pair<BindCallback, Result<model::Allocation>>;

// A gang member's progress, for Events on the pod (an adapter posts them).
struct GangNotice {
  enum class Kind {
    kPlanned,   // the gang was planned and this member steered to its node
    kWaiting,   // the member reached the bind barrier; others are still missing
    kTimedOut,  // the barrier timed out; the member's bind failed
    kEnded,     // every member of the gang is gone: whatever was kept for it is released
                // (pod_* are empty; adapters drop their caches for the gang)
    kAdmitted,  // the barrier released its minimum members together (pod_* are empty; the
                // message names the nodes)
    kRefused,   // a native PodGroup's plan was released: no bind came within the timeout
                // (pod_* are empty; message: why)
  };
  Kind kind = Kind::kPlanned;
  std::string pod_uid, pod_ns, pod_name, gang, message;
  // The gang is a native PodGroup (spec.schedulingGroup): its status is Troupe's to tell.
  bool native = false;
};
using GangObserver = std::function<void(const GangNotice&)>;

// One gang as the book sees it, for tests and diagnostics.
struct GangView {
  enum class State { kWaiting, kPlanned, kAdmitted, kDormant };
  std::string key;
  // 1, 2, ...: a gang re-created under a used name is a new one.
  uint64_t incarnation = 0;
  State state = State::kWaiting;
  // Sizes: the minimum (0 while no member was filtered: dormant), the live pods of the gang
  // Troupe knows of, and of those the ones holding their GPUs (bound, or released by the
  // barrier); GPUs held for its plan, in all and per node; binds parked at its barrier.
  int min_member = 0, members = 0, bound = 0, held_gpus = 0, waiting_binds = 0;
  std::map<std::string, int> held_by_node;
  std::vector<std::string> member_uids;    // sorted
  std::vector<std::string> drained_nodes;  // nodes kept free for it now
  std::string last_reason;                 // why it was last refused
};

// Gang events since the last call, for metrics: seconds from first sight to admission, and
// the number of barrier timeouts.
struct GangEvents {
  std::vector<double> admit_seconds;
  int timeouts = 0;
};

// The Scheduler passes SchedulerConfig's gang settings (where their defaults are defined).
struct GangBookConfig {
  // The longest barrier wait a pod may ask for; how long a gang waits for capacity before
  // the nodes it needs are drained; how recently it must have been seen to keep its place.
  std::chrono::milliseconds max_timeout{};
  std::chrono::milliseconds starvation{};
  std::chrono::milliseconds active_window{};
  size_t max_gangs = 0;  // a pod that would start one more is refused with a reason
  std::vector<std::string> topology_levels;
  std::function<Clock::time_point()> clock;  // steady_clock when empty
};

class GangBook {
 public:
  // `cluster` holds the plans' GPUs and the members' allocations; it must outlive the book.
  GangBook(ClusterState& cluster, GangBookConfig config);

  // --- filter and bind ------------------------------------------------------------------
  // Filters a gang member: joins (or starts) its gang, which waits its turn, is planned whole,
  // or steers the member to its slot. nullopt once the gang is admitted: the member is then
  // filtered like a pod on its own (with the gang's key as its own gang, for drains).
  std::optional<FilterResult> filter(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec,
                                     const std::vector<std::string>& node_names,
                                     std::vector<Completion>* out);
  // A member's bind (uid not holding GPUs): parked at the barrier or answered into `out`;
  // or, when its gang is admitted, left to the caller to reserve like a pod on its own
  // (returns the gang's key, `done` untouched; then setBound(uid, true) once reserved). `pending_gang` is the
  // gang its latest filter named, for the message when that gang has ended.
  std::optional<std::string> bind(const std::string& uid, const std::string& key, const std::string& node,
                                  const std::string& pending_gang, BindCallback& done,
                                  std::vector<Completion>* out);
  // The node a planned member is steered to: nullopt when the gang has no plan, "" when the
  // member has no slot in it.
  std::optional<std::string> slotNode(const std::string& gang, const std::string& uid) const;
  // Expires barriers, abandoned plans, idle drains and forgotten gangs.
  void expire(std::vector<Completion>* out);

  // --- what happens to pods and nodes ---------------------------------------------------
  // A member the API shows bound that this Troupe did not bind: a plan held for its gang is
  // stale. Call before its allocation is recorded (the held GPUs may be the ones it has).
  void boundElsewhere(const model::Allocation& allocation, std::vector<Completion>* out);
  // A bound member read from the API (e.g. after a restart) joins its gang, holding its GPUs.
  void memberBound(const std::string& uid, const std::string& gang, std::vector<Completion>* out);
  // Records whether a member holds its GPUs; one that gave them back may leave its gang's plan
  // short of the minimum (then released, its parked binds failing into `out`).
  void setBound(const std::string& uid, bool bound, std::vector<Completion>* out);
  bool isMember(const std::string& uid) const { return member_gang_.count(uid) > 0; }
  // `uid` is no longer a member: its parked bind fails with `why`, its unbound slot is free
  // again, and a gang left empty ends.
  void leave(const std::string& uid, const std::string& why, std::vector<Completion>* out);
  // A removed node: plans on it are made afresh, and it is no longer drained.
  void nodeRemoved(const std::string& name, std::vector<Completion>* out);
  // The gang's PodGroup object changed its minimum (an elastic gang; `native`: a scheduling.k8s.io
  // PodGroup, else scheduler-plugins'). Only a gang that takes its minimum from that object is
  // changed. Lowered: the members parked at the barrier are released once they reach the new
  // minimum, and a stalled native gang is planned again. Raised: a plan too small for it is
  // released (parked binds fail and are planned afresh); an admitted gang's further members wait
  // for the new minimum together. Bound members keep their GPUs either way.
  void setMinimum(const std::string& key, int min_member, bool native, std::vector<Completion>* out);

  // --- reading --------------------------------------------------------------------------
  // Where a gang stands, for queue admission: a planned or admitted gang's GPUs are already
  // held, so its members are not admitted again.
  struct Progress {
    bool exists = false;
    bool planned = false;   // a plan holds GPUs for its members
    bool admitted = false;  // its minimum members hold their GPUs
    int bound = 0;          // members holding their GPUs
    int min_member = 0;     // its minimum (0 while dormant)
  };
  Progress progress(const std::string& key) const;
  // The live members of a gang (sorted); empty for an unknown gang.
  std::vector<std::string> memberUids(const std::string& key) const;
  bool empty() const { return gangs_.empty(); }
  bool draining() const { return !drained_.empty(); }
  // The gang that keeps `node` free of other pods now, or "".
  std::string drainOwner(const std::string& node) const;
  std::vector<GangView> views() const;  // sorted by key
  void summarize(ClusterSummary::Gangs& s) const;
  GangEvents takeEvents();
  std::vector<GangNotice> takeNotices();

 private:
  struct Waiter {
    std::string uid, key, node;
    BindCallback done;
  };
  // One incarnation of a gang (docs/gang-lifecycle.md). It begins when a member is first seen
  // (filtered, or bound as the API shows) and ends when every member is gone; pods that later
  // carry the same name form the next incarnation. Members are live pods only.
  struct Gang {
    GangSpec spec;
    bool filtered = false;  // a member passed through filter: spec and request are known.
                            // Before that the gang is dormant: bound members read from the
                            // API (e.g. after a restart), not counted, never planned.
    GpuRequest request;
    uint64_t incarnation = 0;  // also the gang's place in line among equal priorities
    int64_t priority = 0;
    Clock::time_point first_seen, last_seen, barrier_deadline;
    Clock::time_point planned_at;  // when the plan in `slots` was made
    // A native gang whose last plan expired with only these members steered into it (the
    // others never reached Troupe's filter): not planned again until another member does.
    std::set<std::string> stalled;
    std::vector<GangSlot> slots;                    // the plan not yet released; empty = none
    std::vector<Waiter> waiting;                    // binds held at the barrier
    std::vector<std::string> drain_nodes;           // nodes kept free for it after starvation
    std::vector<std::string> candidates;            // the nodes its members were last offered
    std::unordered_map<std::string, bool> members;  // live member uid -> holds its GPUs (bound)
    int bound = 0;                                  // members holding their GPUs
    std::string last_reason;

    // Every minimum member holds its GPUs: further members are placed like single pods.
    bool admitted() const { return filtered && bound >= spec.min_member; }
    // A member is still to be placed: only then does the gang stand in line, hold or drain.
    bool pending() const { return static_cast<int>(members.size()) > bound; }
  };
  using GangMap = std::map<std::string, Gang>;

  Clock::time_point now() const;

  // Membership.
  // The gang `pod` belongs to, created (and joined) if need be; nullptr with *refused set when
  // a new gang would exceed max_gangs.
  Gang* gangFor(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec, std::string* refused,
                std::vector<Completion>* out);
  // Makes `uid` a member of gang `key` (created dormant if it does not exist); leaves the gang
  // it was in before, if another.
  Gang& join(const std::string& uid, const std::string& key, std::vector<Completion>* out);
  void checkPlan(Gang& gang, std::vector<Completion>* out);
  // Ends the gang: releases its plan and drains and erases it; its members (if any) are
  // forgotten as members. Returns the next iterator.
  GangMap::iterator endGang(GangMap::iterator it, std::vector<Completion>* out);

  // Filter steps.
  // The gang ahead of `g` that goes first on nodes they share, or "" when `g` may be planned.
  std::string turnAhead(const Gang& g) const;
  // `g` could not be planned for `starvation`: the head of the line keeps nodes free.
  void drainIfStarved(Gang& g, const GpuRequest& req, const std::vector<std::string>& node_names);
  // The member's slot: its own, else a free one on a candidate; nullptr with *refused set
  // when it has none (a plan it cannot use is released).
  GangSlot* steer(Gang& g, const PodFacts& pod, const std::vector<std::string>& node_names,
                  std::string* refused, std::vector<Completion>* out);

  // Planning.
  bool plan(Gang& gang, const std::vector<std::string>& candidates, std::string* reason, bool* never,
            std::vector<Completion>* out);
  // Gives the plan's held GPUs back; binds parked for it fail with `why`.
  void releasePlan(Gang& gang, const std::string& why, std::vector<Completion>* out);
  void setDrain(Gang& gang, std::vector<std::string> nodes);
  bool aheadOf(const Gang& a, const Gang& b) const;
  bool active(const Gang& g) const;  // a member was filtered within active_window

  // The bind barrier.
  void park(Gang& g, const std::string& uid, const std::string& key, const std::string& node,
            BindCallback& done, std::vector<Completion>* out);
  // Slots whose member is parked at the barrier (bind parks a member only on its slot's node).
  int parkedSlots(const Gang& g) const;
  // Enough members are parked on their slots for the gang's minimum (less its bound members).
  bool barrierReady(const Gang& g) const;
  // Every member is here: each hold becomes its member's own allocation, together.
  void releaseBarrier(Gang& g, std::vector<Completion>* out);

  void notice(GangNotice::Kind kind, const std::string& uid, const std::string& key, const std::string& gang,
              std::string message);

  ClusterState& cluster_;
  const GangBookConfig config_;
  GangMap gangs_;
  std::unordered_map<std::string, std::string> member_gang_;  // member uid -> gang key
  std::unordered_map<std::string, std::string> drained_;      // node -> gang keeping it free
  uint64_t incarnations_ = 0;
  GangEvents events_;
  std::vector<GangNotice> notices_;
};

}  // namespace troupe::sched
