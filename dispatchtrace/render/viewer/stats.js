// stats.js: the capture's values (values="stats"): each op's and call's statistics as text, which items hold
// a NaN or Inf, their norms, and the op that made the first non-finite value (Python's g.first_nonfinite()).
// reads: (nothing)
// defines: DT.Values DT.g4 DT.statsText
"use strict";
var DT = window.DT || (window.DT = {});

// From the payload's vals/st/cst/nf fields (render/_html_stats.py); m a DT.Model.
DT.Values = function (m) {
  var p = m.p;
  this.m = m;
  this.state = p.vals || "none";  // "stats", "none" (no values asked for) or "absent" (meta or fake tensors)
  this.on = this.state === "stats";
  this.ops = p.st || [];
  this.calls = p.cst || [];
  this.nf = p.nf || null;  // {op, name, text, carried, phase} or null when every value is finite
  this.first = this.nf && this.nf.op !== null ? this.nf.op : -1;
  this.badOp = {};
  this.badCall = {};  // calls with an op inside (their sub-calls' included) whose results hold a NaN or Inf
  this.ops.forEach(function (row, j) {
    if (!row[0].some(function (t) { return DT.Values.bad(t[1]); })) return;
    this.badOp[j] = true;
    for (var c = m.ops[j].call; c >= 0; c = m.calls[c].parent) this.badCall[c] = true;
  }, this);
};

// Whether one stats row [numel, nan, +inf, -inf, zeros, min, max, mean, norm] holds a non-finite value.
DT.Values.bad = function (s) { return !!s && s[1] + s[2] + s[3] > 0; };

// One line saying why there are no values (null when there are).
DT.Values.prototype.missing = function () {
  if (this.state === "none") return 'not recorded: capture with values="stats" (CLI: --values stats)';
  if (this.state === "absent") return "none: meta or fake tensors have no values";
  return null;
};

// Whether the item with key holds a non-finite value: an op's results, anything inside a call or a folded run.
DT.Values.prototype.bad = function (key) {
  var t = key[0], n = +key.slice(1), m = this.m;
  if (t === "o") return !!this.badOp[n];
  if (t === "c") return !!this.badCall[n];
  if (t === "f") return (m.runOf[n] || [n]).some(function (i) { return this.badCall[i]; }, this);
  return false;
};

// The L2 norm of an item's results (the largest of its tensors'): an op's results, a call's (a run's) outputs.
DT.Values.prototype.norm = function (key) {
  var t = key[0], n = +key.slice(1), m = this.m, rows = [];
  if (t === "o" && this.ops[n]) rows = this.ops[n][0].map(function (x) { return x[1]; });
  else if (t === "c" && this.calls[n]) rows = this.calls[n];
  else if (t === "f") (m.runOf[n] || [n]).forEach(function (i) { rows = rows.concat(this.calls[i] || []); }, this);
  var best = null;
  rows.forEach(function (s) { if (s && typeof s[8] === "number" && (best === null || s[8] > best)) best = s[8]; });
  return best;
};

// Python's f"{v:.4g}": four significant digits, an exponent (two digits at least) below 1e-4 or from 1e4
// (an exact tie, such as 1234.5, rounds up here and to even in Python).
DT.g4 = function (v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "string") return v;  // "inf", "-inf", "nan": a float64 sum that overflowed
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  var r = Number(v.toPrecision(4)), e = Math.floor(Math.log10(Math.abs(r)));  // the exponent after rounding (9.99996 -> 10)
  function strip(s) { return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s; }
  if (e < -4 || e >= 4) {
    var parts = r.toExponential(3).split("e"), x = +parts[1];
    return strip(parts[0]) + "e" + (x < 0 ? "-" : "+") + (Math.abs(x) < 10 ? "0" : "") + Math.abs(x);
  }
  return strip(r.toFixed(Math.max(0, 3 - e)));
};

// Python's str(Stats): "[min, max] mean .. norm .." and the counts that are not zero; "no stats" for none.
DT.statsText = function (s) {
  if (!s) return "no stats";
  if (s[0] === 0) return "empty";
  var out = [s[5] !== null ? "[" + DT.g4(s[5]) + ", " + DT.g4(s[6]) + "] mean " + DT.g4(s[7]) + " norm " + DT.g4(s[8]) : "no finite value"];
  [["zeros", 4], ["nan", 1], ["+inf", 2], ["-inf", 3]].forEach(function (c) { if (s[c[1]]) out.push(c[0] + " " + s[c[1]]); });
  return out.join(" ");
};
