// The safetensors reader's checks: the file read by offset, the header's JSON parsed with its
// nesting and duplicate keys checked, and every entry checked against the format and file size.
#include "tapestry/nn/safetensors_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "tapestry/nn/checkpoint.h"

namespace tapestry::nn::detail {

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's key order: tensors load in file order

std::string system_reason() {
  return std::strerror(errno);
}

}  // namespace

void fail(const std::string& path, const std::string& why) {
  throw CheckpointError(fmt::format("checkpoint '{}': {}", path, why));
}

InputFile::InputFile(std::string path) : path_(std::move(path)) {
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

InputFile::~InputFile() {
  ::close(fd_);
}

void InputFile::read_at(void* dst, uint64_t n, uint64_t offset) {
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

namespace {

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

}  // namespace

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

}  // namespace tapestry::nn::detail
