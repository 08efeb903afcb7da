// Module: parameter registry, hierarchical naming and mode switches.
#include "tapestry/nn/module.h"

#include <fmt/format.h>

namespace tapestry::nn {

Parameter& Module::add_parameter(std::string name, Tensor value) {
  for (const auto& [n, p] : params_)
    if (n == name) throw ValueError(fmt::format("module: parameter '{}' registered twice", name));
  params_.emplace_back(std::move(name), std::make_unique<Parameter>(std::move(value)));
  return *params_.back().second;
}

void Module::collect(const std::string& prefix,
                     std::vector<std::pair<std::string, Parameter*>>& out) {
  for (auto& [name, p] : params_) out.emplace_back(prefix + name, p.get());
  for (auto& [name, child] : children_)
    child->collect(name.empty() ? prefix : prefix + name + ".", out);
}

std::vector<std::pair<std::string, Parameter*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Parameter*>> out;
  collect("", out);
  return out;
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (auto* p : parameters()) n += p->numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto* p : parameters()) p->grad.zero();
}

void name_parameters(Tape& tape, Module& module) {
  std::vector<std::pair<std::string, Tensor>> names;
  for (auto& [name, p] : module.named_parameters()) names.emplace_back(name, p->value);
  tape.set_tensor_names(std::move(names));
}

}  // namespace tapestry::nn
