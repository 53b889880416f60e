// GangBook on its own, over a ClusterState: planning whole, steering, the bind barrier and its
// timeout, and a gang's end. (Through the Scheduler: gang_test, gang_lifecycle_test and the
// model-based gang_model_test.)
#include "troupe/sched/gang/gang_book.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace {

using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

struct Book {
  Clock::time_point t = Clock::time_point{} + std::chrono::hours(1);
  troupe::model::TopologyCatalog catalog;
  ClusterState cluster;
  GangBook book{cluster, config()};
  const std::vector<std::string> nodes{"a", "b"};
  std::vector<Completion> out;  // binds answered, to run()

  Book() {
    addNode("a", 8);
    addNode("b", 8);
  }

  GangBookConfig config() {
    GangBookConfig c;
    c.max_timeout = std::chrono::minutes(5);
    c.starvation = std::chrono::minutes(2);
    c.active_window = std::chrono::seconds(60);
    c.max_gangs = 10;
    c.clock = [this] { return t; };
    return c;
  }
  void addNode(const std::string& name, int gpus) {
    const troupe::model::NodeFacts facts = gpuNode(name, gpus);
    auto info = troupe::model::nodeFromFacts(facts, catalog);
    REQUIRE(info.isOk());
    cluster.upsert(std::move(info).value(), factsFingerprint(facts));
  }
  int freeGpus() const {
    int free = 0;
    for (const std::string& n : nodes) free += cluster.find(n)->wholeFreeCount();
    return free;
  }
};

PodFacts member(int index) { return gpuPod("m" + std::to_string(index), 4); }

GangSpec spec(int size) {
  GangSpec s;
  s.key = "default/g";
  s.min_member = size;
  s.timeout = std::chrono::seconds(30);
  return s;
}

GpuRequest request() {
  auto req = parseGpuRequest(member(0));
  REQUIRE(req.isOk());
  return req.value();
}

// The bind's answer, once delivered.
struct Answer {
  std::optional<troupe::Result<troupe::model::Allocation>> result;
  BindCallback callback() {
    return [this](troupe::Result<troupe::model::Allocation> r) { result = std::move(r); };
  }
};

// Filters member `index` of a gang of `size` and expects it steered to one node.
std::string steered(Book& b, int index, int size) {
  std::optional<FilterResult> r = b.book.filter(member(index), request(), spec(size), b.nodes, &b.out);
  REQUIRE(r);
  REQUIRE(r->passed.size() == 1);
  return r->passed[0];
}

void run(std::vector<Completion>& out) {
  for (Completion& c : out) c.first(std::move(c.second));
  out.clear();
}

}  // namespace

TEST_CASE("gang book: a gang is planned whole, steered slot by slot, and bound together at the barrier",
          "[gang][gang-book]") {
  Book b;

  const std::string first = steered(b, 0, 2);
  CHECK(b.freeGpus() == 8);  // both members' GPUs are held
  std::vector<GangNotice> notices = b.book.takeNotices();
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].kind == GangNotice::Kind::kPlanned);
  CHECK_THAT(notices[0].message, Catch::Contains("gang default/g is planned whole: 2 members"));

  const std::string second = steered(b, 1, 2);
  CHECK(b.book.slotNode("default/g", member(1).uid) == second);
  CHECK(b.book.slotNode("default/g", "stranger") == std::string());

  Answer wrong, one, two;
  BindCallback cb = wrong.callback();
  CHECK_FALSE(b.book.bind(member(0).uid, "default/m0", "elsewhere", "default/g", cb, &b.out));
  run(b.out);
  REQUIRE(wrong.result);
  CHECK_THAT(wrong.result->status().message(), Catch::Contains("planned gang member default/m0 on node"));

  cb = one.callback();
  CHECK_FALSE(b.book.bind(member(0).uid, "default/m0", first, "default/g", cb, &b.out));
  CHECK(b.out.empty());  // parked
  CHECK(b.book.views()[0].waiting_binds == 1);
  cb = two.callback();
  CHECK_FALSE(b.book.bind(member(1).uid, "default/m1", second, "default/g", cb, &b.out));
  run(b.out);
  REQUIRE(one.result);
  REQUIRE(two.result);
  REQUIRE(one.result->isOk());
  CHECK(one.result->value().gang == "default/g");
  CHECK(b.cluster.nodeOf(member(0).uid));
  CHECK(b.cluster.nodeOf(member(1).uid));
  CHECK(b.freeGpus() == 8);  // the holds became the members' own GPUs

  const std::vector<GangView> views = b.book.views();
  REQUIRE(views.size() == 1);
  CHECK(views[0].state == GangView::State::kAdmitted);
  CHECK(views[0].bound == 2);
  CHECK(b.book.takeEvents().admit_seconds.size() == 1);
  // Once admitted, a further member is filtered (and bound) like a pod on its own.
  CHECK_FALSE(b.book.filter(member(2), request(), spec(2), b.nodes, &b.out));
  cb = one.callback();
  CHECK(b.book.bind(member(2).uid, "default/m2", "a", "default/g", cb, &b.out) == std::string("default/g"));
}

TEST_CASE("gang book: a barrier that times out fails every parked bind and gives the GPUs back",
          "[gang][gang-book]") {
  Book b;
  const std::string first = steered(b, 0, 2);
  Answer one;
  BindCallback cb = one.callback();
  b.book.bind(member(0).uid, "default/m0", first, "default/g", cb, &b.out);
  b.t += std::chrono::seconds(29);
  b.book.expire(&b.out);
  CHECK(b.out.empty());
  b.t += std::chrono::seconds(1);
  b.book.expire(&b.out);
  run(b.out);
  REQUIRE(one.result);
  CHECK(one.result->status().code() == troupe::Code::kDeadlineExceeded);
  CHECK(b.freeGpus() == 16);
  CHECK(b.book.takeEvents().timeouts == 1);
  bool timed_out = false;
  for (const GangNotice& n : b.book.takeNotices())
    timed_out = timed_out || n.kind == GangNotice::Kind::kTimedOut;
  CHECK(timed_out);
}

TEST_CASE("gang book: a gang whose members all leave ends and releases what it held", "[gang][gang-book]") {
  Book b;
  REQUIRE(b.book.filter(member(0), request(), spec(3), b.nodes, &b.out));
  CHECK(b.freeGpus() == 4);
  CHECK(b.book.isMember(member(0).uid));
  (void)b.book.takeNotices();
  b.book.leave(member(0).uid, "deleted", &b.out);
  CHECK_FALSE(b.book.isMember(member(0).uid));
  CHECK(b.book.empty());
  CHECK(b.freeGpus() == 16);
  const std::vector<GangNotice> notices = b.book.takeNotices();
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].kind == GangNotice::Kind::kEnded);
}

TEST_CASE("gang book: a gang that cannot fit is refused with the planner's reason, holding nothing",
          "[gang][gang-book]") {
  Book b;
  std::optional<FilterResult> r = b.book.filter(member(0), request(), spec(5), b.nodes, &b.out);
  REQUIRE(r);
  CHECK(r->passed.empty());
  CHECK(r->categories["gang"] == 2);
  CHECK(b.freeGpus() == 16);
  REQUIRE(b.book.views().size() == 1);
  CHECK(b.book.views()[0].state == GangView::State::kWaiting);
  CHECK_FALSE(b.book.views()[0].last_reason.empty());
}
