"""The timeline page: one self-contained HTML file (inline CSS and script, no network).

Owns :func:`render_page` / :func:`write_page`. The trace is reduced by
:func:`~kproto.tools.trace.timeline.build_timeline` and embedded as JSON; the script draws it as
SVG: time runs left to right, one lane per broker, client connection, group member and
kproto consumer; requests and responses are arrows between a connection's lane and its
broker's; member lanes carry what the member owns (segments labelled with the generation or
epoch, ``+``/``-`` markers where partitions are gained and lost); errors are red; clicking
an arrow or marker shows the decoded fields. The page loads nothing: the browser needs no
network and the file can be mailed around.
"""

from __future__ import annotations

import html
import json
from typing import Any, Iterable

from kproto.tools.trace.timeline import build_timeline

__all__ = ["render_page", "write_page"]

_CSS = """
body { font: 13px/1.35 system-ui, sans-serif; margin: 0; color: #222; }
header { padding: 8px 12px; background: #f4f4f8; border-bottom: 1px solid #ccc; }
header h1 { font-size: 16px; margin: 0 0 4px 0; display: inline-block; margin-right: 16px; }
header label { margin-right: 12px; }
#wrap { display: flex; height: calc(100vh - 300px); min-height: 320px; }
#labels { flex: 0 0 300px; overflow: hidden; border-right: 1px solid #ccc; background: #fafafa; }
#labels div { padding: 0 6px; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; border-bottom: 1px solid #eee; font-size: 12px; }
#labels div.broker { font-weight: bold; background: #eef3ff; }
#labels div.member { background: #f5fff0; }
#labels div.kproto { background: #fff8ec; }
#scroller { flex: 1; overflow: auto; }
#details { height: 260px; overflow: auto; border-top: 2px solid #999; margin: 0; padding: 6px 10px;
  background: #fcfcfc; font: 12px/1.3 ui-monospace, monospace; white-space: pre; }
svg text { font-size: 11px; }
.lane-bg.broker { fill: #eef3ff; } .lane-bg.member { fill: #f5fff0; } .lane-bg.kproto { fill: #fff8ec; }
.lane-bg.client { fill: #ffffff; }
.lane-line { stroke: #e4e4e4; }
.arrow { stroke-width: 1.4; cursor: pointer; fill: none; }
.arrow:hover { stroke-width: 3; }
.api-group { stroke: #7b3fb5; } .api-fetch { stroke: #2a6fd6; } .api-commit { stroke: #1d8a4a; }
.api-meta { stroke: #999; } .api-other { stroke: #555; }
.arrow.bad { stroke: #d00; stroke-width: 2; }
.arrow.step { stroke-dasharray: 5 2; }
.marker { cursor: pointer; }
.marker circle { stroke: #333; stroke-width: 0.5; }
.m-gen circle { fill: #7b3fb5; } .m-own circle { fill: #1d8a4a; } .m-target circle { fill: #c9a0ff; }
.m-session circle { fill: #2a6fd6; } .m-commit circle { fill: #1d8a4a; } .m-bad circle { fill: #d00; }
.m-inner circle { fill: #e59400; } .m-share circle { fill: #0aa; } .m-close circle { fill: #bbb; }
.m-bad text { fill: #d00; }
.m-step circle { fill: #f2c14e; } .m-step text { fill: #6a5000; }
.segment rect { fill: #cdeccd; stroke: #4a9a4a; cursor: pointer; }
.segment:nth-of-type(2n) rect { fill: #b9e0f2; stroke: #3a88aa; }
.segment text { fill: #123; }
.tick { stroke: #ccc; } .tick-label { fill: #666; }
.hidden { display: none; }
"""

