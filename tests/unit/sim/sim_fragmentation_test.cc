// FGD's fragmentation measure and request mix, checked against hand computations.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/fragmentation.h"

namespace {

using troupe::sched::GpuRequest;
using troupe::sched::RequestMix;

GpuRequest shape(int gpus, int64_t milli, int64_t cpu, std::vector<std::string> models = {}) {
  GpuRequest r;
  r.gpus = gpus;
  r.milli_per_gpu = gpus > 0 ? milli : 1000;
  r.cpu_milli = cpu;
  r.models = std::move(models);
  return r;
}

// Three half-GPU pods and one CPU-only pod: p = 0.75 and 0.25.
RequestMix handMix() {
  return RequestMix::fromRequests(
      {shape(1, 500, 1000), shape(0, 0, 2000), shape(1, 500, 1000), shape(1, 500, 1000)});
}

TEST_CASE("the request mix: most frequent first, larger first among equals, 95% coverage") {
  RequestMix mix = handMix();
  REQUIRE(mix.entries().size() == 2);
  CHECK(mix.entries()[0].milli_per_gpu == 500);
  CHECK(mix.entries()[0].probability == Approx(0.75));
  CHECK(mix.entries()[1].gpus == 0);
  CHECK(mix.entries()[1].probability == Approx(0.25));

  RequestMix ties = RequestMix::fromRequests({shape(1, 300, 1000), shape(2, 1000, 1000)});
  CHECK(ties.entries()[0].milli_per_gpu == 1000);  // (1000, 1000, 2) > (1000, 300, 1)

  std::vector<GpuRequest> many(96, shape(1, 1000, 0));
  for (int i = 0; i < 4; ++i) many.push_back(shape(1, 100 + i, 0));  // four rare shapes, 1% each
  RequestMix covered = RequestMix::fromRequests(many);
  CHECK(covered.entries().size() == 1);  // 96% already covers 95%
  CHECK(covered.entries()[0].probability == Approx(1.0));
}

TEST_CASE("F on a hand-built node matches the hand computation") {
  RequestMix mix = handMix();
  const std::vector<uint64_t> all = troupe::sched::mixAccess(mix, "T4");
  // GPUs with 1000 and 300 milli free, plenty of CPU. The half-GPU pod fits; only the 300 is a
  // fragment for it (0.75 x 300); the CPU-only pod sees all 1300 as fragment (0.25 x 1300).
  std::vector<int64_t> before{1000, 300};
  CHECK(troupe::sched::fragmentation(mix, all, 10000, before) == Approx(225 + 325));
  // After a half-GPU pod on GPU 0: 500 + 300 free.
  std::vector<int64_t> after{500, 300};
  CHECK(troupe::sched::fragmentation(mix, all, 9000, after) == Approx(225 + 200));
  // int(100 * sigmoid(125 / 1000)) = int(53.12)
  CHECK(troupe::sched::fgdScore(550, 425) == 53);
  CHECK(troupe::sched::fgdScore(425, 550) == 46);
  CHECK(troupe::sched::fgdScore(0, 0) == 50);
  // Too little CPU for either pod: everything free is a fragment for both.
  CHECK(troupe::sched::fragmentation(mix, all, 500, before) == Approx(1300));
  // A model the typical pod does not accept: its share counts all free milli.
  RequestMix picky = RequestMix::fromRequests({shape(1, 500, 0, {"V100M32"})});
  CHECK(troupe::sched::fragmentation(picky, troupe::sched::mixAccess(picky, "T4"), 1000, before) ==
        Approx(1300));
  CHECK(troupe::sched::fragmentation(picky, troupe::sched::mixAccess(picky, "v100m32"), 1000, before) ==
        Approx(300));
}

TEST_CASE("the fragmentation memo returns what the direct computation does") {
  RequestMix mix = handMix();
  troupe::sched::FragmentationCache cache(mix);
  std::vector<int64_t> a{1000, 300}, b{300, 1000};  // the same multiset
  const std::vector<uint64_t> all = troupe::sched::mixAccess(mix, "T4");
  const double direct = troupe::sched::fragmentation(mix, all, 10000, a);
  CHECK(cache.get("T4", 10000, a) == direct);
  CHECK(cache.get("T4", 10000, b) == direct);
  CHECK(cache.get("T4", 500, a) == troupe::sched::fragmentation(mix, all, 500, a));
}

TEST_CASE("the request mix: a GPU part's eventual waste when the mix's one-GPU requests fill it", "[mix]") {
  // 300-milli shares and whole GPUs, one of each: p = 0.5 each. A 2-GPU pod and a CPU-only pod
  // change the probabilities but neither fits in one GPU's part, so the waste is the same.
  for (const RequestMix& mix : {RequestMix::fromRequests({shape(1, 300, 0), shape(1, 1000, 0)}),
                                RequestMix::fromRequests({shape(1, 300, 0), shape(1, 1000, 0),
                                                          shape(2, 1000, 0), shape(0, 0, 4000)})}) {
    CHECK(mix.fragmentWaste(0) == 0.0);
    CHECK(mix.fragmentWaste(299) == 299.0);  // nothing fits: all of it is lost
    CHECK(mix.fragmentWaste(300) == 0.0);    // a share fills it exactly
    CHECK(mix.fragmentWaste(500) == 200.0);  // one share, then 200 too small for anything
    CHECK(mix.fragmentWaste(700) == 100.0);  // two shares, then 100
    // A whole GPU: a whole-GPU pod (nothing left) or a share, then two more (100 left): 50.
    CHECK(mix.fragmentWaste(1000) == Approx(50.0));
    CHECK(mix.fragmentWaste(-20) == 0.0);  // clamped to the GPU
    CHECK(mix.fragmentWaste(1500) == mix.fragmentWaste(1000));
  }
  CHECK(RequestMix().fragmentWaste(500) == 0.0);  // no mix built: nothing to count
}

TEST_CASE("the request mix: eventual waste stays within the part, on random mixes", "[mix]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<GpuRequest> reqs;
    const int n = std::uniform_int_distribution<int>(1, 12)(rng);
    int64_t smallest = 1001;
    for (int i = 0; i < n; ++i) {
      const int gpus = std::uniform_int_distribution<int>(0, 2)(rng);
      const int64_t milli = gpus == 1 ? std::uniform_int_distribution<int64_t>(1, 100)(rng) * 10 : 1000;
      if (gpus == 1) smallest = std::min(smallest, milli);
      reqs.push_back(shape(gpus, milli, std::uniform_int_distribution<int64_t>(0, 8)(rng) * 1000));
    }
    const RequestMix mix = RequestMix::fromRequests(reqs, 1.0);
    for (int64_t f = 0; f <= 1000; ++f) {
      const double w = mix.fragmentWaste(f);
      REQUIRE(w >= 0.0);
      REQUIRE(w <= static_cast<double>(f) + 1e-9);
      if (f < smallest) REQUIRE(w == static_cast<double>(f));
    }
    if (smallest <= 1000) CHECK(mix.fragmentWaste(smallest) == 0.0);
  }
}

