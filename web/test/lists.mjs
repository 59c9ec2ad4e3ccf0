// Browser test of the page's lists (docs/api.md "Lists"): "My tasks"
// (GET /tasks) and "Waiting for my decision" (GET /approvals), in headless
// Debian Chromium driven by playwright-core (never a downloaded browser).
//
//   node web/test/lists.mjs <stack URL> <screenshot dir>
//
// As the requester: three tasks of two kinds (a generate that completes, a
// throttled generate the Go test holds in retry_wait — its prompt carries
// HOLD_RETRY —, a deliver task sent by another client of the same caller),
// listed newest first, filtered by state and kind, with the held task's
// progress; a reload with empty storage lists them again; a task created
// meanwhile appears without a click; no list reads while the tab is not
// shown; Load more pages on with the opaque cursor; a row opens its task.
// As the approver (the stack's default policy: the caller decides on their
// own gated tasks, as in approval.mjs): two gated tasks listed by deadline,
// each result beside its plan (a plan param carrying HTML shows as text),
// the deadline absolute and relative; a result the list does not inline
// (the list answer is altered in the browser to leave it out, as it does
// for a result in the payload bucket) must be loaded before Approve is
// offered; one is rejected, one approved with the hash shown; each leaves
// the list, and the approved one's delivery shows in the task view. An
// item whose result another reviewer changed after the list was read is
// refused (409) at Approve, shows the current result and is approved of
// that.
// Prints one JSON report line on stdout (harness.mjs) and exits 0 only
// when every step passed. Progress goes to stderr.
import { createRun, launch, run, mkdir } from './harness.mjs';

const OVERALL_TIMEOUT = 200_000;
export const HOLD_RETRY = 'hold-retry';

