// export.js: the current view as a standalone SVG document, and as a PNG drawn from that SVG on a canvas.
// reads: DT.SVG_NS DT.el
// defines: DT.CANVAS_AREA DT.CANVAS_SIDE DT.EXPORT_CSS DT.png DT.save DT.svgText
"use strict";
var DT = window.DT || (window.DT = {});

DT.EXPORT_CSS = [
  ".node rect{fill:#fff;stroke:#555;stroke-width:1}", ".node.call rect,.node.fold rect{fill:#eef3fb;stroke:#3d6bb3}",
  ".node.fold rect{stroke-dasharray:4 2}", ".node.io rect{fill:#f4f4f4;stroke:#999}",
  "text{font:11px system-ui,sans-serif;fill:#222}", "text.sub{fill:#666;font-size:10px}",
  ".box>rect{fill:rgba(61,107,179,.04);stroke:#3d6bb3}", ".box>.head{fill:#dbe6f6}", ".box>text{fill:#1d3f75}",
  ".edge{fill:none;stroke:#777;stroke-width:1.1}",
].join("");

// The current view (everything visible, at its own scale, whatever the zoom: a large picture is drawn in
// whole here, not only the part near the window the page holds) as a standalone SVG document.
DT.svgText = function (view) {
  var root = view.at.c0 || { w: 100, h: 100 };
  var svg = DT.el("svg", { xmlns: DT.SVG_NS, width: Math.ceil(root.w), height: Math.ceil(root.h),
                           viewBox: "0 0 " + Math.ceil(root.w) + " " + Math.ceil(root.h) });
  DT.el("style", {}, svg).textContent = DT.EXPORT_CSS;
  svg.appendChild(view.svg.querySelector("defs").cloneNode(true));
  var g = DT.el("g", {});
  view.build(g, null);
  g.querySelectorAll(".hit").forEach(function (x) { x.remove(); });  // the hover targets draw nothing
  svg.appendChild(g);
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(svg);
};

// The browsers' canvas limits a PNG is drawn within: pixels a side, pixels in all.
DT.CANVAS_SIDE = 16000;
DT.CANVAS_AREA = 1.2e8;

// The current view as PNG bytes (a Blob), drawn from svgText() through an image and a canvas: no network.
// Twice the picture's size where that fits the canvas limits, else as large as fits down to its own size;
// a picture larger than the limits at its own size is refused (done(null, why), the size in the message),
// never scaled to unreadable or cut.
DT.png = function (view, done) {
  var root = view.at.c0 || { w: 100, h: 100 }, w = Math.ceil(root.w), h = Math.ceil(root.h);
  var k = Math.min(2, DT.CANVAS_SIDE / w, DT.CANVAS_SIDE / h, Math.sqrt(DT.CANVAS_AREA / (w * h)));
  if (k < 1) {
    done(null, "the view is " + w.toLocaleString("en") + " × " + h.toLocaleString("en") + " px, larger than a PNG canvas holds (" +
      DT.CANVAS_SIDE.toLocaleString("en") + " px a side, " + (DT.CANVAS_AREA / 1e6) + " million px): export SVG, or close some calls");
    return;
  }
  var img = new Image();
  img.onload = function () {
    var canvas = document.createElement("canvas");
    canvas.width = Math.max(1, Math.round(w * k));
    canvas.height = Math.max(1, Math.round(h * k));
    var ctx = canvas.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
    canvas.toBlob(done, "image/png");
  };
  img.onerror = function () { console.error("the view could not be drawn as PNG"); };
  img.src = "data:image/svg+xml," + encodeURIComponent(DT.svgText(view));
};

// Save a Blob as a file named name (a link to the Blob's own URL, clicked; nothing leaves the page).
DT.save = function (blob, name) {
  var a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 0);
};
