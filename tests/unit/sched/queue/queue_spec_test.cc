// QueueTree::build: the validations queue_spec.h lists, each error naming the queue, the field,
// the value and the fix; the order of the valid queues and the implicit default queue.
#include "troupe/sched/queue/queue_spec.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "troupe/sched/cluster/gpu_amount.h"

namespace {

using namespace troupe::sched;

QueueSpec queue(const std::string& name, const std::string& parent = "", double weight = 1) {
  QueueSpec q;
  q.name = name;
  q.parent = parent;
  q.weight = weight;
  return q;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> names(const QueueTree& tree) {
  std::vector<std::string> out;
  for (const QueueSpec& q : tree.queues()) out.push_back(q.name);
  return out;
}

}  // namespace

TEST_CASE("gpusText prints milli-GPUs as GPUs", "[queue]") {
  CHECK(gpusText(0) == "0");
  CHECK(gpusText(16000) == "16");
  CHECK(gpusText(2500) == "2.5");
  CHECK(gpusText(125) == "0.125");
  CHECK(gpusText(1050) == "1.05");
  CHECK(gpusText(-1500) == "-1.5");
  CHECK(gpusText(std::numeric_limits<int64_t>::min()) == "-9223372036854775.808");
}

TEST_CASE("QueueTree: no specs is an empty tree (queueing off)", "[queue]") {
  QueueTree tree = QueueTree::build({});
  CHECK(tree.empty());
  CHECK(tree.queues().empty());
  CHECK(tree.defaultQueue() == "default");
  CHECK(tree.lineage("default").empty());
}

TEST_CASE("QueueTree: parent before child, sorted within a level, implicit default", "[queue]") {
  QueueTree tree = QueueTree::build({queue("z-leaf", "research"), queue("research"),
                                     queue("b-leaf", "research"), queue("prod"), queue("deep", "b-leaf")});
  CHECK_FALSE(tree.empty());
  CHECK(tree.invalid().empty());
  CHECK(names(tree) == std::vector<std::string>{"default", "prod", "research", "b-leaf", "z-leaf", "deep"});
  CHECK(tree.children("") == std::vector<std::string>{"default", "prod", "research"});
  CHECK(tree.children("research") == std::vector<std::string>{"b-leaf", "z-leaf"});
  CHECK(tree.isLeaf("deep"));
  CHECK_FALSE(tree.isLeaf("research"));
  CHECK(tree.lineage("deep") == std::vector<std::string>{"deep", "b-leaf", "research"});
  CHECK(tree.lineage("nope").empty());
  const QueueSpec* d = tree.find("default");
  REQUIRE(d);
  CHECK(d->weight == 1);
  CHECK(d->preemptible);
  CHECK(d->limit.empty());
  CHECK(d->guaranteed.empty());
}

TEST_CASE("QueueTree: a configured default queue is used, and an explicit one not duplicated", "[queue]") {
  QueueSpec d = queue("batch", "", 3);
  QueueTree tree = QueueTree::build({d, queue("team-a")}, "batch");
  CHECK(tree.defaultQueue() == "batch");
  CHECK(names(tree) == std::vector<std::string>{"batch", "team-a"});
  CHECK(tree.find("batch")->weight == 3);
}

TEST_CASE("QueueTree: each validation names the queue, the field, the value and the fix", "[queue]") {
  struct Case {
    QueueSpec spec;
    std::vector<std::string> parts;
  };
  auto withGuarantee = [](QueueSpec q, int64_t g, int64_t lim) {
    q.guaranteed.milli = g;
    q.limit.milli = lim;
    return q;
  };
  QueueSpec neg_product = queue("neg-product");
  neg_product.limit.product_milli["A100"] = -1000;
  QueueSpec product_over = queue("product-over");
  product_over.guaranteed.product_milli["H100"] = 9000;
  product_over.limit.product_milli["H100"] = 8000;
  QueueSpec product_over_all = queue("product-over-all");
  product_over_all.guaranteed.product_milli["H100"] = 9000;
  product_over_all.limit.milli = 4000;
  const std::vector<Case> cases = {
      {queue("Team_A"), {"\"Team_A\"", "name", "DNS-1123", "lower-case"}},
      {queue("-bad"), {"\"-bad\"", "name", "DNS-1123"}},
      {queue(std::string(254, 'a')), {"name", "253"}},
      {queue("zero", "", 0), {"\"zero\"", "weight 0", "positive"}},
      {queue("neg", "", -2), {"\"neg\"", "weight -2", "positive"}},
      {queue("nan", "", std::nan("")), {"\"nan\"", "weight nan", "positive"}},
      {queue("inf", "", std::numeric_limits<double>::infinity()), {"\"inf\"", "weight inf"}},
      {withGuarantee(queue("neg-g"), -500, 1000), {"\"neg-g\"", "guaranteed.gpus -0.5", "0 or more"}},
      {neg_product, {"\"neg-product\"", "limit for A100 -1", "0 or more"}},
      {withGuarantee(queue("over"), 9000, 8000), {"\"over\"", "guaranteed.gpus 9", "limit.gpus 8", "lower"}},
      {product_over, {"\"product-over\"", "guaranteed 9 H100", "limit of 8", "raise the limit"}},
      {product_over_all, {"\"product-over-all\"", "guaranteed 9 H100", "limit.gpus 4"}},
      {queue("selfish", "selfish"), {"\"selfish\"", "parent \"selfish\"", "itself"}},
      {queue("orphan", "missing"), {"\"orphan\"", "parent \"missing\"", "does not exist", "create"}},
  };
  for (const Case& c : cases) {
    INFO(c.spec.name);
    QueueTree tree = QueueTree::build({c.spec, queue("ok")});
    CHECK(tree.find(c.spec.name) == nullptr);
    REQUIRE(tree.invalid().count(c.spec.name) == 1);
    const std::string& error = tree.invalid().at(c.spec.name);
    for (const std::string& part : c.parts) {
      INFO(error);
      CHECK(contains(error, part));
    }
    CHECK(tree.find("ok") != nullptr);  // one bad queue never takes the others down
  }
}

TEST_CASE("QueueTree: a failing parent takes its subtree out, each child saying why", "[queue]") {
  QueueTree tree =
      QueueTree::build({queue("top", "", 0), queue("mid", "top"), queue("leaf", "mid"), queue("ok")});
  CHECK(names(tree) == std::vector<std::string>{"default", "ok"});
  CHECK(contains(tree.invalid().at("mid"), "parent \"top\" is not used"));
  CHECK(contains(tree.invalid().at("mid"), "weight 0"));
  CHECK(contains(tree.invalid().at("leaf"), "parent \"mid\" is not used"));
}

TEST_CASE("QueueTree: cycles of parents are refused", "[queue]") {
  QueueTree tree = QueueTree::build({queue("a", "b"), queue("b", "c"), queue("c", "a"), queue("d", "a")});
  for (const char* name : {"a", "b", "c", "d"}) {
    INFO(name);
    CHECK(tree.find(name) == nullptr);
    CHECK(tree.invalid().count(name) == 1);
  }
  CHECK(contains(tree.invalid().at("a") + tree.invalid().at("b") + tree.invalid().at("c"), "cycle"));
  CHECK(names(tree) == std::vector<std::string>{"default"});
}

TEST_CASE("QueueTree: duplicated names are refused, both definitions", "[queue]") {
  QueueTree tree = QueueTree::build({queue("twin"), queue("twin", "", 2), queue("child", "twin")});
  CHECK(tree.find("twin") == nullptr);
  CHECK(contains(tree.invalid().at("twin"), "defined 2 times"));
  CHECK(contains(tree.invalid().at("child"), "parent \"twin\""));
}

TEST_CASE("QueueTree: children may not guarantee more than their parent", "[queue]") {
  QueueSpec parent = queue("org");
  parent.guaranteed.milli = 10000;
  parent.guaranteed.product_milli["H100"] = 4000;
  QueueSpec a = queue("a", "org");
  a.guaranteed.milli = 6000;
  a.guaranteed.product_milli["H100"] = 2000;
  QueueSpec b = queue("b", "org");
  b.guaranteed.milli = 4000;
  b.guaranteed.product_milli["H100"] = 2000;
  SECTION("exactly the parent's guarantee is fine") {
    QueueTree tree = QueueTree::build({parent, a, b});
    CHECK(tree.invalid().empty());
    CHECK(tree.lineage("a") == std::vector<std::string>{"a", "org"});
  }
  SECTION("more in all") {
    b.guaranteed.milli = 4500;
    QueueTree tree = QueueTree::build({parent, a, b});
    CHECK(tree.find("org") == nullptr);
    const std::string& e = tree.invalid().at("org");
    CHECK(contains(e, "guaranteed.gpus 10"));
    CHECK(contains(e, "10.5"));
    CHECK(contains(e, "raise the parent's guarantee"));
    CHECK(tree.invalid().count("a") == 1);  // the subtree goes with it
  }
  SECTION("more of one product") {
    b.guaranteed.product_milli["H100"] = 2500;
    QueueTree tree = QueueTree::build({parent, a, b});
    CHECK(contains(tree.invalid().at("org"), "guaranteed 4 H100"));
    CHECK(contains(tree.invalid().at("org"), "4.5"));
  }
  SECTION("a parent without a guarantee does not bound its children") {
    parent.guaranteed = {};
    QueueTree tree = QueueTree::build({parent, a, b});
    CHECK(tree.invalid().empty());
  }
}
