// model.js: the capture as the page holds it (decoded from the payload) and what is open or folded.
// Item keys: "c<i>" a call (c0 is the capture itself), "f<i>" a folded run whose first call is i,
// "o<j>" an op, "i<k>" an input of the capture, "y" its outputs.
// A call and an op hold their fields by the names the payload gives (rows.js): a call's parent, path, type, index,
// repeat, src, ins, outs, label, title; an op's call, name, target, flags, src, args, outs, phase; both their
// metrics' values in m (m.flops) and a metric's own text in t (t.norm), for the metrics the payload lists.
// reads: DT.Rows
// defines: DT.Model DT.human DT.seconds
"use strict";
var DT = window.DT || (window.DT = {});

DT.Model = function (p) {
  var rows = this.rows = DT.Rows.use(p);
  this.p = p;
  this.title = p.title;
  this.metrics = p.metrics || [];  // [{name, label, unit, unknown, op, call, colour, fold}], in the registry's order
  this.metricOf = {};
  this.metrics.forEach(function (d) { this.metricOf[d.name] = d; }, this);
  this.calls = rows.all("c", p.c).map(function (c, i) {
    c.id = i; c.calls = []; c.ops = []; c.depth = -1; c.m = c.m || {}; c.t = c.t || {};
    return c;
  });
  this.calls.forEach(function (c) {
    if (c.parent >= 0) { var up = this.calls[c.parent]; up.calls.push(c.id); c.depth = up.depth + 1; }
  }, this);
  var noise = {}, S = p.s;
  p.noise.forEach(function (j) { noise[j] = true; });
  this.ops = rows.all("o", p.o).map(function (o, j) {
    o.id = j; o.inplace = !!(o.flags & 1); o.view = !!(o.flags & 2); o.noise = !!noise[j]; o.prod = []; o.users = [];
    o.m = o.m || {}; o.t = o.t || {};
    return o;
  });
  this.ops.forEach(function (o) { if (!o.noise) this.calls[o.call].ops.push(o.id); }, this);
  this.inputs = p["in"].map(function (k) { return S[k]; });
  this.outputs = p.out.map(function (k) { return S[k]; });
  // the capture's edges [src, dst, shape], indexed by endpoint so that nothing scans them all per redraw:
  // outE/inE[j] for op j, inE of the inputs in fromIn[k], the edges into the outputs in toOut; an end
  // N + 1 + i is call i that ran no shown op (a Dropout in eval), on the path of the tensor it passes on: its
  // edges in callE[i], those calls in empties
  this.edges = [];
  this.callE = {};
  this.empties = [];
  this.outE = this.ops.map(function () { return []; });
  this.inE = this.ops.map(function () { return []; });
  this.fromIn = this.inputs.map(function () { return []; });
  this.toOut = [];
  var N = this.ops.length;
  for (var e = 0; e < p.e.length; e += 3) {
    var a = p.e[e], b = p.e[e + 1], shape = p.e[e + 2] >= 0 ? S[p.e[e + 2]] : "", n = this.edges.length;
    this.edges.push([a, b, shape]);
    if (a > N) this.passing(a - N - 1).push(n);
    else if (a >= 0) this.outE[a].push(n); else if (this.fromIn[-1 - a]) this.fromIn[-1 - a].push(n);
    if (b > N) this.passing(b - N - 1).push(n); else if (b < N) this.inE[b].push(n); else this.toOut.push(n);
    if (a >= 0 && a < N && b < N) { this.ops[a].users.push(b); this.ops[b].prod.push(a); }
  }
  this.bound = {};  // call id -> the edges with one end inside it (computed when first drawn closed)
  // each call's ops (its sub-calls' included) as a range of op indices, where they ran one after another
  this.calls.forEach(function (c) { c.lo = Infinity; c.hi = -1; c.count = 0; });
  this.ops.forEach(function (o, j) {
    for (var c = o.call; c >= 0; c = this.calls[c].parent) {
      var k = this.calls[c];
      if (j < k.lo) k.lo = j;
      if (j > k.hi) k.hi = j;
      k.count++;
    }
  }, this);
  this.calls.forEach(function (c) { c.span = c.count > 0 && c.hi - c.lo + 1 === c.count; });
  this.runOf = {};  // first call -> its run (call ids); laterOf: a later repetition -> the run's first call
  this.laterOf = {};
  this.runLabels = {};  // first call -> the run's label (views.run_label)
  p.fold.forEach(function (run, n) {
    this.runOf[run[0]] = run;
    this.runLabels[run[0]] = S[p.fl[n]];
    for (var k = 1; k < run.length; k++) this.laterOf[run[k]] = run[0];
  }, this);
  this.foldOn = p.fold.length > 0;
  this.unfolded = {};  // first call of a run -> true when the user unfolded it
  this.open = { 0: true };
  this.version = {};  // call id -> counter, bumped when anything inside it opens or closes (layout cache key)
  var depth = p.open;
  this.calls.forEach(function (c) { if (c.id && (depth < 0 ? c.calls.length + c.ops.length : c.depth < depth && c.calls.length)) this.open[c.id] = true; }, this);
};