const [, , stackURL, shotDirArg] = process.argv;
if (!stackURL || !shotDirArg) {
  console.error('usage: node lists.mjs <stack URL> <screenshot dir>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const h = createRun('lists', shotDirArg);
const { report, log, step, check, shotDir } = h;
let page;
const HEX64 = /^[0-9a-f]{64}$/;
const HOSTILE_TO = '<img src=x onerror=window.__pwned=1>@example.com';

const shot = (name) => h.shot(page, name);
const text = (sel) => h.text(page, sel);

// api is another client of the same caller (a script, the CLI).
async function api(method, path, body, key) {
  const headers = {};
  if (body) headers['Content-Type'] = 'application/json';
  if (key) headers['Idempotency-Key'] = key;
  const r = await fetch(stackURL + path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: await r.json().catch(() => null) };
}

async function apiSubmit(name, body) {
  const r = await api('POST', '/tasks', body, 'lists-' + name + '-' + Date.now());
  if (r.status !== 202) throw new Error(`submit ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  if (name) report.tasks[name] = r.body.task_id;
  return r.body.task_id;
}

// until polls cond (an API read) until it holds, for at most 30 s.
async function until(cond, what) {
  const deadline = Date.now() + 30_000;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 200));
  }
}

// submit fills the form and presses Send; it returns the new task's id.
async function submit(name, prompt, { simulate = 'none', approval = false, destination = '', params = '' } = {}) {
  await page.click('#tab-tasks');
  await page.fill('#prompt', prompt);
  if (!(await page.isVisible('#simulate'))) await page.click('#advanced > summary');
  await page.selectOption('#simulate', simulate);
  await page.setChecked('#require-approval', approval);
  await page.selectOption('#deliver-destination', destination);
  await page.fill('#deliver-params', params);
  const before = await page.getAttribute('#submit-status', 'data-task-id');
  await page.click('#send');
  await page.waitForFunction((b) => {
    const s = document.getElementById('submit-status');
    return s.dataset.status === '202' && s.dataset.taskId && s.dataset.taskId !== b;
  }, before);
  const id = await page.getAttribute('#submit-status', 'data-task-id');
  report.tasks[name] = id;
  return id;
}

// rows are the My tasks rows on screen.
async function rows() {
  return page.$$eval('#mine-rows tr[data-task-id]', (trs) => trs.map((tr) => ({
    id: tr.dataset.taskId, state: tr.dataset.state, kind: tr.dataset.kind,
    progress: tr.querySelector('[data-testid=mine-progress]').textContent,
    text: tr.textContent,
  })));
}

// waitRows waits until the rows' ids are exactly ids, in order.
async function waitRows(ids, what) {
  try {
    await page.waitForFunction((want) => {
      const got = Array.from(document.querySelectorAll('#mine-rows tr[data-task-id]')).map((tr) => tr.dataset.taskId);
      return JSON.stringify(got) === JSON.stringify(want);
    }, ids, { timeout: 20_000 });
  } catch (err) {
    throw new Error(`${what}: rows ${JSON.stringify((await rows()).map((r) => r.id))}, want ${JSON.stringify(ids)}`);
  }
}

// filter sets the My tasks filters and waits for the list read with them.
async function filter(state, kind) {
  const done = page.waitForResponse((r) => {
    const u = new URL(r.url());
    return u.pathname === '/tasks' && (u.searchParams.get('state') || '') === state && (u.searchParams.get('kind') || '') === kind && !u.searchParams.get('cursor');
  });
  await page.selectOption('#mine-state', state);
  await page.selectOption('#mine-kind', kind);
  await done;
}

async function inboxItems() {
  return page.$$eval('#inbox-list li[data-task-id]', (lis) => lis.map((li) => ({
    id: li.dataset.taskId, result: li.dataset.result, sha: li.dataset.resultSha,
    plan: Array.from(li.querySelectorAll('[data-testid=plan-entry]')).map((p) => ({ destination: p.dataset.destination, params: p.dataset.params, text: p.textContent })),
    deadline: li.querySelector('[data-testid=inbox-deadline]').textContent.replace(/\s+/g, ' ').trim(),
    expiresAt: li.querySelector('[data-testid=inbox-deadline]').dataset.expiresAt,
    approveDisabled: li.querySelector('[data-testid=inbox-approve]').disabled,
    resultText: li.querySelector('[data-testid=inbox-result]').textContent,
    offloaded: li.querySelector('[data-testid=inbox-offloaded]').hidden ? '' : li.querySelector('[data-testid=inbox-offloaded]').textContent,
  })));
}

async function main() {
  await mkdir(shotDir, { recursive: true });
  const b = await launch(origin, report);
  const { foreign, csp: cspViolations } = b;
  page = b.page;
  // Every list read the page makes, in order.
  const reads = [];
  page.on('request', (req) => {
    const u = new URL(req.url());
    if (req.method() === 'GET' && (u.pathname === '/tasks' || u.pathname === '/approvals')) reads.push(u.pathname + u.search);
  });
  try {
    await page.addInitScript(() => {
      window.__csp = [];
      document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
    });

    await step('open the page; My tasks says there are none yet', async () => {
      await page.goto(stackURL, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      await page.click('#tab-mine');
      await page.waitForSelector('#view-mine[data-loaded="true"]');
      check((await rows()).length === 0, 'no rows');
      const empty = await text('#mine-empty');
      check(/No tasks yet/.test(empty), 'says none yet: ' + empty);
      return { empty };
    });

    let A, B, C;
    await step('as the requester: a generate that completes, a throttled one held in retry_wait, a deliver task', async () => {
      A = await submit('completed', 'Summarise the week for the team.');
      await page.waitForSelector(`#task-view[data-task-id="${A}"][data-state="completed"]`);
      B = await submit('retrying', 'Draft the release note (' + HOLD_RETRY + ').', { simulate: 'throttle' });
      await page.waitForSelector(`#task-view[data-task-id="${B}"][data-state="retry_wait"]`);
      C = await apiSubmit('deliver', { kind: 'deliver', input: { destination: 'crm', params: { client_reference: 'lists-crm-1' }, payload: { order: 'lists-1' } } });
      return { A, B, C };
    });

    await step('My tasks lists them newest first, with kind, times and progress', async () => {
      await page.click('#tab-mine');
      await waitRows([C, B, A], 'newest first');
      const rs = await rows();
      check(rs[0].kind === 'deliver' && rs[1].kind === 'generate' && rs[2].kind === 'generate', 'kinds: ' + JSON.stringify(rs.map((r) => r.kind)));
      check(rs[2].state === 'completed' && rs[1].state === 'retry_wait', 'states: ' + JSON.stringify(rs.map((r) => r.state)));
      // The held task's progress: the API's summary, e.g. "attempt 1 of 5
      // failed; attempt 2 in 1s".
      check(/^attempt 1 of \d+ failed; attempt 2 in \d+s$/.test(rs[1].progress), 'retry_wait progress: ' + rs[1].progress);
      check(/completed after attempt 1 of \d+/.test(rs[2].progress), 'completed progress: ' + rs[2].progress);
      const created = await page.$$eval('#mine-rows tr[data-task-id] td:nth-child(4)', (tds) => tds.map((td) => td.textContent));
      check(created.every((c) => /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC$/.test(c)) && created[0] >= created[1] && created[1] >= created[2],
        'created times, newest first: ' + JSON.stringify(created));
      check(/retry wait/.test(rs[1].text) && rs[1].text.includes(B), 'the row shows its state pill and id');
      await shot('lists-mine.png');
      return { rows: rs.map((r) => [r.kind, r.state, r.progress]) };
    });

    await step('filters: by kind, by state, and both', async () => {
      await filter('', 'deliver');
      await waitRows([C], 'kind deliver');
      await filter('', 'generate');
      await waitRows([B, A], 'kind generate');
      await filter('retry_wait', '');
      await waitRows([B], 'state retry_wait');
      const p = (await rows())[0].progress;
      check(/attempt 2 in \d+s/.test(p), 'progress of the retry_wait row: ' + p);
      await shot('lists-mine-filtered.png');
      await filter('completed', 'deliver');
      // The crm delivery completes on its own; until then it matches nothing.
      await page.waitForFunction(() => {
        const trs = document.querySelectorAll('#mine-rows tr[data-task-id]');
        return trs.length === 1 || !document.getElementById('mine-empty').hidden;
      });
      await filter('running', 'generate');
      await waitRows([], 'state running, kind generate');
      const empty = await text('#mine-empty');
      check(/No task of yours matches/.test(empty), 'says nothing matches: ' + empty);
      const q = reads.filter((r) => r.startsWith('/tasks?')).slice(-1)[0];
      check(q === '/tasks?state=running&kind=generate&limit=20', 'the API filters: ' + q);
      await filter('', '');
      await waitRows([C, B, A], 'no filter');
      return { last: q };
    });

    await step('a reload with empty storage lists them again: the list is the API\'s', async () => {
      await page.evaluate(() => { sessionStorage.clear(); localStorage.clear(); });
      await page.reload({ waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      check((await page.$$('#task-list li[data-task-id]')).length === 0, 'the session list is empty');
      await page.click('#tab-mine');
      await waitRows([C, B, A], 'after a reload');
    });

    let D;
    await step('live: a task created elsewhere appears without a click; no reads while the tab is not shown', async () => {
      const before = reads.length;
      D = await apiSubmit('live', { kind: 'generate', input: { prompt: 'Another tab submitted this.' } });
      await waitRows([D, C, B, A], 'a new task at the top');
      check(reads.length > before, 'read again on its own');
      check(await text('#mine-live') === '● live', 'says it is live');
      await page.click('#tab-tasks');
      const hidden = reads.length;
      // Nothing happens for longer than two refresh periods: the only way
      // to see that no read is made.
      await page.waitForTimeout(7000);
      check(reads.length === hidden, `no list read while another tab is shown (${reads.length - hidden} made)`);
      await page.click('#tab-mine');
      await waitRows([D, C, B, A], 'shown again');
      return { readsWhileShown: hidden - before };
    });

    await step('Load more: the next page by the opaque cursor, then refreshed as a whole', async () => {
      const more = [];
      for (let i = 0; i < 20; i++) more.push(await apiSubmit('', { kind: 'generate', input: { prompt: 'Filler task ' + i } }));
      const newest = more.slice().reverse();
      await waitRows(newest, 'the first page: the 20 newest');
      check(await page.isVisible('#mine-more'), 'Load more is offered');
      await page.click('#mine-more');
      const all = [...newest, D, C, B, A];
      await waitRows(all, 'two pages');
      const withCursor = reads.filter((r) => /[?&]cursor=/.test(r));
      check(withCursor.length >= 1, 'read with a cursor: ' + JSON.stringify(withCursor));
      check(await page.isHidden('#mine-more'), 'no Load more at the end');
      // The next refresh walks both pages again.
      const n = reads.length;
      await page.waitForResponse((r) => /\/tasks\?.*cursor=/.test(r.url()) && reads.length > n);
      await waitRows(all, 'after a refresh of two pages');
      await shot('lists-mine-more.png');
      return { cursorReads: withCursor.length };
    });

    await step('a row opens its task in the task view', async () => {
      await page.click(`#mine-rows tr[data-task-id="${B}"] [data-testid=mine-open]`);
      await page.waitForSelector(`#task-view[data-task-id="${B}"]`);
      check(await page.getAttribute('#tab-tasks', 'aria-selected') === 'true', 'the Tasks tab is shown');
      check(await page.isVisible('#task-view'), 'the task view is shown');
    });

    let E, F;
    await step('as the approver: two gated tasks wait, soonest deadline first, each result beside its plan', async () => {
      E = await submit('approved', 'Summarise the contract for the client.',
        { approval: true, destination: 'notify', params: JSON.stringify({ to: HOSTILE_TO }) });
      await page.waitForSelector(`#task-view[data-task-id="${E}"][data-state="awaiting_approval"]`);
      F = await apiSubmit('rejected', {
        kind: 'generate', input: { prompt: 'Draft the press release.' },
        approval: { required: true, expires_in_seconds: 7200 },
        deliver: [{ destination: 'publish', params: { slug: 'press-release' } }],
      });
      // Both are listed by the API (the worker generates F meanwhile; the
      // list reads an index, eventually consistent) before the tab reads it.
      await until(async () => {
        const r = await api('GET', '/approvals');
        return r.status === 200 && [E, F].every((id) => r.body.approvals.some((a) => a.task_id === id));
      }, 'E and F listed by GET /approvals');
      // The list answer is altered in the browser to leave F's result out,
      // as the API does for a result kept in the payload bucket.
      await page.route((u) => u.pathname === '/approvals', async (route) => {
        const r = await route.fetch();
        const body = await r.json();
        for (const it of body.approvals || []) {
          if (it.task_id === F) { delete it.result; it.receipt = Object.assign({}, it.receipt, { result_bytes: 9300 }); }
        }
        await route.fulfill({ response: r, json: body });
      });
      await page.click('#tab-inbox');
      await page.waitForFunction((ids) => {
        const got = Array.from(document.querySelectorAll('#inbox-list li[data-task-id]')).map((li) => li.dataset.taskId);
        return JSON.stringify(got) === JSON.stringify(ids);
      }, [F, E]);
      const items = await inboxItems();
      const [f, e] = items;
      const ve = await api('GET', '/tasks/' + E);
      check(e.result === 'inline' && HEX64.test(e.sha) && e.sha === ve.body.result_sha256, `E shows its result with the API's hash (${e.sha} vs ${ve.body.result_sha256})`);
      check(e.resultText.length > 0 && e.resultText === (ve.body.result.text || ''), 'E\'s result text is shown');
      check(e.plan.length === 1 && e.plan[0].destination === 'notify' && e.plan[0].text.includes(HOSTILE_TO),
        'E\'s plan names notify and its params, the HTML as text: ' + JSON.stringify(e.plan));
      check(!(await page.evaluate(() => window.__pwned)), 'nothing in the plan ran');
      check((await page.$$('#inbox-list img')).length === 0, 'no element made from the plan');
      check(/^decide by \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC \(in 2 d 23 h\)$/.test(e.deadline), 'E\'s deadline, absolute and relative: ' + e.deadline);
      check(/^decide by .* UTC \(in 1 h 59 min\)$/.test(f.deadline), 'F\'s deadline: ' + f.deadline);
      check(f.expiresAt < e.expiresAt, 'soonest deadline first');
      check(f.plan.length === 1 && f.plan[0].destination === 'publish' && f.plan[0].params === '{"slug":"press-release"}', 'F\'s plan: ' + JSON.stringify(f.plan));
      check(f.result === 'offloaded' && /payload bucket/.test(f.offloaded) && /9\.1 KiB/.test(f.offloaded), 'F says where its result is: ' + f.offloaded);
      check(f.approveDisabled && !e.approveDisabled, 'Approve waits for F\'s result to be shown');
      check(await text('#inbox-count') === '2', 'the tab counts 2');
      await shot('lists-inbox.png');
      return { deadlines: [f.deadline, e.deadline] };
    });

    await step('load the result the list left out, then reject it: it leaves the list', async () => {
      const li = `#inbox-list li[data-task-id="${F}"]`;
      await page.click(`${li} [data-testid=inbox-load]`);
      await page.waitForSelector(`${li}[data-result="inline"]`);
      const vf = await api('GET', '/tasks/' + F);
      const f = (await inboxItems()).find((x) => x.id === F);
      check(f.sha === vf.body.result_sha256 && f.resultText === vf.body.result.text && !f.approveDisabled, 'F\'s result is shown and Approve offered');
      await page.fill(`${li} [data-testid=inbox-note]`, 'not this week');
      await page.click(`${li} [data-testid=inbox-reject]`);
      await page.waitForSelector(li, { state: 'detached' });
      await page.waitForSelector('#inbox-status[data-outcome="rejected"]');
      check(await text('#inbox-count') === '1', 'the tab counts 1');
      return { status: await text('#inbox-status') };
    });

    await step('approve with the hash shown: it leaves the list, and its delivery shows in the task view', async () => {
      const li = `#inbox-list li[data-task-id="${E}"]`;
      const sha = await page.getAttribute(li, 'data-result-sha');
      report.hashes.approved = sha;
      const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/tasks/' + E + '/approve'));
      await page.fill(`${li} [data-testid=inbox-note]`, 'approved from the inbox');
      await page.click(`${li} [data-testid=inbox-approve]`);
      const body = JSON.parse((await posted).postData());
      check(body.artifact_sha256 === sha && body.approval_round === 0 && body.note === 'approved from the inbox', 'the approval names the hash shown: ' + JSON.stringify(body));
      await page.waitForSelector(li, { state: 'detached' });
      await page.waitForSelector('#inbox-status[data-outcome="approved"]');
      const status = await text('#inbox-status');
      check(/1 delivery created: notify/.test(status), 'says what the approval did: ' + status);
      await page.waitForSelector('#inbox-empty:visible');
      check(await text('#inbox-count') === '', 'nothing counted');
      await shot('lists-inbox-decided.png');
      await page.click('[data-testid=inbox-decided-open]');
      await page.waitForSelector(`#task-view[data-task-id="${E}"][data-state="completed"]`);
      await page.waitForSelector('#deliveries li[data-task-id][data-state="completed"]');
      const ds = await page.$$eval('#deliveries li[data-task-id]', (lis) => lis.map((l) => ({ id: l.dataset.taskId, text: l.textContent })));
      check(ds.length === 1 && /notify/.test(ds[0].text), 'one notify delivery: ' + JSON.stringify(ds));
      report.tasks.delivery = ds[0].id;
      await shot('lists-approved-task.png');
      return { deliveries: ds };
    });

    await step('a result changed after the list was read: Approve is refused (409), the current result shown, approved again', async () => {
      const G = await apiSubmit('stale', { kind: 'generate', input: { prompt: 'Write the changelog.' }, approval: { required: true } });
      await until(async () => {
        const r = await api('GET', '/approvals');
        return r.status === 200 && r.body.approvals.some((a) => a.task_id === G);
      }, 'G listed by GET /approvals');
      await page.click('#tab-inbox');
      const li = `#inbox-list li[data-task-id="${G}"]`;
      await page.waitForSelector(li);
      const stale = await page.getAttribute(li, 'data-result-sha');
      // Another reviewer edits and approves, then withdraws: the task
      // awaits approval again, of another result.
      const ed = await api('POST', '/tasks/' + G + '/approve', { artifact_sha256: stale, edited_result: { text: 'Edited by another reviewer.' } });
      check(ed.status === 200, 'the other reviewer\'s edit: ' + ed.status);
      const wd = await api('POST', '/tasks/' + G + '/withdraw', {});
      check(wd.status === 200 && wd.body.state === 'awaiting_approval', 'withdrawn: ' + wd.status);
      const current = wd.body.result_sha256;
      check(current !== stale, 'the result changed');
      await page.click(`${li} [data-testid=inbox-approve]`);
      await page.waitForFunction(([sel, sha]) => {
        const el = document.querySelector(sel);
        return el && el.dataset.resultSha === sha;
      }, [li, current]);
      const outcome = await page.getAttribute(li, 'data-outcome');
      const msg = await text(`${li} [data-testid=inbox-item-status]`);
      check(outcome === 'artifact-changed' || outcome === 'approval-round-changed', 'refused with a 409: ' + outcome);
      check(/Not approved \(409/.test(msg) && /nothing was changed/.test(msg), 'says so: ' + msg);
      check(await text(`${li} [data-testid=inbox-result]`) === 'Edited by another reviewer.', 'the current result is shown');
      await shot('lists-inbox-conflict.png');
      await page.click(`${li} [data-testid=inbox-approve]`);
      await page.waitForSelector(li, { state: 'detached' });
      report.hashes.stale = stale;
      report.hashes.current = current;
      return { outcome, msg };
    });

    await step('the delivery is in My tasks too, as deliver', async () => {
      await page.click('#tab-mine');
      await filter('', 'deliver');
      await page.waitForSelector(`#mine-rows tr[data-task-id="${report.tasks.delivery}"][data-kind="deliver"]`);
      const r = (await rows()).find((x) => x.id === report.tasks.delivery);
      check(r.text.includes('delivery of ' + E), 'the row names its task: ' + r.text);
    });

    await step('narrow screen: the lists fit', async () => {
      await page.setViewportSize({ width: 420, height: 900 });
      await filter('', '');
      await shot('lists-mine-narrow.png');
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      check(overflow <= 0, 'no sideways scroll of the page: ' + overflow + 'px');
      await page.setViewportSize({ width: 1280, height: 1000 });
    });

    await step('every request stayed on the page\'s origin; the CSP held', async () => {
      const violations = await page.evaluate(() => window.__csp);
      check(foreign.length === 0, 'no request beyond the stack: ' + JSON.stringify(foreign));
      check(violations.length === 0 && cspViolations.length === 0, 'no CSP violation: ' + JSON.stringify([violations, cspViolations]));
      // The browser logs the one refused approval (409) as a failed load.
      const errors = report.errors.filter((e) => !/Failed to load resource: the server responded with a status of 409/.test(e));
      check(errors.length === 0, 'no page errors: ' + JSON.stringify(errors));
    });

    report.ok = true;
  } catch (err) {
    if (page) await shot('lists-failure.png').catch(() => {});
    throw err;
  } finally {
    await b.close();
  }
}

run(report, log, OVERALL_TIMEOUT, main);
