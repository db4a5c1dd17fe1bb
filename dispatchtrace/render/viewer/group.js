// group.js: lays out one open call over its direct children (closed sub-calls are single boxes, open ones
// boxes of the size their own layout gave). It runs in the page's Web Worker (made from this very text,
// see layout.js) and, only where a worker cannot start, on the page itself. No DOM here.
// reads: dagre
// defines: DT.HEAD_H DT.NODE_H DT.PAD DT.PORT DT.RANK_LIMIT DT.dagreAt DT.layoutGroup DT.layoutJobs DT.ranks DT.shift DT.shiftRoute DT.square DT.tidy
"use strict";
var DT = self.DT || (self.DT = {});  // self: the window on the page, the global scope in the worker

DT.NODE_H = 34;
DT.HEAD_H = 22;
DT.PAD = 12;
DT.RANK_LIMIT = 600;  // more direct children than this: a simple rank layout instead of dagre

// Lay out jobs in order (each one an open call, inner calls first); returns {"c<id>": {w, h, at, routes}}.
// A job: {id, kids: [key], size: {key: {w, h}} (an open kid laid out in this batch is taken from it),
// edges: [[a, b]] (indices into kids), top, title (minimal width), prev (the layout to keep, or null)}.
// Two kids may be ports: "^" where edges from outside the call enter it, "$" where edges leave it; the
// layout puts "^" above every other kid and "$" below, so an edge between levels reaches its box's
// margin from its port without passing a box. routes: {"a>b": [[x, y], ...]}, dagre's own edge points.
DT.layoutJobs = function (jobs) {
  var done = {};
  jobs.forEach(function (j) {
    var size = {};
    j.kids.forEach(function (k) { var d = j.size[k] || done[k]; size[k] = { w: d.w, h: d.h }; });
    done["c" + j.id] = DT.layoutGroup(j, size);
  });
  return done;
};

DT.PORT = 2;  // a port's width and height

DT.layoutGroup = function (j, size) {
  var r;
  if (j.prev) r = DT.shift(j.prev, size, j.kids);
  else {
    r = j.kids.length > DT.RANK_LIMIT ? { at: DT.ranks(j.kids, size, j.edges), routes: {} } : DT.dagreAt(j.kids, size, j.edges);
    j.kids.forEach(function (k) { r.at[k].x += DT.PAD; r.at[k].y += j.top; });
    Object.keys(r.routes).forEach(function (id) { r.routes[id].forEach(function (p) { p[0] += DT.PAD; p[1] += j.top; }); });
  }
  var w = 0, h = 0, at = r.at;
  j.kids.forEach(function (k) { w = Math.max(w, at[k].x + at[k].w); h = Math.max(h, at[k].y + at[k].h); });
  return { w: Math.max(w + DT.PAD, j.title, 80), h: Math.max(h, j.top) + DT.PAD, at: at, routes: r.routes };
};

DT.dagreAt = function (kids, size, edges) {
  var g = new dagre.graphlib.Graph(), into = {}, from = {};
  g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 28, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(function () { return {}; });
  kids.forEach(function (k) { g.setNode(k, { width: size[k].w, height: size[k].h }); });
  edges.forEach(function (e) { g.setEdge(kids[e[0]], kids[e[1]]); into[kids[e[1]]] = from[kids[e[0]]] = true; });
  // the ports above and below everything: weightless edges to the kids nothing enters, from those nothing leaves
  kids.forEach(function (k) {
    if (k === "^" || k === "$") return;
    if (size["^"] && !into[k]) g.setEdge("^", k, { weight: 0, helper: true });
    if (size["$"] && !from[k]) g.setEdge(k, "$", { weight: 0, helper: true });
  });
  dagre.layout(g);
  var at = {}, routes = {};
  kids.forEach(function (k) {
    var n = g.node(k);
    at[k] = { x: n.x - size[k].w / 2, y: n.y - size[k].h / 2, w: size[k].w, h: size[k].h };
  });
  edges.forEach(function (e) {
    var a = kids[e[0]], b = kids[e[1]], d = g.edge(a, b);
    if (d && d.points && !d.helper) routes[a + ">" + b] = DT.square(d.points, at[a], at[b]);
  });
  return { at: at, routes: routes };
};

