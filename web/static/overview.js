/*
 * taskledger page: the Overview tab. GET /overview (the local stack's
 * operator API; counts only, never task text) every REFRESH_MS while the
 * tab is shown and the page visible, drawn as inline SVG: live tasks per
 * state as bars, the oldest task's age per state, per-minute rates as
 * sparklines, open reviews by reason as bars. Deployed (no /overview), the
 * tab points to the CloudWatch dashboard instead.
 *
 * All text goes into the DOM with textContent; SVG is built with
 * createElementNS and presentation comes from style.css (classes), so the
 * page's Content-Security-Policy (style-src 'self') holds.
 */
(function (root) {
  'use strict';

  var C = root.TaskledgerChart;
  var SVG = 'http://www.w3.org/2000/svg';
  var REFRESH_MS = 3000;
  var BAR_W = 300;

  var STATES = [
    { state: 'active', help: 'queued or running: waiting for a worker, or held by one' },
    { state: 'retry_wait', help: 'backing off before a retry' },
    { state: 'unknown', help: 'outcome uncertain; read back by the reconciler' }
  ];
  // Per-minute series, in display order.
  var SERIES = [
    { name: 'completed', label: 'Completions', cls: 'ok' },
    { name: 'failed', label: 'Failures', cls: 'bad' },
    { name: 'parked', label: 'Parked', cls: 'bad' },
    { name: 'retried', label: 'Retries', cls: 'warn' },
    { name: 'provider_calls', label: 'Provider calls', cls: 'accent' },
    { name: 'tokens', label: 'Tokens', cls: 'accent' },
    { name: 'cost_usd', label: 'Cost', cls: 'accent', unit: 'usd' }
  ];

  var st = { call: null, timer: 0, seq: 0, on: false, paused: false };
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, text) {
    var n = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text != null) n.textContent = text;
    return n;
  }

  function svg(tag, attrs) {
    var n = document.createElementNS(SVG, tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { n.setAttribute(k, String(attrs[k])); });
    return n;
  }

  // bar is an SVG of one horizontal bar (value v on scale max).
  function bar(v, max, cls, label) {
    var s = svg('svg', { viewBox: '0 0 ' + BAR_W + ' 14', preserveAspectRatio: 'none', 'class': 'ov-bar', role: 'img', 'aria-label': label });
    s.appendChild(svg('rect', { x: 0, y: 0, width: BAR_W, height: 14, rx: 3, 'class': 'ov-track' }));
    var w = C.barWidth(v, max, BAR_W);
    if (w > 0) s.appendChild(svg('rect', { x: 0, y: 0, width: w, height: 14, rx: 3, 'class': 'ov-fill ' + cls }));
    return s;
  }

  // spark is an SVG sparkline of values (area + line + the last point).
  function spark(values, cls, label) {
    var W = 160, H = 36;
    var s = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', 'class': 'ov-spark', role: 'img', 'aria-label': label });
    var pts = C.sparkPoints(values, W, H);
    s.appendChild(svg('polygon', { points: ['0,' + (H - 1)].concat(pts, [W + ',' + (H - 1)]).join(' '), 'class': 'ov-area ' + cls }));
    s.appendChild(svg('polyline', { points: pts.join(' '), 'class': 'ov-line ' + cls }));
    var last = pts[pts.length - 1].split(',');
    s.appendChild(svg('circle', { cx: last[0], cy: last[1], r: 2.5, 'class': 'ov-dot ' + cls }));
    return s;
  }

  function renderStates(o) {
    var box = $('ov-states');
    box.textContent = '';
    var byState = {};
    (o.states || []).forEach(function (s) { byState[s.state] = s; });
    var maxCount = 0, maxAge = 0;
    STATES.forEach(function (d) {
      var s = byState[d.state] || {};
      maxCount = Math.max(maxCount, s.count || 0);
      maxAge = Math.max(maxAge, s.oldest_age_seconds || 0);
    });
    var countScale = C.niceMax(maxCount), ageScale = C.niceMax(maxAge);
    var ages = $('ov-ages');
    ages.textContent = '';
    var total = 0;
    STATES.forEach(function (d) {
      var s = byState[d.state] || { count: 0, oldest_age_seconds: 0, oldest_exact: true };
      total += s.count || 0;
      var row = el('div', { 'class': 'ov-row', 'data-state': d.state, 'data-count': String(s.count || 0), title: d.help });
      row.appendChild(el('span', { 'class': 'ov-label badge state-' + d.state }, d.state.replace('_', ' ')));
      row.appendChild(bar(s.count || 0, countScale, 'state-fill-' + d.state, d.state + ': ' + (s.count || 0)));
      row.appendChild(el('span', { 'class': 'ov-num', 'data-testid': 'ov-count-' + d.state }, String(s.count || 0)));
      box.appendChild(row);

      var age = s.oldest_age_seconds || 0;
      var arow = el('div', { 'class': 'ov-row', 'data-state': d.state, 'data-age': String(age) });
      arow.appendChild(el('span', { 'class': 'ov-label badge state-' + d.state }, d.state.replace('_', ' ')));
      arow.appendChild(bar(age, ageScale, 'state-fill-' + d.state, d.state + ' oldest: ' + C.formatAge(age)));
      arow.appendChild(el('span', { 'class': 'ov-num', 'data-testid': 'ov-age-' + d.state },
        (s.oldest_exact === false && age > 0 ? '≥ ' : '') + C.formatAge(age)));
      ages.appendChild(arow);
    });
    $('ov-live-total').textContent = String(total) + ' live';
    $('ov-states-scale').textContent = 'scale 0–' + countScale;
    // Submitted tasks the reconciler has not checked yet (their watch
    // items): queued or running unless they ended, and in no count above
    // until it adopts them at their dispatch deadline.
    var watch = $('ov-watch');
    if (o.watch) {
      watch.hidden = false;
      watch.textContent = 'submitted, not yet checked: ' + o.watch.pending +
        ' (not in the counts above until the reconciler checks them at their dispatch deadline)';
    } else {
      watch.hidden = true;
    }
  }

  function renderRates(o) {
    var box = $('ov-rates');
    box.textContent = '';
    var rates = o.rates;
    $('ov-rates-window').textContent = rates ? 'per minute over the last ' + rates.minutes + ' min; the number is this minute so far' : '';
    SERIES.forEach(function (d) {
      var vals = rates && rates.series ? rates.series[d.name] : null;
      var card = el('div', { 'class': 'ov-rate', 'data-series': d.name });
      card.appendChild(el('div', { 'class': 'ov-rate-label' }, d.label));
      if (!vals || !vals.length) {
        card.setAttribute('data-nodata', 'true');
        card.appendChild(el('div', { 'class': 'ov-big muted' }, 'no data'));
        card.appendChild(el('div', { 'class': 'ov-rate-foot muted' },
          rates ? 'not recorded by the worker yet' : 'no metrics on this server'));
        box.appendChild(card);
        return;
      }
      var total = C.sum(vals);
      var last = vals[vals.length - 1] || 0;
      card.setAttribute('data-total', String(total));
      card.appendChild(el('div', { 'class': 'ov-big ' + d.cls, title: 'this minute so far' }, C.formatValue(last, d.unit)));
      card.appendChild(spark(vals, d.cls, d.label + ' per minute, last ' + vals.length + ' minutes'));
      card.appendChild(el('div', { 'class': 'ov-rate-foot muted' }, C.formatValue(total, d.unit) + ' in ' + vals.length + ' min'));
      box.appendChild(card);
    });
  }

  function renderReviews(o) {
    var box = $('ov-reviews');
    box.textContent = '';
    var rv = o.reviews || { open: 0, by_reason: {} };
    var reasons = Object.keys(rv.by_reason || {}).sort(function (a, b) {
      return (rv.by_reason[b] - rv.by_reason[a]) || (a < b ? -1 : 1);
    });
    $('ov-reviews-total').textContent = String(rv.open) + (rv.truncated ? '+' : '') + ' open';
    if (!reasons.length) {
      box.appendChild(el('p', { 'class': 'muted', 'data-testid': 'ov-reviews-empty' }, 'No open review items.'));
      return;
    }
    var scale = C.niceMax(rv.by_reason[reasons[0]]);
    reasons.forEach(function (r) {
      var n = rv.by_reason[r];
      var row = el('div', { 'class': 'ov-row', 'data-reason': r, 'data-count': String(n) });
      row.appendChild(el('code', { 'class': 'ov-label' }, r));
      row.appendChild(bar(n, scale, 'bad', r + ': ' + n));
      row.appendChild(el('span', { 'class': 'ov-num' }, String(n)));
      box.appendChild(row);
    });
  }

  function render(o) {
    renderStates(o);
    renderRates(o);
    renderReviews(o);
    var at = new Date(o.generated_at);
    var cost = o.cost && o.cost.queries ? ' · ' + o.cost.queries + ' DynamoDB queries per read (shared by every viewer for 2 s)' : '';
    $('ov-updated').textContent = 'Updated ' + (isNaN(at) ? '' : at.toLocaleTimeString()) + ' · refreshes every ' + (REFRESH_MS / 1000) + ' s' + cost;
    var v = $('view-overview');
    v.setAttribute('data-generated-at', o.generated_at || '');
    v.setAttribute('data-loaded', 'true');
  }

  function tick() {
    var seq = ++st.seq;
    st.call('GET', '/overview', { retry: false }).then(function (r) {
      if (seq !== st.seq || !st.on) return;
      var status = $('ov-status');
      if (r.status === 200 && r.body && Array.isArray(r.body.states)) {
        status.textContent = '';
        status.className = 'status';
        $('ov-body').hidden = false;
        $('ov-deployed').hidden = true;
        render(r.body);
      } else if (r.status === 404) {
        $('ov-body').hidden = true;
        $('ov-deployed').hidden = false;
      } else {
        status.textContent = 'Overview: ' + (r.body && (r.body.detail || r.body.title) || ('HTTP ' + r.status)) + ' — retrying.';
        status.className = 'status error';
      }
    }, function (err) {
      if (seq !== st.seq || !st.on) return;
      $('ov-status').textContent = 'Overview: ' + (err && err.message ? err.message : 'network error') + ' — retrying.';
      $('ov-status').className = 'status error';
    }).then(function () {
      if (seq !== st.seq || !st.on) return;
      st.timer = setTimeout(tick, REFRESH_MS);
    });
  }

  // start shows live figures until stop; call is the page's API call.
  function start(call) {
    st.call = call;
    if (st.on) return;
    st.on = true;
    tick();
  }

  function halt() {
    st.on = false;
    st.seq++;
    clearTimeout(st.timer);
  }

  // stop ends the refreshes (another tab was selected).
  function stop() {
    st.paused = false;
    halt();
  }

  // A hidden page (another browser tab) does not poll.
  document.addEventListener('visibilitychange', function () {
    if (document.hidden) {
      if (st.on) { halt(); st.paused = true; }
    } else if (st.paused) {
      st.paused = false;
      start(st.call);
    }
  });

  root.TaskledgerOverview = { start: start, stop: stop, REFRESH_MS: REFRESH_MS };
})(window);