// The edges of call i that ran no shown op (created on first use).
DT.Model.prototype.passing = function (i) {
  if (!this.callE[i]) { this.callE[i] = []; this.empties.push(i); }
  return this.callE[i];
};

// The labels Python wrote (never recomputed here): Call.label ("layer1.0.relu#2"), the views' call_label
// ("layer1.0.relu#2 (ReLU)"), and a folded run's views.run_label ("layer1.1–2 ×2").
DT.Model.prototype.label = function (c) { return c.label; };
DT.Model.prototype.callLabel = function (c) { return c.title; };
DT.Model.prototype.runLabel = function (run) { return this.runLabels[run[0]]; };

// Whether call i stands inside a folded run: returns the run's first call, else -1.
DT.Model.prototype.folded = function (i) {
  if (!this.foldOn) return -1;
  var first = this.runOf[i] ? i : this.laterOf[i];
  return first !== undefined && !this.unfolded[first] ? first : -1;
};

// The key of the item that shows call i's contents at its own level (its box, or its run's box).
DT.Model.prototype.callKey = function (i) {
  var f = this.folded(i);
  return f >= 0 ? "f" + f : "c" + i;
};

// The visible item that stands for op j: the outermost closed (or folded) call around it, else the op.
DT.Model.prototype.leafOfOp = function (j) {
  var chain = [], c = this.ops[j].call;
  while (c > 0) { chain.push(c); c = this.calls[c].parent; }
  for (var k = chain.length - 1; k >= 0; k--) {
    var f = this.folded(chain[k]);
    if (f >= 0) return "f" + f;
    if (!this.open[chain[k]]) return "c" + chain[k];
  }
  return this.ops[j].noise ? null : "o" + j;
};

// The visible item that stands for call i: the outermost closed (or folded) call around it, else its own box.
DT.Model.prototype.leafOfCall = function (i) {
  var chain = [];
  for (var c = i; c > 0; c = this.calls[c].parent) chain.push(c);
  for (var k = chain.length - 1; k >= 0; k--) {
    var f = this.folded(chain[k]);
    if (f >= 0) return "f" + f;
    if (!this.open[chain[k]] || k === 0) return "c" + chain[k];
  }
  return "c" + i;
};

DT.Model.prototype.leafOfEnd = function (v) {
  var N = this.ops.length;
  if (v < 0) return "i" + (-1 - v);
  if (v === N) return "y";
  if (v > N) return this.leafOfCall(v - N - 1);
  return this.leafOfOp(v);
};

// Whether edge end v (an op, or an empty call N + 1 + i) lies inside call i.
DT.Model.prototype.endInside = function (v, i) {
  var N = this.ops.length;
  if (v < 0 || v === N) return false;
  if (v < N) return this.inside(v, i);
  for (var c = v - N - 1; c >= 0; c = this.calls[c].parent) if (c === i) return true;
  return false;
};

