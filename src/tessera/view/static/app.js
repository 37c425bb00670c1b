// Tessera viewer: one page; what it shows follows the address's "#" part
// (#/, #/array/PATH?..., #/table/PATH?..., #/images/PATH?..., #/image/PATH?..., #/h5/PATH,
// #/models). Every picture comes from the server as PNG; nothing is loaded from elsewhere.
"use strict";

const METHOD_COLOURS = { get: "#4c78a8", range: "#f58518", pushdown: "#54a24b" };
const VIEW = 512; // the slice viewer's side in pixels

// ---------------------------------------------------------------- helpers
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}
function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : String(Math.round(v))) + " " + units[i];
}
function num(v, digits = 4) {
  if (v === null || v === undefined) return "-";
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? v.toLocaleString("en") : v.toPrecision(digits);
}
function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", " UTC") : "-"; }
function kindClass(kind) { return "kind " + kind.replace(/[ .]/g, "-"); }

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = !message;
}
async function api(name, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") query.set(k, v);
  const response = await fetch(`/api/${name}?${query}`, { credentials: "same-origin" });
  let doc;
  try { doc = await response.json(); } catch (e) { doc = { error: `${response.status} ${response.statusText}` }; }
  if (!response.ok) {
    const err = new Error(doc.error || `${response.status}`);
    err.status = response.status;
    throw err;
  }
  return doc;
}
let renders = 0;  // pages and views drawn (tests wait for a change of it)
function ready() { document.body.dataset.state = "ready"; document.body.dataset.renders = String(++renders); }
function busy() { document.body.dataset.state = "loading"; }

// The route: kind, path and parameters from the address's "#" part.
function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [head, query] = hash.split("?");
  const parts = head.split("/");
  const kind = parts.shift() || "";
  return { kind, path: decodeURIComponent(parts.join("/")), params: new URLSearchParams(query || "") };
}
function link(kind, path, params) {
  const q = new URLSearchParams(params || {}).toString();
  return `#/${kind}/${path.split("/").map(encodeURIComponent).join("/")}${q ? "?" + q : ""}`;
}
function setParams(params) {  // update the address without a new history entry
  const r = route();
  history.replaceState(null, "", link(r.kind, r.path, params));
}
function crumbs(r) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren();
  if (r.kind) nav.append(el("span", { class: kindClass(r.kind === "image" ? "image set" : r.kind), text: r.kind }), " ", el("span", { class: "mono", text: r.path || "/" }));
}
const PAGE_OF = { array: "array", "tensor table": "table", "image set": "images", "tessera.h5 file": "h5" };

// ---------------------------------------------------------------- the store
async function storePage(main) {
  const entries = await api("tree");
  const rows = entries.map((e) => {
    const page = PAGE_OF[e.kind];
    const name = page ? el("a", { href: link(page, e.path) }, e.path) : el("span", { class: "mono" }, e.path);
    return el("tr", { "data-kind": e.kind }, el("td", {}, name), el("td", {}, el("span", { class: kindClass(e.kind), text: e.kind })),
      el("td", { class: "num" }, bytes(e.size)), el("td", { class: "num" }, num(e.objects)), el("td", {}, when(e.modified)));
  });
  main.replaceChildren(el("h1", {}, "What the store holds"),
    entries.length ? el("table", { id: "tree" }, el("thead", {}, el("tr", {}, ["path", "kind", "size", "objects", "last commit"].map((h) => el("th", {}, h)))), el("tbody", {}, rows))
      : el("p", { class: "muted" }, "Nothing here yet."));
}

// ---------------------------------------------------------------- time line
function timeline(history, at, onPick) {
  const slider = el("input", { type: "range", id: "time", min: 0, max: history.length - 1, step: 1, value: history.length - 1 });
  const label = el("span", { id: "time-label", class: "mono" });
  const index = at === null ? history.length - 1 : Math.max(0, history.findIndex((c) => String(c.marker) === at));
  slider.value = index;
  const show = () => {
    const c = history[slider.value];
    label.textContent = `${when(c.when)} · ${c.operation} · +${c.added} ${c.unit}${Number(slider.value) === history.length - 1 ? " (latest)" : ""}`;
  };
  show();
  slider.addEventListener("input", show);
  slider.addEventListener("change", () => {
    const i = Number(slider.value);
    onPick(i === history.length - 1 ? null : String(history[i].marker));
  });
  return el("div", { class: "timeline" }, el("label", {}, "as of ", slider), label);
}
function historyTable(history) {
  return el("table", { class: "history" }, el("thead", {}, el("tr", {}, ["when", "marker", "operation", "added", "removed", "bytes"].map((h) => el("th", {}, h)))),
    el("tbody", {}, history.map((c) => el("tr", {}, el("td", {}, when(c.when)), el("td", { class: "num" }, String(c.marker)), el("td", {}, c.operation),
      el("td", { class: "num" }, `${c.added} ${c.unit}`), el("td", { class: "num" }, String(c.removed)), el("td", { class: "num" }, bytes(c.nbytes))))));
}

