#include "jit/PlanJson.h"
#include "runtime/Error.h"

#include "llvm/ADT/StringExtras.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include <optional>

namespace kiln::jit {
namespace {
using json = nlohmann::json;

json attrsToJson(const ops::AttrMap &attrs) {
  json o = json::object();
  for (const auto &[k, v] : attrs.all()) {
    if (auto *i = std::get_if<int64_t>(&v)) o[k] = {{"i", *i}};
    else if (auto *d = std::get_if<double>(&v)) o[k] = {{"f", *d}};
    else if (auto *s = std::get_if<std::string>(&v)) o[k] = {{"s", *s}};
    else o[k] = {{"l", std::get<std::vector<int64_t>>(v)}};
  }
  return o;
}

ops::AttrMap attrsFromJson(const json &o) {
  ops::AttrMap a;
  for (auto it = o.begin(); it != o.end(); ++it) {
    const json &v = it.value();
    if (v.contains("i")) a.set(it.key(), v["i"].get<int64_t>());
    else if (v.contains("f")) a.set(it.key(), v["f"].get<double>());
    else if (v.contains("s")) a.set(it.key(), v["s"].get<std::string>());
    else a.set(it.key(), v["l"].get<std::vector<int64_t>>());
  }
  return a;
}

const char *valueKindName(lowering::PlanValue::Kind k) {
  switch (k) {
  case lowering::PlanValue::kInput: return "input";
  case lowering::PlanValue::kWeight: return "weight";
  case lowering::PlanValue::kConstant: return "constant";
  case lowering::PlanValue::kIntermediate: return "intermediate";
  }
  return "?";
}

std::optional<lowering::PlanValue::Kind> valueKind(const std::string &name) {
  for (auto k : {lowering::PlanValue::kInput, lowering::PlanValue::kWeight, lowering::PlanValue::kConstant,
                 lowering::PlanValue::kIntermediate})
    if (name == valueKindName(k)) return k;
  return std::nullopt;
}

}  // namespace

std::string planToJson(const lowering::ExecPlan &plan) {
  json j;
  json vs = json::array();
  for (const lowering::PlanValue &v : plan.values) {
    std::string bytes;
    if (v.kind == lowering::PlanValue::kConstant && v.constant.valid())
      bytes.assign(static_cast<const char *>(v.constant.rawData()), v.constant.byteSize());
    vs.push_back({{"kind", valueKindName(v.kind)},
                  {"type", v.type.str()},
                  {"index", v.index},
                  {"constant", llvm::toHex(bytes, /*LowerCase=*/true)}});
  }
  json ss = json::array();
  for (const lowering::PlanStep &s : plan.steps)
    ss.push_back({{"kind", s.kind == lowering::PlanStep::kJit ? "jit" : "kernel"},
                  {"name", s.name},
                  {"inputs", s.inputs},
                  {"outputs", s.outputs},
                  {"target", s.target},
                  {"object", s.object},
                  {"symbol", s.symbol},
                  {"ops", s.ops},
                  {"fault_sites", s.faultSites},
                  {"scratch_bytes", s.scratchBytes},
                  {"strategy", s.strategy},
                  {"op", s.op},
                  {"kernel", s.kernel},
                  {"attrs", attrsToJson(s.attrs)},
                  {"location", s.location},
                  {"reason", s.reason},
                  {"flops", s.flops},
                  {"locations", s.locations}});
  j["values"] = vs;
  j["steps"] = ss;
  j["results"] = plan.results;
  j["summary"] = plan.summary;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // names from models may be any bytes
}

llvm::Expected<lowering::ExecPlan> planFromJson(llvm::StringRef text) {
  lowering::ExecPlan p;
  auto bad = [](const char *what) { return error(ErrorCode::kIO, "bad plan: %s", what); };
  try {
    json j = json::parse(text.str());
    for (const json &v : j.at("values")) {
      lowering::PlanValue val;
      auto kind = valueKind(v.at("kind").get<std::string>());
      if (!kind) return bad("unknown value kind");
      val.kind = *kind;
      auto t = parseTensorType(v.at("type").get<std::string>());
      if (!t) return t.takeError();
      val.type = *t;
      val.index = v.at("index").get<int>();
      std::string bytes = llvm::fromHex(v.at("constant").get<std::string>());
      if (val.kind == lowering::PlanValue::kConstant) {
        if (bytes.size() != val.type.byteSize()) return bad("constant size does not match its type");
        auto c = Tensor::allocate(val.type.dtype, val.type.shape, "a plan constant");
        if (!c) return c.takeError();
        if (!bytes.empty()) std::memcpy(c->rawData(), bytes.data(), bytes.size());
        val.constant = std::move(*c);
      }
      p.values.push_back(std::move(val));
    }
    for (const json &s : j.at("steps")) {
      lowering::PlanStep st;
      std::string kind = s.at("kind").get<std::string>();
      if (kind != "jit" && kind != "kernel") return bad("unknown step kind");
      st.kind = kind == "jit" ? lowering::PlanStep::kJit : lowering::PlanStep::kKernel;
      st.name = s.at("name").get<std::string>();
      st.inputs = s.at("inputs").get<std::vector<int>>();
      st.outputs = s.at("outputs").get<std::vector<int>>();
      st.target = s.at("target").get<std::string>();
      st.object = s.at("object").get<int>();
      st.symbol = s.at("symbol").get<std::string>();
      st.ops = s.at("ops").get<std::vector<std::string>>();
      st.faultSites = s.at("fault_sites").get<std::vector<std::string>>();
      st.scratchBytes = s.value("scratch_bytes", int64_t(0));
      if (st.scratchBytes < 0) return bad("negative scratch size");
      st.strategy = s.value("strategy", std::string());
      st.op = s.at("op").get<std::string>();
      st.kernel = s.at("kernel").get<std::string>();
      st.attrs = attrsFromJson(s.at("attrs"));
      st.location = s.at("location").get<std::string>();
      st.reason = s.at("reason").get<std::string>();
      st.flops = s.value("flops", 0.0);
      st.locations = s.value("locations", std::vector<std::string>());
      for (int id : st.inputs)
        if (id < 0 || id >= int(p.values.size())) return bad("bad value id");
      for (int id : st.outputs)
        if (id < 0 || id >= int(p.values.size())) return bad("bad value id");
      p.steps.push_back(std::move(st));
    }
    p.results = j.at("results").get<std::vector<int>>();
    for (int id : p.results)
      if (id < 0 || id >= int(p.values.size())) return bad("bad result id");
    p.summary = j.at("summary").get<std::string>();
  } catch (const std::exception &e) {
    return error(ErrorCode::kIO, "bad plan: %s", e.what());
  }
  return p;
}

}  // namespace kiln::jit
