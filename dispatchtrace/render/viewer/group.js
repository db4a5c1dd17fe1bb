// group.js: lays out one open call over its direct children (closed sub-calls are single boxes, open ones
// boxes of the size their own layout gave). It runs in the page's Web Worker (made from this very text,
// see layout.js) and, only where a worker cannot start, on the page itself. No DOM here.
// reads: dagre
// defines: DT.HEAD_H DT.NODE_H DT.PAD DT.RANK_LIMIT DT.dagreAt DT.layoutGroup DT.layoutJobs DT.ranks DT.shift
"use strict";
var DT = self.DT || (self.DT = {});  // self: the window on the page, the global scope in the worker

DT.NODE_H = 34;
DT.HEAD_H = 22;
DT.PAD = 12;
DT.RANK_LIMIT = 600;  // more direct children than this: a simple rank layout instead of dagre

// Lay out jobs in order (each one an open call, inner calls first); returns {"c<id>": {w, h, at}}.
// A job: {id, kids: [key], size: {key: {w, h}} (an open kid laid out in this batch is taken from it),
// edges: [[a, b]] (indices into kids), top, title (minimal width), prev (positions to keep, or null)}.
DT.layoutJobs = function (jobs) {
  var done = {};
  jobs.forEach(function (j) {
    var size = {};
    j.kids.forEach(function (k) { var d = j.size[k] || done[k]; size[k] = { w: d.w, h: d.h }; });
    done["c" + j.id] = DT.layoutGroup(j, size);
  });
  return done;
};

DT.layoutGroup = function (j, size) {
  var at;
  if (j.prev) at = DT.shift(j.prev, size, j.kids);
  else {
    at = j.kids.length > DT.RANK_LIMIT ? DT.ranks(j.kids, size, j.edges) : DT.dagreAt(j.kids, size, j.edges);
    j.kids.forEach(function (k) { at[k].x += DT.PAD; at[k].y += j.top; });
  }
  var w = 0, h = 0;
  j.kids.forEach(function (k) { w = Math.max(w, at[k].x + at[k].w); h = Math.max(h, at[k].y + at[k].h); });
  return { w: Math.max(w + DT.PAD, j.title, 80), h: Math.max(h, j.top) + DT.PAD, at: at };
};

DT.dagreAt = function (kids, size, edges) {
  var g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 28, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(function () { return {}; });
  kids.forEach(function (k) { g.setNode(k, { width: size[k].w, height: size[k].h }); });
  edges.forEach(function (e) { g.setEdge(kids[e[0]], kids[e[1]]); });
  dagre.layout(g);
  var at = {};
  kids.forEach(function (k) {
    var n = g.node(k);
    at[k] = { x: n.x - size[k].w / 2, y: n.y - size[k].h / 2, w: size[k].w, h: size[k].h };
  });
  return at;
};

// The fallback for a call with thousands of direct children: longest-path ranks, one row per rank.
DT.ranks = function (kids, size, edges) {
  var rank = kids.map(function () { return 0; });
  edges.slice().sort(function (a, b) { return a[1] - b[1]; }).forEach(function (e) {
    if (e[0] < e[1]) rank[e[1]] = Math.max(rank[e[1]], rank[e[0]] + 1);
  });
  var rows = [];
  kids.forEach(function (k, n) { (rows[rank[n]] = rows[rank[n]] || []).push(k); });
  var at = {}, y = 0;
  rows.forEach(function (row) {
    if (!row) return;
    var x = 0, h = 0;
    row.forEach(function (k) { at[k] = { x: x, y: y, w: size[k].w, h: size[k].h }; x += size[k].w + 18; h = Math.max(h, size[k].h); });
    y += h + 28;
  });
  return at;
};

// The same children, only some of them resized (a sub-call opened or closed): keep every box where it
// was, grow each resized one from its top left corner, and move down what lies below it and right what
// lies beside it, by as much as it grew.
DT.shift = function (prev, size, kids) {
  var at = {};
  kids.forEach(function (k) { var p = prev[k]; at[k] = { x: p.x, y: p.y, w: p.w, h: p.h }; });
  kids.forEach(function (k) {
    var a = at[k], dw = size[k].w - a.w, dh = size[k].h - a.h, bottom = a.y + a.h, right = a.x + a.w;
    if (!dw && !dh) return;
    kids.forEach(function (o) {
      if (o === k) return;
      var b = at[o];
      if (b.y >= bottom - 0.5) b.y += dh;
      else if (b.y + b.h > a.y && b.x >= right - 0.5) b.x += dw;
    });
    a.w = size[k].w;
    a.h = size[k].h;
  });
  return at;
};
