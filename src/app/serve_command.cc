// troupe serve: wires config, the scheduling core, metrics and the HTTP server together.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "adapters/common/internal_errors.h"
#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "adapters/http/open_file_limit.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/client/kube_config.h"
#include "adapters/kube/runtime/kube_runtime.h"
#include "adapters/metrics/metrics.h"
#include "adapters/yaml/config.h"
#include "app/commands.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::app {

const char* const kServeHelp = R"(troupe serve - run the kube-scheduler extender

Usage:
  troupe serve [--listen HOST:PORT] [--metrics-listen HOST:PORT] [--config FILE]
               [--cluster FILE | --kubeconfig FILE] [flags]

Flags:
  --listen HOST:PORT   where to listen (default 127.0.0.1:8888, or 'listen' in --config).
                       kube-scheduler's extender urlPrefix is then http://HOST:PORT
                       (https:// with --tls-cert) with
                       filterVerb: filter, prioritizeVerb: prioritize, bindVerb: bind,
                       preemptVerb: preempt. /healthz, /readyz and /metrics are served
                       there too.
  --metrics-listen HOST:PORT
                       also serve GET /healthz, /readyz and /metrics (only those: the verbs
                       answer 404 there) on a second address, e.g. 0.0.0.0:8889 for kubelet
                       probes and Prometheus, while --listen stays on 127.0.0.1 for
                       kube-scheduler in the same pod.
  --tls-cert FILE --tls-key FILE
                       serve the verbs over HTTPS with this PEM certificate chain and key
                       (kube-scheduler: enableHTTPS: true). Re-read when the files change.
  --client-ca FILE     with HTTPS, require a client certificate signed by this PEM CA
                       (kube-scheduler: tlsConfig certFile/keyFile); without a certificate
                       the TLS handshake fails. --metrics-listen stays plain HTTP.
  --config FILE        YAML: listen, maxBodyBytes, logLevel, policy {name, weights},
                       filter {narrowTo}, topology {preset, levels}, gang {timeout, maxTimeout,
                       maxGangs}, metrics {perNodeSeries, perNodeSeriesOffAt},
                       schedulerNames, learnedNodes {maxNodes, ttlSeconds},
                       limits {maxHeaderBytes, maxBodyBytesInFlight, maxConnections,
                       headerTimeoutSeconds, readTimeoutSeconds, idleTimeoutSeconds,
                       writeTimeoutSeconds}, binder {workers} (Kubernetes mode:
                       Bindings in flight at once, default 8), queues {default,
                       minRuntime, reclaim, reclaimTimeout, definitions} (docs/queues.md;
                       in Kubernetes mode the Queue objects replace the definitions once
                       listed), defrag {enabled, interval, minGpus, minPending,
                       maxMoves, evict} (Kubernetes mode: DefragAdvice events,
                       docs/defrag.md).
                       See examples/config.yaml and docs/security.md (Limits).
  --cluster FILE       YAML list of nodes for standalone mode (no Kubernetes API), e.g.
                       examples/cluster.yaml; requests never change these nodes. Without it
                       (and without the API) Troupe learns nodes from full-node filter
                       requests (nodeCacheCapable: false): at most learnedNodes.maxNodes
                       (10000), each forgotten when no request carried it for
                       learnedNodes.ttlSeconds (3600).
  --kubeconfig FILE    watch the cluster through the Kubernetes API with this kubeconfig:
                       nodes and GPU pods are cached from the API, GPU indices are read back
                       from the troupe.dev/gpus pod annotation, and bind writes that
                       annotation on the Binding (set bindVerb: bind). /readyz turns
                       200 after the first full sync. Running in a pod (KUBERNETES_SERVICE_HOST
                       set) without --cluster or --kubeconfig does the same with the pod's
                       service account. RBAC: deploy/rbac.yaml.
  --kube-context NAME  the kubeconfig context to use (default: its current-context)
  --scheduler-name NAME
                       Kubernetes mode: bind only pods whose spec.schedulerName is NAME;
                       repeat it for each kube-scheduler profile that calls Troupe
                       (default troupe-scheduler, or 'schedulerNames' in --config). Other
                       pods get an error naming their scheduler, and nothing is bound.
  --leader-lease NAMESPACE/NAME
                       Kubernetes mode with several replicas: kube-scheduler's
                       leader-election Lease. Only the replica whose host holds it writes
                       the Queues' status and reclaims GPUs (default: none, always active).
  --allow-insecure-api-server
                       accept an http:// API server (e.g. kubectl proxy on 127.0.0.1).
                       Without it Troupe refuses one: credentials and pods would cross the
                       network in clear text.
  --narrow-to best|all filter passes only the node Troupe ranks first (best), so
                       kube-scheduler places the pod exactly there, or every node that fits
                       (all, the default; or 'filter: {narrowTo: ...}' in --config)
  --print-config       print the configuration Troupe would run with (the defaults, then
                       --config, then the flags above) as YAML, every key written, and exit
  --per-node-metrics auto|on|off
                       export troupe_node_gpus (three series per GPU node) in /metrics:
                       auto (the default) while the cluster has fewer than 1,000 GPU nodes
                       ('metrics: {perNodeSeriesOffAt: N}' in --config), on, or off. The
                       per-product and cluster-wide series are always exported.
  --record-dir DIR     save every extender request body under DIR (to capture what a real
                       kube-scheduler sends)
  --log-level LEVEL    debug | info | warn | error (default info); logs are JSON lines on stderr
  -h, --help           this text

Endpoints: POST /filter /prioritize /bind /preempt, GET /healthz /readyz /metrics.
Stop with SIGINT or SIGTERM: /readyz turns 503, new requests get an error, requests in
flight get up to 5 s to finish (a gang bind still waiting at its barrier is then answered
with an error, and kube-scheduler retries the pod).
)";