TEST_CASE("FGD scores a node by its best GPU for a share") {
  troupe::model::TopologyCatalog catalog;
  troupe::model::NodeFacts facts;
  facts.name = "n";
  facts.labels[troupe::model::kLabelGpuProduct] = "T4";
  facts.allocatable_gpus = "2";
  facts.cpu = "10";
  auto info = troupe::model::nodeFromFacts(facts, catalog);
  REQUIRE(info.isOk());
  troupe::model::NodeState node(info.value());
  troupe::model::Allocation a;
  a.pod_uid = "x";
  a.gpus = {1};
  a.milli_per_gpu = 700;
  REQUIRE(node.add(a).isOk());  // free: 1000, 300
  RequestMix mix = handMix();
  const troupe::sched::PolicyConfig fgd = troupe::sched::builtinPolicies().create("fgd").value();
  troupe::sched::NodeScore s = troupe::sched::scoreNode(fgd, node, shape(1, 500, 1000), {&mix, nullptr});
  CHECK(s.value == 53);
  CHECK(s.placement.gpus == std::vector<int>{0});
  // A 300-milli share fits GPU 1 exactly, which removes a fragment: better than GPU 0.
  s = troupe::sched::scoreNode(fgd, node, shape(1, 300, 1000), {&mix, nullptr});
  CHECK(s.placement.gpus == std::vector<int>{1});
}

}  // namespace

