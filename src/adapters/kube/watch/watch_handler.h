// What a Watcher feeds one resource's objects into: the observer of a list-then-watch. The
// watcher knows only this interface; ClusterSync and QueueSync feed it (MemberFeed) once per resource. All
// calls come from the watcher's thread, in order: beginList(), listed() for each object of a full list,
// endList() (only when the whole list arrived), then event() for each watch event.
#pragma once

#include "adapters/kube/watch/kube_objects.h"

namespace troupe::kube {

enum class WatchEventType { kAdded, kModified, kDeleted };

class WatchHandler {
 public:
  virtual ~WatchHandler() = default;
  // A full list begins: what it does not list again is gone at endList().
  virtual void beginList() = 0;
  virtual void listed(const Json& object) = 0;
  virtual void endList() = 0;
  virtual void event(WatchEventType type, const Json& object) = 0;
};

// One resource's watch fed into an owner's member functions (ClusterSync, QueueSync): a list
// is begun, its objects arrive as added, then it ends.
template <typename Owner>
class MemberFeed final : public WatchHandler {
 public:
  using Step = void (Owner::*)();
  using Event = void (Owner::*)(WatchEventType, const Json&);
  MemberFeed(Owner& owner, Step begin, Step end, Event on_event)
      : owner_(owner), begin_(begin), end_(end), event_(on_event) {}
  void beginList() override { (owner_.*begin_)(); }
  void listed(const Json& object) override { (owner_.*event_)(WatchEventType::kAdded, object); }
  void endList() override { (owner_.*end_)(); }
  void event(WatchEventType type, const Json& object) override { (owner_.*event_)(type, object); }

 private:
  Owner& owner_;
  const Step begin_, end_;
  const Event event_;
};

}  // namespace troupe::kube