// The container (an open call's key, "c<i>") that an item is drawn in.
DT.Model.prototype.container = function (key) {
  var t = key[0], n = +key.slice(1);
  if (t === "o") return "c" + this.ops[n].call;
  if (t === "c" || t === "f") return "c" + this.calls[n].parent;
  return "c0";  // inputs and outputs
};

// The items drawn directly inside open call i, in the order they ran (folded runs once).
DT.Model.prototype.children = function (i) {
  var c = this.calls[i], out = [], seen = {};
  c.calls.forEach(function (k) {
    var key = this.callKey(k);
    if (!seen[key]) { seen[key] = true; out.push(key); }
  }, this);
  c.ops.forEach(function (j) { out.push("o" + j); });
  if (i === 0) {
    this.inputs.forEach(function (_, k) { out.unshift("i" + (this.inputs.length - 1 - k)); }, this);
    if (this.outputs.length) out.push("y");
  }
  return out;
};

DT.Model.prototype.isOpen = function (key) { return key[0] === "c" && !!this.open[+key.slice(1)]; };

DT.Model.prototype.touch = function (i) {
  for (var c = i; c >= 0; c = this.calls[c].parent) this.version[c] = (this.version[c] || 0) + 1;
};

// Open or close a call, or unfold a run (opening its repetitions as closed boxes).
DT.Model.prototype.toggle = function (key) {
  var n = +key.slice(1);
  if (key[0] === "f") {  // its repetitions appear closed, each opens with a click
    this.unfolded[n] = true;
    this.runOf[n].forEach(function (i) { delete this.open[i]; }, this);
    this.touch(this.calls[n].parent);
    return;
  }
  if (key[0] !== "c" || n === 0) return;
  if (this.open[n]) delete this.open[n]; else this.open[n] = true;
  this.touch(n);
};

// Make item key visible: open every call around it and unfold every run it lies in.
DT.Model.prototype.reveal = function (key) {
  var c = key[0] === "o" ? this.ops[+key.slice(1)].call : key[0] === "c" ? this.calls[+key.slice(1)].parent : 0;
  var self = key[0] === "c" ? +key.slice(1) : -1;
  for (; c > 0; c = this.calls[c].parent) {
    if (!this.open[c]) { this.open[c] = true; this.touch(c); }
  }
  for (c = key[0] === "o" ? this.ops[+key.slice(1)].call : self; c > 0; c = this.calls[c].parent) {
    var f = this.folded(c);
    if (f >= 0) { this.unfolded[f] = true; this.touch(this.calls[f].parent); }
  }
};

DT.Model.prototype.hasInside = function (i) { return this.calls[i].calls.length + this.calls[i].ops.length > 0; };

DT.Model.prototype.setOpen = function (i, on) {
  if (!!this.open[i] === on || (on && !this.hasInside(i))) return;
  if (on) this.open[i] = true; else delete this.open[i];
  this.touch(i);
};

// "open to depth N": every call shallower than depth N open (the model's own call is depth 0), the rest closed.
DT.Model.prototype.openTo = function (depth) {
  this.calls.forEach(function (c) { if (c.id) this.setOpen(c.id, c.depth < depth); }, this);
};

// "open all inside": call i (or run i's calls) and everything inside open, every run inside unfolded.
DT.Model.prototype.openAll = function (key) {
  var self = this, n = +key.slice(1);
  if (key[0] === "i" || key[0] === "y" || key[0] === "o") return;
  (function visit(i) {
    var f = self.folded(i);
    if (f >= 0) { self.unfolded[f] = true; self.touch(self.calls[f].parent); }
    self.setOpen(i, true);
    self.calls[i].calls.forEach(visit);
  })(n);
  if (key[0] === "f") this.runOf[n].forEach(function (i) { if (i !== n) this.openAll("c" + i); }, this);
};

DT.Model.prototype.setFold = function (on) {
  this.foldOn = on && this.p.fold.length > 0;
  this.version = {};
};