namespace {

struct ServeFlags {
  std::optional<std::string> listen;
  std::optional<std::string> metrics_listen;
  std::optional<std::string> config;
  std::optional<std::string> cluster;
  std::optional<std::string> record_dir;
  std::optional<std::string> log_level;
  std::optional<std::string> kubeconfig;
  std::optional<std::string> kube_context;
  std::optional<std::string> narrow_to;
  std::optional<std::string> per_node_metrics;
  std::optional<std::string> leader_lease;
  std::vector<std::string> scheduler_names;
  bool allow_insecure_api_server = false;
  bool print_config = false;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> client_ca;
};

std::string schedulerList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

http::ServerLimits serverLimits(const config::ServerLimitsConfig& c) {
  auto ms = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); };
  http::ServerLimits l;
  l.max_header_bytes = c.max_header_bytes;
  l.max_body_bytes_in_flight = c.max_body_bytes_in_flight;
  l.max_connections = c.max_connections;
  l.header_timeout = ms(c.header_timeout_seconds);
  l.read_timeout = ms(c.read_timeout_seconds);
  l.idle_timeout = ms(c.idle_timeout_seconds);
  l.write_timeout = ms(c.write_timeout_seconds);
  return l;
}

// Raises the open-file limit and fits the connection cap into it (adapters/http/open_file_limit.h).
size_t fitOpenFiles(size_t max_connections, int listeners, adapters::Logger& logger) {
  const http::OpenFileLimit files = http::raiseOpenFileLimit(max_connections, listeners);
  if (files.max_connections < max_connections) {
    logger.warn(
        "the open-file limit is too low for limits.maxConnections: lowered it per port",
        {{"maxConnections", std::to_string(max_connections)},
         {"lowered_to", std::to_string(files.max_connections)},
         {"open_file_limit", std::to_string(files.soft)},
         {"fix", "raise the hard limit (ulimit -Hn, the container runtime's LimitNOFILE) to at least " +
                     std::to_string(max_connections * listeners + http::kReservedFiles)}});
  }
  return files.max_connections;
}

