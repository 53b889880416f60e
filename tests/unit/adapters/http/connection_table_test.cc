// ConnectionTable: which connection a listener at its cap closes (the oldest that never sent a
// byte, then the oldest with a header begun, then a new one whose request waits unread, then
// the one idle longest; never one mid-request), checked against a plain model over random sequences; and the
// per-listener cap that fits the open-file limit.
#include "adapters/http/connection_table.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "adapters/http/open_file_limit.h"

using troupe::http::ConnectionTable;
using Phase = ConnectionTable::Phase;

namespace {

struct FakeConnection : ConnectionTable::Member {
  int closed = 0;
  bool waiting = false;  // what a peek at its socket would say
  void close() override { ++closed; }
  bool requestWaiting() const override { return waiting; }
};

// The eviction order: silent new, header begun, new with a request waiting, idle.
int rank(Phase p, bool waiting) {
  switch (p) {
    case Phase::kNew: return waiting ? 2 : 0;
    case Phase::kStarted: return 1;
    case Phase::kIdle: return 3;
    case Phase::kBusy: break;
  }
  return 4;
}

}  // namespace

TEST_CASE("a connection table evicts new connections first, oldest first, and never a busy one",
          "[http][connections]") {
  ConnectionTable table;
  std::vector<std::shared_ptr<FakeConnection>> c;
  std::vector<ConnectionTable::Id> id;
  for (int i = 0; i < 5; ++i) {
    c.push_back(std::make_shared<FakeConnection>());
    id.push_back(table.add(c.back()));
  }
  // 0: idle after a request; 1: a header begun; 2: mid-request; 3, 4: new.
  REQUIRE(table.enter(id[0], Phase::kBusy));
  REQUIRE(table.enter(id[0], Phase::kIdle));
  REQUIRE(table.enter(id[1], Phase::kStarted));
  REQUIRE(table.enter(id[2], Phase::kStarted));
  REQUIRE(table.enter(id[2], Phase::kBusy));
  CHECK(table.size() == 5);
  CHECK(table.count(Phase::kNew) == 2);
  CHECK(table.count(Phase::kBusy) == 1);

  std::vector<int> order;
  while (std::optional<ConnectionTable::Evicted> e = table.evictOne()) {
    for (int i = 0; i < 5; ++i) {
      if (e->member == c[i]) order.push_back(i);
    }
  }
  CHECK(order == std::vector<int>{3, 4, 1, 0});
  CHECK(table.size() == 1);  // the busy one stays
  CHECK(table.count(Phase::kBusy) == 1);
  // An evicted connection cannot go on; removing it again is harmless.
  CHECK_FALSE(table.enter(id[3], Phase::kStarted));
  table.remove(id[3]);
  CHECK(table.size() == 1);
  // Once its request is answered, the busy one is idle and can go too.
  REQUIRE(table.enter(id[2], Phase::kIdle));
  REQUIRE(table.evictOne().has_value());
  CHECK_FALSE(table.evictOne().has_value());
  CHECK(table.members().empty());
}

TEST_CASE("a new connection whose request already waits unread outlasts the silent ones and slow headers",
          "[http][connections]") {
  // The FLOOD-V case: a /healthz probe accepted amid 3,000 idle connections sent its request at
  // once, but the acceptor ran ahead of the reads; the idle ones accepted after it go first.
  ConnectionTable table;
  std::vector<std::shared_ptr<FakeConnection>> c;
  for (int i = 0; i < 6; ++i) {
    c.push_back(std::make_shared<FakeConnection>());
    const ConnectionTable::Id id = table.add(c.back());
    if (i == 4) REQUIRE(table.enter(id, Phase::kStarted));
    if (i == 5) {
      REQUIRE(table.enter(id, Phase::kBusy));
      REQUIRE(table.enter(id, Phase::kIdle));
    }
  }
  c[0]->waiting = true;  // the probe, oldest of the new ones
  c[2]->waiting = true;
  std::vector<int> order;
  while (std::optional<ConnectionTable::Evicted> e = table.evictOne()) {
    for (int i = 0; i < 6; ++i) {
      if (e->member == c[i]) order.push_back(i);
    }
  }
  CHECK(order == std::vector<int>{1, 3, 4, 0, 2, 5});
}

