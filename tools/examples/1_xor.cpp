// Example 1: a 2-layer MLP learns XOR, the micrograd demo in C++. It teaches the whole loop: a
// module of layers, a forward pass recorded on a tape, a loss, backward, an optimizer step; and it
// draws the last step's graph, every value beside its gradient (xor_graph.html).
#include <tapestry/tapestry.h>

#include <cstdio>

using namespace tapestry;

struct MLP : nn::Module {  // 2 -> 8 (tanh) -> 1 (sigmoid)
  nn::Linear l1, l2;
  explicit MLP(Rng& rng) : l1(2, 8, true, rng), l2(8, 1, true, rng) {
    add_module("l1", l1);
    add_module("l2", l2);
  }
  Var forward(Tape& tape, const Var& x) {
    return ops::sigmoid(l2.forward(tape, ops::tanh(l1.forward(tape, x))));
  }
};

int main() {
  Rng rng(1);  // everything random takes a seed
  MLP mlp(rng);
  nn::Adam opt(mlp.parameters(), 0.05);
  Tensor x = Tensor::from({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2}, DType::f32);
  Tensor y = Tensor::from({0, 1, 1, 0}, {4, 1}, DType::f32);
  Tape tape;
  tape.set_keep_grads(true);       // keep every node's gradient, to draw them
  nn::name_parameters(tape, mlp);  // parameters go by their names in drawings and errors
  for (int step = 0; step <= 300; ++step) {
    tape.clear();  // one recording per step; the memory is reused
    Var d = mlp.forward(tape, x) - y;
    Var loss = ops::mean(d * d);
    opt.zero_grad();
    tape.backward(loss);  // dloss/dw accumulates into every parameter's grad
    if (step == 300) draw_graph(loss, "xor_graph.html", {.title = "XOR, step 300"});  // or .dot
    opt.step();
    if (step % 100 == 0) std::printf("step %3d  loss %.5f\n", step, loss.value().item());
  }
  NoGrad inference(tape);  // nothing is recorded now
  Tensor p = mlp.forward(tape, x).value();
  int right = 0;
  for (int i = 0; i < 4; ++i) {
    std::printf("xor(%g, %g) = %.3f\n", x.at(2 * i), x.at(2 * i + 1), p.at(i));
    right += (p.at(i) > 0.5) == (y.at(i) > 0.5);
  }
  std::printf("%d of 4 on the right side of 0.5\n", right);
  return right == 4 ? 0 : 1;
}