// glibc gives each thread that allocates its own heap arena and keeps what is freed there: 80
// large requests on the old 40-thread server left 1.45 GB resident (review L3/M2). Two arenas
// unless MALLOC_ARENA_MAX says otherwise (the image and the chart set it too).
void limitMallocArenas() {
#ifdef __GLIBC__
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
#endif
}

int usage(const std::string& message) {
  std::cerr << "troupe serve: " << message << "\nRun 'troupe help serve' for the flags.\n";
  return 2;
}

// Reads the flags into `flags`; an exit code when serve stops here (--help, or a usage error).
std::optional<int> parseFlags(const std::vector<std::string>& args, ServeFlags& flags) {
  const std::map<std::string, std::optional<std::string>*> valued = {
      {"--listen", &flags.listen},
      {"--metrics-listen", &flags.metrics_listen},
      {"--config", &flags.config},
      {"--cluster", &flags.cluster},
      {"--record-dir", &flags.record_dir},
      {"--log-level", &flags.log_level},
      {"--kubeconfig", &flags.kubeconfig},
      {"--kube-context", &flags.kube_context},
      {"--narrow-to", &flags.narrow_to},
      {"--tls-cert", &flags.tls_cert},
      {"--tls-key", &flags.tls_key},
      {"--client-ca", &flags.client_ca},
      {"--per-node-metrics", &flags.per_node_metrics},
      {"--leader-lease", &flags.leader_lease}};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kServeHelp;
      return 0;
    }
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "--print-config") {
      if (has_value) return usage("--print-config takes no value");
      flags.print_config = true;
      continue;
    }
    if (arg == "--allow-insecure-api-server") {
      if (has_value) return usage("--allow-insecure-api-server takes no value");
      flags.allow_insecure_api_server = true;
      continue;
    }
    auto it = valued.find(arg);
    const bool repeated = arg == "--scheduler-name";
    if (it == valued.end() && !repeated) return usage("unknown flag \"" + arg + "\"");
    if (!has_value) {
      if (i + 1 >= args.size()) return usage(arg + " needs a value");
      value = args[++i];
    }
    if (repeated) {
      if (Status st = config::checkSchedulerName(value); !st.isOk())
        return usage("--scheduler-name " + st.message());
      flags.scheduler_names.push_back(value);
      continue;
    }
    *it->second = value;
  }
  return std::nullopt;
}

// The defaults, then --config, then the flags that override it; an exit code when serve stops
// here (an error, or --print-config).
std::optional<int> loadConfig(const ServeFlags& flags, config::ServeConfig& cfg) {
  if (flags.config) {
    Result<config::ServeConfig> loaded = config::loadServeConfig(*flags.config);
    if (!loaded.isOk()) return usage(loaded.status().message());
    cfg = loaded.value();
  }
  if (flags.listen) cfg.listen = *flags.listen;
  if (flags.log_level) cfg.log_level = *flags.log_level;
  if (!flags.scheduler_names.empty()) cfg.scheduler_names = flags.scheduler_names;
  if (flags.narrow_to) {
    Result<bool> narrow = config::parseNarrowTo(*flags.narrow_to);
    if (!narrow.isOk()) return usage("--narrow-to " + narrow.status().message());
    cfg.narrow_to_best = narrow.value();
  }
  if (flags.per_node_metrics) {
    Result<adapters::PerNodeSeries::Mode> mode = config::parsePerNodeSeries(*flags.per_node_metrics);
    if (!mode.isOk()) return usage("--per-node-metrics " + mode.status().message());
    cfg.per_node_series.mode = mode.value();
  }
  if (flags.print_config) {
    std::cout << config::formatServeConfig(cfg);
    return 0;
  }
  return std::nullopt;
}

// The log level, where serve listens, and with what certificate.
struct Listeners {
  adapters::LogLevel level = adapters::LogLevel::kInfo;
  std::pair<std::string, int> address;
  std::optional<std::pair<std::string, int>> metrics_address;
  std::optional<http::TlsFiles> tls;
};

