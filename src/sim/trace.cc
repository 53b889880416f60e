#include "troupe/sim/trace.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

namespace troupe::sim {
namespace {

std::vector<std::string_view> splitLine(std::string_view line) {
  std::vector<std::string_view> cells;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    cells.push_back(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return cells;
}

// Rows of a CSV file with a header; `required` columns must be present.
class CsvReader {
 public:
  CsvReader(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  Status readHeader(const std::vector<std::string>& required) {
    std::string_view line;
    if (!nextLine(&line)) return invalidArgument(file_ + ": the file is empty; expected a CSV header line");
    header_ = splitLine(line);
    for (size_t i = 0; i < header_.size(); ++i) columns_[std::string(header_[i])] = i;
    for (const std::string& name : required) {
      if (!columns_.count(name)) {
        std::string have;
        for (auto h : header_) have += (have.empty() ? "" : ",") + std::string(h);
        return invalidArgument(file_ + ":1: the header lacks column \"" + name + "\" (header: " + have + ")");
      }
    }
    return Status::ok();
  }

  // False at the end. Blank lines are skipped.
  bool next() {
    std::string_view line;
    while (nextLine(&line)) {
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      cells_ = splitLine(line);
      return true;
    }
    return false;
  }

  Status checkWidth() const {
    if (cells_.size() != header_.size()) {
      return invalidArgument(where() + ": has " + std::to_string(cells_.size()) +
                             " cells, but the header has " + std::to_string(header_.size()) +
                             "; every row needs one cell per column");
    }
    return Status::ok();
  }

  std::string_view text(const std::string& column) const { return cells_[columns_.at(column)]; }
  bool has(const std::string& column) const { return columns_.count(column) > 0; }

  Result<int64_t> integer(const std::string& column, int64_t lo, int64_t hi) const {
    std::string_view cell = text(column);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
    if (ec != std::errc() || end != cell.data() + cell.size() || v < lo || v > hi) {
      return invalidArgument(cellRef(column) + ": \"" + std::string(cell) +
                             "\" must be a whole number from " + std::to_string(lo) + " to " +
                             std::to_string(hi));
    }
    return v;
  }

  std::string where() const { return file_ + ":" + std::to_string(line_no_); }
  // "file:line, column N (name)": where a cell's problem is.
  std::string cellRef(const std::string& column) const {
    return where() + ", column " + std::to_string(columns_.at(column) + 1) + " (" + column + ")";
  }

 private:
  bool nextLine(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    size_t nl = text_.find('\n', pos_);
    size_t end = nl == std::string_view::npos ? text_.size() : nl;
    *line = text_.substr(pos_, end - pos_);
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    pos_ = end + 1;
    ++line_no_;
    return true;
  }

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  int line_no_ = 0;
  std::vector<std::string_view> header_;
  std::vector<std::string_view> cells_;
  std::map<std::string, size_t> columns_;
};

constexpr int64_t kBig = int64_t{1} << 40;

}  // namespace

Result<std::vector<TraceNode>> parseNodeCsv(std::string_view text, const std::string& file) {
  CsvReader csv(text, file);
  if (Status s = csv.readHeader({"sn", "cpu_milli", "memory_mib", "gpu", "model"}); !s.isOk()) return s;
  std::vector<TraceNode> nodes;
  std::set<std::string> names;
  while (csv.next()) {
    if (Status s = csv.checkWidth(); !s.isOk()) return s;
    TraceNode n;
    n.name = std::string(csv.text("sn"));
    if (n.name.empty()) return invalidArgument(csv.cellRef("sn") + ": the node name is empty");
    if (!names.insert(n.name).second)
      return invalidArgument(csv.cellRef("sn") + ": node \"" + n.name + "\" is listed twice");
    auto cpu = csv.integer("cpu_milli", 1, kBig);
    if (!cpu.isOk()) return cpu.status();
    auto mem = csv.integer("memory_mib", 0, kBig);
    if (!mem.isOk()) return mem.status();
    auto gpus = csv.integer("gpu", 0, 64);
    if (!gpus.isOk()) return gpus.status();
    n.cpu_milli = cpu.value();
    n.memory_mib = mem.value();
    n.gpus = static_cast<int>(gpus.value());
    n.model = std::string(csv.text("model"));
    if (n.gpus > 0 && n.model.empty()) {
      return invalidArgument(csv.cellRef("model") + ": node \"" + n.name + "\" has " +
                             std::to_string(n.gpus) + " GPUs but no model; name the GPU type, e.g. \"T4\"");
    }
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return invalidArgument(file + ": no node rows after the header");
  return nodes;
}

Result<std::vector<TracePod>> parsePodCsv(std::string_view text, const std::string& file) {
  CsvReader csv(text, file);
  if (Status s = csv.readHeader({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}); !s.isOk())
    return s;
  std::vector<TracePod> pods;
  std::set<std::string> names;
  while (csv.next()) {
    if (Status s = csv.checkWidth(); !s.isOk()) return s;
    TracePod p;
    p.name = std::string(csv.text("name"));
    if (p.name.empty()) return invalidArgument(csv.cellRef("name") + ": the pod name is empty");
    if (!names.insert(p.name).second)
      return invalidArgument(csv.cellRef("name") + ": pod \"" + p.name + "\" is listed twice");
    auto cpu = csv.integer("cpu_milli", 0, kBig);
    if (!cpu.isOk()) return cpu.status();
    auto mem = csv.integer("memory_mib", 0, kBig);
    if (!mem.isOk()) return mem.status();
    auto gpus = csv.integer("num_gpu", 0, 64);
    if (!gpus.isOk()) return gpus.status();
    auto milli = csv.integer("gpu_milli", 0, kBig);
    if (!milli.isOk()) return milli.status();
    p.cpu_milli = cpu.value();
    p.memory_mib = mem.value();
    p.num_gpu = static_cast<int>(gpus.value());
    p.gpu_milli = std::min<int64_t>(milli.value(), 1000);
    if (p.num_gpu == 0) {
      p.gpu_milli = 0;
    } else {
      if (p.gpu_milli == 0) {
        return invalidArgument(csv.cellRef("gpu_milli") + ": a pod with num_gpu " +
                               std::to_string(p.num_gpu) + " needs gpu_milli from 1 to 1000 (per GPU)");
      }
      if (csv.has("gpu_spec")) p.gpu_spec = std::string(csv.text("gpu_spec"));
    }
    for (auto [column, field] :
         {std::pair{"creation_time", &p.creation_time}, std::pair{"deletion_time", &p.deletion_time},
          std::pair{"scheduled_time", &p.scheduled_time}}) {
      if (!csv.has(column) || csv.text(column).empty()) continue;
      auto seconds = csv.integer(column, 0, kBig);
      if (!seconds.isOk()) return seconds.status();
      *field = seconds.value();
    }
    pods.push_back(std::move(p));
  }
  if (pods.empty()) return invalidArgument(file + ": no pod rows after the header");
  return pods;
}

}  // namespace troupe::sim
