// Module: owns named parameters and child modules; hierarchical names, train/eval, zero_grad.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapestry/nn/parameter.h"

namespace tapestry::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter with its dotted path ("encoder.rnn.weight_ih_l0"), in registration order:
  // a module's own parameters first, then each child's, depth first.
  std::vector<std::pair<std::string, Parameter*>> named_parameters();
  std::vector<Parameter*> parameters();
  int64_t num_parameters();

  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  void zero_grad();

 protected:
  Parameter& add_parameter(std::string name, Tensor value);
  // Registers a child owned elsewhere (usually a member of the derived class). An empty name adds
  // nothing to its parameters' paths (the child's names become this module's own).
  template <class M>
  M& add_module(std::string name, M& child) {
    children_.emplace_back(std::move(name), &child);
    return child;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Parameter*>>& out);

  std::vector<std::pair<std::string, std::unique_ptr<Parameter>>> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
};

// Names the module's parameters on `tape` (Tape::set_tensor_names), so error messages, anomaly
// reports and graph drawings call each parameter's leaf by its path ("decoder.attention.W").
void name_parameters(Tape& tape, Module& module);

}  // namespace tapestry::nn
