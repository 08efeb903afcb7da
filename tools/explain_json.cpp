// Explain as JSON for programs: every node's value and gradient at full precision.
#include <nlohmann/json.hpp>

#include "tools/explain.h"

namespace tapestry::cli {

std::string render_json(const Explanation& e) {
  using nlohmann::json;
  json nodes = json::array();
  for (const auto& n : e.nodes) {
    nodes.push_back({{"index", n.index},
                     {"step", n.step},
                     {"op", n.op},
                     {"region", n.region},
                     {"label", n.label},
                     {"math", n.math},
                     {"inputs", n.inputs},
                     {"passed", n.passed},
                     {"shape", n.shape},
                     {"value", n.value},
                     {"grad", n.grad.empty() ? json(nullptr) : json(n.grad)}});
  }
  json params = json::object();
  for (const auto& p : e.parameters)
    params[p.name] = {{"shape", p.shape},
                      {"value", p.value},
                      {"grad", p.grad},
                      {"attention", p.attention},
                      {"node", p.node}};
  json chain = json::array();
  for (const auto& c : e.chain)
    chain.push_back(
        {{"formula", c.formula}, {"shape", c.shape}, {"tape", c.tape}, {"by_hand", c.by_hand}});
  json check = json::array();
  for (const auto& c : e.checks)
    check.push_back({{"parameter", c.tensor},
                     {"shape", c.shape},
                     {"index", c.index},
                     {"analytic", c.analytic},
                     {"numeric", c.numeric},
                     {"rel_error", c.rel_error},
                     {"pass", c.pass}});
  const FocusNodes& f = e.focus;
  json out = {
      {"config", json::parse(e.config_json)},
      {"model", e.model},
      {"source", e.source},
      {"src_vocab", e.src_vocab},
      {"tgt_vocab", e.tgt_vocab},
      {"step", e.step},
      {"target_sentence", e.target_sentence},
      {"previous", e.previous},
      {"target", e.target},
      {"target_id", e.target_id},
      {"loss", e.loss},
      {"top", e.top},
      {"story", e.story},
      {"equations", e.equations},
      {"focus",
       {{"keys", f.keys},
        {"summary", f.summary},
        {"query", f.query},
        {"scores", f.scores},
        {"softmax", f.softmax},
        {"weights", f.weights},
        {"context", f.context},
        {"logits", f.logits},
        {"loss", f.loss},
        {"keys_projection", f.keys_proj}}},
      {"nodes", nodes},
      {"parameters", params},
      {"chain", chain},
      {"check_settings",
       {{"eps", e.eps}, {"tolerance", e.tolerance}, {"max_elements", e.check_max}}},
      {"check", check},
  };
  return out.dump(1) + "\n";
}

std::string across_json(const AcrossSteps& a) {
  using nlohmann::json;
  return json{{"source", a.source},
              {"written", a.written},
              {"losses", a.losses},
              {"weights", a.weights},
              {"dh_norms", a.dh_norms},
              {"total_norms", a.total_norms},
              {"sum_difference", a.sum_difference},
              {"story", a.story}}
      .dump(1);
}

}  // namespace tapestry::cli
