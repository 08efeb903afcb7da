// Checkpoints: the safetensors writer (atomic replace), the loaders built on the checked reader
// (safetensors_reader.h), and a module's parameters saved and loaded by name.
#include "tapestry/nn/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "tapestry/core/file_io.h"
#include "tapestry/nn/safetensors_reader.h"

namespace tapestry::nn {

// Tensor bytes go to and from the file as they lie in memory.
static_assert(std::endian::native == std::endian::little,
              "checkpoint: safetensors data is little-endian; this host is not");

namespace {

using Json = nlohmann::ordered_json;  // keeps the caller's order of the tensors in the header

using detail::Entry;
using detail::fail;
using detail::Header;
using detail::InputFile;
using detail::kMaxHeaderBytes;
using detail::read_header;

const char* format_dtype(DType d) {
  return d == DType::f32 ? "F32" : "F64";
}

void* raw_bytes(Tensor& t) {
  return dispatch(t.dtype(), [&](auto tag) -> void* { return t.data<decltype(tag)>(); });
}
const void* raw_bytes(const Tensor& t) {
  return dispatch(t.dtype(), [&](auto tag) -> const void* { return t.data<decltype(tag)>(); });
}
uint64_t byte_size(const Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
}

// A valid UTF-8 string is one the JSON writer accepts (it refuses ill-formed sequences).
void require_utf8(const std::string& what, const std::string& s) {
  try {
    (void)Json(s).dump();
  } catch (const Json::type_error&) {
    throw ValueError(fmt::format("save_safetensors: {} is not valid UTF-8", what));
  }
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw ValueError(fmt::format("save_safetensors: tensor '{}' is undefined", name));
    if (name == "__metadata__")
      throw ValueError("save_safetensors: '__metadata__' is reserved and cannot name a tensor");
    if (!names.insert(name).second)
      throw ValueError(fmt::format("save_safetensors: tensor name '{}' appears twice", name));
    require_utf8(fmt::format("tensor name '{}'", name), name);
  }
  for (const auto& [key, value] : metadata) {
    require_utf8(fmt::format("metadata key '{}'", key), key);
    require_utf8(fmt::format("metadata value of '{}'", key), value);
  }

  // Wider elements first (stable otherwise), as the reference writer does, so that a reader
  // mapping the file can view every tensor in place with its natural alignment.
  std::vector<size_t> data_order(tensors.size());
  std::iota(data_order.begin(), data_order.end(), size_t{0});
  std::stable_sort(data_order.begin(), data_order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype()) > dtype_size(tensors[b].second.dtype());
  });
  std::vector<std::pair<uint64_t, uint64_t>> offsets(tensors.size());
  uint64_t data_size = 0;
  for (size_t i : data_order) {
    offsets[i] = {data_size, data_size + byte_size(tensors[i].second)};
    data_size = offsets[i].second;
  }

  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    Json entry = Json::object();
    entry["dtype"] = format_dtype(t.dtype());
    entry["shape"] = Json::array();
    for (int64_t d : t.shape().dims()) entry["shape"].push_back(d);
    entry["data_offsets"] = Json::array({offsets[i].first, offsets[i].second});
    header[tensors[i].first] = std::move(entry);
  }
  std::string text = header.dump();
  // Spaces (JSON whitespace) up to a multiple of 8, so the data starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes)
    throw ValueError(
        fmt::format("save_safetensors: '{}': header of {} bytes is over the limit of "
                    "{} bytes that readers accept",
                    path, text.size(), kMaxHeaderBytes));

  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  try {
    AtomicFile file(path);
    file.write(prefix, 8);
    file.write(text.data(), text.size());
    for (size_t i : data_order)
      file.write(raw_bytes(tensors[i].second), byte_size(tensors[i].second));
    file.commit();
  } catch (const FileError& e) {
    fail(path, e.what());
  }
}

SafetensorsFile load_safetensors(const std::string& path) {
  InputFile file(path);
  const Header h = read_header(file);
  SafetensorsFile out;
  out.metadata = h.metadata;
  for (const Entry& e : h.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) file.read_at(raw_bytes(t), e.end - e.begin, h.data_start + e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path) {
  InputFile file(path);
  return read_header(file).metadata;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  InputFile file(path);
  Header h = read_header(file);
  SafetensorsHeader out;
  for (Entry& e : h.entries) out.tensors.push_back({std::move(e.name), e.dtype, e.shape});
  out.metadata = std::move(h.metadata);
  out.file_bytes = file.size();
  return out;
}

const char* safetensors_dtype(DType dtype) {
  return format_dtype(dtype);
}

void save_checkpoint(const std::string& path, Module& module,
                     const std::map<std::string, std::string>& metadata) {
  NamedTensors tensors;
  for (auto& [name, p] : module.named_parameters()) tensors.emplace_back(name, p->value);
  save_safetensors(path, tensors, metadata);
}

std::map<std::string, std::string> load_checkpoint(const std::string& path, Module& module) {
  SafetensorsFile file = load_safetensors(path);
  std::map<std::string, const Tensor*> saved;
  for (const auto& [name, t] : file.tensors) saved.emplace(name, &t);

  std::vector<std::string> problems;
  std::vector<std::pair<Parameter*, const Tensor*>> copies;
  std::set<std::string> expected;
  for (auto& [name, p] : module.named_parameters()) {
    expected.insert(name);
    auto it = saved.find(name);
    if (it == saved.end()) {
      problems.push_back(fmt::format("tensor '{}' {} {} is missing from the file", name,
                                     p->shape().str(), format_dtype(p->value.dtype())));
      continue;
    }
    const Tensor& t = *it->second;
    if (t.shape() != p->shape())
      problems.push_back(fmt::format("tensor '{}' has shape {} in the file but {} in the module",
                                     name, t.shape().str(), p->shape().str()));
    else if (t.dtype() != p->value.dtype())
      problems.push_back(fmt::format("tensor '{}' is {} in the file but {} in the module", name,
                                     format_dtype(t.dtype()), format_dtype(p->value.dtype())));
    else
      copies.emplace_back(p, &t);
  }
  for (const auto& [name, t] : file.tensors)
    if (!expected.count(name))
      problems.push_back(
          fmt::format("tensor '{}' {} {} in the file is not a parameter of the "
                      "module",
                      name, t.shape().str(), format_dtype(t.dtype())));
  if (!problems.empty()) {
    constexpr size_t kShown = 10;
    std::string list;
    for (size_t i = 0; i < std::min(problems.size(), kShown); ++i)
      list += (i ? "; " : "") + problems[i];
    if (problems.size() > kShown) list += fmt::format("; and {} more", problems.size() - kShown);
    fail(path, fmt::format("does not fit the module ({} problem{}): {}", problems.size(),
                           problems.size() == 1 ? "" : "s", list));
  }
  for (auto& [p, t] : copies) p->value.copy_from(*t);
  return file.metadata;
}

}  // namespace tapestry::nn
