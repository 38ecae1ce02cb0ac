#include "varuna/planning/profile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"

namespace varuna {
namespace {

using json::Value;

constexpr char kProfileFile[] = "profile.json";

std::string SegmentFile(int k) { return absl::StrCat("segment_", k, ".json"); }

bool ValidTime(double ms) { return std::isfinite(ms) && ms >= 0; }

absl::Status ValidateCurve(const CostCurve& curve, const std::string& name) {
  for (size_t j = 0; j < curve.points.size(); ++j) {
    const auto& [bytes, ms] = curve.points[j];
    if (bytes < 0 || !ValidTime(ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " point ", j, " = (", bytes, " bytes, ", ms,
                       " ms) is negative or not finite: profile again"));
    }
    if (j > 0 && curve.points[j - 1].first >= bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " is not sorted by bytes: point ", j, " (", bytes, " bytes) follows ",
          curve.points[j - 1].first, " bytes; give each message size once, ascending"));
    }
  }
  return absl::OkStatus();
}

// ---- JSON encoding ----------------------------------------------------------------------

Value CurveJson(const CostCurve& curve) {
  Value points = Value::array();
  for (const auto& [bytes, ms] : curve.points) points.push_back(Value::array({bytes, ms}));
  return points;
}

Value ProfileJson(const Profile& p) {
  Value out = Value::object();
  out["model"] = p.model;
  out["device"] = p.device;
  out["dtype"] = p.dtype;
  out["num_segments"] = p.num_segments;
  if (p.cache_bytes > 0) out["cache_bytes"] = p.cache_bytes;
  out["send_within_node"] = CurveJson(p.send_within_node);
  out["send_across_nodes"] = CurveJson(p.send_across_nodes);
  Value allreduce = Value::object();
  for (const auto& [ring, curve] : p.allreduce) allreduce[absl::StrCat(ring)] = CurveJson(curve);
  out["allreduce"] = std::move(allreduce);
  // Only where measured, so that a profile read from older files writes back the same files.
  if (!p.joins.empty()) {
    Value joins = Value::array();
    for (const auto& [b, join] : p.joins) {
      Value entry = Value::object();
      entry["micro_batch_size"] = b;
      entry["forward_ms"] = join.forward_ms;
      entry["recompute_ms"] = join.recompute_ms;
      entry["backward_ms"] = join.backward_ms;
      joins.push_back(std::move(entry));
    }
    out["segment_joins"] = std::move(joins);
  }
  return out;
}

Value SegmentJson(const Profile& p, int k) {
  Value out = Value::object();
  out["segment"] = k;
  out["parameter_count"] = p.statics[k].parameter_count;
  out["state_bytes"] = p.statics[k].state_bytes;
  out["optimizer_ms"] = p.statics[k].optimizer_ms;
  out["gradient_ms"] = p.statics[k].gradient_ms;
  out["bucket_ms"] = p.statics[k].bucket_ms;
  if (p.statics[k].step_memory_bytes != 0) {
    out["step_memory_bytes"] = p.statics[k].step_memory_bytes;
  }
  Value sizes = Value::array();
  for (const auto& [b, m] : p.compute[k]) {
    Value entry = Value::object();
    entry["micro_batch_size"] = b;
    entry["forward_ms"] = m.forward_ms;
    entry["backward_ms"] = m.backward_ms;
    entry["recompute_ms"] = m.recompute_ms;
    entry["activation_memory_bytes"] = m.activation_memory_bytes;
    entry["output_bytes"] = m.output_bytes;
    entry["stash_bytes"] = m.stash_bytes;
    if (m.graph_memory_bytes > 0) entry["graph_memory_bytes"] = m.graph_memory_bytes;
    // Only where known, so that a profile read from older files writes back the same files.
    if (m.timed_passes > 0) {
      entry["timed_passes"] = m.timed_passes;
      entry["forward_spread_ms"] = m.forward_spread_ms;
      entry["backward_spread_ms"] = m.backward_spread_ms;
      entry["recompute_spread_ms"] = m.recompute_spread_ms;
    }
    for (const auto& [name, ms] : {std::make_pair("forward_cold_ms", m.forward_cold_ms),
                                   std::make_pair("backward_cold_ms", m.backward_cold_ms),
                                   std::make_pair("recompute_cold_ms", m.recompute_cold_ms)}) {
      if (ms > 0) entry[name] = ms;
    }
    sizes.push_back(std::move(entry));
  }
  out["micro_batches"] = std::move(sizes);
  return out;
}