// Whether op j runs inside call i (i itself or one of its sub-calls).
DT.Model.prototype.inside = function (j, i) {
  var k = this.calls[i];
  if (k.span) return j >= k.lo && j <= k.hi;
  for (var c = this.ops[j].call; c >= 0; c = this.calls[c].parent) if (c === i) return true;
  return false;
};

// Every op inside call i, its sub-calls' included.
DT.Model.prototype.allOps = function (i, out) {
  out = out || [];
  var c = this.calls[i];
  c.ops.forEach(function (j) { out.push(j); });
  c.calls.forEach(function (k) { this.allOps(k, out); }, this);
  return out;
};

// The edges with exactly one end inside call i, cached: what a closed call shows.
DT.Model.prototype.boundary = function (i) {
  var hit = this.bound[i];
  if (hit) return hit;
  var out = [], self = this, N = this.ops.length, c = this.calls[i];
  function visit(j) {
    self.inE[j].forEach(function (e) { if (!self.endInside(self.edges[e][0], i)) out.push(e); });
    self.outE[j].forEach(function (e) { if (!self.endInside(self.edges[e][1], i)) out.push(e); });
  }
  if (c.span) for (var j = c.lo; j <= c.hi; j++) visit(j);  // noise ops among them have no edges
  else this.allOps(i).forEach(visit);
  this.empties.forEach(function (k) {  // the empty calls inside: their edges that leave i
    if (!self.endInside(N + 1 + k, i)) return;
    self.callE[k].forEach(function (e) { var x = self.edges[e]; if (!self.endInside(x[0], i) || !self.endInside(x[1], i)) out.push(e); });
  });
  return (this.bound[i] = out);
};

// The capture's edges that touch visible item key (an op's own, a closed call's or run's boundary).
DT.Model.prototype.edgesOf = function (key) {
  var t = key[0], n = +key.slice(1);
  if (t === "o") return this.inE[n].concat(this.outE[n]);
  if (t === "i") return this.fromIn[n] || [];
  if (t === "y") return this.toOut;
  if (t === "c" && this.callE[n]) return this.callE[n];
  var out = [];
  (t === "f" ? this.runOf[n] : [n]).forEach(function (i) { out = out.concat(this.boundary(i)); }, this);
  return out;
};

// Every visible item, containers first: the open calls' children, depth first.
DT.Model.prototype.visible = function () {
  var out = [], self = this;
  (function visit(i) {
    self.children(i).forEach(function (k) { out.push(k); if (self.isOpen(k)) visit(+k.slice(1)); });
  })(0);
  return out;
};

// The edges among visible items: [srcKey, dstKey, shapes], one per pair. The cost follows the
// visible items' own edges (indexed by endpoint), not the capture's size.
DT.Model.prototype.visibleEdges = function (keys) {
  var seen = {}, pairs = {}, out = [], self = this, done = {};
  (keys || this.visible()).forEach(function (key) {
    if (self.isOpen(key)) return;
    self.edgesOf(key).forEach(function (e) {
      if (done[e]) return;
      done[e] = true;
      var a = self.leafOfEnd(self.edges[e][0]), b = self.leafOfEnd(self.edges[e][1]);
      if (a === null || b === null || a === b) return;
      var id = a + ">" + b, shape = self.edges[e][2], hit = pairs[id];
      if (!hit) { hit = pairs[id] = [a, b, [], e]; out.push(hit); }
      if (shape && hit[2].length < 6 && hit[2].indexOf(shape) < 0) hit[2].push(shape);
    });
  });
  out.sort(function (x, y) { return x[3] - y[3]; });  // capture order
  return out;
};

