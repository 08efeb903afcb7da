// Checkpoints: the safetensors writer (atomic replace) and a reader that checks the header
// against the format and the file size before trusting any offset in it.
#include "tapestry/nn/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <tuple>

#include "tapestry/core/file_io.h"

namespace tapestry::nn {

// Tensor bytes go to and from the file as they lie in memory.
static_assert(std::endian::native == std::endian::little,
              "checkpoint: safetensors data is little-endian; this host is not");

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's key order: tensors load in file order

// The reference implementation's limit: larger headers are refused before they are parsed.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw CheckpointError(fmt::format("checkpoint '{}': {}", path, why));
}

std::string system_reason() {
  return std::strerror(errno);
}

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

// ---------------------------------------------------------------------------------------------
// Writing.

// ---------------------------------------------------------------------------------------------
// Reading.

class InputFile {
 public:
  explicit InputFile(std::string path) : path_(std::move(path)) {
    // O_NONBLOCK: a named pipe opens at once (to be refused below) instead of waiting for a
    // writer; reads of a regular file do not heed it.
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) fail(path_, fmt::format("cannot open: {}", system_reason()));
    // The destructor does not run when the constructor throws: close the file here.
    struct stat st;
    std::string why;
    if (::fstat(fd_, &st) != 0)
      why = fmt::format("cannot stat: {}", system_reason());
    else if (!S_ISREG(st.st_mode))
      why = "not a regular file";
    if (!why.empty()) {
      ::close(fd_);
      fail(path_, why);
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Reads exactly n bytes at `offset`; a file that ends early (e.g. shrank since it was opened)
  // is reported as truncated.
  void read_at(void* dst, uint64_t n, uint64_t offset) {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      ssize_t k = ::pread(fd_, p, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) fail(path_, fmt::format("cannot read: {}", system_reason()));
      if (k == 0)
        fail(path_, fmt::format("truncated: the file ends at byte {} while {} more are expected",
                                offset, n));
      p += k;
      n -= static_cast<uint64_t>(k);
      offset += static_cast<uint64_t>(k);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// One tensor as the header describes it; offsets are relative to the data buffer.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

struct Header {
  std::vector<Entry> entries;  // in header order
  std::map<std::string, std::string> metadata;
  uint64_t data_start;  // 8 + N
};

// JSON text of a value for messages, cut short so that a huge bad value does not flood them.
// Written by hand, depth-limited, because Json::dump recurses once per nesting level and a
// hostile header may nest a million arrays.
void show_into(const Json& v, std::string& out, int depth) {
  constexpr size_t kEnough = 80;
  if (out.size() > kEnough) return;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    out += Json(s.substr(0, kEnough)).dump(-1, ' ', false, Json::error_handler_t::replace);
  } else if (!v.is_structured()) {
    out += v.dump();
  } else if (depth >= 3) {
    out += v.is_array() ? "[...]" : "{...}";
  } else {
    out += v.is_array() ? '[' : '{';
    for (auto it = v.begin(); it != v.end() && out.size() <= kEnough; ++it) {
      if (it != v.begin()) out += ',';
      if (v.is_object())
        out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace) + ':';
      show_into(it.value(), out, depth + 1);
    }
    out += v.is_array() ? ']' : '}';
  }
}
std::string show(const Json& v) {
  std::string s;
  show_into(v, s, 0);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// Why `v` is not a count (a whole number >= 0 up to `limit`), or "" if it is one.
std::string not_a_count(const Json& v, uint64_t limit) {
  if (v.is_number_unsigned())
    return v.get<uint64_t>() > limit ? fmt::format("larger than {}", limit) : "";
  if (v.is_number_integer()) return "negative";
  if (v.is_number_float()) return "not an integer";
  return fmt::format("a {}, not a number", v.type_name());
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& v,
                  uint64_t data_size) {
  const std::string where = fmt::format("tensor '{}'", name);
  auto bad = [&](const std::string& why) { fail(path, fmt::format("{}: {}", where, why)); };
  if (!v.is_object())
    bad(fmt::format("entry must be an object with dtype, shape and data_offsets, got {} {}",
                    v.type_name(), show(v)));
  auto field = [&](const char* key) -> const Json& {
    auto it = v.find(key);
    if (it == v.end()) bad(fmt::format("entry has no \"{}\"", key));
    return *it;
  };
  Entry e;
  e.name = name;

  const Json& dtype = field("dtype");
  if (!dtype.is_string())
    bad(fmt::format("\"dtype\" must be a string, got {} {}", dtype.type_name(), show(dtype)));
  const std::string& dt = dtype.get_ref<const std::string&>();
  if (dt == "F32") {
    e.dtype = DType::f32;
  } else if (dt == "F64") {
    e.dtype = DType::f64;
  } else {
    bad(fmt::format("unsupported dtype {} (supported: F32, F64)", show(dtype)));
  }

  const Json& shape = field("shape");
  if (!shape.is_array())
    bad(fmt::format("\"shape\" must be an array, got {} {}", shape.type_name(), show(shape)));
  if (shape.size() > static_cast<size_t>(kMaxDims))
    bad(fmt::format("\"shape\" {} has {} dimensions, at most {} are supported", show(shape),
                    shape.size(), kMaxDims));
  std::vector<int64_t> dims;
  // Checked as the reference does: the element count must not overflow, even if a later
  // dimension is 0, so that no product here is ever undefined.
  uint64_t numel = 1;
  const uint64_t max_dim = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (size_t i = 0; i < shape.size(); ++i) {
    const std::string why = not_a_count(shape[i], max_dim);
    if (!why.empty())
      bad(fmt::format("\"shape\" {} must hold non-negative integers, but dimension {} is {} ({})",
                      show(shape), i, show(shape[i]), why));
    const uint64_t d = shape[i].get<uint64_t>();
    if (d != 0 && numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / d)
      bad(fmt::format("\"shape\" {} has too many elements", show(shape)));
    numel *= d;
    dims.push_back(static_cast<int64_t>(d));
  }
  e.shape = Shape(std::span<const int64_t>(dims));
  const uint64_t elem = dtype_size(e.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / elem)
    bad(fmt::format("\"shape\" {} has too many elements", show(shape)));
  const uint64_t nbytes = numel * elem;

  const Json& offsets = field("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    bad(fmt::format("\"data_offsets\" must be an array [begin, end], got {}", show(offsets)));
  for (size_t i = 0; i < 2; ++i) {
    const std::string why = not_a_count(offsets[i], std::numeric_limits<uint64_t>::max());
    if (!why.empty())
      bad(fmt::format("\"data_offsets\" {} must hold non-negative integers, but {} is {} ({})",
                      show(offsets), i == 0 ? "begin" : "end", show(offsets[i]), why));
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end)
    bad(fmt::format("\"data_offsets\" [{}, {}] begin after they end", e.begin, e.end));
  if (e.end - e.begin != nbytes)
    bad(fmt::format("\"data_offsets\" [{}, {}] hold {} bytes, but shape {} of {} needs {}", e.begin,
                    e.end, e.end - e.begin, e.shape.str(), dt, nbytes));
  if (e.end > data_size)
    bad(fmt::format("\"data_offsets\" end {} is past the end of the data ({} bytes)", e.end,
                    data_size));
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const Json& v) {
  if (!v.is_object())
    fail(path, fmt::format("\"__metadata__\" must be an object mapping strings to strings, got "
                           "{} {}",
                           v.type_name(), show(v)));
  std::map<std::string, std::string> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_string())
      fail(path, fmt::format("\"__metadata__\" value of '{}' must be a string, got {} {}", it.key(),
                             it.value().type_name(), show(it.value())));
    out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

// The data buffer must be exactly the tensors' bytes: no byte claimed twice, none unclaimed.
void check_layout(const std::string& path, const std::vector<Entry>& entries, uint64_t data_size) {
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : order) {
    if (e->begin < covered)
      fail(path, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", previous->name,
                             previous->begin, previous->end, e->name, e->begin, e->end));
    if (e->begin > covered)
      fail(path, fmt::format("data bytes [{}, {}) belong to no tensor (a gap before '{}')", covered,
                             e->begin, e->name));
    covered = e->end;
    previous = e;
  }
  if (covered != data_size)
    fail(path, fmt::format("data bytes [{}, {}) belong to no tensor (the data is {} bytes)",
                           covered, data_size, data_size));
}

