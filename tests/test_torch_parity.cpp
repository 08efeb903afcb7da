// PyTorch parity: our recurrent layers' weights, loaded into torch.nn.RNN/GRU/LSTM, give the same
// outputs on the same padded batch, and cross_entropy (ignored rows, label smoothing) gives
// F.cross_entropy's loss and gradient. Skipped (with a warning) where python3 has no torch.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tapestry/nn/rnn.h"
#include "tapestry/ops/loss.h"
#include "torch_run.h"

using namespace tapestry;
using namespace tapestry::nn;
using namespace tapestry::testing;
namespace fs = std::filesystem;

namespace {

const char* kScript = R"PY(
import json, sys, torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
spec = json.load(open(sys.argv[1]))
cls = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[spec["cell"]]
m = cls(spec["input"], spec["hidden"], num_layers=spec["layers"], bidirectional=spec["bidir"],
        batch_first=True).double()
state = {k: torch.tensor(v, dtype=torch.float64).reshape(spec["shapes"][k]) for k, v in spec["weights"].items()}
m.load_state_dict(state, strict=True)
x = torch.tensor(spec["x"], dtype=torch.float64).reshape(spec["x_shape"])
packed = pack_padded_sequence(x, torch.tensor(spec["lengths"]), batch_first=True, enforce_sorted=False)
out, h = m(packed)
y, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
h_n = h[0] if isinstance(h, tuple) else h
print(json.dumps({"y": y.flatten().tolist(), "h_n": h_n.flatten().tolist()}))
)PY";

const char* kLossScript = R"PY(
import json, sys, torch
out = []
for c in json.load(open(sys.argv[1])):
    z = torch.tensor(c["z"], dtype=torch.float64).reshape(c["shape"]).requires_grad_()
    t = torch.tensor(c["targets"], dtype=torch.int64)
    loss = torch.nn.functional.cross_entropy(z, t, ignore_index=c["ignore_index"],
                                             label_smoothing=c["eps"], reduction="mean")
    loss.backward()
    out.append({"loss": loss.item(), "grad": z.grad.flatten().tolist()})
print(json.dumps(out))
)PY";

}  // namespace

TEST_CASE("recurrent layers match PyTorch given the same weights", "[nn][torch]") {
  if (!torch_available()) {
    WARN("python3 with torch not found: PyTorch parity not checked");
    return;
  }
  fs::path dir = fs::temp_directory_path() / ("tapestry_parity_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "parity.py") << kScript;

  for (CellKind kind : {CellKind::rnn, CellKind::gru, CellKind::lstm}) {
    DYNAMIC_SECTION(cell_name(kind)) {
      Rng rng(21);
      const int64_t in = 3, hidden = 4, b = 3, s = 5;
      RNN layer(kind, in, hidden, 2, true, rng, DType::f64);
      Tensor x = rng.uniform_tensor({b, s, in}, -1, 1, DType::f64);
      const int64_t lengths[] = {5, 2, 4};

      nlohmann::json spec;
      spec["cell"] = cell_name(kind);
      spec["input"] = in;
      spec["hidden"] = hidden;
      spec["layers"] = 2;
      spec["bidir"] = true;
      for (auto& [name, p] : layer.named_parameters()) {
        spec["weights"][name] = p->value.to_vector();
        spec["shapes"][name] =
            std::vector<int64_t>(p->shape().dims().begin(), p->shape().dims().end());
      }
      spec["x"] = x.to_vector();
      spec["x_shape"] = {b, s, in};
      spec["lengths"] = {lengths[0], lengths[1], lengths[2]};
      std::ofstream(dir / "spec.json") << spec.dump();

      auto got = nlohmann::json::parse(run("/usr/bin/python3 " + (dir / "parity.py").string() +
                                           " " + (dir / "spec.json").string()));
      Tape tape;
      RNN::Output ours = layer.forward(tape, x, lengths);
      auto y = got["y"].get<std::vector<double>>();
      auto h_n = got["h_n"].get<std::vector<double>>();
      REQUIRE(y.size() == static_cast<size_t>(ours.y.numel()));
      REQUIRE(h_n.size() == static_cast<size_t>(ours.h_n.numel()));
      for (size_t i = 0; i < y.size(); ++i)
        REQUIRE(ours.y.value().at(i) == Approx(y[i]).margin(1e-12));
      for (size_t i = 0; i < h_n.size(); ++i)
        REQUIRE(ours.h_n.value().at(i) == Approx(h_n[i]).margin(1e-12));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("cross_entropy with label smoothing matches F.cross_entropy", "[loss][torch]") {
  if (!torch_available()) {
    WARN("python3 with torch not found: cross_entropy's PyTorch parity not checked");
    return;
  }
  fs::path dir = fs::temp_directory_path() / ("tapestry_ce_parity_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "ce.py") << kLossScript;
  struct Case {
    int64_t n, v;
    std::vector<int32_t> targets;
    int32_t ignore_index;
    double eps;
  };
  // Rows of 37 classes run the vectorised lanes and a tail; logits up to 8 give confident rows.
  const std::vector<Case> cases = {{5, 7, {2, -100, 6, 0, 3}, -100, 0.1},
                                   {4, 37, {0, 36, 5, 0}, 0, 0.3},
                                   {3, 6, {1, 5, 0}, -100, 0.0},
                                   {2, 4, {3, 3}, -100, 0.9}};
  Rng rng(23);
  nlohmann::json spec = nlohmann::json::array();
  std::vector<Tensor> logits;
  for (const Case& c : cases) {
    logits.push_back(rng.uniform_tensor({c.n, c.v}, -8, 8, DType::f64));
    spec.push_back({{"z", logits.back().to_vector()},
                    {"shape", {c.n, c.v}},
                    {"targets", c.targets},
                    {"ignore_index", c.ignore_index},
                    {"eps", c.eps}});
  }
  std::ofstream(dir / "cases.json") << spec.dump();
  auto got = nlohmann::json::parse(
      run("/usr/bin/python3 " + (dir / "ce.py").string() + " " + (dir / "cases.json").string()));
  REQUIRE(got.size() == cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    INFO("case " << k << ": (" << c.n << "," << c.v << "), label_smoothing " << c.eps);
    Tape tape;
    Var z = tape.leaf(logits[k]);
    Var loss = ops::cross_entropy(z, c.targets, c.ignore_index, c.eps);
    tape.backward(loss);
    CHECK(loss.value().item() == Approx(got[k]["loss"].get<double>()).epsilon(1e-12));
    const auto want = got[k]["grad"].get<std::vector<double>>();
    const std::vector<double> grad = tape.grad(z).to_vector();
    REQUIRE(grad.size() == want.size());
    for (size_t i = 0; i < grad.size(); ++i) {
      INFO("element " << i);
      CHECK(grad[i] == Approx(want[i]).margin(1e-15).epsilon(1e-12));
    }
  }
  fs::remove_all(dir);
}
