// tapestry export: writes a trained model as a self-contained PyTorch package (modules, weights,
// vocabularies, preprocessing and a translation script) into a new directory.
#include <fmt/format.h>

#include "tools/cli.h"
#include "tools/export_pytorch.h"
#include "tools/flags.h"
#include "tools/text_files.h"

namespace tapestry::cli {

namespace {
constexpr const char* kAbout =
    "Writes a model trained by 'tapestry train' (its run directory or a .safetensors file) as a\n"
    "PyTorch package in the new directory --out: model.py (the model as PyTorch modules: an\n"
    "RNN's encoder, attention and decoder, or a Transformer around torch.nn.Transformer; the\n"
    "loss, greedy and beam search), weights.safetensors (the parameters under their PyTorch\n"
    "names), the configuration, the vocabularies and the preprocessing as JSON, preprocess.py,\n"
    "and translate.py, which translates as 'tapestry translate' does. README.md in the package\n"
    "describes it and the model's conventions.\n"
    "--out must not exist or be an empty directory: nothing is overwritten, and the package\n"
    "appears complete or not at all.\n\n"
    "examples:\n"
    "  tapestry export --model runs/grammar --to pytorch --out grammar-pytorch\n"
    "  python3 grammar-pytorch/translate.py --beam 5 < input.txt";
}  // namespace

int cmd_export(const Args& args) {
  std::string model, to = "pytorch", out;
  Flags f("tapestry export --model DIR --to pytorch --out OUT", kAbout);
  f.add("model", &model, "run directory or .safetensors file (required)");
  f.add("to", &to, "format to write", {"pytorch"});
  f.add("out", &out, "directory to create for the package (required; new or empty)");
  if (!f.parse(args)) return 0;
  if (model.empty()) throw UsageError{"--model is required (a run directory or .safetensors file)"};
  if (out.empty()) throw UsageError{"--out is required (the directory to create)"};

  const std::string checkpoint = model_file(model);
  ExportResult r = export_pytorch(checkpoint, out);
  std::string files;
  for (const auto& name : r.files) files += (files.empty() ? "" : ", ") + name;
  fmt::print("exported {} to {}/: {}\n", checkpoint, r.dir, files);
  fmt::print("translate with: python3 {}/translate.py < input.txt\n", r.dir);
  return 0;
}

}  // namespace tapestry::cli