// ---- JSON decoding: every error names the file and the field ------------------------------

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  absl::Status Error(const std::string& where, const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", where, where.empty() ? "" : " ",
                                                   problem,
                                                   ": fix or delete the file and profile again"));
  }

  // `type` is a json::TypeName ("int", "string", "array", "object"), or "double" for any
  // number.
  absl::StatusOr<const Value*> Field(const Value& object, const std::string& key,
                                     absl::string_view type, const std::string& where) const {
    const Value* v = json::Find(object, key);
    if (v == nullptr) return Error(where + "\"" + key + "\"", "is missing");
    const bool ok = type == "double" ? v->is_number() : type == json::TypeName(*v);
    if (!ok) {
      return Error(where + "\"" + key + "\"",
                   absl::StrCat("is a ", json::TypeName(*v), ", expected a ", type));
    }
    return v;
  }

  absl::Status Int(const Value& object, const std::string& key, const std::string& where,
                   int64_t& out) const {
    absl::StatusOr<const Value*> v = Field(object, key, "int", where);
    if (!v.ok()) return v.status();
    const std::optional<int64_t> n = json::AsInt64(**v);
    if (!n.has_value()) {
      return Error(where + "\"" + key + "\"",
                   absl::StrCat("= ", json::Serialize(**v), " is too large"));
    }
    out = *n;
    if (out < 0) return Error(where + "\"" + key + "\"", absl::StrCat("= ", out, " is negative"));
    return absl::OkStatus();
  }

  absl::Status Ms(const Value& object, const std::string& key, const std::string& where,
                  double& out) const {
    absl::StatusOr<const Value*> v = Field(object, key, "double", where);
    if (!v.ok()) return v.status();
    out = (*v)->get<double>();
    if (!ValidTime(out)) {
      return Error(where + "\"" + key + "\"", absl::StrCat("= ", out, " ms is negative"));
    }
    return absl::OkStatus();
  }

  // A time that may be negative (a difference of times), but finite.
  absl::Status SignedMs(const Value& object, const std::string& key, const std::string& where,
                        double& out) const {
    absl::StatusOr<const Value*> v = Field(object, key, "double", where);
    if (!v.ok()) return v.status();
    out = (*v)->get<double>();
    if (!std::isfinite(out)) {
      return Error(where + "\"" + key + "\"", absl::StrCat("= ", out, " ms is not finite"));
    }
    return absl::OkStatus();
  }

  absl::Status String(const Value& object, const std::string& key, std::string& out) const {
    absl::StatusOr<const Value*> v = Field(object, key, "string", "");
    if (!v.ok()) return v.status();
    out = (*v)->get<std::string>();
    return absl::OkStatus();
  }

  absl::Status Curve(const Value& value, const std::string& where, CostCurve& out) const {
    if (!value.is_array()) return Error(where, "is not an array of [bytes, ms] pairs");
    for (size_t j = 0; j < value.size(); ++j) {
      const Value& point = value[j];
      const std::optional<int64_t> bytes =
          point.is_array() && point.size() == 2 ? json::AsInt64(point[0]) : std::nullopt;
      if (!bytes.has_value() || !point[1].is_number()) {
        return Error(absl::StrCat(where, "[", j, "]"), "is not a [bytes, ms] pair");
      }
      out.points.emplace_back(*bytes, point[1].get<double>());
    }
    if (absl::Status s = ValidateCurve(out, where); !s.ok()) {
      return Error("", std::string(s.message()));
    }
    return absl::OkStatus();
  }

 private:
  std::string file_;
};

absl::StatusOr<Value> ParseFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Value> value = json::Parse(*text);
  if (!value.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not valid JSON (",
                                                   value.status().message(),
                                                   "): fix or delete the file and profile again"));
  }
  if (!value->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds a JSON ", json::TypeName(*value),
                     ", expected an object: fix or delete the file and profile again"));
  }
  return value;
}

