// The graph page's style sheet and script, embedded in every page core/graph_html.cpp writes.
#include "tapestry/core/graph_page_assets.h"

namespace tapestry::detail {

const char* const kGraphPageStyle = R"CSS(
body { font: 13px/1.4 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       color: #1d2330; background: #fbfbfd; }
header { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid #dde1ea;
         padding: 8px 14px; display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; }
header h1 { font-size: 15px; margin: 0 8px 0 0; }
header button { font: inherit; padding: 2px 9px; border: 1px solid #b9c0cf; border-radius: 4px;
                background: #f4f6fa; cursor: pointer; }
header button:hover { background: #e6ebf5; }
.hint { color: #5b6475; font-size: 12px; }
.open-list span { display: inline-block; margin: 0 4px 2px 0; padding: 0 6px; border-radius: 9px;
                  background: #e8ecf4; font-size: 12px; cursor: pointer; }
.open-list span:hover { background: #d3dbea; }
#viewport { overflow: auto; padding: 16px; }
#canvas { position: relative; transform-origin: 0 0; }
#edges { position: absolute; left: 0; top: 0; overflow: visible; }
.box { position: absolute; border: 1px solid #8d97aa; border-radius: 6px; background: #fff;
       font-size: 11px; box-shadow: 0 1px 2px rgba(0,0,0,.08); white-space: nowrap; }
.box .head { padding: 3px 7px; border-bottom: 1px solid #d5dae4; border-radius: 6px 6px 0 0;
             white-space: nowrap; }
.box .op { font-weight: 600; }
.box .name { color: #7a4b00; margin-left: 4px; }
.box .shape { color: #5b6475; margin-left: 4px; }
.box .chip { float: right; margin-left: 8px; font-size: 10px; color: #39435a; cursor: pointer;
             padding: 0 5px; border-radius: 7px; background: rgba(255,255,255,.7); }
.box .chip:hover { background: #fff; text-decoration: underline; }
.box .cols { display: flex; }
.box .col { padding: 3px 6px; }
.box .col + .col { border-left: 1px solid #e2e6ee; }
.box .col .t { font-size: 9px; color: #7b8394; text-transform: uppercase; letter-spacing: .04em; }
.box table { border-collapse: collapse; font: 10px/1.25 ui-monospace, Menlo, Consolas, monospace; }
.box td { padding: 0 3px; text-align: right; white-space: nowrap; }
.box .sum { font: 10px/1.3 ui-monospace, Menlo, Consolas, monospace; white-space: nowrap; }
.box.param { background: #fff6e5; border-color: #d8a54a; }
.box.leaf { background: #f3f3f3; }
.box.output { border-width: 2px; border-color: #1d2330; }
.box.folded { cursor: pointer; border-style: double; border-width: 3px; padding: 4px 8px;
              max-width: 300px; white-space: normal; }
.box.folded:hover { border-color: #3b6fd8; }
.box.folded .title { font-weight: 600; }
.box.folded .more { color: #5b6475; font-size: 11px; }
.bad { color: #b3261e; font-weight: 600; }
)CSS";

// The page's script. Folding follows core/graph_draw.cpp's rule; the layout puts each box one layer
// below its lowest input (inputs that are leaves just above their first reader), orders each layer
// by the mean position of its neighbours, and places boxes as near those neighbours as they fit.
const char* const kGraphPageScript = R"JS(
"use strict";
const G = JSON.parse(document.getElementById("graph-data").textContent);
const num = v => Number(v);
const byId = new Map(G.nodes.map(n => [n.id, n]));
// A region's prefixes, "a", "a.b", ..., itself last (none empty: ".x" has only ".x").
function prefixes(region) {
  const p = region ? region.split(".") : [], out = [];
  for (let k = 1; k <= p.length; k++) {
    const key = p.slice(0, k).join(".");
    if (key) out.push(key);
  }
  return out;
}
const groups = new Set();  // regions that have subregions
for (const n of G.nodes) prefixes(n.region).slice(0, -1).forEach(k => groups.add(k));
function keysOf(region) {
  const keys = prefixes(region);
  if (region && groups.has(region)) keys.push(region + "/");
  return keys;
}
const allKeys = new Set();
for (const n of G.nodes) for (const k of keysOf(n.region)) allKeys.add(k);
let open = new Set(G.expanded);
let zoom = 1;

function fmt(v) {
  v = num(v);
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(2).replace("e+", "e");
  return String(Number(v.toPrecision(4)));
}
function shapeText(s) { return "(" + s.join(",") + ")"; }
function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;"})[c]);
}
const palette = ["#dbe9f6", "#e3f1dc", "#f6e3db", "#ebe0f4", "#f4efd2", "#d9f0ee", "#f4dbe8", "#e6e6e6"];
function colour(region) {
  if (!region) return "#ffffff";
  const top = region.split(".")[0];
  let h = 0;
  for (const ch of top) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return palette[h % 8];
}
// A tensor in a box: every value when small (the gradient tinted by sign), else its range.
function tensorHtml(t, signed) {
  if (!t) return "<div class=\"sum\">-</div>";
  if (t.numel <= G.fullMax && t.head.length === t.numel) {
    const cols = t.shape.length ? Math.max(1, t.shape[t.shape.length - 1]) : 1;
    let big = 0;
    for (const v of t.head) if (Number.isFinite(num(v))) big = Math.max(big, Math.abs(num(v)));
    let rows = "";
    for (let i = 0; i < t.numel; i += cols) {
      rows += "<tr>";
      for (let j = i; j < Math.min(t.numel, i + cols); j++) {
        const v = num(t.head[j]);
        let style = "";
        if (signed && big > 0 && Number.isFinite(v) && v !== 0) {
          const a = (0.08 + 0.32 * Math.abs(v) / big).toFixed(2);
          style = " style=\"background:" + (v > 0 ? "rgba(178,24,43," : "rgba(33,102,172,") + a + ")\"";
        }
        rows += "<td" + style + (Number.isFinite(v) ? "" : " class=\"bad\"") + ">" + fmt(v) + "</td>";
      }
      rows += "</tr>";
    }
    return "<table>" + rows + "</table>";
  }
  let s = "<div class=\"sum\">" + fmt(t.min) + " .. " + fmt(t.max) + "<br>mean " + fmt(t.mean) +
          " |x| " + fmt(t.norm) + "</div>";
  if (t.nan || t.inf) s += "<div class=\"sum bad\">" + t.nan + " NaN, " + t.inf + " inf</div>";
  return s;
}
function tooltip(n) {
  let s = n.op + (n.name ? " " + n.name : "") + " " + shapeText(n.value.shape) + "\n" + n.math;
  if (n.region) s += "\nregion: " + n.region;
  s += "\nnode #" + n.id;
  if (n.value.numel > G.fullMax) s += "\nvalue: " + n.value.head.map(fmt).join(" ") +
                                     (n.value.numel > n.value.head.length ? " ..." : "");
  if (n.grad && n.grad.numel > G.fullMax) s += "\ngradient: " + n.grad.head.map(fmt).join(" ") +
                                               (n.grad.numel > n.grad.head.length ? " ..." : "");
  return s;
}

// ---- folding: which box each node is drawn in
function buildBoxes() {
  // Node boxes and region boxes apart ("n:", "r:"), so a region named "n5" is not node 5's box.
  const boxes = [], byKey = new Map(), boxOf = new Map();
  for (const n of G.nodes) {
    let key = "n" + n.id, folded = false;
    for (const k of keysOf(n.region)) if (!open.has(k)) { key = k; folded = true; break; }
    const id = (folded ? "r:" : "n:") + key;
    if (!byKey.has(id)) { byKey.set(id, boxes.length); boxes.push({key, node: folded ? null : n, members: []}); }
    const b = byKey.get(id);
    boxes[b].members.push(n);
    boxOf.set(n.id, b);
  }
  const edges = [], seen = new Set();
  for (const n of G.nodes) n.inputs.forEach((id, k) => {
    if (id < 0 || !boxOf.has(id)) return;
    const u = boxOf.get(id), v = boxOf.get(n.id);
    if (u === v || seen.has(u + ">" + v)) return;
    seen.add(u + ">" + v);
    const label = boxes[u].node && boxes[v].node && n.labels[k] ? n.labels[k] : "";
    edges.push({u, v, label});
  });
  return {boxes, edges};
}

function boxHtml(b) {
  if (!b.node) {
    const own = b.key.endsWith("/"), region = own ? b.key.slice(0, -1) : b.key;
    const params = b.members.filter(n => n.param && n.name).map(n => n.name);
    const ops = new Map();
    for (const n of b.members) if (!n.leaf) ops.set(n.op, (ops.get(n.op) || 0) + 1);
    const top = [...ops].sort((a, c) => c[1] - a[1]).slice(0, 4).map(([o, c]) => o + " x" + c);
    let s = "<div class=\"title\">" + esc(region) + (own ? " (own nodes)" : "") + "</div>" +
            "<div class=\"more\">" + b.members.length + (b.members.length === 1 ? " node: " : " nodes: ") + esc(top.join(", ")) + "</div>";
    if (params.length) s += "<div class=\"more\">parameters: " + esc(params.join(", ")) + "</div>";
    if (Object.prototype.hasOwnProperty.call(G.notes, region))
      s += "<div class=\"more\">" + esc(G.notes[region]) + "</div>";
    return s + "<div class=\"more\"><i>click to open</i></div>";
  }
  const n = b.node;
  let head = "<span class=\"op\">" + esc(n.op) + "</span>";
  if (n.name) head += "<span class=\"name\">" + esc(n.name) + "</span>";
  head += "<span class=\"shape\">" + shapeText(n.value.shape) + "</span>";
  if (n.region) head += "<span class=\"chip\" data-fold=\"" + esc(n.region) + "\" title=\"fold " +
                        esc(n.region) + "\">" + esc(n.region) + "</span>";
  return "<div class=\"head\" style=\"background:" + colour(n.region) + "\">" + head + "</div>" +
         "<div class=\"cols\"><div class=\"col\"><div class=\"t\">value</div>" +
         tensorHtml(n.value, false) + "</div><div class=\"col\"><div class=\"t\">gradient</div>" +
         tensorHtml(n.grad, true) + "</div></div>";
}

// ---- layout: layers, order within layers, positions
const GAP_X = 28, GAP_Y = 46;
function layout(boxes, edges) {
  const n = boxes.length, preds = boxes.map(() => []), succs = boxes.map(() => []);
  // Boxes come in order of their first node, which is data-flow order: an edge into an earlier
  // box is a recurrence, drawn apart and left out of the layering.
  const forward = edges.filter(e => e.u < e.v);
  for (const e of forward) { preds[e.v].push(e.u); succs[e.u].push(e.v); }
  const layer = new Array(n).fill(0);
  for (let v = 0; v < n; v++) for (const u of preds[v]) layer[v] = Math.max(layer[v], layer[u] + 1);
  for (let v = n - 1; v >= 0; v--)
    if (!preds[v].length && succs[v].length)
      layer[v] = Math.max(0, succs[v].reduce((m, w) => Math.min(m, layer[w]), Infinity) - 1);
  // Points of the layered graph: the boxes, and one dummy per layer an edge passes through.
  const pts = boxes.map((b, i) => ({box: i, layer: layer[i], w: b.w, h: b.h, up: [], down: [], pos: i}));
  const routes = [];
  for (const e of forward) {
    let prev = e.u;
    const route = [e.u];
    for (let l = layer[e.u] + 1; l < layer[e.v]; l++) {
      const d = pts.length;
      pts.push({box: -1, layer: l, w: 2, h: 0, up: [], down: [], pos: e.u + 0.5});
      pts[prev].down.push(d); pts[d].up.push(prev);
      route.push(d); prev = d;
    }
    pts[prev].down.push(e.v); pts[e.v].up.push(prev);
    route.push(e.v);
    routes.push({edge: e, route});
  }
  const depth = pts.reduce((m, p) => Math.max(m, p.layer), 0) + 1;
  const layers = Array.from({length: depth}, () => []);
  for (let i = 0; i < pts.length; i++) layers[pts[i].layer].push(i);
  const rank = new Array(pts.length);
  const setRanks = () => layers.forEach(L => L.forEach((p, r) => { rank[p] = r; }));
  layers.forEach(L => L.sort((a, b) => pts[a].pos - pts[b].pos));
  setRanks();
  // Barycentre sweeps, keeping the order with the fewest crossings.
  const crossings = () => {
    let c = 0;
    for (let l = 0; l + 1 < depth; l++) {
      const segs = [];
      for (const p of layers[l]) for (const q of pts[p].down) segs.push([rank[p], rank[q]]);
      for (let i = 0; i < segs.length; i++)
        for (let j = i + 1; j < segs.length; j++)
          if ((segs[i][0] - segs[j][0]) * (segs[i][1] - segs[j][1]) < 0) c++;
    }
    return c;
  };
  // Counting crossings costs the square of a layer's edges: past a few thousand points the sweeps
  // run without it, keeping the last order.
  const counted = pts.length <= 3000;
  let best = counted ? crossings() : 1, bestOrder = layers.map(L => L.slice());
  for (let sweep = 0; sweep < 12 && best > 0; sweep++) {
    const down = sweep % 2 === 0;
    for (let k = 1; k < depth; k++) {
      const l = down ? k : depth - 1 - k;
      const key = new Map();
      for (const p of layers[l]) {
        const nb = down ? pts[p].up : pts[p].down;
        key.set(p, nb.length ? nb.reduce((s, q) => s + rank[q], 0) / nb.length : rank[p]);
      }
      layers[l].sort((a, b) => key.get(a) - key.get(b));
      layers[l].forEach((p, r) => { rank[p] = r; });
    }
    if (!counted) { bestOrder = layers.map(L => L.slice()); continue; }
    const c = crossings();
    if (c < best) { best = c; bestOrder = layers.map(L => L.slice()); }
  }
  bestOrder.forEach((L, l) => { layers[l] = L; });
  setRanks();
  // x: start packed, then move each layer towards its neighbours' centres; the nearest positions
  // that keep the order and the gaps are an isotonic regression (pool adjacent violators).
  const cx = new Array(pts.length);
  for (const L of layers) {
    let x = 0;
    for (const p of L) { cx[p] = x + pts[p].w / 2; x += pts[p].w + GAP_X; }
  }
  const place = (L, want) => {
    const off = [];
    let acc = 0;
    L.forEach((p, i) => { if (i) acc += (pts[L[i - 1]].w + pts[p].w) / 2 + GAP_X; off.push(acc); });
    const blocks = [];
    L.forEach((p, i) => {
      blocks.push({sum: want[i] - off[i], count: 1});
      while (blocks.length > 1) {
        const a = blocks[blocks.length - 2], b = blocks[blocks.length - 1];
        if (a.sum / a.count <= b.sum / b.count) break;
        a.sum += b.sum; a.count += b.count; blocks.pop();
      }
    });
    let i = 0;
    for (const b of blocks) for (let k = 0; k < b.count; k++, i++) cx[L[i]] = b.sum / b.count + off[i];
  };
  // Ops line up under the ops they read (a sweep down); leaves (parameters, data) then sit by their
  // reader (a sweep up), so a chain of ops stays straight with its parameters beside it.
  const isLeaf = p => pts[p].box >= 0 && preds[pts[p].box].length === 0;
  const mean = nb => nb.reduce((s, q) => s + cx[q], 0) / nb.length;
  const alignOps = () => {
    for (let k = 0; k < depth; k++)
      place(layers[k], layers[k].map(p => {
        const ops = pts[p].up.filter(q => !isLeaf(q));
        return ops.length ? mean(ops) : cx[p];
      }));
  };
  const gatherLeaves = () => {
    for (let k = depth - 1; k >= 0; k--)
      place(layers[k], layers[k].map(p => {
        const free = isLeaf(p) || !pts[p].up.some(q => !isLeaf(q));
        return free && pts[p].down.length ? mean(pts[p].down) : cx[p];
      }));
  };
  for (let iter = 0; iter < 6; iter++) { alignOps(); gatherLeaves(); }
  alignOps();
  const minX = pts.reduce((m, p, i) => Math.min(m, cx[i] - p.w / 2), Infinity);
  const top = [];
  let y = 0;
  for (const L of layers) {
    top.push(y);
    y += L.reduce((m, p) => Math.max(m, pts[p].h), 0) + GAP_Y;
  }
  const at = i => ({x: cx[i] - minX, y: top[pts[i].layer]});
  const width = pts.reduce((m, p, i) => Math.max(m, cx[i] - minX + p.w / 2), 0);
  return {pts, routes, at, height: y, width};
}

// ---- drawing
const SVG = "http://www.w3.org/2000/svg";
function path(d, cls) {
  const p = document.createElementNS(SVG, "path");
  p.setAttribute("d", d);
  p.setAttribute("fill", "none");
  p.setAttribute("stroke", cls === "back" ? "#c0772f" : "#6b7486");
  p.setAttribute("stroke-width", "1.2");
  if (cls === "back") p.setAttribute("stroke-dasharray", "5 4");
  p.setAttribute("marker-end", cls === "back" ? "url(#arrow-back)" : "url(#arrow)");
  return p;
}
function render() {
  const {boxes, edges} = buildBoxes();
  if (!boxes.length) {
    document.getElementById("canvas").textContent = "(an empty graph)";
    return;
  }
  const canvas = document.getElementById("canvas");
  canvas.innerHTML = "";
  const svg = document.createElementNS(SVG, "svg");
  svg.id = "edges";
  svg.innerHTML = "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" " +
    "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#6b7486\"/>" +
    "</marker><marker id=\"arrow-back\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" " +
    "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#c0772f\"/></marker></defs>";
  canvas.appendChild(svg);
  const els = boxes.map(b => {
    const el = document.createElement("div");
    el.className = "box" + (b.node ? (b.node.param ? " param" : b.node.leaf ? " leaf" : "") +
                                     (b.node.id === G.output ? " output" : "") : " folded");
    if (!b.node) el.style.background = colour(b.key.replace(/\/$/, ""));
    el.innerHTML = boxHtml(b);
    el.title = b.node ? tooltip(b.node) : b.key.replace(/\/$/, "") + ": click to open";
    el.dataset.key = b.key;
    el.style.visibility = "hidden";
    canvas.appendChild(el);
    b.w = el.offsetWidth; b.h = el.offsetHeight;
    return el;
  });
  const L = layout(boxes, edges);
  els.forEach((el, i) => {
    const p = L.at(i);
    el.style.left = p.x - boxes[i].w / 2 + "px";
    el.style.top = p.y + "px";
    el.style.visibility = "visible";
  });
  const centre = i => L.at(i).x;
  const pointOf = (q, end) => {
    const p = L.pts[q], a = L.at(q);
    if (p.box < 0) return [a.x, a.y];
    return end === "in" ? [a.x, a.y] : [a.x, a.y + p.h];
  };
  for (const {edge, route} of L.routes) {
    const xy = route.map((q, i) => pointOf(q, i === 0 ? "out" : "in"));
    let d = "M" + xy[0][0] + "," + xy[0][1];
    for (let i = 1; i < xy.length; i++) {
      const [x0, y0] = xy[i - 1], [x1, y1] = xy[i], my = (y0 + y1) / 2;
      d += " C" + x0 + "," + my + " " + x1 + "," + my + " " + x1 + "," + y1;
    }
    svg.appendChild(path(d));
    if (edge.label) {
      const t = document.createElementNS(SVG, "text");
      const [x0, y0] = xy[0], [x1, y1] = xy[1];
      t.setAttribute("x", (x0 + x1) / 2 + 4); t.setAttribute("y", (y0 + y1) / 2);
      t.setAttribute("font-size", "9"); t.setAttribute("fill", "#444");
      t.textContent = edge.label;
      svg.appendChild(t);
    }
  }
  for (const e of edges.filter(e => e.u > e.v)) {  // recurrences: out of the right, back up
    const a = L.at(e.u), b = L.at(e.v);
    const x0 = a.x + boxes[e.u].w / 2, y0 = a.y + boxes[e.u].h / 2;
    const x1 = b.x + boxes[e.v].w / 2, y1 = b.y + boxes[e.v].h / 2;
    const bulge = Math.max(x0, x1) + 40 + Math.min(120, Math.abs(y0 - y1) / 6);
    svg.appendChild(path("M" + x0 + "," + y0 + " C" + bulge + "," + y0 + " " + bulge + "," + y1 +
                         " " + x1 + "," + y1, "back"));
  }
  svg.setAttribute("width", L.width + 200);
  svg.setAttribute("height", L.height);
  canvas.style.width = L.width + 200 + "px";
  canvas.style.height = L.height + "px";
  canvas.style.transform = "scale(" + zoom + ")";
  document.getElementById("counts").textContent =
    boxes.length + " boxes for " + G.nodes.length + " nodes";
  const list = document.getElementById("open-list");
  list.innerHTML = "";
  document.getElementById("open-label").style.display = open.size ? "" : "none";
  for (const k of [...open].sort()) {
    const s = document.createElement("span");
    s.textContent = k.replace(/\/$/, " (own nodes)") + " \u00d7";
    s.title = "fold " + k;
    s.onclick = () => { foldUnder(k); render(); };
    list.appendChild(s);
  }
}
function foldUnder(key) {
  const region = key.replace(/\/$/, "");
  for (const k of [...open])
    if (k === key || k.startsWith(region + ".") || k.startsWith(region + "/")) open.delete(k);
}
document.getElementById("canvas").addEventListener("click", ev => {
  const chip = ev.target.closest(".chip");
  if (chip) {  // fold the region this node sits in (its deepest open key)
    const keys = keysOf(chip.dataset.fold);
    foldUnder(keys[keys.length - 1]);
    render();
    return;
  }
  const box = ev.target.closest(".box.folded");
  if (box) { open.add(box.dataset.key); render(); }
});
document.getElementById("fold-all").onclick = () => { open = new Set(); render(); };
document.getElementById("open-all").onclick = () => { open = new Set(allKeys); render(); };
document.getElementById("zoom-in").onclick = () => { zoom = Math.min(2, zoom * 1.25); render(); };
document.getElementById("zoom-out").onclick = () => { zoom = Math.max(0.2, zoom / 1.25); render(); };
render();
)JS";

}  // namespace tapestry::detail
