// Internal to core/graph_html.cpp: the style sheet and the script of the graph page.
#pragma once

namespace tapestry::detail {

// The page's CSS.
extern const char* const kGraphPageStyle;
// The page's script: reads the graph's JSON from the element "graph-data", folds, lays out and
// draws it, and wires the header's buttons.
extern const char* const kGraphPageScript;

}  // namespace tapestry::detail