absl::Status ReadSegment(const Value& root, const std::string& path, int k, Profile& p) {
  const Reader r(path);
  int64_t segment = 0;
  if (absl::Status s = r.Int(root, "segment", "", segment); !s.ok()) return s;
  if (segment != k) {
    return r.Error("\"segment\"", absl::StrCat("= ", segment, " but the file is for segment ", k));
  }
  if (absl::Status s = r.Int(root, "parameter_count", "", p.statics[k].parameter_count); !s.ok()) {
    return s;
  }
  if (absl::Status s = r.Int(root, "state_bytes", "", p.statics[k].state_bytes); !s.ok()) return s;
  // Optional: profiles written before these were measured lack them (0).
  for (const auto& [name, field] : {std::make_pair("optimizer_ms", &SegmentStatic::optimizer_ms),
                                    std::make_pair("gradient_ms", &SegmentStatic::gradient_ms),
                                    std::make_pair("bucket_ms", &SegmentStatic::bucket_ms)}) {
    if (json::Find(root, name) == nullptr) continue;
    if (absl::Status s = r.Ms(root, name, "", p.statics[k].*field); !s.ok()) return s;
  }
  if (json::Find(root, "step_memory_bytes") != nullptr) {
    if (absl::Status s = r.Int(root, "step_memory_bytes", "", p.statics[k].step_memory_bytes);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<const Value*> sizes = r.Field(root, "micro_batches", "array", "");
  if (!sizes.ok()) return sizes.status();
  for (size_t j = 0; j < (*sizes)->size(); ++j) {
    const Value& entry = (**sizes)[j];
    const std::string where = absl::StrCat("micro_batches[", j, "].");
    if (!entry.is_object()) return r.Error(where, "is not an object");
    int64_t b = 0;
    SegmentMeasurement m;
    for (absl::Status s :
         {r.Int(entry, "micro_batch_size", where, b),
          r.Ms(entry, "forward_ms", where, m.forward_ms),
          r.Ms(entry, "backward_ms", where, m.backward_ms),
          r.Ms(entry, "recompute_ms", where, m.recompute_ms),
          r.Int(entry, "activation_memory_bytes", where, m.activation_memory_bytes),
          r.Int(entry, "output_bytes", where, m.output_bytes),
          r.Int(entry, "stash_bytes", where, m.stash_bytes)}) {
      if (!s.ok()) return s;
    }
    // Optional: the graph's share of the memory (absent in profiles written before 2026-11-27).
    if (json::Find(entry, "graph_memory_bytes") != nullptr) {
      if (absl::Status s = r.Int(entry, "graph_memory_bytes", where, m.graph_memory_bytes);
          !s.ok()) {
        return s;
      }
    }
    // Optional: how the times were taken (absent in profiles written before they were kept).
    if (json::Find(entry, "timed_passes") != nullptr) {
      int64_t passes = 0;
      if (absl::Status s = r.Int(entry, "timed_passes", where, passes); !s.ok()) return s;
      if (passes < 0 || passes > INT32_MAX) {
        return r.Error(where + "\"timed_passes\"", absl::StrCat("= ", passes, " is not >= 0"));
      }
      m.timed_passes = static_cast<int>(passes);
    }
    for (const auto& [name, field] :
         {std::make_pair("forward_spread_ms", &SegmentMeasurement::forward_spread_ms),
          std::make_pair("backward_spread_ms", &SegmentMeasurement::backward_spread_ms),
          std::make_pair("recompute_spread_ms", &SegmentMeasurement::recompute_spread_ms),
          std::make_pair("forward_cold_ms", &SegmentMeasurement::forward_cold_ms),
          std::make_pair("backward_cold_ms", &SegmentMeasurement::backward_cold_ms),
          std::make_pair("recompute_cold_ms", &SegmentMeasurement::recompute_cold_ms)}) {
      if (json::Find(entry, name) == nullptr) continue;
      if (absl::Status s = r.Ms(entry, name, where, m.*field); !s.ok()) return s;
    }
    if (b < 1 || b > INT32_MAX) {
      return r.Error(where + "\"micro_batch_size\"", absl::StrCat("= ", b, " is not >= 1"));
    }
    if (!p.compute[k].emplace(static_cast<int>(b), m).second) {
      return r.Error(where + "\"micro_batch_size\"", absl::StrCat("= ", b, " appears twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, absl::StrCat("cannot create profile directory ", prefix));
    }
  }
  return absl::OkStatus();
}

// Whether segment k has anything to store: measurements or non-zero statics.
bool HasSegmentData(const Profile& p, int k) {
  const SegmentStatic& statics = p.statics[k];
  return !p.compute[k].empty() || statics.parameter_count != 0 || statics.state_bytes != 0 ||
         statics.optimizer_ms != 0 || statics.gradient_ms != 0 || statics.bucket_ms != 0 ||
         statics.step_memory_bytes != 0;
}

void MergeCurve(const CostCurve& update, CostCurve& base) {
  std::map<int64_t, double> merged(base.points.begin(), base.points.end());
  for (const auto& [bytes, ms] : update.points) merged[bytes] = ms;
  base.points.assign(merged.begin(), merged.end());
}

}  // namespace

double CostCurve::Milliseconds(int64_t bytes) const {
  if (bytes <= 0 || points.empty()) return 0;
  if (points.size() == 1) return points[0].second;
  // The segment [lo, lo + 1] that holds `bytes`, or the first / last one to extrapolate.
  size_t lo = 0;
  while (lo + 2 < points.size() && points[lo + 1].first < bytes) ++lo;
  const auto& [x0, y0] = points[lo];
  const auto& [x1, y1] = points[lo + 1];
  const double ms =
      y0 + (y1 - y0) * (static_cast<double>(bytes - x0) / static_cast<double>(x1 - x0));
  return std::max(ms, 0.0);
}

std::vector<int> Profile::CommonMicroBatchSizes() const {
  std::vector<int> common;
  if (compute.empty()) return common;
  for (const auto& [b, unused] : compute[0]) {
    bool everywhere = true;
    for (const auto& segment : compute) everywhere = everywhere && segment.count(b) > 0;
    if (everywhere) common.push_back(b);
  }
  return common;
}

absl::Status ValidateProfile(const Profile& p) {
  auto invalid = [](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat("profile: ", message));
  };
  if (p.num_segments <= 0) {
    return invalid(absl::StrCat("num_segments = ", p.num_segments,
                                " must be > 0 (one per cut-point segment of the model)"));
  }
  if (p.dtype != "float32" && p.dtype != "float16" && p.dtype != "bfloat16") {
    return invalid(
        absl::StrCat("dtype = \"", p.dtype, "\" is not one of float32, float16, bfloat16"));
  }
  if (p.cache_bytes < 0) {
    return invalid(absl::StrCat("cache_bytes = ", p.cache_bytes,
                                " must be >= 0 (the device's last-level cache; 0 if unknown)"));
  }
  if (static_cast<int>(p.statics.size()) != p.num_segments ||
      static_cast<int>(p.compute.size()) != p.num_segments) {
    return invalid(absl::StrCat("statics has ", p.statics.size(), " and compute ", p.compute.size(),
                                " entries for num_segments = ", p.num_segments,
                                ": give one per segment"));
  }
  for (int k = 0; k < p.num_segments; ++k) {
    const std::string segment = absl::StrCat("segment ", k);
    if (p.statics[k].parameter_count < 0 || p.statics[k].state_bytes < 0 ||
        p.statics[k].step_memory_bytes < 0) {
      return invalid(segment + ": parameter_count, state_bytes and step_memory_bytes must be >= 0");
    }
    for (const auto& [name, value] : {std::make_pair("optimizer_ms", p.statics[k].optimizer_ms),
                                      std::make_pair("gradient_ms", p.statics[k].gradient_ms),
                                      std::make_pair("bucket_ms", p.statics[k].bucket_ms)}) {
      if (!ValidTime(value)) {
        return invalid(absl::StrCat(segment, ": ", name, " = ", value, " must be finite and >= 0"));
      }
    }
    for (const auto& [b, m] : p.compute[k]) {
      const std::string where = absl::StrCat(segment, " at micro-batch size ", b);
      if (b < 1) return invalid(where + ": micro-batch sizes must be >= 1");
      if (!ValidTime(m.forward_ms) || !ValidTime(m.backward_ms) || !ValidTime(m.recompute_ms)) {
        return invalid(absl::StrCat(where, ": times (forward ", m.forward_ms, ", backward ",
                                    m.backward_ms, ", recompute ", m.recompute_ms,
                                    " ms) must be finite and >= 0"));
      }
      if (m.timed_passes < 0 || !ValidTime(m.forward_spread_ms) ||
          !ValidTime(m.backward_spread_ms) || !ValidTime(m.recompute_spread_ms)) {
        return invalid(absl::StrCat(where, ": timed_passes (", m.timed_passes,
                                    ") must be >= 0 and the spreads finite and >= 0"));
      }
      if (!ValidTime(m.forward_cold_ms) || !ValidTime(m.backward_cold_ms) ||
          !ValidTime(m.recompute_cold_ms)) {
        return invalid(absl::StrCat(where, ": cold times (forward ", m.forward_cold_ms,
                                    ", backward ", m.backward_cold_ms, ", recompute ",
                                    m.recompute_cold_ms, " ms) must be finite and >= 0"));
      }
      if (m.activation_memory_bytes < 0 || m.output_bytes < 0 || m.stash_bytes < 0 ||
          m.graph_memory_bytes < 0) {
        return invalid(where + ": byte counts must be >= 0");
      }
      if (m.graph_memory_bytes > m.activation_memory_bytes) {
        return invalid(absl::StrCat(where, ": graph_memory_bytes (", m.graph_memory_bytes,
                                    ") is more than activation_memory_bytes (",
                                    m.activation_memory_bytes,
                                    "), the peak it is part of: the profile is corrupt; "
                                    "profile the model again"));
      }
    }
  }
  if (absl::Status s = ValidateCurve(p.send_within_node, "profile: send_within_node"); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateCurve(p.send_across_nodes, "profile: send_across_nodes"); !s.ok()) {
    return s;
  }
  for (const auto& [b, join] : p.joins) {
    if (b < 1)
      return invalid(absl::StrCat("segment join at micro-batch size ", b, ": sizes must be >= 1"));
    if (!std::isfinite(join.forward_ms) || !std::isfinite(join.recompute_ms) ||
        !std::isfinite(join.backward_ms)) {
      return invalid(absl::StrCat("segment join at micro-batch size ", b, ": times (forward ",
                                  join.forward_ms, ", recompute ", join.recompute_ms, ", backward ",
                                  join.backward_ms, " ms) must be finite"));
    }
  }
  for (const auto& [ring, curve] : p.allreduce) {
    if (ring < 2) return invalid(absl::StrCat("allreduce ring size ", ring, " must be >= 2"));
    if (absl::Status s = ValidateCurve(curve, absl::StrCat("profile: allreduce[", ring, "]"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteProfile(const Profile& profile, const std::string& dir) {
  if (absl::Status s = ValidateProfile(profile); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not writing the profile to ", dir, ": ", s.message()));
  }
  if (absl::Status s = MakeDirectories(dir); !s.ok()) return s;
  auto write = [&](const std::string& name, const Value& value) {
    const std::string path = dir + "/" + name;
    return WriteFileAtomically(path, path + ".tmp-", {json::Serialize(value, true), "\n"});
  };
  for (int k = 0; k < profile.num_segments; ++k) {
    if (!HasSegmentData(profile, k)) continue;
    if (absl::Status s = write(SegmentFile(k), SegmentJson(profile, k)); !s.ok()) return s;
  }
  // profile.json last: a reader that finds it finds the segments written with it.
  if (absl::Status s = write(kProfileFile, ProfileJson(profile)); !s.ok()) return s;
  return SyncDirectory(dir);
}

absl::StatusOr<Profile> ReadProfile(const std::string& dir) {
  const std::string path = dir + "/" + kProfileFile;
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat(
        "profile directory ", dir, " has no ", kProfileFile,
        ": run the trainer with --profiling to write a profile there, or point to another one"));
  }
  absl::StatusOr<Value> root = ParseFile(path);
  if (!root.ok()) return root.status();
  const Reader r(path);
  Profile p;
  for (auto [key, out] : {std::make_pair("model", &p.model), std::make_pair("device", &p.device),
                          std::make_pair("dtype", &p.dtype)}) {
    if (absl::Status s = r.String(*root, key, *out); !s.ok()) return s;
  }
  int64_t num_segments = 0;
  if (absl::Status s = r.Int(*root, "num_segments", "", num_segments); !s.ok()) return s;
  if (num_segments < 1 || num_segments > 1000000) {
    return r.Error("\"num_segments\"", absl::StrCat("= ", num_segments, " is not >= 1"));
  }
  p.num_segments = static_cast<int>(num_segments);
  // Optional: profiles written before the cold times were measured lack it.
  if (json::Find(*root, "cache_bytes") != nullptr) {
    if (absl::Status s = r.Int(*root, "cache_bytes", "", p.cache_bytes); !s.ok()) return s;
  }
  for (auto [key, out] : {std::make_pair("send_within_node", &p.send_within_node),
                          std::make_pair("send_across_nodes", &p.send_across_nodes)}) {
    absl::StatusOr<const Value*> v = r.Field(*root, key, "array", "");
    if (!v.ok()) return v.status();
    if (absl::Status s = r.Curve(**v, key, *out); !s.ok()) return s;
  }
  absl::StatusOr<const Value*> allreduce = r.Field(*root, "allreduce", "object", "");
  if (!allreduce.ok()) return allreduce.status();
  for (const auto& [key, value] : (*allreduce)->items()) {
    int ring = 0;
    if (!absl::SimpleAtoi(key, &ring) || ring < 2) {
      return r.Error(absl::StrCat("\"allreduce\" key \"", key, "\""), "is not a ring size >= 2");
    }
    if (absl::Status s = r.Curve(value, absl::StrCat("allreduce[", key, "]"), p.allreduce[ring]);
        !s.ok()) {
      return s;
    }
  }
  // Optional: profiles written before the joins were measured lack them.
  if (json::Find(*root, "segment_joins") != nullptr) {
    absl::StatusOr<const Value*> joins = r.Field(*root, "segment_joins", "array", "");
    if (!joins.ok()) return joins.status();
    for (size_t j = 0; j < (*joins)->size(); ++j) {
      const Value& entry = (**joins)[j];
      const std::string where = absl::StrCat("segment_joins[", j, "].");
      if (!entry.is_object()) return r.Error(where, "is not an object");
      int64_t b = 0;
      SegmentJoin join;
      for (absl::Status s : {r.Int(entry, "micro_batch_size", where, b),
                             r.SignedMs(entry, "forward_ms", where, join.forward_ms),
                             r.SignedMs(entry, "recompute_ms", where, join.recompute_ms),
                             r.SignedMs(entry, "backward_ms", where, join.backward_ms)}) {
        if (!s.ok()) return s;
      }
      if (b < 1 || b > INT32_MAX) {
        return r.Error(where + "\"micro_batch_size\"", absl::StrCat("= ", b, " is not >= 1"));
      }
      if (!p.joins.emplace(static_cast<int>(b), join).second) {
        return r.Error(where + "\"micro_batch_size\"", absl::StrCat("= ", b, " appears twice"));
      }
    }
  }
  p.statics.resize(p.num_segments);
  p.compute.resize(p.num_segments);
  for (int k = 0; k < p.num_segments; ++k) {
    const std::string segment_path = dir + "/" + SegmentFile(k);
    if (::stat(segment_path.c_str(), &info) != 0 && errno == ENOENT) continue;
    absl::StatusOr<Value> segment = ParseFile(segment_path);
    if (!segment.ok()) return segment.status();
    if (absl::Status s = ReadSegment(*segment, segment_path, k, p); !s.ok()) return s;
  }
  if (absl::Status s = ValidateProfile(p); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": ", s.message()));
  }
  return p;
}

absl::Status MergeProfile(const Profile& update, Profile& base) {
  auto differ = [](const char* field, const std::string& a, const std::string& b) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot merge profiles of different ", field, ": \"", a, "\" (new) vs \"", b,
                     "\" (existing): profile into an empty directory, or with the same settings"));
  };
  if (update.model != base.model) return differ("models", update.model, base.model);
  if (update.device != base.device) return differ("devices", update.device, base.device);
  if (update.dtype != base.dtype) return differ("dtypes", update.dtype, base.dtype);
  if (update.num_segments != base.num_segments) {
    return differ("segment counts", absl::StrCat(update.num_segments),
                  absl::StrCat(base.num_segments));
  }
  for (const Profile* p : {&update, static_cast<const Profile*>(&base)}) {
    if (absl::Status s = ValidateProfile(*p); !s.ok()) return s;
  }
  for (int k = 0; k < base.num_segments; ++k) {
    if (HasSegmentData(update, k)) base.statics[k] = update.statics[k];
    for (const auto& [b, m] : update.compute[k]) base.compute[k][b] = m;
  }
  MergeCurve(update.send_within_node, base.send_within_node);
  MergeCurve(update.send_across_nodes, base.send_across_nodes);
  for (const auto& [ring, curve] : update.allreduce) MergeCurve(curve, base.allreduce[ring]);
  for (const auto& [b, join] : update.joins) base.joins[b] = join;
  if (update.cache_bytes > 0) base.cache_bytes = update.cache_bytes;
  return absl::OkStatus();
}

}  // namespace varuna