std::optional<int> resolveListeners(const ServeFlags& flags, const config::ServeConfig& cfg, Listeners& out) {
  if (!adapters::parseLogLevel(cfg.log_level, &out.level)) {
    return usage("--log-level \"" + cfg.log_level + "\" must be debug, info, warn or error");
  }
  Result<std::pair<std::string, int>> address = http::parseListenAddress(cfg.listen);
  if (!address.isOk()) return usage(address.status().message());
  out.address = address.value();
  if (flags.metrics_listen) {
    Result<std::pair<std::string, int>> a =
        http::parseListenAddress(*flags.metrics_listen, "--metrics-listen");
    if (!a.isOk()) return usage(a.status().message());
    if (a.value() == out.address) {
      return usage("--metrics-listen " + *flags.metrics_listen +
                   " is the --listen address; choose another port");
    }
    out.metrics_address = a.value();
  }
  if (flags.tls_cert || flags.tls_key || flags.client_ca) {
    if (!flags.tls_cert || !flags.tls_key) {
      return usage("HTTPS needs both --tls-cert and --tls-key" +
                   std::string(flags.client_ca ? " (--client-ca alone is not enough)" : ""));
    }
    out.tls = http::TlsFiles{*flags.tls_cert, *flags.tls_key, flags.client_ca.value_or("")};
  }
  return std::nullopt;
}

// The Kubernetes API, when serve watches a cluster.
struct KubeAccess {
  std::optional<kube::ClusterEndpoint> endpoint;
  std::vector<std::string> warnings;  // about the connection's security, logged once the logger is up
  std::optional<kube::LeaseRef> leader_lease;
  std::unique_ptr<kube::ApiClient> api;
};

// Where the cluster comes from: --cluster (standalone), --kubeconfig, or the pod's service
// account when running in a cluster.
std::optional<int> resolveKube(const ServeFlags& flags, KubeAccess& out) {
  if (flags.cluster && flags.kubeconfig) {
    return usage("--cluster (standalone) and --kubeconfig (watch the cluster) exclude each other");
  }
  if (flags.kubeconfig) {
    Result<kube::ClusterEndpoint> ep =
        kube::loadKubeconfig(*flags.kubeconfig, flags.kube_context.value_or(""));
    if (!ep.isOk()) return usage(ep.status().message());
    out.endpoint = ep.value();
  } else if (flags.kube_context) {
    return usage("--kube-context needs --kubeconfig");
  } else if (!flags.cluster) {
    if (std::optional<kube::InClusterEnv> env = kube::detectInCluster()) {
      Result<kube::ClusterEndpoint> ep = kube::inClusterEndpoint(*env);
      if (!ep.isOk()) return usage(ep.status().message());
      out.endpoint = ep.value();
    }
  }
  if (out.endpoint) {
    Result<std::vector<std::string>> checked =
        kube::checkEndpointSecurity(*out.endpoint, flags.allow_insecure_api_server);
    if (!checked.isOk()) return usage(checked.status().message());
    out.warnings = checked.value();
  } else if (flags.allow_insecure_api_server) {
    return usage("--allow-insecure-api-server needs the Kubernetes API (--kubeconfig, or in a pod)");
  }
  if (flags.leader_lease) {
    if (!out.endpoint) return usage("--leader-lease needs the Kubernetes API (--kubeconfig, or in a pod)");
    Result<kube::LeaseRef> lease = kube::parseLeaseRef(*flags.leader_lease);
    if (!lease.isOk()) return usage("--leader-lease " + lease.status().message());
    out.leader_lease = lease.value();
  }
  if (out.endpoint) {
    kube::ApiClientOptions api_options;
    api_options.user_agent = std::string("troupe/") + TROUPE_VERSION;
    Result<std::unique_ptr<kube::ApiClient>> client = kube::ApiClient::create(*out.endpoint, api_options);
    if (!client.isOk()) return usage(client.status().message());
    out.api = std::move(client).value();
  }
  return std::nullopt;
}

