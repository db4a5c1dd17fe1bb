// layout.js: where each visible item goes. Each open call is laid out over its direct children only
// (open sub-calls as boxes of the size their own layout gave), and each result is cached until
// something inside that call opens or closes, so the cost follows what is visible.
"use strict";
var DT = window.DT || (window.DT = {});

DT.NODE_H = 34;
DT.HEAD_H = 22;
DT.PAD = 12;
DT.RANK_LIMIT = 1500;  // more direct children than this: a simple rank layout instead of dagre

DT.Layout = function (model) {
  this.m = model;
  this.cache = {};  // call id -> {v: version, r: result}
};

DT.Layout.prototype.text = function (key) {
  var m = this.m, t = key[0], n = +key.slice(1);
  if (t === "c") { var c = m.calls[n]; return [m.label(c), c.type]; }
  if (t === "f") return [m.runLabel(m.runOf[n]), m.calls[n].type];
  if (t === "o") { var o = m.ops[n]; return [o.name, o.target.replace(/^aten\./, "").replace(/\.default$/, "")]; }
  if (t === "i") return ["input", m.inputs[n]];
  return ["output", m.outputs.join(", ")];
};

DT.Layout.prototype.leafSize = function (key) {
  var lines = this.text(key), len = Math.max(lines[0].length, lines[1].length * 0.9);
  return { w: Math.max(60, Math.min(360, Math.ceil(len * 7.2) + 22)), h: DT.NODE_H };
};

// The edges between direct children of each open call: every visible edge maps to one edge
// between the two children of the innermost open call holding both ends. {call key: [[a, b], ...]}
DT.Layout.prototype.group = function (edges) {
  var m = this.m, out = {}, seen = {};
  edges.forEach(function (e) {
    var a = m.path(e[0]), b = m.path(e[1]), k = 0;
    while (k + 1 < a.length && k + 1 < b.length && a[k + 1] === b[k + 1]) k++;
    if (k + 1 >= a.length || k + 1 >= b.length) return;
    var x = a[k + 1], y = b[k + 1], id = x + ">" + y;
    if (seen[id]) return;
    seen[id] = true;
    (out[a[k]] = out[a[k]] || []).push([x, y]);
  });
  return out;
};

// {w, h, at: {key: {x, y, w, h}}} for open call i (positions relative to its box's top left).
DT.Layout.prototype.box = function (i, edges) {
  var m = this.m, v = m.version[i] || 0, hit = this.cache[i];
  if (hit && hit.v === v) return hit.r;
  var kids = m.children(i), size = {}, self = this;
  kids.forEach(function (k) {
    if (m.isOpen(k)) { var r = self.box(+k.slice(1), edges); size[k] = { w: r.w, h: r.h }; }
    else size[k] = self.leafSize(k);
  });
  var inner = edges["c" + i] || [];
  var at = kids.length > DT.RANK_LIMIT ? this.ranks(kids, size, inner) : this.dagre(kids, size, inner);
  var w = 0, h = 0;
  kids.forEach(function (k) { w = Math.max(w, at[k].x + at[k].w); h = Math.max(h, at[k].y + at[k].h); });
  var top = i === 0 ? DT.PAD : DT.HEAD_H + DT.PAD;
  kids.forEach(function (k) { at[k].x += DT.PAD; at[k].y += top; });
  var title = i === 0 ? 0 : this.text("c" + i)[0].length * 6.6 + 60;
  var r = { w: Math.max(w + 2 * DT.PAD, title, 80), h: h + top + DT.PAD, at: at };
  this.cache[i] = { v: v, r: r };
  return r;
};

DT.Layout.prototype.dagre = function (kids, size, inner) {
  var g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 28, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(function () { return {}; });
  kids.forEach(function (k) { g.setNode(k, { width: size[k].w, height: size[k].h }); });
  inner.forEach(function (e) { g.setEdge(e[0], e[1]); });
  dagre.layout(g);
  var at = {};
  kids.forEach(function (k) {
    var n = g.node(k);
    at[k] = { x: n.x - size[k].w / 2, y: n.y - size[k].h / 2, w: size[k].w, h: size[k].h };
  });
  return at;
};

// The fallback for a call with thousands of direct children: longest-path ranks, one row per rank.
DT.Layout.prototype.ranks = function (kids, size, inner) {
  var rank = {}, idx = {};
  kids.forEach(function (k, n) { rank[k] = 0; idx[k] = n; });
  var sorted = inner.slice().sort(function (a, b) { return idx[a[1]] - idx[b[1]]; });
  sorted.forEach(function (e) { if (idx[e[0]] < idx[e[1]]) rank[e[1]] = Math.max(rank[e[1]], rank[e[0]] + 1); });
  var rows = [];
  kids.forEach(function (k) { (rows[rank[k]] = rows[rank[k]] || []).push(k); });
  var at = {}, y = 0;
  rows.forEach(function (row) {
    if (!row) return;
    var x = 0, h = 0;
    row.forEach(function (k) { at[k] = { x: x, y: y, w: size[k].w, h: size[k].h }; x += size[k].w + 18; h = Math.max(h, size[k].h); });
    y += h + 28;
  });
  return at;
};

// Absolute positions of everything visible: {key: {x, y, w, h, open}}.
DT.Layout.prototype.place = function (visible) {
  var out = {}, self = this, edges = this.group(visible);
  function visit(i, x0, y0) {
    var r = self.box(i, edges);
    Object.keys(r.at).forEach(function (k) {
      var a = r.at[k], p = { x: x0 + a.x, y: y0 + a.y, w: a.w, h: a.h, open: self.m.isOpen(k) };
      out[k] = p;
      if (p.open) visit(+k.slice(1), p.x, p.y);
    });
    return r;
  }
  var root = visit(0, 0, 0);
  out.c0 = { x: 0, y: 0, w: root.w, h: root.h, open: true };
  return out;
};
