// What a Watcher feeds one resource's objects into: the observer of a list-then-watch. The
// watcher knows only this interface; ClusterSync implements it once per resource. All calls
// come from the watcher's thread, in order: beginList(), listed() for each object of a full
// list, endList() (only when the whole list arrived), then event() for each watch event.
#pragma once

#include "adapters/kube/kube_objects.h"

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

}  // namespace troupe::kube