// ---------------------------------------------------------------- an array
async function arrayPage(main, r) {
  const at = r.params.get("at");
  const info = await api("array", { path: r.path, at });
  const nd = info.shape.length;
  const state = {
    at, attr: r.params.get("attr") || info.attrs[0].name,
    axes: (r.params.get("axes") || (nd >= 2 ? `${nd - 2},${nd - 1}` : "-1,0")).split(",").map(Number),
    index: (r.params.get("index") || new Array(nd).fill(0).join(",")).split(",").map(Number),
    cmap: r.params.get("cmap") || info.colour_maps[0],
    vmin: r.params.get("vmin") || "", vmax: r.params.get("vmax") || "",
    plan: r.params.get("plan") !== "0",
  };
  const extent = (axis) => (axis < 0 ? 1 : info.shape[axis]);
  const fit = () => Math.max(extent(state.axes[0]), extent(state.axes[1]), 1) / VIEW;
  state.zoom = Number(r.params.get("zoom")) || fit();
  state.y0 = r.params.has("y0") ? Number(r.params.get("y0")) : 0;
  state.x0 = r.params.has("x0") ? Number(r.params.get("x0")) : 0;
  const save = () => setParams({ ...(state.at ? { at: state.at } : {}), attr: state.attr, axes: state.axes.join(","), index: state.index.join(","), cmap: state.cmap,
    ...(state.vmin !== "" ? { vmin: state.vmin } : {}), ...(state.vmax !== "" ? { vmax: state.vmax } : {}), zoom: state.zoom, y0: state.y0, x0: state.x0, ...(state.plan ? {} : { plan: "0" }) });

  const schema = el("table", { id: "schema" }, el("thead", {}, el("tr", {}, ["dimension", "cells", "tile"].map((h) => el("th", {}, h)))),
    el("tbody", {}, info.dims.map((d, i) => el("tr", {}, el("td", { class: "mono" }, d.name), el("td", { class: "num" }, num(info.shape[i])), el("td", { class: "num" }, num(d.tile))))));
  const attrs = el("table", { id: "attrs" }, el("thead", {}, el("tr", {}, ["attribute", "dtype", "codec", "fill"].map((h) => el("th", {}, h)))),
    el("tbody", {}, info.attrs.map((a) => el("tr", {}, el("td", { class: "mono" }, a.name), el("td", { class: "mono" }, a.dtype), el("td", { class: "mono" }, a.codec || "raw"), el("td", { class: "mono" }, String(a.fill))))));
  const fragments = el("table", { id: "fragments" }, el("thead", {}, el("tr", {}, ["fragment", "committed", "cells", "bytes"].map((h) => el("th", {}, h)))),
    el("tbody", {}, info.fragments.map((f) => el("tr", {}, el("td", { class: "mono" }, f.name.slice(0, 28)), el("td", {}, when(f.committed)), el("td", { class: "num" }, num(f.cells)), el("td", { class: "num" }, bytes(f.nbytes))))));

  // the controls
  const axisSelect = (which) => {
    const options = nd === 1 ? [[-1, "(none)"], [0, info.dims[0].name]] : info.dims.map((d, i) => [i, d.name]);
    const s = el("select", { id: `axis-${which}` }, options.map(([i, n]) => el("option", { value: i, selected: state.axes[which] === i }, `${which ? "x" : "y"}: ${n}`)));
    s.addEventListener("change", () => {
      const other = 1 - which, v = Number(s.value);
      if (v === state.axes[other]) state.axes[other] = state.axes[which];
      state.axes[which] = v; state.zoom = fit(); state.y0 = state.x0 = 0; arrayPage(main, { ...r, params: paramsNow() });
    });
    return s;
  };
  const paramsNow = () => { save(); return route().params; };
  const sliders = info.dims.map((d, i) => {
    if (state.axes.includes(i)) return null;
    const s = el("input", { type: "range", id: `index-${i}`, min: 0, max: info.shape[i] - 1, value: state.index[i] });
    const v = el("span", { class: "mono" }, String(state.index[i]));
    s.addEventListener("input", () => { v.textContent = s.value; });
    s.addEventListener("change", () => { state.index[i] = Number(s.value); draw(); });
    return el("label", {}, `${d.name} `, s, v);
  }).filter(Boolean);
  const attrSelect = el("select", { id: "attr" }, info.attrs.map((a) => el("option", { value: a.name, selected: a.name === state.attr }, a.name)));
  attrSelect.addEventListener("change", () => { state.attr = attrSelect.value; draw(); });
  const cmapSelect = el("select", { id: "cmap" }, info.colour_maps.map((c) => el("option", { value: c, selected: c === state.cmap }, c)));
  cmapSelect.addEventListener("change", () => { state.cmap = cmapSelect.value; draw(); });
  const vmin = el("input", { type: "number", id: "vmin", step: "any", value: state.vmin, placeholder: "auto" });
  const vmax = el("input", { type: "number", id: "vmax", step: "any", value: state.vmax, placeholder: "auto" });
  for (const [box, key] of [[vmin, "vmin"], [vmax, "vmax"]]) box.addEventListener("change", () => { state[key] = box.value; draw(); });
  const planBox = el("input", { type: "checkbox", id: "show-plan", checked: state.plan });
  planBox.addEventListener("change", () => { state.plan = planBox.checked; paint(); save(); });
  const zoomBy = (f, cy = VIEW / 2, cx = VIEW / 2) => {
    const yc = state.y0 + cy * state.zoom, xc = state.x0 + cx * state.zoom;
    state.zoom = Math.min(Math.max(state.zoom * f, 1 / 64), fit() * 4);
    state.y0 = yc - cy * state.zoom; state.x0 = xc - cx * state.zoom; draw();
  };
  const buttons = [el("button", { id: "zoom-in", onclick: () => zoomBy(1 / 1.5) }, "+"), el("button", { id: "zoom-out", onclick: () => zoomBy(1.5) }, "−"),
    el("button", { id: "zoom-fit", onclick: () => { state.zoom = fit(); state.y0 = state.x0 = 0; draw(); } }, "fit"),
    el("button", { id: "zoom-one", onclick: () => { const yc = state.y0 + VIEW / 2 * state.zoom, xc = state.x0 + VIEW / 2 * state.zoom; state.zoom = 1; state.y0 = Math.round(yc - VIEW / 2); state.x0 = Math.round(xc - VIEW / 2); draw(); } }, "1:1")];

  const slice = el("canvas", { id: "slice", width: VIEW, height: VIEW });
  const overlay = el("canvas", { id: "overlay", width: VIEW, height: VIEW });
  const viewport = el("div", { id: "viewport", class: info.sparse ? "sparse" : null }, slice, overlay);
  const cursor = el("div", { id: "cursor", class: "mono" }, "value: move over the picture");
  const hist = el("div", { id: "hist" });
  const plan = el("div", { id: "plan", class: "panel" });
  const legend = el("div", { class: "legend" }, Object.entries(METHOD_COLOURS).map(([m, c]) => el("span", {}, el("i", { class: "swatch", style: `background:${c}` }), m)));
  const time = timeline(info.history, at, (marker) => { state.at = marker; save(); arrayPage(main, { ...r, params: route().params }); });

  main.replaceChildren(
    el("h1", {}, `${r.path || "(the viewed URL)"} `, el("span", { class: "muted" }, `${info.sparse ? "sparse" : "dense"} array, ${info.shape.join(" × ")}`)),
    time,
    el("div", { class: "row" },
      el("div", {},
        el("div", { class: "controls" }, axisSelect(0), axisSelect(1), sliders, el("label", {}, "attribute ", attrSelect)),
        el("div", { class: "controls" }, el("label", {}, "colours ", cmapSelect), el("label", {}, "from ", vmin), el("label", {}, "to ", vmax), buttons,
          el("label", {}, planBox, " plan")),
        viewport, cursor),
      el("div", {}, el("h2", {}, "The plan of what is on screen"), legend, plan, el("h2", {}, "Values drawn"), hist)),
    el("div", { class: "row" }, el("div", {}, el("h2", {}, "Dimensions"), schema), el("div", {}, el("h2", {}, "Attributes"), attrs)),
    el("h2", {}, "Fragments"), fragments, el("h2", {}, "History"), historyTable(info.history));

  let shown = null, picture = null, seq = 0;
  function paint() {
    const g = slice.getContext("2d");
    g.clearRect(0, 0, VIEW, VIEW);
    g.imageSmoothingEnabled = false;
    const o = overlay.getContext("2d");
    o.clearRect(0, 0, VIEW, VIEW);
    if (!shown || !picture) return;
    const [by0, , bx0] = shown.box, s = shown.step;
    const dy = (by0 - state.y0) / state.zoom, dx = (bx0 - state.x0) / state.zoom;
    const dw = picture.width * s / state.zoom, dh = picture.height * s / state.zoom;
    if (shown.sparse && s / state.zoom < 3) {  // cells as dots of 3 pixels at least
      for (const oy of [-1, 0, 1]) for (const ox of [-1, 0, 1]) g.drawImage(picture, dx + ox, dy + oy, dw, dh);
    } else g.drawImage(picture, dx, dy, dw, dh);
    if (!state.plan) return;
    for (const [y0, y1, x0, x1, method] of shown.tiles) {
      const c = METHOD_COLOURS[method] || "#9d755d";
      const ty = (y0 - state.y0) / state.zoom, tx = (x0 - state.x0) / state.zoom;
      o.fillStyle = c + "33"; o.strokeStyle = c; o.lineWidth = 1;
      o.fillRect(tx, ty, (x1 - x0) / state.zoom, (y1 - y0) / state.zoom);
      o.strokeRect(tx + 0.5, ty + 0.5, (x1 - x0) / state.zoom - 1, (y1 - y0) / state.zoom - 1);
    }
  }
  async function draw() {
    save();
    const [ay, ax] = state.axes;
    const ny = extent(ay), nx = extent(ax);
    const y0 = Math.max(0, Math.floor(state.y0)), x0 = Math.max(0, Math.floor(state.x0));
    const y1 = Math.min(ny, Math.ceil(state.y0 + VIEW * state.zoom)), x1 = Math.min(nx, Math.ceil(state.x0 + VIEW * state.zoom));
    const mine = ++seq;
    if (y1 <= y0 || x1 <= x0) { shown = null; paint(); ready(); return; }
    busy();
    try {
      const doc = await api("array/view", { path: r.path, at: state.at, attr: state.attr, axes: state.axes.join(","), index: state.index.join(","),
        y0, y1, x0, x1, w: Math.ceil((x1 - x0) / Math.max(state.zoom, 1)), h: Math.ceil((y1 - y0) / Math.max(state.zoom, 1)), cmap: state.cmap, vmin: state.vmin, vmax: state.vmax });
      if (mine !== seq) return;
      const img = new Image();
      img.src = doc.image;
      await img.decode();
      if (mine !== seq) return;
      shown = doc; picture = img;
      showError("");
      paint(); showPlan(doc); showHist(doc);
      slice.dataset.at = state.at || "";
      slice.dataset.selection = doc.selection;
      ready();
    } catch (e) {
      if (mine !== seq) return;
      showError(e.message); ready();
    }
  }
  function showPlan(doc) {
    const e = doc.estimated, m = doc.measured;
    plan.dataset.methods = JSON.stringify(doc.methods);
    plan.dataset.bytes = e ? String(e.bytes) : "";
    plan.dataset.selection = doc.selection;
    const row = (name, a, b) => el("tr", {}, el("th", {}, name), el("td", { class: "num" }, a), el("td", { class: "num" }, b));
    plan.replaceChildren(
      el("div", { class: "mono" }, `[${doc.selection}] · step ${doc.step}`),
      el("div", { id: "methods" }, Object.keys(doc.methods).length ? Object.entries(doc.methods).map(([k, v]) => `${k} ${v}`).join(" · ") + " tiles" : (doc.sparse ? `${num(doc.cells)} cells` : "no tiles")),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "estimated"), el("th", {}, "measured"))),
        el("tbody", {}, row("requests", e ? num(e.requests) : "-", m ? num(m.requests) : "-"), row("bytes", e ? num(e.bytes) : "-", m ? num(m.bytes) : "-"),
          row("seconds", e ? num(e.seconds) : "-", m ? num(m.seconds) : "-"), row(`dollars${e ? " (" + e.pricing + ")" : ""}`, e ? num(e.dollars, 3) : "-", m ? num(m.dollars, 3) : "-"))),
      ...(doc.tiles_planned > doc.tiles.length ? [el("div", { class: "muted" }, `${doc.tiles.length} of ${doc.tiles_planned} tiles drawn`)] : []));
  }
  function showHist(doc) {
    const counts = doc.histogram.counts, top = Math.max(...counts, 1), w = 256, h = 80, bw = w / counts.length;
    hist.replaceChildren(svg("svg", { width: w, height: h + 16, viewBox: `0 0 ${w} ${h + 16}`, id: "hist-svg" },
      counts.map((c, i) => svg("rect", { x: i * bw, y: h - (c / top) * h, width: Math.max(bw - 1, 1), height: (c / top) * h, fill: "#4c78a8" })),
      svg("text", { x: 0, y: h + 13 }, num(doc.vmin)), svg("text", { x: w, y: h + 13, "text-anchor": "end" }, num(doc.vmax))));
  }

  // pan, zoom and the value under the cursor
  let drag = null, hover = 0;
  viewport.addEventListener("pointerdown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, y0: state.y0, x0: state.x0 }; viewport.setPointerCapture(ev.pointerId); });
  viewport.addEventListener("pointermove", (ev) => {
    const rect = slice.getBoundingClientRect();  // inside the viewport's border
    const py = ev.clientY - rect.top, px = ev.clientX - rect.left;
    if (drag) {
      state.y0 = drag.y0 - (ev.clientY - drag.y) * state.zoom; state.x0 = drag.x0 - (ev.clientX - drag.x) * state.zoom;
      paint();
      return;
    }
    const cy = Math.floor(state.y0 + py * state.zoom), cx = Math.floor(state.x0 + px * state.zoom);
    const [ay, ax] = state.axes;
    if (cx < 0 || cx >= extent(ax) || cy < 0 || cy >= extent(ay)) { cursor.textContent = "value: outside the array"; return; }
    const index = state.index.slice();
    if (ay >= 0) index[ay] = cy;
    index[ax] = cx;
    const mine = ++hover;
    setTimeout(async () => {
      if (mine !== hover) return;
      try {
        const v = await api("array/value", { path: r.path, at: state.at, attr: state.attr, index: index.join(",") });
        if (mine === hover) cursor.textContent = `[${index.join(", ")}] ${state.attr} = ${v.value === null ? "(empty)" : v.value}`;
      } catch (e) { cursor.textContent = e.message; }
    }, 80);
  });
  viewport.addEventListener("pointerup", () => { if (drag) { drag = null; draw(); } });
  viewport.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const rect = slice.getBoundingClientRect();  // inside the viewport's border
    zoomBy(ev.deltaY > 0 ? 1.25 : 0.8, ev.clientY - rect.top, ev.clientX - rect.left);
  }, { passive: false });
  await draw();
}

