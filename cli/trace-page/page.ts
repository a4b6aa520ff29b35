// The trace page `crdfn dev --trace` serves: recent changes found by object, and a waterfall per
// change, over Jaeger's query API. Hand-written, with no framework: Jaeger v2 built from the Go
// module proxy embeds no UI assets (it serves a placeholder page), and its UI is a separate
// JavaScript build that no package registry serves. The changes are assembled here by the same
// code `crdfn trace` prints (traces.ts), so the page and the terminal show the same thing.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { changeById, findChanges, objectContains } from "./traces.ts";

export interface TracePage {
  url: string;
  stop(): Promise<void>;
}

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>crdfn traces</title>
<style>
  body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
  h1 { font-size: 16px; margin: 0 0 12px; }
  form { margin-bottom: 12px; }
  input { font: inherit; padding: 4px 6px; width: 320px; }
  table { border-collapse: collapse; width: 100%; }
  #changes td { padding: 3px 8px; border-bottom: 1px solid #eee; cursor: pointer; }
  #changes tr:hover, #changes tr.open { background: #eef4ff; }
  .mono { font-family: ui-monospace, monospace; }
  #waterfall { margin-top: 16px; }
  .span { display: flex; align-items: center; height: 20px; }
  .label { box-sizing: border-box; width: 420px; flex: none; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
  .track { position: relative; flex: 1; height: 14px; background: #f6f6f6; }
  .bar { position: absolute; top: 0; height: 14px; min-width: 2px; border-radius: 2px; }
  .ms { width: 150px; flex: none; text-align: right; color: #555; }
  .svc-crdfn-bridge { background: #4c78a8; }
  .svc-function { background: #59a14f; }
  .svc-apiserver { background: #e15759; }
  .muted { color: #777; }
</style>
</head>
<body>
<h1>crdfn — one trace per change</h1>
<form id="search"><input id="q" name="q" placeholder="object name, e.g. hello-world" autofocus> <button>Search</button> <span id="status" class="muted"></span></form>
<table id="changes"><tbody></tbody></table>
<div id="waterfall"></div>
<script>
const $ = (id) => document.getElementById(id);
const ms = (us) => (us / 1000).toFixed(1) + " ms";
function cell(tr, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }
let searches = 0;
async function search(q) {
  // Only the latest search's answer is shown: the first, on load, may answer after a typed one.
  const mine = ++searches;
  $("status").textContent = "searching…";
  const res = await fetch("changes?q=" + encodeURIComponent(q) + "&last=20");
  const changes = await res.json();
  if (mine !== searches) return;
  if (!res.ok) { $("status").textContent = changes.error; return; }
  $("status").textContent = changes.length + " change(s)";
  const body = $("changes").tBodies[0];
  body.replaceChildren();
  for (const c of changes) {
    const tr = document.createElement("tr");
    tr.dataset.trace = c.traceId;
    cell(tr, new Date(c.startUs / 1000).toLocaleTimeString());
    cell(tr, c.object, "mono object");
    cell(tr, c.cause + (c.outcome && c.outcome !== "sent" ? " (" + c.outcome + ")" : ""));
    cell(tr, ms(c.durationUs));
    cell(tr, c.spans.length + " spans");
    tr.onclick = () => { for (const r of body.rows) r.classList.remove("open"); tr.classList.add("open"); show(c); };
    body.appendChild(tr);
  }
  if (changes[0]) body.rows[0].click();
}
function show(c) {
  const w = $("waterfall");
  w.replaceChildren();
  const head = document.createElement("h1");
  head.textContent = c.object + " — " + ms(c.durationUs) + " — trace " + c.traceId;
  w.appendChild(head);
  for (const s of c.spans) {
    const row = document.createElement("div");
    row.className = "span";
    const label = document.createElement("div");
    label.className = "label";
    label.style.paddingLeft = (s.depth * 14) + "px";
    label.textContent = (s.linked ? "↪ " : "") + s.service + ": " + s.name;
    label.title = JSON.stringify(s.attributes, null, 1);
    const track = document.createElement("div");
    track.className = "track";
    const bar = document.createElement("div");
    // The bridge, the API server, and every other service a function (crdfn-<kind>).
    bar.className = "bar svc-" + (s.service === "crdfn-bridge" || s.service === "apiserver" ? s.service : "function");
    bar.style.left = (100 * (s.startUs - c.startUs) / Math.max(c.durationUs, 1)) + "%";
    bar.style.width = (100 * s.durationUs / Math.max(c.durationUs, 1)) + "%";
    track.appendChild(bar);
    const time = document.createElement("div");
    time.className = "ms";
    time.textContent = "+" + ms(s.startUs - c.startUs) + "  " + ms(s.durationUs);
    row.append(label, track, time);
    w.appendChild(row);
  }
}
$("search").onsubmit = (e) => { e.preventDefault(); search($("q").value); };
search(new URLSearchParams(location.search).get("q") ?? "");
</script>
</body>
</html>
`;

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
  res.end(body);
}

async function answer(query: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://page");
  if (url.pathname === "/") return send(res, 200, "text/html; charset=utf-8", HTML);
  if (url.pathname === "/changes") {
    const last = Math.min(100, Math.max(1, Number(url.searchParams.get("last") ?? 20) || 20));
    const changes = await findChanges(query, { match: objectContains(url.searchParams.get("q") ?? ""), last });
    return send(res, 200, "application/json", JSON.stringify(changes));
  }
  const trace = /^\/changes\/([0-9a-f]+)$/.exec(url.pathname);
  if (trace) return send(res, 200, "application/json", JSON.stringify(await changeById(query, trace[1]!)));
  // Jaeger's own query API, for whoever wants the raw traces from the same place.
  if (url.pathname.startsWith("/api/")) {
    const upstream = await fetch(new URL(url.pathname + url.search, query), { signal: AbortSignal.timeout(10_000) });
    return send(res, upstream.status, upstream.headers.get("content-type") ?? "application/json", await upstream.text());
  }
  send(res, 404, "text/plain", "not found");
}

/** Serves the page on a free loopback port (or `port`), over the Jaeger query API at `query`. */
export function startTracePage(query: string, port = 0): Promise<TracePage> {
  const server = createServer((req, res) => {
    answer(query, req, res).catch((e: unknown) => send(res, 502, "application/json", JSON.stringify({ error: (e as Error).message })));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      const at = typeof address === "object" && address ? address.port : port;
      resolve({
        url: `http://127.0.0.1:${at}/`,
        stop: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
