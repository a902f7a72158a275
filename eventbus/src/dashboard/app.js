// The eventbus dashboard: polls /api/state every second and redraws the tables, with the
// rates and the short histories the server computes over its own samples (history.rs), one
// small SVG chart per topic and subscription; a dead letter's button redelivers it with
// POST /api/redeliver (the token is the page's).
"use strict";

const token = document.querySelector('meta[name="eventbus-token"]').content;
// The page's own path as the base of the API's: `/` on the dashboard's own server, the mount
// point (`/admin/bus` or `/admin/bus/`) inside an application's router.
const apiBase = location.pathname.endsWith("/") ? location.pathname : location.pathname + "/";
// The span of the charts, in seconds: the server keeps five minutes of samples.
const CHART_SECONDS = 300;
const SVG = "http://www.w3.org/2000/svg";

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function rate(value) {
  if (value == null) return "–";
  return value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

// A line of `values` at times `t` (seconds before now, negative) over the chart's span,
// scaled to `top` (its largest value, at least 1).
function line(t, values, top, className, width, height) {
  const scale = Math.max(1, top);
  const points = values.map((v, i) => {
    const x = width * (1 + Math.max(-CHART_SECONDS, t[i]) / CHART_SECONDS);
    const y = height - 1 - (height - 2) * Math.min(1, v / scale);
    return x.toFixed(1) + "," + y.toFixed(1);
  });
  const polyline = document.createElementNS(SVG, "polyline");
  polyline.setAttribute("class", className);
  polyline.setAttribute("points", points.join(" "));
  return polyline;
}

// A topic's chart (its rate), or a subscription's (its rate out, and its mailbox's depth
// against its capacity).
function chart(history, capacity) {
  const width = 120, height = 28;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.dataset.points = history.t.length;
  const top = Math.max(0, ...history.rate);
  const title = document.createElementNS(SVG, "title");
  title.textContent = "last " + CHART_SECONDS / 60 + " min: up to " + rate(top) + "/s" +
    (history.depth ? ", mailbox up to " + Math.max(0, ...history.depth) + " of " + capacity : "");
  svg.appendChild(title);
  if (history.depth) svg.appendChild(line(history.t, history.depth, capacity, "depth", width, height));
  svg.appendChild(line(history.t, history.rate, top, "rate", width, height));
  return svg;
}

// A log topic's column: how many it keeps, from which seq, and how far behind each reader is.
function logCell(row, topic, subscriptions) {
  const td = cell(row, "", "log");
  if (topic.retained == null) return;
  const part = (text, className) => {
    const span = document.createElement("span");
    span.className = className;
    span.textContent = text;
    td.appendChild(span);
    return span;
  };
  part(topic.retained + " kept", "retained");
  part(" from #" + topic.oldest, "oldest");
  for (const s of subscriptions) {
    if (s.topic !== topic.name || s.lag == null) continue;
    const lag = part(s.name + ": " + s.lag + " behind", "lag" + (s.lag > 0 ? " behind" : ""));
    lag.dataset.subscriber = s.name;
    lag.title = s.name + " is at #" + s.position;
  }
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
    cell(row, t.name, "name");
    cell(row, t.published, "num published");
    cell(row, rate(t.rate), "num rate");
    cell(row, "", "trend").appendChild(chart(t.history, 0));
    cell(row, t.subscribers, "num subscribers");
    logCell(row, t, stats.subscriptions);
    topics.appendChild(row);
  }

  const subs = document.querySelector("#subscriptions tbody");
  subs.replaceChildren();
  for (const s of stats.subscriptions) {
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
    cell(row, rate(s.rate_in), "num rate-in");
    // Out is everything finished: delivered, dead-lettered or dropped, so in = out at rest.
    cell(row, rate(s.rate_out), "num rate-out");
    cell(row, "", "trend").appendChild(chart(s.history, s.capacity));
    cell(row, s.received, "num received");
    cell(row, s.in_handler, "num in-handler");
    cell(row, s.delivered, "num delivered");
    cell(row, s.failed, "num failed");
    cell(row, s.retried, "num retried");
    cell(row, s.dead_lettered, "num dead" + (s.dead_lettered > 0 ? " alert" : ""));
    // A dropping policy drops by design; a Block subscriber should never lose a message.
    const drops = s.dropped === 0 ? "" : s.overflow === "Block" ? " alert" : " expected";
    cell(row, s.dropped, "num dropped" + drops);
    cell(row, s.filtered, "num filtered");
    subs.appendChild(row);
  }

  // NATS bridges (feature `nats`): a row per export and per import.
  const bridges = stats.bridges || [];
  document.getElementById("bridges-section").hidden = bridges.length === 0;
  const links = document.querySelector("#bridges tbody");
  links.replaceChildren();
  for (const b of bridges) {
    const link = (way, topic, where, values, dead) => {
      const row = document.createElement("tr");
      row.dataset.way = way;
      row.dataset.topic = topic;
      cell(row, b.id, "bridge");
      cell(row, way, "way");
      cell(row, topic, "topic");
      cell(row, where, "where");
      const names = ["moved", "passed", "acked", "waiting", "again", "skipped"];
      values.forEach((v, i) => cell(row, v, "num " + names[i]));
      cell(row, dead, "num dead" + (dead > 0 ? " alert" : ""));
      cell(row, b.reconnects, "num reconnects");
      links.appendChild(row);
    };
    for (const e of b.exports) {
      link("export", e.topic, e.subject,
        [e.taken, e.sent, e.acked, e.pending, e.resent, ""], e.dead_lettered);
    }
    for (const i of b.imports) {
      link("import", i.topic, i.name,
        [i.received, i.imported, i.acked, i.held, i.redelivered, i.skipped], i.dead_lettered);
      // Why an import waits (a keyed import whose partition count it cannot read), on a
      // line of its own under its row, where an operator looking at the page sees it.
      if (i.problem) {
        const row = document.createElement("tr");
        row.className = "problem";
        row.dataset.way = "import";
        row.dataset.topic = i.topic;
        const columns = document.querySelectorAll("#bridges thead th").length;
        cell(row, "waiting: " + i.problem, "alert").colSpan = columns;
        links.appendChild(row);
      }
    }
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
    cell(row, l.message == null ? "" : l.message, "message");
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
    count + " kept, " + stats.dead_letters_discarded + " discarded";
  const older = document.getElementById("dead-older");
  older.textContent = "and " + state.dead_letters_not_shown + " older not shown";
  older.hidden = state.dead_letters_not_shown === 0;
  document.getElementById("no-dead").hidden = state.dead_letters.length > 0;
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
