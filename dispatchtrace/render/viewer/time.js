// time.js: where the time goes: the parts of a call (its calls and its own ops) or of a folded run (its calls)
// ranked by time, measured where the capture was timed, else estimated (g.estimate), for the details panel.
// reads: (nothing)
// defines: DT.RANKED DT.percent DT.timeRanks
"use strict";
var DT = window.DT || (window.DT = {});

DT.RANKED = 8;  // parts listed by name; the rest is one line

// Python's views._time_metrics.percent: 12.3%, 100%, 0.04%.
DT.percent = function (v) {
  var p = v * 100;
  return p >= 99.95 ? p.toFixed(0) + "%" : p >= 0.095 ? p.toFixed(1) + "%" : p.toFixed(2) + "%";
};

// Item key's parts ranked by time, the longest first: {estimated, total, rows: [{key, v, share, est}], rest} where
// v is a part's time (inclusive for a call), share its fraction of key's time, est its estimated time beside a
// measured one (null without an estimate), and rest {count, v, share} what the rows leave of key's time: the parts
// past limit (DT.RANKED) and the ops no view shows (bookkeeping); null where the page has no time, for an op, or
// for an item that took none.
DT.timeRanks = function (m, key, limit) {
  var name = m.metricOf.time ? "time" : m.metricOf.est_time ? "est_time" : null;
  var t = key[0], n = +key.slice(1);
  if (!name || (t !== "c" && t !== "f")) return null;
  var total = m.metric(key, name);
  if (!total) return null;
  var c = m.calls[n], est = name === "time" && m.metricOf.est_time ? "est_time" : null;
  var keys = t === "f" ? m.runOf[n].map(function (i) { return "c" + i; })
    : c.calls.map(function (i) { return "c" + i; }).concat(c.ops.map(function (j) { return "o" + j; }));
  var parts = keys.map(function (k, i) { return { key: k, v: m.metric(k, name), i: i }; })
    .filter(function (x) { return x.v !== null; });
  parts.sort(function (a, b) { return b.v - a.v || a.i - b.i; });
  var rows = parts.slice(0, limit || DT.RANKED).map(function (x) {
    return { key: x.key, v: x.v, share: x.v / total, est: est ? m.metric(x.key, est) : null };
  });
  var listed = rows.reduce(function (s, x) { return s + x.v; }, 0), left = total - listed;
  var count = parts.length - rows.length;
  var rest = count > 0 || left > 5e-4 * total ? { count: count, v: Math.max(left, 0), share: Math.max(left, 0) / total } : null;
  return { estimated: name === "est_time", total: total, rows: rows, rest: rest };
};