Json parse_json(const std::string& path, const std::string& text) {
  // Checked while parsing: duplicate keys, which the format disallows but a JSON parser would
  // keep one of silently; and nesting, limited as serde_json (the reference's parser) limits it,
  // since a header needs 3 levels and a million would cost gigabytes.
  constexpr size_t kMaxNesting = 128;
  std::vector<std::set<std::string>> object_keys;  // one set per open object
  size_t nesting = 0;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      if (++nesting > kMaxNesting)
        fail(path, fmt::format("header nests more than {} levels deep", kMaxNesting));
      if (event == E::object_start) object_keys.emplace_back();
    } else if (event == E::object_end || event == E::array_end) {
      --nesting;
      if (event == E::object_end) object_keys.pop_back();
    } else if (event == E::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!object_keys.back().insert(key).second)
        fail(path, fmt::format("header has the key '{}' twice", key));
    }
    return true;
  };
  try {
    return Json::parse(text, check);
  } catch (const Json::exception& e) {
    fail(path, fmt::format("header is not valid JSON: {}", e.what()));
  }
}

Header read_header(InputFile& file) {
  const std::string& path = file.path();
  if (file.size() < 8)
    fail(path,
         fmt::format("truncated: {} bytes, too short for the 8-byte header length", file.size()));
  unsigned char prefix[8];
  file.read_at(prefix, 8, 0);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n > kMaxHeaderBytes)
    fail(path, fmt::format("header length {} is over the limit of {} bytes", n, kMaxHeaderBytes));
  if (n > file.size() - 8)
    fail(path, fmt::format("truncated: header length {} runs past the end of the file ({} bytes)",
                           n, file.size()));
  std::string text(n, '\0');
  file.read_at(text.data(), n, 8);

  const Json json = parse_json(path, text);
  if (!json.is_object())
    fail(path,
         fmt::format("header must be a JSON object, got {} {}", json.type_name(), show(json)));
  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = file.size() - h.data_start;
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__")
      h.metadata = parse_metadata(path, it.value());
    else
      h.entries.push_back(parse_entry(path, it.key(), it.value(), data_size));
  }
  check_layout(path, h.entries, data_size);
  return h;
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