// ---------------------------------------------------------------- a tensor table
async function tablePage(main, r) {
  const at = r.params.get("at");
  const prefix = r.params.get("prefix") || "";
  const info = await api("table", { path: r.path, at, prefix });
  const detail = el("div", { id: "tensor", class: "panel" }, el("span", { class: "muted" }, "Pick a tensor."));
  const pick = async (id) => {
    setParams({ ...(at ? { at } : {}), ...(prefix ? { prefix } : {}), id });
    for (const a of list.querySelectorAll("a")) a.classList.toggle("on", a.dataset.id === id);
    await tensorDetail(detail, r.path, at, id);
  };
  const list = el("div", { class: "ids", id: "ids" }, info.ids.map((id) => el("a", { href: "#", "data-id": id, onclick: (ev) => { ev.preventDefault(); pick(id); } }, id)));
  const filter = el("input", { type: "search", id: "prefix", placeholder: "ids starting with…", value: prefix });
  filter.addEventListener("change", () => { setParams({ ...(at ? { at } : {}), prefix: filter.value }); tablePage(main, route()); });
  main.replaceChildren(
    el("h1", {}, `${r.path} `, el("span", { class: "muted" }, `tensor table, version ${info.version}`)),
    timeline(info.history, at, (marker) => { setParams(marker === null ? {} : { at: marker }); tablePage(main, route()); }),
    el("p", {}, `${num(info.tensors)} tensors in ${num(info.files)} data files, ${bytes(info.stored_bytes)} stored (${bytes(info.encoded_bytes)} before Parquet compression); `,
      Object.entries(info.layouts).map(([k, v]) => `${k} ${v}`).join(", ")),
    el("div", { class: "row" }, el("div", {}, el("h2", {}, "Tensors"), filter,
      el("div", { class: "muted" }, `${info.ids.length} of ${num(info.matching)} listed`), list), el("div", {}, el("h2", {}, "Tensor"), detail)),
    el("h2", {}, "Versions"), historyTable(info.history));
  const chosen = r.params.get("id") || info.ids[0];
  if (chosen) await pick(chosen);
}
// a small preview drawn larger, by a whole factor (its cells stay square and sharp)
function previewWidth(t) {
  const [h, w] = t.shape.slice(-2).map((n) => Math.min(n, 512));
  return w * Math.max(1, Math.floor(320 / Math.max(h, w)));
}
async function tensorDetail(box, path, at, id, index) {
  busy();
  try {
    const t = await api("table/tensor", { path, at, id, index: index ? index.join(",") : undefined });
    const rows = [["shape", t.shape.join(" × ") || "()"], ["dtype", t.dtype], ["format", t.layout], ["stored values", num(t.nnz)],
      ["stored bytes", bytes(t.stored_bytes)], ["data files", num(t.files)], ["density", t.density === null ? "dense" : (100 * t.density).toPrecision(3) + " %"]];
    const sliders = t.shape.length > 2 ? t.shape.slice(0, -2).map((n, i) => {
      const s = el("input", { type: "range", id: `tindex-${i}`, min: 0, max: n - 1, value: (index || [])[i] || 0 });
      s.addEventListener("change", () => { const ix = new Array(t.shape.length).fill(0); t.shape.slice(0, -2).forEach((_, j) => { ix[j] = Number(box.querySelector(`#tindex-${j}`).value); }); tensorDetail(box, path, at, id, ix); });
      return el("label", {}, `axis ${i} `, s);
    }) : [];
    box.replaceChildren(el("div", { class: "mono" }, id),
      el("table", {}, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { class: "mono" }, v))))),
      el("h2", {}, `Preview [${t.preview_selection.join(", ")}]`), el("div", { class: "controls" }, sliders),
      t.image ? el("img", { id: "preview", src: t.image, alt: `preview of ${id}`, width: previewWidth(t) }) : el("pre", { id: "numbers", class: "mono" }, t.numbers.map((v) => num(v, 6)).join("  ")));
    showError("");
  } catch (e) { showError(e.message); }
  ready();
}

