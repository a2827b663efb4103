// The compare page: two clips looping in sync, keys and buttons to answer, the next pair
// already loading while this one is shown.
"use strict";
const token = document.body.dataset.token;
const headers = { "Content-Type": "application/json", "X-Prefrl-Token": token };
const statusEl = document.getElementById("status");
const slots = { left: document.getElementById("left"), right: document.getElementById("right") };
let current = null;   // {id, left, right, videos}
let upcoming = [];    // pairs fetched and preloading
let shownAt = 0;
let sending = false;
let waiting = null;   // why no pair came, as the server said
// The run's labels and unanswered pairs (the pair shown included), from the server's latest
// answer: every answer and every fetch of pairs brings them, a later request's over an earlier.
// `notice`: the run's trainer has finished or stopped (said above a pair; `waiting` says it
// where there is none).
const counts = { labels: null, open: null, notice: null, request: 0 };
let requests = 0;
const answered = new Set();  // pairs this page answered: a fetch that crossed the answer may bring one back
// Playback speed: "auto" slows short clips down so that each plays for at least MIN_SECONDS (a
// 100-step Hopper clip is 0.8 s at the simulator's rate: too fast to judge); or a fixed rate.
const MIN_SECONDS = 3;
const SLOWEST = 0.0625;  // the slowest a browser plays (Chromium and Firefox refuse less)
const speedEl = document.getElementById("speed");
speedEl.value = localStorage.getItem("prefrl-speed") || "auto";
// Whose sound plays (clips of the piano have it): both clips loop together, so only one at a time.
const soundModes = ["off", "left", "right"];
let sound = "off";

function video(src) {
  const v = document.createElement("video");
  v.muted = true; v.playsInline = true; v.preload = "auto"; v.src = src;
  v.load();
  return v;
}

function rate(seconds) {
  if (speedEl.value !== "auto") return Number(speedEl.value);
  return seconds ? Math.max(SLOWEST, Math.min(1, seconds / MIN_SECONDS)) : 1;
}

function applySpeed() {
  if (!current) return;
  const r = rate(current.seconds);
  for (const v of Object.values(slots)) { v.defaultPlaybackRate = r; v.playbackRate = r; }
  const auto = speedEl.value === "auto" ? ` (${r.toFixed(2)}×)` : "";
  document.getElementById("speed-now").textContent = auto;
}

function say(text) { statusEl.textContent = text; }

function count(n) { return n === null ? "?" : n; }

function showCounts() {
  const notice = document.getElementById("notice");
  notice.textContent = counts.notice || "";
  notice.hidden = !(current && counts.notice);
  const given = `Labels given: ${count(counts.labels)}.`;
  if (current) say(`${given} Pairs left to label: ${count(counts.open)}.`);
  else say(`${given} ${waiting || "No pair ready yet."} (Checking every 2 s.)`);
}

function took(data, request) {
  if (request < counts.request || data.labels === undefined) return;
  Object.assign(counts, { labels: data.labels, open: data.open, notice: data.notice, request });
  showCounts();
}

async function fetchPairs() {
  const request = ++requests;
  let r;
  try { r = await fetch("/api/next?n=3", { headers }); } catch (e) { return say("Server unreachable; retrying…"); }
  if (!r.ok) { return say((await r.json()).detail || `error ${r.status}`); }
  const data = await r.json();
  waiting = data.waiting;
  took(data, request);
  const known = new Set([current && current.id, ...upcoming.map(q => q.id), ...answered]);
  for (const q of data.queries) {
    if (!known.has(q.id)) upcoming.push({ ...q, videos: [video(q.left), video(q.right)] });
  }
}

function place(slot, v) {
  v.id = slot.id; v.className = "";
  v.muted = sound !== slot.id;
  slot.replaceWith(v);
  slots[slot.id] = v;
}

function cycleSound() {
  sound = soundModes[(soundModes.indexOf(sound) + 1) % soundModes.length];
  for (const [side, v] of Object.entries(slots)) v.muted = sound !== side;
  document.getElementById("sound").textContent = `s Sound: ${sound}`;
  restart();
}

function restart() {
  for (const v of Object.values(slots)) {
    if (v.src) { v.currentTime = 0; v.play().catch(() => {}); }
  }
}

// No pair to show: the last one answered goes (it must not look like one still to answer).
function clearPair() {
  for (const [side, v] of Object.entries(slots)) {
    if (!v.src) continue;
    const empty = document.createElement("video");
    empty.muted = true;
    place(slots[side], empty);
    v.pause();
  }
  for (const b of document.querySelectorAll("button[data-label]")) b.disabled = true;
}

async function advance() {
  if (upcoming.length < 2) await fetchPairs();
  current = upcoming.shift() || null;
  window.prefrlPair = current ? current.id : null;
  if (!current) {
    clearPair();
    showCounts();
    setTimeout(advance, 2000);
    return;
  }
  for (const b of document.querySelectorAll("button[data-label]")) b.disabled = false;
  place(slots.left, current.videos[0]);
  place(slots.right, current.videos[1]);
  applySpeed();
  // The left clip leads: when it ends, both start again together.
  slots.left.onended = restart;
  restart();
  shownAt = performance.now();
  showCounts();
  fetchPairs();  // keep the next pairs loading
}

// Pairs handed to this page and not answered go back to the others as the page closes.
function releaseHeld() {
  const ids = [current && current.id, ...upcoming.map(q => q.id)].filter(id => id !== null && id !== undefined);
  if (!ids.length) return;
  const body = new Blob([JSON.stringify({ query_ids: ids })], { type: "application/json" });
  navigator.sendBeacon(`/api/release?token=${encodeURIComponent(token)}`, body);
}
window.addEventListener("pagehide", releaseHeld);

async function answer(label) {
  if (!current || sending) return;
  sending = true;
  const body = JSON.stringify({ query_id: current.id, label, response_ms: Math.round(performance.now() - shownAt) });
  for (;;) {
    let r;
    const request = ++requests;
    try { r = await fetch("/api/label", { method: "POST", headers, body }); }
    catch (e) { say("Not saved yet (server unreachable); retrying…"); await new Promise(ok => setTimeout(ok, 1000)); continue; }
    const data = await r.json();
    if (r.ok) { answered.add(current.id); took(data, request); break; }
    if (r.status === 409 || r.status === 404) { answered.add(current.id); break; }  // answered elsewhere, or gone: move on
    say(data.detail || `error ${r.status}`);
    sending = false;
    return;
  }
  sending = false;
  await advance();
}

document.querySelectorAll("button[data-label]").forEach(b => b.addEventListener("click", () => answer(b.dataset.label)));
document.getElementById("replay").addEventListener("click", restart);
document.getElementById("sound").addEventListener("click", cycleSound);
speedEl.addEventListener("change", () => { localStorage.setItem("prefrl-speed", speedEl.value); applySpeed(); restart(); speedEl.blur(); });
const keys = { ArrowLeft: "left", ArrowRight: "right", ArrowUp: "equal", "=": "equal", ArrowDown: "skip", " ": "skip" };
document.addEventListener("keydown", e => {
  if (e.key === "r") { restart(); return; }
  if (e.key === "s") { cycleSound(); return; }
  const label = keys[e.key];
  if (label) { e.preventDefault(); answer(label); }
});

advance();
