// The eventbus dashboard: polls /api/state every second and redraws the tables; a dead
// letter's button redelivers it with POST /api/redeliver (the token is the page's).
"use strict";

const token = document.querySelector('meta[name="eventbus-token"]').content;
// The page's own path as the base of the API's: `/` on the dashboard's own server, the mount
// point (`/admin/bus` or `/admin/bus/`) inside an application's router.
const apiBase = location.pathname.endsWith("/") ? location.pathname : location.pathname + "/";
let previous = null; // { at, published: Map, received: Map, delivered: Map }

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function perSecond(now, before, key, at) {
  if (!previous || !before.has(key)) return "–";
  const seconds = (at - previous.at) / 1000;
  if (seconds <= 0) return "–";
  const rate = Math.max(0, now - before.get(key)) / seconds;
  return rate >= 100 ? rate.toFixed(0) : rate.toFixed(1);
}

function bar(queued, capacity) {
  const depth = document.createElement("div");
  depth.className = "depth";
  const outer = document.createElement("div");
  outer.className = "bar";
  outer.title = queued + " queued of " + capacity;
  const fill = document.createElement("div");
  const share = capacity > 0 ? Math.min(1, queued / capacity) : 0;
  fill.className = "fill" + (share >= 0.9 ? " full" : share >= 0.5 ? " warn" : "");
  fill.style.width = (share * 100).toFixed(1) + "%";
  const label = document.createElement("span");
  label.className = "label";
  label.textContent = queued + " / " + capacity;
  outer.append(fill);
  depth.append(outer, label);
  return depth;
}

function draw(state) {
  const at = state.now_ms;
  const stats = state.stats;
  const published = new Map(), received = new Map(), delivered = new Map();

  const pill = document.getElementById("bus-state");
  pill.textContent = state.closed ? "closed" : "open";
  pill.className = "pill" + (state.closed ? " closed" : "");
  document.getElementById("updated").textContent =
    "updated " + new Date(at).toLocaleTimeString();

  const topics = document.querySelector("#topics tbody");
  topics.replaceChildren();
  for (const t of stats.topics) {
    const row = document.createElement("tr");
    row.dataset.topic = t.name;
    published.set(t.name, t.published);
    cell(row, t.name, "name");
    cell(row, t.published, "num published");
    cell(row, perSecond(t.published, previous ? previous.published : null, t.name, at), "num rate");
    cell(row, t.subscribers, "num subscribers");
    cell(row, t.retained == null ? "" : t.retained + " kept from #" + t.oldest, "log");
    topics.appendChild(row);
  }

  const subs = document.querySelector("#subscriptions tbody");
  subs.replaceChildren();
  const seen = new Map();
  for (const s of stats.subscriptions) {
    const base = s.topic + "\u0000" + s.name;
    const n = (seen.get(base) || 0) + 1;
    seen.set(base, n);
    const key = base + "\u0000" + n;
    received.set(key, s.received);
    delivered.set(key, s.delivered);
    const row = document.createElement("tr");
    row.dataset.topic = s.topic;
    row.dataset.subscriber = s.name;
    cell(row, s.topic, "topic");
    cell(row, s.name, "name");
    cell(row, s.overflow, "overflow");
    const depth = cell(row, "", "mailbox");
    depth.dataset.queued = s.queued;
    depth.dataset.capacity = s.capacity;
    depth.appendChild(bar(s.queued, s.capacity));
    cell(row, perSecond(s.received, previous ? previous.received : null, key, at), "num rate-in");
    cell(row, perSecond(s.delivered, previous ? previous.delivered : null, key, at), "num rate-out");
    cell(row, s.received, "num received");
    cell(row, s.in_handler, "num in-handler");
    cell(row, s.delivered, "num delivered");
    cell(row, s.failed, "num failed");
    cell(row, s.retried, "num retried");
    cell(row, s.dead_lettered, "num dead" + (s.dead_lettered > 0 ? " alert" : ""));
    cell(row, s.dropped, "num dropped" + (s.dropped > 0 ? " alert" : ""));
    cell(row, s.filtered, "num filtered");
    subs.appendChild(row);
  }

  const letters = document.querySelector("#dead-letters tbody");
  letters.replaceChildren();
  for (const l of state.dead_letters) {
    const row = document.createElement("tr");
    // A letter is its subscription's, topic's and seq's: an observer's letters of two
    // topics may share a seq.
    row.dataset.subscription = l.subscription;
    row.dataset.topic = l.topic;
    row.dataset.seq = l.seq;
    cell(row, l.topic, "topic");
    cell(row, l.seq, "num seq");
    cell(row, l.subscriber, "subscriber");
    cell(row, l.attempts, "num attempts");
    cell(row, l.error, "error");
    const button = document.createElement("button");
    button.textContent = "Republish";
    button.className = "republish";
    button.title = "Redeliver this message to " + l.subscriber + " alone";
    button.disabled = state.closed;
    button.addEventListener("click", () => republish(button, l));
    cell(row, "").appendChild(button);
    letters.appendChild(row);
  }
  const count = stats.dead_letters;
  document.getElementById("dead-count").textContent =
    count + " kept, " + stats.dead_letters_discarded + " discarded" +
    (count > state.dead_letters.length ? ", newest " + state.dead_letters.length + " shown" : "");
  document.getElementById("no-dead").hidden = state.dead_letters.length > 0;

  previous = { at, published, received, delivered };
}

async function republish(button, letter) {
  button.disabled = true;
  const status = document.getElementById("status");
  try {
    const response = await fetch(apiBase + "api/redeliver", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Eventbus-Token": token },
      body: JSON.stringify({
        subscription: letter.subscription,
        topic: letter.topic,
        seq: letter.seq,
      }),
    });
    const answer = await response.json();
    status.textContent = response.ok ? answer.ok : "refused: " + answer.error;
    status.dataset.outcome = response.ok ? "ok" : "refused";
  } catch (error) {
    status.textContent = "failed: " + error;
    status.dataset.outcome = "failed";
  }
  refresh();
}

async function refresh() {
  try {
    const response = await fetch(apiBase + "api/state", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    draw(await response.json());
  } catch (error) {
    const pill = document.getElementById("bus-state");
    pill.textContent = "no answer";
    pill.className = "pill lost";
  }
}

refresh();
setInterval(refresh, 1000);