// ---------------------------------------------------------------- an image set
function curveChart(curve, k) {
  const w = 360, h = 180, pad = 34;
  const top = Math.max(...curve.bytes_per_image, 1);
  const scores = curve.psnr.map((p) => (p === null ? 99 : p));
  const lo = Math.min(...scores), hi = Math.max(...scores.filter((p) => p < 99), lo + 1);
  const X = (b) => pad + (b / top) * (w - pad - 8), Y = (p) => h - pad - ((Math.min(p, hi) - lo) / (hi - lo)) * (h - pad - 8);
  const points = curve.bytes_per_image.map((b, i) => `${X(b)},${Y(scores[i])}`).join(" ");
  const marks = [];
  if (k) { const i = k - 1; marks.push(svg("circle", { cx: X(curve.bytes_per_image[i]), cy: Y(scores[i]), r: 4, fill: "#f58518" })); }
  return svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, id: "curve" },
    svg("line", { x1: pad, y1: h - pad, x2: w - 4, y2: h - pad, stroke: "#999" }), svg("line", { x1: pad, y1: 4, x2: pad, y2: h - pad, stroke: "#999" }),
    svg("polyline", { points, fill: "none", stroke: "#4c78a8", "stroke-width": 2 }), marks,
    svg("text", { x: w - 4, y: h - 8, "text-anchor": "end" }, `bytes per image (max ${bytes(top)})`),
    svg("text", { x: 4, y: 12 }, `PSNR dB vs k = ${curve.k.length} (${num(lo, 3)}–${num(hi, 3)})`));
}
async function imagesPage(main, r) {
  const at = r.params.get("at");
  let page = Number(r.params.get("page") || 0);
  const info = await api("images", { path: r.path, at });
  const grid = el("div", { id: "grid" });
  const touched = el("div", { id: "touched", class: "muted" });
  const pager = el("div", { class: "controls" });
  const curveBox = el("div", {});
  main.replaceChildren(
    el("h1", {}, `${r.path} `, el("span", { class: "muted" }, `image set, ${num(info.images)} images of ${info.size.join(" × ")}, ${info.colour}${info.colour === "ycbcr" ? " " + info.chroma : ""}, q = ${info.q}, groups of ${info.group}`)),
    timeline(info.history, at, (marker) => { setParams(marker === null ? {} : { at: marker }); imagesPage(main, route()); }),
    el("div", { class: "row" }, el("div", {}, el("h2", {}, "Images"), pager, grid, touched), el("div", {}, el("h2", {}, "Bytes against quality"), curveBox)),
    el("h2", {}, "History"), historyTable(info.history));
  const load = async () => {
    busy();
    setParams({ ...(at ? { at } : {}), page });
    try {
      const doc = await api("images/grid", { path: r.path, at, page });
      pager.replaceChildren(el("button", { id: "prev", disabled: page <= 0, onclick: () => { page--; load(); } }, "‹ previous"),
        el("span", {}, `page ${page + 1} of ${doc.pages}`), el("button", { id: "next", disabled: page >= doc.pages - 1, onclick: () => { page++; load(); } }, "next ›"));
      if (doc.image) {
        const sheet = el("img", { class: "sheet", id: "sheet", src: doc.image, alt: `images ${doc.ids[0]}–${doc.ids[doc.ids.length - 1]}` });
        sheet.addEventListener("click", (ev) => {
          const [th, tw] = doc.thumb, scale = sheet.width / sheet.naturalWidth;
          const i = Math.floor(ev.offsetY / scale / th) * doc.per_row + Math.floor(ev.offsetX / scale / tw);
          if (i < doc.ids.length) location.hash = link("image", r.path, { ...(at ? { at } : {}), id: doc.ids[i] });
        });
        grid.replaceChildren(sheet);
        const m = doc.measured;
        touched.textContent = `this page read groups ${doc.groups.join(", ")} and diagonals (columns) 1–${doc.columns} at scale ${doc.scale}: planned ${num(doc.estimated.requests)} requests, ${bytes(doc.estimated.bytes)}; measured ${m ? num(m.requests) + " requests, " + bytes(m.bytes) : "-"}`;
      } else grid.replaceChildren(el("p", { class: "muted" }, "No images."));
      showError("");
    } catch (e) { showError(e.message); }
    ready();
  };
  try { curveBox.replaceChildren(curveChart(await api("images/curve", { path: r.path, at }))); } catch (e) { showError(e.message); }
  await load();  // last: the page is ready when its grid is drawn
}
async function imagePage(main, r) {
  const at = r.params.get("at");
  const info = await api("images", { path: r.path, at });
  const id = Number(r.params.get("id") || 0);
  let k = Number(r.params.get("k") || info.k_max);
  const picture = el("img", { id: "image", alt: `image ${id}` });
  const slider = el("input", { type: "range", id: "k", min: 1, max: info.k_max, value: k });
  const kLabel = el("span", { id: "k-label", class: "mono" });
  const facts = el("div", { id: "facts", class: "panel" });
  const curveBox = el("div", {});
  let curve = null;
  main.replaceChildren(
    el("h1", {}, el("a", { href: link("images", r.path, at ? { at } : {}) }, r.path), ` · image ${id}`),
    el("div", { class: "row" },
      el("div", {}, el("div", { class: "controls" }, el("label", {}, "detail k ", slider), kLabel), picture),
      el("div", {}, facts, el("h2", {}, "The set: bytes against quality"), curveBox)));
  const load = async () => {
    busy();
    setParams({ ...(at ? { at } : {}), id, k });
    kLabel.textContent = `k = ${k} of ${info.k_max}`;
    try {
      const doc = await api("images/image", { path: r.path, at, id, k });
      picture.src = doc.image;
      await picture.decode();
      const m = doc.measured;
      facts.replaceChildren(el("table", {}, el("tbody", {},
        el("tr", {}, el("th", {}, "k"), el("td", { class: "num" }, `${doc.k} of ${doc.k_max}`)),
        el("tr", {}, el("th", {}, "PSNR vs k max"), el("td", { class: "num", id: "psnr" }, doc.psnr === null ? "exact" : `${doc.psnr.toFixed(2)} dB`)),
        el("tr", {}, el("th", {}, "bytes planned"), el("td", { class: "num", id: "bytes-planned" }, num(doc.estimated.bytes))),
        el("tr", {}, el("th", {}, "bytes read"), el("td", { class: "num", id: "bytes-read" }, m ? num(m.bytes) : "-")),
        el("tr", {}, el("th", {}, "label"), el("td", { class: "num" }, String(doc.label))))));
      if (curve) curveBox.replaceChildren(curveChart(curve, k));
      picture.dataset.k = String(k);
      showError("");
    } catch (e) { showError(e.message); }
    ready();
  };
  slider.addEventListener("input", () => { kLabel.textContent = `k = ${slider.value} of ${info.k_max}`; });
  slider.addEventListener("change", () => { k = Number(slider.value); load(); });
  try { curve = await api("images/curve", { path: r.path, at }); } catch (e) { showError(e.message); }
  await load();
}

