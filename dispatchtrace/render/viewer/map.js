// map.js: the mini-map, the whole picture small in a corner with the window's part outlined; it shows
// when the picture does not fit the window at a readable scale, and a click or drag there moves the view.
// reads: (nothing)
// defines: DT.MAP_H DT.MAP_MIN_W DT.MAP_W DT.MiniMap
"use strict";
var DT = window.DT || (window.DT = {});

DT.MAP_W = 220;
DT.MAP_H = 160;
DT.MAP_MIN_W = 60;

DT.MiniMap = function (view, el) {
  this.v = view;
  this.el = el;
  this.canvas = el.querySelector("canvas");
  this.frame = el.querySelector(".frame");
  this.kx = this.ky = 1;
  var self = this, drag = false;
  function go(ev) {
    var r = self.canvas.getBoundingClientRect(), s = self.v.svg.getBoundingClientRect(), t = self.v.t;
    var x = (ev.clientX - r.left) / self.kx, y = (ev.clientY - r.top) / self.ky;  // picture coordinates
    t.x = s.width / 2 - x * t.k;
    t.y = s.height / 2 - y * t.k;
    self.v.apply();
  }
  el.addEventListener("mousedown", function (ev) { ev.stopPropagation(); drag = true; go(ev); });
  window.addEventListener("mousemove", function (ev) { if (drag) go(ev); });
  window.addEventListener("mouseup", function () { drag = false; });
};

// Redraw the picture's boxes and nodes (after each layout).
DT.MiniMap.prototype.draw = function () {
  var at = this.v.at, root = at.c0, s = this.v.svg.getBoundingClientRect();
  var big = root && s.width && (root.w * 0.5 > s.width || root.h * 0.5 > s.height);
  this.el.style.display = big ? "block" : "none";
  if (!big) return;
  // a tall picture takes up to the stage's height, and is stretched sideways to at least MAP_MIN_W
  // rather than shrink to a sliver (kx, ky: the map's scales across and down)
  var tall = Math.max(DT.MAP_H, Math.min(s.height - 24, DT.MAP_MIN_W * root.h / root.w));
  var k = Math.min(DT.MAP_W / root.w, tall / root.h), kx = this.kx = Math.min(DT.MAP_W / root.w, Math.max(k, DT.MAP_MIN_W / root.w));
  var ky = this.ky = k;
  var c = this.canvas, ctx = c.getContext("2d");
  c.width = Math.ceil(root.w * kx);
  c.height = Math.ceil(root.h * ky);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, c.width, c.height);
  Object.keys(at).forEach(function (key) {
    var p = at[key];
    if (key === "c0") return;
    ctx.fillStyle = p.open ? "rgba(61,107,179,.10)" : key[0] === "o" ? "#999" : "#6d8fc7";
    ctx.fillRect(p.x * kx, p.y * ky, Math.max(1, p.w * kx), Math.max(1, p.h * ky));
  });
  this.move();
};

// Outline the part of the picture the window shows (after each pan or zoom).
DT.MiniMap.prototype.move = function () {
  if (this.el.style.display === "none") return;
  var t = this.v.t, s = this.v.svg.getBoundingClientRect(), kx = this.kx, ky = this.ky, f = this.frame.style;
  var W = this.canvas.width, H = this.canvas.height;  // the frame clipped to the map, so it never shows as a lone edge
  var x0 = Math.max(0, (-t.x / t.k) * kx), y0 = Math.max(0, (-t.y / t.k) * ky);
  var x1 = Math.min(W, ((s.width - t.x) / t.k) * kx), y1 = Math.min(H, ((s.height - t.y) / t.k) * ky);
  f.left = x0 + "px";
  f.top = y0 + "px";
  f.width = Math.max(2, x1 - x0) + "px";
  f.height = Math.max(2, y1 - y0) + "px";
};