// The core's configuration from the file's sections. Request bodies change node facts only
// when nothing else provides them (`learn`: neither --cluster nor the API).
Result<sched::SchedulerConfig> schedulerConfig(const config::ServeConfig& cfg, bool learn) {
  sched::SchedulerConfig sc;
  sc.learning = cfg.learned_nodes;
  sc.learning.enabled = learn;
  Result<sched::PolicyPtr> policy = sched::builtinPolicies().create(cfg.policy);
  if (!policy.isOk()) return invalidArgument("policy.name: " + policy.status().message());
  sc.policy = std::move(policy).value();
  sc.narrow_to_best = cfg.narrow_to_best;
  sc.topology_levels = cfg.topology_levels;
  sc.gang = cfg.gang;
  sc.reclaim = cfg.queues.reclaim;
  return sc;
}

// The kube adapter's options from the file's sections and the flags.
kube::KubeOptions kubeOptions(const config::ServeConfig& cfg,
                              const std::optional<kube::LeaseRef>& leader_lease,
                              const adapters::InternalErrors& internal_errors) {
  kube::KubeOptions o;
  o.internal_errors = internal_errors;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) o.events.instance = host;
  o.binder.scheduler_names = cfg.scheduler_names;
  o.binder.workers = cfg.bind_workers;
  o.dra = cfg.dra;  // one struct (adapters/common/dra_options.h)
  o.queues.default_queue = cfg.queues.default_queue;
  o.queues.leader_lease = leader_lease;
  o.defrag = cfg.defrag;  // one struct (adapters/common/defrag_options.h)
  return o;
}

