// The rating page: each clip gets a 1-100 rating; a saved rating is replaced by the next clip.
// Siblings (clips that start from one moment, `prefrl collect --siblings`) come as a family:
// the next family is shown once every clip of this one is rated.
"use strict";
const token = document.body.dataset.token;
const headers = { "Content-Type": "application/json", "X-Prefrl-Token": token };
const grid = document.getElementById("clips");
const statusEl = document.getElementById("status");
const familyEl = document.getElementById("family");
let rated = 0;
// Playback speed, as on the compare page (one choice for both): "auto" slows short clips down so
// that each plays for at least MIN_SECONDS (a 50-step Hopper clip is 0.4 s at the simulator's
// rate: barely one hop); or a fixed rate.
const MIN_SECONDS = 3;
const SLOWEST = 0.0625;  // the slowest a browser plays (Chromium and Firefox refuse less)
const speedEl = document.getElementById("speed");
speedEl.value = localStorage.getItem("prefrl-speed") || "auto";

function speedOf(seconds) {
  if (speedEl.value !== "auto") return Number(speedEl.value);
  return seconds ? Math.max(SLOWEST, Math.min(1, seconds / MIN_SECONDS)) : 1;
}

function applySpeed() {
  let shown = null;
  for (const fig of grid.children) {
    const v = fig.querySelector("video");
    v.defaultPlaybackRate = v.playbackRate = speedOf(Number(fig.dataset.seconds));
    if (shown === null) shown = v.playbackRate;
  }
  const auto = speedEl.value === "auto" && shown !== null ? ` (${shown.toFixed(2)}×)` : "";
  document.getElementById("speed-now").textContent = auto;
}
speedEl.addEventListener("change", () => {
  localStorage.setItem("prefrl-speed", speedEl.value); applySpeed(); speedEl.blur();
});

function card(seg) {
  const fig = document.createElement("figure");
  fig.dataset.segment = seg.id;
  fig.dataset.seconds = seg.seconds || "";
  // Listen only where the clip has sound (the piano's).
  const listen = seg.sound
    ? '<button class="listen" title="play this clip from the start with its sound">Listen</button>'
    : "";
  fig.innerHTML = `<video muted playsinline loop autoplay preload="auto" src="${seg.clip}"></video>
    <input type="range" min="1" max="100" value="50" aria-label="rating">
    <input type="number" min="1" max="100" step="1" value="50" aria-label="rating (1-100)">
    <button class="save">Save</button>
    ${listen}
    <span class="err"></span>`;
  const range = fig.querySelector("input[type=range]");
  const box = fig.querySelector("input[type=number]");
  const v = fig.querySelector("video");
  // All clips loop muted; Listen plays one with its sound, silencing the others.
  if (seg.sound) fig.querySelector(".listen").addEventListener("click", () => {
    for (const other of grid.querySelectorAll("video")) other.muted = other !== v;
    v.currentTime = 0;
    v.play().catch(() => {});
  });
  // The slider and the number box show one rating: either sets it.
  range.addEventListener("input", () => { box.value = range.value; });
  box.addEventListener("input", () => { if (box.value !== "") range.value = box.value; });
  const save = fig.querySelector(".save");
  save.addEventListener("click", async () => {
    save.disabled = true;  // a double click saves once
    const r = await fetch("/api/rating", { method: "POST", headers,
      body: JSON.stringify({ segment_id: seg.id, rating: box.value === "" ? null : Number(box.value) }) });
    const data = await r.json();
    if (!r.ok) { save.disabled = false; fig.querySelector(".err").textContent = data.detail; return; }
    rated += 1;
    fig.remove();
    load();
  });
  return fig;
}

async function load() {
  const r = await fetch("/api/rate/next?n=6", { headers });
  const data = await r.json();
  if (!r.ok) { statusEl.textContent = data.detail; return; }
  const shown = new Set([...grid.children].map(f => Number(f.dataset.segment)));
  for (const seg of data.segments) if (!shown.has(seg.id)) grid.appendChild(card(seg));
  applySpeed();
  familyEl.hidden = data.family === null || !grid.children.length;
  familyEl.textContent = `These ${grid.children.length} clips start from the same moment and ` +
    "differ only in what the agent did: rate them against each other.";
  const unseen = data.without_clips
    ? ` ${data.without_clips} segment(s) have no clip to show (collected with --clip-size 0): ` +
      "collect them again with clips, or rate them with a scripted rater (prefrl rate)."
    : "";
  statusEl.textContent = grid.children.length
    ? `Rated here: ${rated}.`
    : `Rated here: ${rated}. Nothing left to rate here.${unseen} Checking every 5 s.`;
  if (!grid.children.length) setTimeout(load, 5000);
}
load();