// dagre's edge points as a path of vertical and horizontal segments that keeps to the gaps. dagre
// places an edge's inner points on every rank it spans, ranks alternating between rows of boxes and
// the empty rows between them (it doubles the ranks to make room for labels), the first and last inner
// points in empty rows; its straight segments cut the corners of boxes beside them. Here the path
// leaves the bottom middle of its source, runs sideways only along an empty row, and goes up or down
// only at an inner point's x (where dagre left room in that row of boxes), to the top middle of its
// target. An edge dagre turned round (a cycle) is squared the same way upwards.
DT.square = function (points, from, to) {
  var p = points.map(function (q) { return [q.x, q.y]; });
  if (p.length < 3) return p;
  var up = p[0][1] > p[p.length - 1][1];
  if (up) { p.reverse(); var t = from; from = to; to = t; }
  var inner = p.slice(1, -1), x = from.x + from.w / 2, y = inner[0][1], out = [[x, from.y + from.h], [x, y]];
  for (var k = 1; k + 1 < inner.length; k += 2) {  // inner[k] in a row of boxes, inner[k + 1] in the empty row below
    x = inner[k][0];
    out.push([x, y]);
    y = inner[k + 1][1];
    out.push([x, y]);
  }
  x = to.x + to.w / 2;
  out.push([x, y], [x, to.y]);
  return DT.tidy(up ? out.reverse() : out);
};

// A path without repeated points or points in the middle of a straight run.
DT.tidy = function (pts) {
  var out = [];
  pts.forEach(function (q) {
    var n = out.length;
    if (n && Math.abs(out[n - 1][0] - q[0]) < 0.01 && Math.abs(out[n - 1][1] - q[1]) < 0.01) return;
    if (n > 1) {
      var a = out[n - 2], b = out[n - 1];
      if ((Math.abs(a[0] - b[0]) < 0.01 && Math.abs(b[0] - q[0]) < 0.01) || (Math.abs(a[1] - b[1]) < 0.01 && Math.abs(b[1] - q[1]) < 0.01)) out.pop();
    }
    out.push(q);
  });
  return out;
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
// lies beside it, by as much as it grew. The edges' points move by the same rule (DT.shiftRoute), so
// they keep to the gaps between the boxes they ran between.
// One route after box a grew by dw, dh: a point below a moves down, one level with a and to its right
// moves right (a point on a's top line too: the end of an edge into a box beside a); a vertical segment right
// of a that ends on that line steps right in the gap above it; one that enters or leaves a's band is split
// there, and steps right along a's top where it enters and down then back along a's new bottom where it leaves, so no
// part of it runs through a's new extent or the boxes that moved.
DT.shiftRoute = function (pts, a, dw, dh) {
  var top = a.y, bottom = a.y + a.h, right = a.x + a.w, out = [];
  function move(p) {
    if (p[1] >= bottom - 0.5) return [p[0], p[1] + dh];
    if (p[1] > top - 0.5 && p[0] >= right - 0.5) return [p[0] + dw, p[1]];  // (on a's top line too: an end on a box beside a)
    return [p[0], p[1]];
  }
  for (var i = 0; i < pts.length; i++) {
    var p = pts[i], q = pts[i + 1];
    out.push(move(p));
    if (!q || Math.abs(p[0] - q[0]) > 0.01 || p[0] < right - 0.5) continue;
    var x = p[0], lo = Math.min(p[1], q[1]), hi = Math.max(p[1], q[1]), steps = [];
    if (lo < top - 0.5 && hi > top + 0.5) steps.push([[x, top], [x + dw, top]]);
    else if (lo < top - 0.5 && Math.abs(hi - top) <= 0.5) steps.push([[x, lo], [x + dw, lo]]);  // ends on the top line: step in the gap
    if (lo < bottom - 0.5 && hi > bottom - 0.5) steps.push([[x + dw, bottom], [x + dw, bottom + dh], [x, bottom + dh]]);
    if (q[1] < p[1]) { steps.reverse(); steps.forEach(function (s) { s.reverse(); }); }
    steps.forEach(function (s) { s.forEach(function (r) { out.push(r); }); });
  }
  return out;
};

DT.shift = function (prev, size, kids) {
  var at = {}, routes = {};
  kids.forEach(function (k) { var p = prev.at[k]; at[k] = { x: p.x, y: p.y, w: p.w, h: p.h }; });
  Object.keys(prev.routes || {}).forEach(function (id) { routes[id] = prev.routes[id].map(function (p) { return [p[0], p[1]]; }); });
  kids.forEach(function (k) {
    var a = at[k], dw = size[k].w - a.w, dh = size[k].h - a.h, bottom = a.y + a.h, right = a.x + a.w;
    if (!dw && !dh) return;
    kids.forEach(function (o) {
      if (o === k) return;
      var b = at[o];
      if (b.y >= bottom - 0.5) b.y += dh;
      else if (b.y + b.h > a.y && b.x >= right - 0.5) b.x += dw;
    });
    Object.keys(routes).forEach(function (id) { routes[id] = DT.tidy(DT.shiftRoute(routes[id], a, dw, dh)); });
    a.w = size[k].w;
    a.h = size[k].h;
  });
  return { at: at, routes: routes };
};
