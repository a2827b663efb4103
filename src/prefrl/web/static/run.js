// The run page: polls /api/status and redraws its tables and charts in place (no reload), so a
// team watching it while labelling sees whether the labels are teaching the reward and agent.
"use strict";
const token = document.body.dataset.token;
const POLL_MS = 3000;
const NS = "http://www.w3.org/2000/svg";
const W = 480, H = 300, PAD = { left: 56, right: 12, top: 12, bottom: 36 };

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function range(values) {
  const finite = values.filter((v) => v !== null && Number.isFinite(v));
  if (!finite.length) return [0, 1];
  let lo = Math.min(...finite), hi = Math.max(...finite);
  if (lo === hi) { lo -= 1; hi += 1; }
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

function fmt(v) {
  const a = Math.abs(v);
  // (steps in full, 12,500 and 13,000: "1.3e+4" twice says nothing, and was cut at the edge)
  if (a >= 100) return v.toLocaleString("en-US", { maximumFractionDigits: 0 });
  return a >= 1 ? v.toFixed(1) : v.toFixed(2);
}

// One chart: `series` are {points: [[x, y]], colour, line, name}; empty: `empty` is said instead.
// `yRange`: a fixed [lo, hi] (a share: 0 to 1), else the data's.
function draw(svg, series, xlabel, ylabel, empty, square, yRange) {
  svg.replaceChildren();
  const points = series.flatMap((s) => s.points);
  if (!points.length) {
    svg.append(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, empty));
    return;
  }
  let [x0, x1] = range(points.map((p) => p[0]));
  let [y0, y1] = yRange || range(points.map((p) => p[1]));
  const sx = (x) => PAD.left + ((x - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
  const sy = (y) => H - PAD.bottom - ((y - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
  svg.append(el("rect", { x: PAD.left, y: PAD.top, width: W - PAD.left - PAD.right,
                          height: H - PAD.top - PAD.bottom, class: "frame" }));
  for (const t of [0, 0.5, 1]) {
    const x = x0 + t * (x1 - x0), y = y0 + t * (y1 - y0);
    svg.append(el("text", { x: sx(x), y: H - PAD.bottom + 16, "text-anchor": "middle" }, fmt(x)));
    svg.append(el("text", { x: PAD.left - 6, y: sy(y) + 4, "text-anchor": "end" }, fmt(y)));
  }
  svg.append(el("text", { x: (W + PAD.left) / 2, y: H - 4, "text-anchor": "middle" }, xlabel));
  svg.append(el("text", { x: 12, y: H / 2, transform: `rotate(-90 12 ${H / 2})`,
                          "text-anchor": "middle" }, ylabel));
  let legendY = PAD.top + 14;
  for (const s of series) {
    const pts = s.points.filter((p) => p[1] !== null && Number.isFinite(p[1]));
    if (!pts.length) continue;
    if (s.line) {
      svg.append(el("polyline", { points: pts.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" "),
                                  fill: "none", stroke: s.colour, "stroke-width": 2 }));
    }
    for (const p of pts) {
      svg.append(el("circle", { cx: sx(p[0]), cy: sy(p[1]), r: s.line ? 2.5 : 2, fill: s.colour }));
    }
    if (s.name) {
      // (a style, not the fill attribute: the stylesheet's grey for chart text would win)
      svg.append(el("text", { x: PAD.left + 8, y: legendY, class: "legend",
                              style: `fill: ${s.colour}` }, s.name));
      legendY += 16;
    }
  }
}

function show(id, text) { document.getElementById(id).textContent = text; }

function render(st) {
  document.getElementById("waiting").hidden = !st.waiting_for_first_labels;
  show("labels", st.labels);
  show("counts", ["left", "right", "equal", "skip"].map((k) => st.counts[k] || 0).join(" / "));
  show("open", st.open_queries);
  show("doubly", st.doubly_labelled + (st.waiting_for_second ? ` (${st.waiting_for_second} waiting for a second)` : ""));
  show("agreement", st.agreement === null ? "–" : `${Math.round(100 * st.agreement)}%`);
  show("fits", st.reward_fits);
  show("accuracy", st.reward_val_accuracy === null ? "–" : st.reward_val_accuracy.toFixed(2));
  show("step", st.finished ? `${st.step} (the run has finished)` : st.step);
  const body = document.querySelector("#annotators tbody");
  body.replaceChildren(...st.annotators.map((a) => {
    const row = document.createElement("tr");
    const agreed = a.doubly_labelled ? `${a.agreed} of ${a.doubly_labelled}` : "–";
    for (const v of [a.name, a.labels, agreed]) {
      const td = document.createElement("td"); td.textContent = v; row.append(td);
    }
    return row;
  }));
  draw(document.getElementById("curve"), [
    { points: st.curve.map((r) => [r.step, r.return]), colour: "#6cf", line: true, name: "true return" },
    { points: st.curve.map((r) => [r.step, r.learned]), colour: "#fc6", line: true, name: "learned return" },
  ], "environment step", "evaluation return", "No evaluation yet: the curve starts at the first one.");
  draw(document.getElementById("accuracy-chart"), [
    { points: st.fits.map((r) => [r.step, r.val_accuracy]), colour: "#6c6", line: true },
  ], "environment step", "held-out label accuracy", "No reward model fit yet.", false, [0, 1]);
  const sc = st.fit_scatter;
  draw(document.getElementById("scatter"),
       sc ? [{ points: sc.true.map((t, i) => [t, sc.learned[i]]), colour: "#c9f", line: false,
               name: `fit at step ${sc.step}` }] : [],
       "return under the environment's reward", "learned return", "No reward model fit yet.");
  show("updated", `Updated ${new Date().toLocaleTimeString()}; updates by itself every few seconds.`);
  window.prefrlStatus = st;
}

async function poll() {
  try {
    const r = await fetch("/api/status", { headers: { "X-Prefrl-Token": token } });
    if (r.ok) render(await r.json());
    else show("updated", `The server answered ${r.status}; trying again.`);
  } catch (e) {
    show("updated", "The server cannot be reached; trying again.");
  }
  setTimeout(poll, POLL_MS);
}
poll();
