// stats.js: the capture's values (values="stats"): each op's and call's statistics as text, which items hold
// a NaN or Inf, and the op that made the first non-finite value (Python's g.first_nonfinite()).
// A stats row is read through its field names (rows.js; render/_html_stats.py's STATS_TABLES): numel, nan, posinf,
// neginf, zeros, min, max, mean, norm (zeros and mean null where not taken).
// reads: DT.Rows
// defines: DT.Values DT.g4 DT.stat DT.statsText
"use strict";
var DT = window.DT || (window.DT = {});

// From the payload's vals/st/cst/nf fields (render/_html_stats.py); m a DT.Model. ops[j]: {outputs, inputs}, each a
// list of {tensor, stats}; calls[i]: the stats of call i's outputs.
DT.Values = function (m) {
  var p = m.p, rows = m.rows;
  this.m = m;
  this.state = p.vals || "none";  // "stats", "none" (no values asked for) or "absent" (meta or fake tensors)
  this.on = this.state === "stats";
  this.ops = rows.all("so", p.st);
  this.calls = (p.cst || []).map(function (list) { return rows.all("st", list); });
  this.nf = p.nf || null;  // {op, name, text, carried, phase} or null when every value is finite
  this.first = this.nf && this.nf.op !== null ? this.nf.op : -1;
  this.badOp = {};
  this.badCall = {};  // calls with an op inside (their sub-calls' included) whose results hold a NaN or Inf
  this.ops.forEach(function (row, j) {
    if (!row.outputs.some(function (t) { return DT.Values.bad(t.stats); })) return;
    this.badOp[j] = true;
    for (var c = m.ops[j].call; c >= 0; c = m.calls[c].parent) this.badCall[c] = true;
  }, this);
};

// One stats row as its fields: decoded already, or a row as a payload holds it (the diff page's) read through the
// page's field names (DT.Rows.use).
DT.stat = function (s) { return Array.isArray(s) ? DT.Rows.page.one("st", s) : s; };

// Whether one stats row holds a non-finite value.
DT.Values.bad = function (s) { s = DT.stat(s); return !!s && s.nan + s.posinf + s.neginf > 0; };

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

// Python's str(Stats): "[min, max] mean .. norm .." (the mean where it was taken) and the counts that are not
// zero; "no stats" for none.
DT.statsText = function (s) {
  s = DT.stat(s);
  if (!s) return "no stats";
  if (s.numel === 0) return "empty";
  var mean = s.mean === null || s.mean === undefined ? "" : " mean " + DT.g4(s.mean);
  var out = [s.min !== null ? "[" + DT.g4(s.min) + ", " + DT.g4(s.max) + "]" + mean + " norm " + DT.g4(s.norm) : "no finite value"];
  var counts = { zeros: "zeros", nan: "nan", "+inf": "posinf", "-inf": "neginf" };  // as str(Stats) names them
  Object.keys(counts).forEach(function (word) { if (s[counts[word]]) out.push(word + " " + s[counts[word]]); });
  return out.join(" ");
};