// ---------------------------------------------------------------- a tessera.h5 file, models
async function h5Page(main, r) {
  const doc = await api("h5", { path: r.path });
  main.replaceChildren(el("h1", {}, `${r.path} `, el("span", { class: "muted" }, "tessera.h5 file")),
    el("table", { id: "datasets" }, el("thead", {}, el("tr", {}, ["dataset", "shape", "dtype"].map((h) => el("th", {}, h)))),
      el("tbody", {}, doc.datasets.map((d) => el("tr", {}, el("td", {}, el("a", { href: link("array", `${r.path}/${d.name}`) }, d.name)),
        el("td", { class: "mono" }, d.shape.join(" × ") || "()"), el("td", { class: "mono" }, d.dtype))))));
}
async function modelsPage(main) {
  const doc = await api("models");
  main.replaceChildren(el("h1", {}, `Frozen models in ${doc.folder}`), ...doc.models.map((m) => {
    const most = Math.max(...m.layers.map((l) => l.bytes), 1);
    const chart = m.candidates.length ? (() => {
      const top = Math.max(...m.candidates.map((c) => c.epoch_s), 1e-9), w = 420, bh = 14;
      return svg("svg", { width: w, height: m.candidates.length * bh + 20, class: "split" }, m.candidates.map((c, i) => svg("g", {},
        svg("rect", { x: 120, y: i * bh, width: (c.epoch_s / top) * (w - 130), height: bh - 3, fill: c.split === m.chosen ? "#f58518" : (c.feasible ? "#4c78a8" : "#ccc") }),
        svg("text", { x: 116, y: i * bh + 10, "text-anchor": "end" }, `${c.split} ${c.name}`))),
        svg("text", { x: 120, y: m.candidates.length * bh + 14 }, `seconds per epoch at batch ${doc.batch} (longest ${num(top)})`));
    })() : el("p", { class: "muted" }, `No split profile: run \`tessera model profile ${m.name} ...\` to save one beside the models.`);
    return el("section", { class: "model" }, el("h2", {}, `${m.name} (${m.arch}), ${num(m.parameters)} parameters, ${bytes(m.weights_bytes)}`),
      el("div", { class: "row" }, el("table", {}, el("thead", {}, el("tr", {}, ["layer", "name", "output per sample", "bytes"].map((h) => el("th", {}, h)))),
        el("tbody", {}, m.layers.map((l) => el("tr", {}, el("td", { class: "num" }, l.index), el("td", { class: "mono" }, l.name), el("td", { class: "mono" }, l.shape.join(" × ")),
          el("td", { class: "num" }, el("span", {}, bytes(l.bytes)), " ", svg("svg", { width: 60, height: 8 }, svg("rect", { width: 60 * l.bytes / most, height: 8, fill: "#4c78a8" }))))))),
      el("div", {}, el("h2", {}, "Split estimates"), chart)));
  }));
}

// ---------------------------------------------------------------- the router
const PAGES = { "": storePage, array: arrayPage, table: tablePage, images: imagesPage, image: imagePage, h5: h5Page, models: modelsPage };
async function show() {
  const r = route();
  crumbs(r);
  const main = document.getElementById("main");
  const page = PAGES[r.kind];
  busy();
  showError("");
  try {
    if (!page) throw new Error(`no page ${JSON.stringify(r.kind)}: the viewer shows ${Object.keys(PAGES).filter(Boolean).join(", ")}`);
    await page(main, r);
  } catch (e) {
    showError(e.message);
    main.replaceChildren(el("p", {}, el("a", { href: "#/" }, "back to the store")));
  }
  ready();
}
window.addEventListener("hashchange", show);
window.addEventListener("DOMContentLoaded", async () => {
  try {
    const about = await api("about");
    document.getElementById("store").textContent = about.url;
    if (about.models) document.getElementById("crumbs").before(el("a", { href: "#/models", id: "models-link" }, "models"));
  } catch (e) { showError(e.message); }
  await show();
});