_SCRIPT = r"""
(function () {
  const data = JSON.parse(document.getElementById('trace-data').textContent);
  const LANE = LANE_HEIGHT, TOP = 24, NS = 'http://www.w3.org/2000/svg';
  // Member lanes are taller: markers on top, what the member owns below.
  const heights = data.lanes.map(function (l) { return l.kind === 'member' ? LANE + 18 : LANE; });
  const tops = []; let acc = TOP;
  heights.forEach(function (h) { tops.push(acc); acc += h; });
  const svg = document.getElementById('timeline');
  const labels = document.getElementById('labels');
  const details = document.getElementById('details');
  const zoom = document.getElementById('zoom');
  const hideNoise = document.getElementById('hide-noise');
  const NOISE = new Set(['Fetch', 'Heartbeat', 'ConsumerGroupHeartbeat', 'ApiVersions', 'Metadata']);
  const span = Math.max(data.t1 - data.t0, 0.001);
  function family(api) {
    if (/Group|SyncGroup|JoinGroup|Heartbeat/.test(api)) return 'api-group';
    if (/Fetch$/.test(api) && api !== 'OffsetFetch') return 'api-fetch';
    if (/Commit|OffsetFetch/.test(api)) return 'api-commit';
    if (/Metadata|ApiVersions|FindCoordinator/.test(api)) return 'api-meta';
    return 'api-other';
  }
  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const k in attrs) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function show(index, what) {
    if (index === null || index === undefined) { details.textContent = what || ''; return; }
    details.textContent = (what ? what + '\n' : '') + JSON.stringify(data.details[index], null, 2);
  }
  data.lanes.forEach(function (lane) {
    const div = document.createElement('div');
    div.className = lane.kind; div.textContent = lane.label; div.title = lane.label;
    const h = heights[labels.children.length - 1];
    div.style.height = h + 'px'; div.style.lineHeight = h + 'px';
    labels.appendChild(div);
  });
  document.getElementById('scroller').addEventListener('scroll', function (ev) {
    labels.scrollTop = ev.target.scrollTop;
  });
  function draw() {
    const pxPerS = Number(zoom.value);
    const width = Math.max(600, Math.ceil(span * pxPerS) + 320);
    const height = acc + 10;
    const x = function (t) { return 10 + (t - data.t0) * pxPerS; };
    const y = function (lane) { return tops[lane] + LANE / 2; };
    svg.innerHTML = '';
    svg.setAttribute('width', width); svg.setAttribute('height', height);
    const defs = el('defs', {}, svg);
    ['api-group', 'api-fetch', 'api-commit', 'api-meta', 'api-other', 'bad'].forEach(function (c) {
      const m = el('marker', {id: 'head-' + c, viewBox: '0 0 10 10', refX: 9, refY: 5,
        markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse'}, defs);
      el('path', {d: 'M0,0 L10,5 L0,10 z', class: c === 'bad' ? 'arrow bad' : 'arrow ' + c,
        style: 'fill: currentColor'}, m);
    });
    data.lanes.forEach(function (lane, i) {
      el('rect', {x: 0, y: tops[i], width: width, height: heights[i], class: 'lane-bg ' + lane.kind}, svg);
      el('line', {x1: 0, x2: width, y1: tops[i] + heights[i], y2: tops[i] + heights[i], class: 'lane-line'}, svg);
    });
    const step = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300].find(function (s) { return s * pxPerS >= 90; }) || 600;
    for (let s = 0; s <= span + step; s += step) {
      el('line', {x1: x(data.t0 + s), x2: x(data.t0 + s), y1: 14, y2: height, class: 'tick'}, svg);
      const label = el('text', {x: x(data.t0 + s) + 2, y: 12, class: 'tick-label'}, svg);
      label.textContent = '+' + (Math.round(s * 1000) / 1000) + ' s';
    }
    data.segments.forEach(function (seg) {
      const g = el('g', {class: 'segment'}, svg);
      const x0 = x(seg.t0), w = Math.max(2, x(seg.t1) - x0);
      el('rect', {x: x0, y: tops[seg.lane] + LANE - 6, width: w, height: 20, rx: 3}, g);
      const text = el('text', {x: x0 + 3, y: tops[seg.lane] + LANE + 8}, g);
      // A label stays inside its segment, measured: the whole text, else only its name
      // ("gen 3"), else its number, else nothing (the tooltip and a click still tell).
      const head = seg.text.split(':')[0];
      const forms = [seg.text, head, head.replace(/^\D+/, '')];
      text.textContent = '';
      for (const form of forms) {
        text.textContent = form;
        if (form && text.getComputedTextLength() <= w - 6) break;
        text.textContent = '';
      }
      el('title', {}, g).textContent = seg.text;
      g.addEventListener('click', function () { show(null, seg.text); });
    });
    data.arrows.forEach(function (a) {
      if (hideNoise.checked && NOISE.has(a.api) && !a.bad) return;
      const cls = a.bad ? 'bad' : family(a.api);
      const x1 = x(a.t), y1 = y(a.from), y2 = y(a.to);
      const line = el('line', {x1: x1, y1: y1 + (y2 > y1 ? 6 : -6), x2: x1 + 3, y2: y2 + (y2 > y1 ? -6 : 6),
        class: 'arrow ' + a.dir + ' ' + cls + (a.step ? ' step' : ''), 'marker-end': 'url(#head-' + cls + ')',
        'data-api': a.api}, svg);
      el('title', {}, line).textContent = a.label + (a.dir === 'req' ? ' request' : ' response');
      line.addEventListener('click', function () { show(a.detail, a.label + (a.dir === 'req' ? ' (request)' : ' (response)')); });
    });
    // Marker labels: the story's (generations, ownership, steps, errors) placed first, then
    // the rest; a label whose measured box would overlap one already on its lane is left to
    // the tooltip, so no two labels ever overlap.
    const placed = {};
    const groups = data.markers.map(function (m) {
      const g = el('g', {class: 'marker m-' + (m.cls || 'inner')}, svg);
      const mx = x(m.t), my = data.lanes[m.lane].kind === 'member' ? tops[m.lane] + 9 : y(m.lane);
      el('circle', {cx: mx, cy: my, r: 4}, g);
      el('title', {}, g).textContent = m.text;
      g.addEventListener('click', function () { show(m.detail, m.text); });
      return {m: m, g: g, mx: mx, my: my};
    });
    const FIRST = new Set(['gen', 'own', 'step', 'bad', 'target']);
    [true, false].forEach(function (first) {
      groups.forEach(function (it) {
        if (FIRST.has(it.m.cls) !== first) return;
        const label = it.m.text.length > 70 ? it.m.text.slice(0, 67) + '...' : it.m.text;
        const text = el('text', {x: it.mx + 6, y: it.my + 4, class: 'marker-label'}, it.g);
        text.textContent = label;
        const x0 = it.mx - 5, x1 = it.mx + 8 + text.getComputedTextLength();
        const lane = placed[it.m.lane] || (placed[it.m.lane] = []);
        if (lane.some(function (r) { return x0 < r[1] && r[0] < x1; })) {
          it.g.removeChild(text);
          return;
        }
        lane.push([x0, x1]);
      });
    });
  }
  const fit = Math.max(20, Math.min(4000, (window.innerWidth - 640) / span));
  zoom.min = Math.max(1, fit / 4); zoom.max = Math.max(fit * 50, 5000); zoom.value = fit;
  // #quiet hides the noisy APIs; #show=N opens the details of item N (links, screenshots).
  hideNoise.checked = /quiet/.test(location.hash);
  const wanted = /show=(\d+)/.exec(location.hash);
  if (wanted) show(Number(wanted[1]), 'item ' + wanted[1]);
  zoom.addEventListener('input', draw);
  hideNoise.addEventListener('change', draw);
  draw();
  document.body.setAttribute('data-rendered', String(data.arrows.length));
})();
"""

