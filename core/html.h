// HTML escaping for the pages and labels the library and the program write.
#pragma once

#include <string>
#include <string_view>

namespace tapestry {

// Escapes & < > " ' for HTML text and attribute values (and Graphviz's HTML-like labels); every
// other byte, UTF-8 included, is kept.
std::string html_escape(std::string_view text);

}  // namespace tapestry