namespace {

TEST_CASE("the live window starts from the default mix and follows what it sees") {
  troupe::sched::RequestMixWindow window(10, 5);
  CHECK(window.current().get() == &RequestMix::defaults());
  for (int i = 0; i < 5; ++i) window.record(shape(2, 1000, 4000));
  REQUIRE(window.current()->entries().size() == 1);
  CHECK(window.current()->entries()[0].gpus == 2);
  // Ten later requests push the old ones out of a window of ten.
  for (int i = 0; i < 10; ++i) window.record(shape(1, 250, 1000));
  REQUIRE(window.current()->entries().size() == 1);
  CHECK(window.current()->entries()[0].milli_per_gpu == 250);
}

TEST_CASE("the live window counts a pod uid once, and remembers a bounded number of uids", "[mix]") {
  // Refreshed at every request, so the mix shows what the window holds.
  troupe::sched::RequestMixWindow window(100, 1, 3);
  CHECK_FALSE(window.remembers("a"));
  CHECK(window.record(shape(1, 1000, 0), "a"));
  CHECK(window.remembers("a"));
  CHECK_FALSE(window.record(shape(1, 1000, 0), "a"));  // the same pod, seen again
  CHECK(window.record(shape(0, 0, 2000), "b"));
  REQUIRE(window.current()->entries().size() == 2);
  CHECK(window.current()->entries()[0].probability == Approx(0.5));
  CHECK(window.record(shape(1, 1000, 0), "c"));  // another pod of the same shape counts
  REQUIRE(window.current()->entries().size() == 2);
  CHECK(window.current()->entries()[0].gpus == 1);
  CHECK(window.current()->entries()[0].probability == Approx(2.0 / 3));

  // Three uids are remembered: a fourth forgets "a", which then counts again; "c" is still known.
  CHECK(window.record(shape(1, 1000, 0), "d"));
  CHECK_FALSE(window.remembers("a"));
  CHECK(window.record(shape(1, 1000, 0), "a"));
  CHECK(window.remembers("c"));
  CHECK_FALSE(window.record(shape(1, 1000, 0), "c"));
  CHECK(window.current()->entries()[0].probability == Approx(4.0 / 5));
  // Without a uid every request counts, as with record(request).
  CHECK(window.record(shape(0, 0, 2000), ""));
  CHECK(window.record(shape(0, 0, 2000), ""));
  CHECK_FALSE(window.remembers(""));
  CHECK(window.current()->entries()[0].probability == Approx(4.0 / 7));
}

TEST_CASE("every policy scores a live placement on 0..1") {
  troupe::model::TopologyCatalog catalog;
  troupe::model::NodeFacts facts;
  facts.name = "n";
  facts.labels[troupe::model::kLabelGpuProduct] = "NVIDIA-H100-80GB-HBM3";
  facts.allocatable_gpus = "8";
  auto info = troupe::model::nodeFromFacts(facts, catalog);
  REQUIRE(info.isOk());
  troupe::model::NodeState node(info.value());
  GpuRequest req = shape(2, 1000, 0);
  auto placement = troupe::sched::placeOnNode(node, req);
  REQUIRE(placement);
  for (const std::string& kind : troupe::sched::builtinPolicies().names()) {
    const troupe::sched::PolicyPtr policy = troupe::sched::builtinPolicies().create(kind).value();
    const double s = policy->unitScore(node, req, *placement, troupe::sched::ScoreContext{});
    INFO(kind);
    CHECK(s >= 0.0);
    CHECK(s <= 1.0);
  }
}

}  // namespace

TEST_CASE("a typical request past the 64th still sees the models it accepts") {
  // 64 CPU-only shapes (1/65 each) first, then a whole-GPU pod that only takes T4s: entry 64.
  std::vector<GpuRequest> reqs;
  for (int i = 0; i < 64; ++i) reqs.push_back(shape(0, 0, 1000 + i));
  reqs.push_back(shape(1, 1000, 500, {"T4"}));
  for (int cpu : {100, 2, 1}) reqs.push_back(shape(0, 0, cpu));  // rarer, smaller: cut at 95%
  RequestMix mix = RequestMix::fromRequests(reqs);
  REQUIRE(mix.entries().size() == 65);
  REQUIRE(mix.entries()[64].models == std::vector<std::string>{"T4"});
  const std::vector<int64_t> free{1000};
  // On a T4 the constrained pod fits the free GPU: no fragment for it, 64/65 x 1000 in all.
  CHECK(troupe::sched::fragmentation(mix, troupe::sched::mixAccess(mix, "T4"), 100000, free) ==
        Approx(64000.0 / 65));
  // Elsewhere it cannot use the GPU at all: its 1/65 of 1000 counts too.
  CHECK(troupe::sched::fragmentation(mix, troupe::sched::mixAccess(mix, "V100M16"), 100000, free) ==
        Approx(1000));
  troupe::sched::FragmentationCache cache(mix);
  CHECK(cache.get("T4", 100000, free) == Approx(64000.0 / 65));
  CHECK(cache.get("V100M16", 100000, free) == Approx(1000));
}