_LANE_HEIGHT = 30


def render_page(events: Iterable[dict[str, Any]], title: str = "kproto trace") -> str:
    """The HTML text of the timeline of ``events``."""
    model = build_timeline(list(events))
    # "</" inside the JSON would end the script element early.
    payload = json.dumps(model, default=str, separators=(",", ":")).replace("</", "<\\/")
    counts = "{} lanes, {} arrows, {} markers".format(len(model["lanes"]), len(model["arrows"]),
                                                      len(model["markers"]))
    page = _PAGE
    for key, value in (("@TITLE@", html.escape(title)), ("@COUNTS@", counts),
                       ("@CSS@", _CSS.replace("LANE", str(_LANE_HEIGHT))),
                       ("@SCRIPT@", _SCRIPT.replace("LANE_HEIGHT", str(_LANE_HEIGHT))),
                       ("@PAYLOAD@", payload)):  # the payload last: it may contain anything
        page = page.replace(key, value)
    return page


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>@TITLE@</title><style>@CSS@</style></head>
<body>
<header><h1>@TITLE@</h1><span>@COUNTS@</span><br>
<label>zoom <input id="zoom" type="range" step="any"></label>
<label><input id="hide-noise" type="checkbox"> hide Fetch, heartbeats, Metadata, ApiVersions</label>
<span>Click an arrow, marker or segment to see its decoded fields.</span></header>
<div id="wrap"><div id="labels"><div style="height:24px;line-height:24px">lanes</div></div>
<div id="scroller"><svg id="timeline" xmlns="http://www.w3.org/2000/svg"></svg></div></div>
<pre id="details">Click an arrow or a marker.</pre>
<script type="application/json" id="trace-data">@PAYLOAD@</script>
<script>@SCRIPT@</script>
</body></html>
"""


def write_page(events: Iterable[dict[str, Any]], path: str, title: str = "kproto trace") -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_page(events, title))