// Ops (and "i<k>" inputs, "y" outputs) upstream or downstream of item key, the item's own excluded.
DT.Model.prototype.trace = function (key, dir) {
  var t = key[0], n = +key.slice(1), N = this.ops.length, start = [], mine = {}, self = this;
  if (t === "o") start = [n];
  else if (t === "c" && this.callE[n]) start = [N + 1 + n];
  else if (t === "c" || t === "f") (t === "f" ? this.runOf[n] : [n]).forEach(function (i) { start = start.concat(self.allOps(i)); });
  start.forEach(function (j) { mine[j] = true; });
  var seen = {}, stack = [], count = 0, far = dir === "up" ? 0 : 1;
  function expand(list) { list.forEach(function (e) { stack.push(self.edges[e][far]); }); }
  function along(j) { return j > N ? self.callE[j - N - 1].filter(function (e) { return self.edges[e][far] !== j; }) : dir === "up" ? self.inE[j] : self.outE[j]; }
  start.forEach(function (j) { expand(along(j)); });
  if (t === "i" && dir === "down") expand(this.fromIn[n]);
  if (t === "y" && dir === "up") expand(this.toOut);
  while (stack.length) {
    var j = stack.pop();
    if (j < 0) { seen["i" + (-1 - j)] = true; continue; }
    if (j === N) { seen.y = true; continue; }
    if (mine[j] || seen[j]) continue;
    seen[j] = true;
    if (j < N) count++;
    expand(along(j));
  }
  return { ops: seen, count: count };
};

// The chain of containers from the capture down to the one holding key ("c0" first).
DT.Model.prototype.path = function (key) {
  var out = [key];
  while (key !== "c0") { key = this.container(key); out.unshift(key); }
  return out;
};

// The value of metric name for item key: an op's, a call's, a folded run's (its calls' added up, or the largest:
// the metric's fold); null where it has none.
DT.Model.prototype.metric = function (key, name) {
  var t = key[0], n = +key.slice(1), d = this.metricOf[name];
  if (!d) return null;
  if (t === "o") { var v = this.ops[n].m[name]; return d.op && typeof v === "number" ? v : null; }
  if ((t !== "c" && t !== "f") || !d.call) return null;
  var out = null;
  (t === "f" ? this.runOf[n] : [n]).forEach(function (i) {
    var x = this.calls[i].m[name];
    if (typeof x === "number") out = out === null ? x : d.fold === "max" ? Math.max(out, x) : out + x;
  }, this);
  return out;
};

// The text of metric name's value for item key, as Python writes it: its own text for a single item when the
// metric has its own format, else human() of the value; the metric's unknown text for none.
DT.Model.prototype.metricText = function (key, name) {
  var d = this.metricOf[name], t = key[0], n = +key.slice(1), v = this.metric(key, name);
  var own = t === "o" ? this.ops[n].t : t === "c" ? this.calls[n].t : {};
  if (own[name] !== undefined && own[name] !== null) return own[name];
  return v === null ? d.unknown : DT.human(v, d.unit);
};

// Python's _text.human: a count in SI units with two or three significant digits; seconds as DT.seconds.
DT.human = function (n, unit) {
  if (unit === "s") return DT.seconds(n);
  var prefixes = ["", "k", "M", "G", "T", "P", "E"], v = n, i = 0;
  while (Math.abs(v) >= 999.5 && i < prefixes.length - 1) { v /= 1000; i++; }
  var text = i === 0 ? String(n) : Math.abs(v) < 10 || (Math.abs(v) < 100 && !unit) ? v.toFixed(1) : v.toFixed(0);
  return (text + " " + prefixes[i] + (unit || "")).replace(/\s+$/, "");
};

// Python's views._time_metrics.seconds: three significant digits in s, ms or µs (a time is under a second).
DT.seconds = function (v) {
  if (v === 0) return "0 s";
  var units = [[1, "s"], [1e-3, "ms"], [1e-6, "µs"]];
  for (var i = 0; i < units.length; i++) {
    var scale = units[i][0], unit = units[i][1];
    if (Math.abs(v) >= scale * 0.9995 || unit === "µs") {
      var x = v / scale, digits = Math.abs(x) < 9.995 ? 2 : Math.abs(x) < 99.95 ? 1 : 0;
      return x.toFixed(digits) + " " + unit;
    }
  }
};

DT.Model.prototype.typeOf = function (key) {
  var t = key[0], n = +key.slice(1);
  if (t === "c" || t === "f") return this.calls[n].type;
  if (t === "o") return this.ops[n].target.split(".").slice(0, 2).join(".");
  return "input/output";
};