TEST_CASE("a connection being destroyed still frees its slot when evicted", "[http][connections]") {
  ConnectionTable table;
  ConnectionTable::Id gone = 0;
  {
    auto c = std::make_shared<FakeConnection>();
    gone = table.add(c);
  }
  auto alive = std::make_shared<FakeConnection>();
  table.add(alive);
  std::optional<ConnectionTable::Evicted> e = table.evictOne();
  REQUIRE(e.has_value());
  CHECK(e->member == nullptr);
  CHECK(e->phase == Phase::kNew);
  CHECK_FALSE(table.enter(gone, Phase::kBusy));
  CHECK(table.members().size() == 1);
}

TEST_CASE("on random sequences a connection table evicts what a plain model says", "[http][connections]") {
  for (unsigned seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    ConnectionTable table;
    struct Model {
      Phase phase;
      uint64_t since;  // when it entered its phase
      std::shared_ptr<FakeConnection> conn;
    };
    std::map<ConnectionTable::Id, Model> model;
    std::vector<ConnectionTable::Id> evicted;
    uint64_t clock = 0;
    auto pick = [&]() -> std::optional<ConnectionTable::Id> {
      if (model.empty()) return std::nullopt;
      auto it = model.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, model.size() - 1)(rng));
      return it->first;
    };
    for (int step = 0; step < 300; ++step) {
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      if (op <= 2) {
        auto conn = std::make_shared<FakeConnection>();
        conn->waiting = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
        model[table.add(conn)] = {Phase::kNew, ++clock, conn};
      } else if (op <= 6) {
        if (auto id = pick()) {
          const Phase to = static_cast<Phase>(std::uniform_int_distribution<int>(1, 3)(rng));
          REQUIRE(table.enter(*id, to));
          model[*id].phase = to;
          model[*id].since = ++clock;
        }
      } else if (op == 7) {
        if (auto id = pick()) {
          table.remove(*id);
          model.erase(*id);
        }
      } else if (op == 8 && !evicted.empty()) {
        // A connection evicted earlier tries to go on: refused, and its removal is harmless.
        const ConnectionTable::Id id =
            evicted[std::uniform_int_distribution<size_t>(0, evicted.size() - 1)(rng)];
        CHECK_FALSE(table.enter(id, Phase::kBusy));
        table.remove(id);
      } else {
        std::optional<ConnectionTable::Id> want;
        for (const auto& [id, m] : model) {
          if (m.phase == Phase::kBusy) continue;
          const Model& w = want ? model[*want] : m;
          if (!want || std::pair(rank(m.phase, m.conn->waiting), m.since) <
                           std::pair(rank(w.phase, w.conn->waiting), w.since)) {
            want = id;
          }
        }
        std::optional<ConnectionTable::Evicted> got = table.evictOne();
        REQUIRE(got.has_value() == want.has_value());
        if (want) {
          CHECK(got->member == model[*want].conn);
          CHECK(got->phase == model[*want].phase);
          evicted.push_back(*want);
          model.erase(*want);
        }
      }
      REQUIRE(table.size() == model.size());
      for (Phase p : {Phase::kNew, Phase::kStarted, Phase::kIdle, Phase::kBusy}) {
        REQUIRE(table.count(p) ==
                static_cast<size_t>(std::count_if(model.begin(), model.end(),
                                                  [p](const auto& kv) { return kv.second.phase == p; })));
      }
    }
    CHECK(table.members().size() == model.size());
  }
}

TEST_CASE("the connection cap fits the open-file limit with room for the rest of Troupe",
          "[http][connections]") {
  using troupe::http::connectionsThatFit;
  using troupe::http::kReservedFiles;
  CHECK(connectionsThatFit(1 << 20, 1024, 2) == 1024);                    // plenty: as configured
  CHECK(connectionsThatFit(2 * 1024 + kReservedFiles, 1024, 2) == 1024);  // just enough
  CHECK(connectionsThatFit(1024, 1024, 2) == (1024 - kReservedFiles) / 2);
  CHECK(connectionsThatFit(1024, 1024, 1) == 1024 - kReservedFiles);
  CHECK(connectionsThatFit(100, 1024, 2) == 16);  // never below 16
  CHECK(connectionsThatFit(100, 4, 2) == 4);      // nor above what was asked
  CHECK(connectionsThatFit(1 << 20, 1024, 0) == 1024);
}
