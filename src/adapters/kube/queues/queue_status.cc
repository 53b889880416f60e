#include "adapters/kube/queues/queue_status.h"

#include <cmath>

#include "adapters/kube/queues/queues.h"
#include "adapters/kube/watch/kube_objects.h"
#include "troupe/sched/cluster/gpu_amount.h"

namespace troupe::kube {
namespace {

using adapters::Json;

// The CRD's amounts are int-or-string: whole GPUs as an integer, a fraction as "2.5".
Json gpus(int64_t milli) {
  if (milli % 1000 == 0) return milli / 1000;
  return sched::gpusText(milli);
}

Json amounts(int64_t total_milli, const sched::ProductMilli& products) {
  Json per = Json::object();
  for (const auto& [product, milli] : products) {
    if (milli != 0) per[product.empty() ? "unlabelled" : product] = gpus(milli);
  }
  return Json{{"gpus", gpus(total_milli)}, {"products", per}};
}

int64_t sum(const sched::ProductMilli& products) {
  int64_t total = 0;
  for (const auto& [product, milli] : products) total += milli;
  return total;
}

QueueCondition condition(const char* type, bool value, std::string reason, std::string message) {
  return QueueCondition{type, value ? "True" : "False", std::move(reason), std::move(message), ""};
}

}  // namespace

std::vector<QueueCondition> queueConditions(const sched::QueueStatus& s,
                                            const std::vector<QueueCondition>& previous,
                                            const std::string& now) {
  std::vector<QueueCondition> out;
  const std::string holds = "holds " + sched::gpusText(s.allocated_milli) + " GPUs";
  if (!s.invalid.empty()) {
    out.push_back(condition("Valid", false, "Invalid", s.invalid));
    out.push_back(condition("BelowGuaranteed", false, "Invalid", "the queue is not used"));
    out.push_back(condition("AboveFairShare", false, "Invalid", "the queue is not used"));
  } else {
    out.push_back(condition("Valid", true, "Valid", "the queue is in use"));
    const sched::GpuQuota& g = s.spec.guaranteed;
    if (s.below_guaranteed) {
      out.push_back(condition("BelowGuaranteed", true, "BelowGuaranteed",
                              holds + " of " + sched::gpusText(g.milli.value_or(0)) + " guaranteed, with " +
                                  std::to_string(s.pending_pods) + " pods pending"));
    } else if (g.empty()) {
      out.push_back(
          condition("BelowGuaranteed", false, "NoGuarantee", "nothing is guaranteed to this queue"));
    } else {
      out.push_back(
          condition("BelowGuaranteed", false, "GuaranteeMet",
                    holds + (s.pending_pods > 0 ? ", at least its guarantee" : "; no pods pending")));
    }
    const std::string share = "fair share " + sched::gpusText(s.fair_share.total_milli) + " GPUs";
    out.push_back(s.above_fair_share
                      ? condition("AboveFairShare", true, "AboveFairShare", holds + ", " + share)
                      : condition("AboveFairShare", false, "WithinFairShare", holds + ", " + share));
  }
  for (QueueCondition& c : out) {
    c.last_transition = now;
    for (const QueueCondition& p : previous) {
      if (p.type == c.type && p.status == c.status && !p.last_transition.empty())
        c.last_transition = p.last_transition;
    }
  }
  return out;
}

Json queueStatusPatch(const sched::QueueStatus& s, const std::vector<QueueCondition>& conditions) {
  Json conds = Json::array();
  for (const QueueCondition& c : conditions) {
    conds.push_back(Json{{"type", c.type},
                         {"status", c.status},
                         {"reason", c.reason},
                         {"message", c.message.substr(0, 1024)},
                         {"lastTransitionTime", c.last_transition}});
  }
  // Four decimals: enough to read, and no rewrite for a change in the tenth digit.
  const double dominant = std::round(s.dominant_share * 10000.0) / 10000.0;
  Json status = {
      {"allocated", amounts(s.allocated_milli, s.allocated)},
      {"pending",
       Json{{"gpus", gpus(s.pending_milli ? s.pending_milli : sum(s.pending))}, {"pods", s.pending_pods}}},
      {"fairShare", amounts(s.fair_share.total_milli, s.fair_share.share)},
      {"dominantShare", std::isfinite(dominant) ? dominant : 0.0},
      {"running", s.running_pods},
      {"conditions", conds},
      {"explanation", (s.explanation.empty() ? s.invalid : s.explanation).substr(0, 2048)},
  };
  return Json{{"status", status}};
}

QueueStatusWriter::QueueStatusWriter(KubeTransport& api, Statuses statuses, adapters::Logger& logger,
                                     std::function<std::set<std::string>()> objects, WallClock wall)
    : api_(api),
      statuses_(std::move(statuses)),
      logger_(logger),
      objects_(std::move(objects)),
      wall_(std::move(wall)) {}

void QueueStatusWriter::reset() {
  written_.clear();
  conditions_.clear();
}

std::vector<QueueCondition> QueueStatusWriter::readConditions(const std::string& name) {
  ApiReply reply = api_.request("GET", std::string(kQueuesPath) + "/" + name);
  if (!reply.ok()) return {};
  Json doc = Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  return doc.is_discarded() ? std::vector<QueueCondition>{} : conditionsOf(doc);
}

size_t QueueStatusWriter::writeOnce() {
  const std::set<std::string> objects = objects_ ? objects_() : std::set<std::string>{};
  // Objects that are gone: forget them, so one created again under the name is written.
  for (auto it = written_.begin(); it != written_.end();) {
    if (objects.count(it->first)) {
      ++it;
    } else {
      conditions_.erase(it->first);
      it = written_.erase(it);
    }
  }
  const std::string now = formatApiTime(wall_ ? wall_() : std::chrono::system_clock::now());
  size_t written = 0;
  for (const sched::QueueStatus& s : statuses_()) {
    const std::string& name = s.spec.name;
    if (!objects.count(name)) continue;  // the implicit default queue, or a config-file queue
    auto prev = conditions_.find(name);
    if (prev == conditions_.end()) prev = conditions_.emplace(name, readConditions(name)).first;
    std::vector<QueueCondition> conds = queueConditions(s, prev->second, now);
    const std::string body = queueStatusPatch(s, conds).dump(-1, ' ', false, Json::error_handler_t::replace);
    if (auto w = written_.find(name); w != written_.end() && w->second == body) continue;
    ApiReply reply = api_.request("PATCH", std::string(kQueuesPath) + "/" + name + "/status", body,
                                  "application/merge-patch+json");
    if (!reply.ok()) {
      // Not remembered: the next round tries again.
      logger_.log(
          reply.kind == ApiErrorKind::kNotFound ? adapters::LogLevel::kDebug : adapters::LogLevel::kWarn,
          "queue status not written", {{"queue", name}, {"error", reply.message}});
      continue;
    }
    written_[name] = body;
    prev->second = std::move(conds);
    ++written;
  }
  return written;
}

}  // namespace troupe::kube
