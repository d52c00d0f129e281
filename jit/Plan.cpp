#include "jit/Plan.h"

#include "llvm/ADT/StringExtras.h"

#include <nlohmann/json.hpp>

namespace kiln::jit {
namespace {
using json = nlohmann::json;

json attrsToJson(const kernels::AttrMap &attrs) {
  json o = json::object();
  for (const auto &[k, v] : attrs.all()) {
    if (auto *i = std::get_if<int64_t>(&v)) o[k] = {{"i", *i}};
    else if (auto *d = std::get_if<double>(&v)) o[k] = {{"f", *d}};
    else if (auto *s = std::get_if<std::string>(&v)) o[k] = {{"s", *s}};
    else o[k] = {{"l", std::get<std::vector<int64_t>>(v)}};
  }
  return o;
}

kernels::AttrMap attrsFromJson(const json &o) {
  kernels::AttrMap a;
  for (auto it = o.begin(); it != o.end(); ++it) {
    const json &v = it.value();
    if (v.contains("i")) a.set(it.key(), v["i"].get<int64_t>());
    else if (v.contains("f")) a.set(it.key(), v["f"].get<double>());
    else if (v.contains("s")) a.set(it.key(), v["s"].get<std::string>());
    else a.set(it.key(), v["l"].get<std::vector<int64_t>>());
  }
  return a;
}

}  // namespace

std::string ExecPlan::toJson() const {
  json j;
  json vs = json::array();
  for (const Value &v : values)
    vs.push_back({{"kind", int(v.kind)},
                  {"type", v.type.str()},
                  {"index", v.index},
                  {"constant", llvm::toHex(v.constant, /*LowerCase=*/true)}});
  json ss = json::array();
  for (const Step &s : steps)
    ss.push_back({{"jit", s.jit},
                  {"object", s.object},
                  {"symbol", s.symbol},
                  {"op", s.op},
                  {"attrs", attrsToJson(s.attrs)},
                  {"name", s.name},
                  {"ops", s.ops},
                  {"inputs", s.inputs},
                  {"outputs", s.outputs}});
  j["values"] = vs;
  j["steps"] = ss;
  j["results"] = results;
  j["summary"] = summary;
  return j.dump();
}

llvm::Expected<ExecPlan> ExecPlan::fromJson(llvm::StringRef text) {
  ExecPlan p;
  try {
    json j = json::parse(text.str());
    for (const json &v : j.at("values")) {
      Value val;
      val.kind = Value::Kind(v.at("kind").get<int>());
      auto t = parseTensorType(v.at("type").get<std::string>());
      if (!t) return t.takeError();
      val.type = *t;
      val.index = v.at("index").get<int>();
      val.constant = llvm::fromHex(v.at("constant").get<std::string>());
      p.values.push_back(std::move(val));
    }
    for (const json &s : j.at("steps")) {
      Step st;
      st.jit = s.at("jit").get<bool>();
      st.object = s.at("object").get<int>();
      st.symbol = s.at("symbol").get<std::string>();
      st.op = s.at("op").get<std::string>();
      st.attrs = attrsFromJson(s.at("attrs"));
      st.name = s.at("name").get<std::string>();
      st.ops = s.at("ops").get<std::vector<std::string>>();
      st.inputs = s.at("inputs").get<std::vector<int>>();
      st.outputs = s.at("outputs").get<std::vector<int>>();
      for (int id : st.inputs)
        if (id < 0 || id >= int(p.values.size())) return llvm::createStringError("plan: bad value id");
      for (int id : st.outputs)
        if (id < 0 || id >= int(p.values.size())) return llvm::createStringError("plan: bad value id");
      p.steps.push_back(std::move(st));
    }
    p.results = j.at("results").get<std::vector<int>>();
    for (int id : p.results)
      if (id < 0 || id >= int(p.values.size())) return llvm::createStringError("plan: bad result id");
    p.summary = j.at("summary").get<std::string>();
  } catch (const std::exception &e) {
    return llvm::createStringError("bad plan: %s", e.what());
  }
  return p;
}

}  // namespace kiln::jit