// Blocks SIGINT and SIGTERM before any thread starts, so only sigwait sees them.
sigset_t blockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// Serves until SIGINT or SIGTERM: the HTTP servers, the core's ticker and, with the API, the
// kube runtime.
int serve(const ServeFlags& flags, const config::ServeConfig& cfg, const Listeners& listen, KubeAccess& kube,
          sched::Scheduler& scheduler, adapters::Logger& logger) {
  const sigset_t stop_signals = blockStopSignals();
  metrics::Metrics metrics(TROUPE_VERSION, cfg.per_node_series);
  // Exceptions caught on Troupe's own threads (and by the HTTP handlers) are counted here.
  const adapters::InternalErrors internal_errors(
      [&metrics](const std::string& where) { metrics.internalError(where); });
  http::HandlerOptions options;
  options.max_body_bytes = cfg.max_body_bytes;
  options.record_dir = flags.record_dir.value_or("");
  options.internal_errors = internal_errors;
  http::ExtenderHandler handler(options, scheduler, metrics, logger);
  std::unique_ptr<kube::KubeRuntime> cluster;
  if (kube.api) {
    cluster = std::make_unique<kube::KubeRuntime>(
        *kube.api, scheduler, logger, kubeOptions(cfg, kube.leader_lease, internal_errors), &metrics);
    handler.setReady(false);  // until the first full sync of nodes and pods
    handler.setBinder(&cluster->binder());
    handler.setPodGroups(cluster->podGroupLookup(),
                         cluster->nativePodGroupLookup());  // read before the core's filter
    handler.setClaimGpus(
        [sync = &cluster->sync()](const sched::PodFacts& pod) { return sync->claimGpus(pod); });
  }
  http::ServerOptions server_options;
  server_options.limits = serverLimits(cfg.limits);
  server_options.limits.max_connections =
      fitOpenFiles(cfg.limits.max_connections, listen.metrics_address ? 2 : 1, logger);
  server_options.tls = listen.tls;
  server_options.events = metrics.connectionEvents("verbs");
  http::ExtenderServer server(listen.address.first, listen.address.second, handler, logger, server_options);
  if (Status s = server.start(); !s.isOk()) {
    logger.error("cannot start", {{"error", s.message()}});
    return 1;
  }
  std::unique_ptr<http::ExtenderServer> metrics_server;
  if (listen.metrics_address) {
    http::ServerOptions probes;
    probes.limits = server_options.limits;
    probes.events = metrics.connectionEvents("metrics");
    probes.endpoints = http::Endpoints::kProbesOnly;
    probes.flag = "--metrics-listen";
    metrics_server = std::make_unique<http::ExtenderServer>(
        listen.metrics_address->first, listen.metrics_address->second, handler, logger, probes);
    if (Status s = metrics_server->start(); !s.isOk()) {
      logger.error("cannot start", {{"error", s.message()}});
      return 1;
    }
  }
  // Gang barriers and abandoned plans expire on this clock, not on request traffic.
  std::atomic<bool> stopping{false};
  std::thread ticker([&] {
    for (unsigned n = 0; !stopping.load(); ++n) {
      adapters::guarded(logger, internal_errors, adapters::kWhereTicker, "scheduler tick", [&] {
        scheduler.tick();
        if (n % 10 == 0) scheduler.expireLearnedNodes();  // learn mode: also while no request comes
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const std::string mode = kube.endpoint   ? "kubernetes: " + kube.endpoint->source
                           : flags.cluster ? "standalone (--cluster)"
                                           : "learn nodes from requests";
  logger.info("serving", {{"url", server.url()},
                          {"metrics_url", metrics_server ? metrics_server->url() : server.url()},
                          {"nodes", std::to_string(scheduler.nodeCount())},
                          {"policy", cfg.policy.name},
                          {"narrowTo", cfg.narrow_to_best ? "best" : "all"},
                          {"perNodeMetrics", cfg.per_node_series.modeName()},
                          {"mode", mode},
                          {"schedulerNames", kube.endpoint ? schedulerList(cfg.scheduler_names) : "-"},
                          {"queues", std::to_string(cfg.queues.definitions.size())},
                          {"leaderLease", flags.leader_lease.value_or("-")}});
  if (cluster) cluster->start([&handler] { handler.setReady(true); });
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  logger.info("stopping", {{"signal", std::to_string(signal_number)}});
  handler.setReady(false);  // probes see the shutdown while the verbs drain
  // The extender first: its drain lets in-flight binds finish; the probes last.
  server.stop();
  if (metrics_server) metrics_server->stop();
  if (cluster) cluster->stop();
  stopping.store(true);
  ticker.join();
  return 0;
}

}  // namespace

int serveCommand(const std::vector<std::string>& args) {
  limitMallocArenas();  // before any thread allocates
  ServeFlags flags;
  if (std::optional<int> exit = parseFlags(args, flags)) return *exit;
  config::ServeConfig cfg;
  if (std::optional<int> exit = loadConfig(flags, cfg)) return *exit;
  Listeners listen;
  if (std::optional<int> exit = resolveListeners(flags, cfg, listen)) return *exit;
  KubeAccess kube;
  if (std::optional<int> exit = resolveKube(flags, kube)) return *exit;

  adapters::Logger logger(std::cerr, listen.level);
  for (const std::string& w : kube.warnings) logger.warn("insecure API server connection", {{"warning", w}});
  Result<sched::SchedulerConfig> sched_config = schedulerConfig(cfg, !flags.cluster && !kube.endpoint);
  if (!sched_config.isOk()) return usage(sched_config.status().message());
  sched::Scheduler scheduler(std::move(sched_config).value());
  // The file's queues, in every mode (checked when the file was read); in Kubernetes mode the
  // Queue objects replace them once listed.
  scheduler.setQueues(sched::QueueTree::build(cfg.queues.definitions, cfg.queues.default_queue));
  if (flags.cluster) {
    Result<std::vector<model::NodeFacts>> nodes = config::loadCluster(*flags.cluster);
    if (!nodes.isOk()) return usage(nodes.status().message());
    for (const model::NodeFacts& n : nodes.value()) {
      if (Status s = scheduler.upsertNode(n); !s.isOk()) return usage(*flags.cluster + ": " + s.message());
    }
  }
  return serve(flags, cfg, listen, kube, scheduler, logger);
}

}  // namespace troupe::app
