// Browser test of the taskledger page, in headless Debian Chromium driven by
// playwright-core (never a downloaded browser build).
//
//   node web/test/browser.mjs <stack URL> <screenshot dir> <recorder URL>
//
// The stack URL serves the page at "/" and the API beside it (the local
// stack, internal/local). The recorder is another origin (an https server
// of the Go test that records every request it gets): the page is opened
// with ?api= naming it, and with it remembered as an older page would have,
// and must never send it anything (the Go test reads the recorder). Prints one JSON report line on stdout:
//   {"ok":bool,"steps":[{"name","ok","ms","detail"}...],"screenshots":[paths],
//    "tasks":{...},"errors":[...]}
// and exits 0 only when every step passed. Progress goes to stderr.
import { createRun, launch, run, mkdir, STEP_TIMEOUT } from './harness.mjs';

const OVERALL_TIMEOUT = 170_000;

const [, , stackURL, shotDirArg, recorderURL] = process.argv;
if (!stackURL || !shotDirArg || !recorderURL) {
  console.error('usage: node browser.mjs <stack URL> <screenshot dir> <recorder URL>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const recorder = new URL(recorderURL).origin;
const { report, log, step, check, shot, shotDir } = createRun('browser', shotDirArg);
let page; // the page under test, for a screenshot on failure

// POSTs to /tasks seen by the page, with their key and outcome.
function trackSubmissions(page) {
  const posts = [];
  page.on('request', (req) => {
    if (req.method() === 'POST' && new URL(req.url()).pathname === '/tasks') {
      posts.push({ req, key: req.headers()['idempotency-key'] || '', body: req.postData() || '', done: false });
    }
  });
  page.on('requestfinished', async (req) => {
    const p = posts.find((x) => x.req === req);
    if (!p) return;
    const resp = await req.response();
    p.status = resp.status();
    p.replayed = (await resp.headerValue('idempotent-replayed')) || '';
    try { p.taskID = (await resp.json()).task_id; } catch { p.taskID = ''; }
    p.done = true;
  });
  page.on('requestfailed', (req) => {
    const p = posts.find((x) => x.req === req);
    if (p) { p.failed = req.failure()?.errorText || 'failed'; p.done = true; }
  });
  return posts;
}

// settle waits until every tracked POST has finished and no new one
// started for quietMs (the only way to see that a second click sent
// nothing is to watch for a while).
async function settle(posts, quietMs = 400) {
  const deadline = Date.now() + 15_000;
  let seen = -1;
  let since = Date.now();
  for (;;) {
    if (posts.length !== seen || posts.some((p) => !p.done)) { seen = posts.length; since = Date.now(); }
    if (Date.now() - since >= quietMs) return;
    if (Date.now() > deadline) throw new Error('submissions did not settle');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function listedIDs(page) {
  return page.$$eval('#task-list li[data-task-id]', (els) => els.map((e) => e.getAttribute('data-task-id')));
}

async function submitStatus(page) {
  await page.waitForSelector('#submit-status[data-status="202"], #submit-status[data-status="200"]', { timeout: STEP_TIMEOUT });
  await page.waitForFunction(() => !document.getElementById('send').disabled, null, { timeout: STEP_TIMEOUT });
  return page.$eval('#submit-status', (e) => ({
    status: e.getAttribute('data-status'), taskID: e.getAttribute('data-task-id'),
    replayed: e.getAttribute('data-replayed'), text: e.textContent,
  }));
}

async function resetStatus(page) {
  await page.$eval('#submit-status', (e) => { e.removeAttribute('data-status'); e.removeAttribute('data-task-id'); });
}

async function main() {
  await mkdir(shotDir, { recursive: true });
  // No network loads beyond the stack under test (launch aborts them and
  // lists them in foreign), but the recorder's: what the page sends it
  // reaches it, so that the Go test sees it.
  const b = await launch(origin, report, { viewport: { width: 1280, height: 900 }, passThrough: [recorder] });
  const { foreign } = b;
  page = b.page;
  try {
    const posts = trackSubmissions(page);
    const toRecorder = [];
    page.on('request', (req) => { if (req.url().startsWith(recorder + '/')) toRecorder.push(req.method() + ' ' + req.url()); });

    await step('a link naming another API (?api=) still talks only to the page\'s own origin', async () => {
      await page.goto(stackURL.replace(/\/?$/, '/') + '?api=' + encodeURIComponent(recorderURL), { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      check(await page.getAttribute('html', 'data-auth') === 'none', 'auth settings read from the page\'s own API (mode none)');
      // As a page from before this rule would have remembered it: the next
      // load must ignore it, and forget it.
      await page.evaluate((u) => localStorage.setItem('taskledger.apiBase', u), recorderURL);
      return { toRecorder: toRecorder.length };
    });

    await step('load page', async () => {
      await page.goto(stackURL, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      check(await page.$('#api-base') === null, 'no API base field: the page uses its own origin');
      const remembered = await page.evaluate(() => localStorage.getItem('taskledger.apiBase'));
      check(remembered === null, `a remembered API base is cleared (got ${remembered})`);
      check(toRecorder.length === 0, 'requests to the ?api= origin: ' + toRecorder.join(', '));
      const base = origin;
      // The local stack runs without an authorizer (auth mode none): the
      // page says the API is open to anyone, and offers no sign-in.
      await page.waitForSelector('#open-banner:not([hidden])');
      check(await page.getAttribute('html', 'data-auth') === 'none', 'auth mode none');
      check(await page.isHidden('#sign-in'), 'no sign-in button in mode none');
      return { title: await page.title(), apiBase: base, banner: (await page.textContent('#open-banner')).trim().slice(0, 60) };
    });

    await step('submit and see the task complete', async () => {
      await page.fill('#prompt', 'Write two lines about a ledger that never forgets.');
      await page.click('#send');
      const st = await submitStatus(page);
      check(st.status === '202', `first submission is 202 (got ${st.status}: ${st.text})`);
      await page.waitForSelector(`#task-view[data-task-id="${st.taskID}"][data-state="completed"]`);
      const result = (await page.textContent('#task-result')).trim();
      check(result.length > 0, 'result text shown');
      const provider = (await page.textContent('#task-receipt [data-field="provider"]')).trim();
      check(provider && provider !== '—', 'receipt names the provider');
      const opID = (await page.textContent('#task-receipt [data-field="operation_id"]')).trim();
      check(opID.length > 0 && opID !== '—', 'receipt has an operation id');
      report.tasks.completed = st.taskID;
      await shot(page, '01-completed.png');
      return { taskID: st.taskID, resultChars: result.length, provider, attempts: await page.textContent('#task-attempts') };
    });

    await step('regenerate makes a new task linked to its parent', async () => {
      const parent = report.tasks.completed;
      await page.click('#regenerate');
      await page.waitForFunction((p) => {
        const v = document.getElementById('task-view');
        return v.getAttribute('data-task-id') !== p && v.getAttribute('data-state') === 'completed';
      }, parent);
      const child = await page.getAttribute('#task-view', 'data-task-id');
      const link = (await page.textContent('#task-parent')).trim();
      check(link === parent, `child links its parent (got ${link})`);
      check(/^202 Accepted/.test(await page.textContent('#task-action-status')), 'regenerate answered 202');
      check((await page.textContent('#task-result')).trim().length > 0, 'child has a result');
      report.tasks.regenerated = child;
      return { parent, child };
    });

    await step('double click Send creates one task', async () => {
      await resetStatus(page);
      const before = await listedIDs(page);
      const from = posts.length;
      await page.fill('#prompt', 'Double-click me: one logical request.');
      await page.dblclick('#send');
      const st = await submitStatus(page);
      await settle(posts);
      const mine = posts.slice(from);
      check(mine.length >= 1 && mine.length <= 2, `one or two POSTs went out (got ${mine.length})`);
      check(mine.every((p) => p.key && p.key === mine[0].key), 'every POST of the double click carries the same Idempotency-Key');
      check(mine.filter((p) => p.status === 202).length === 1, 'exactly one 202');
      check(mine.every((p) => p.taskID === st.taskID), 'every response names the same task');
      check(mine.slice(1).every((p) => p.status === 200 && p.replayed === 'true'), 'a second POST, if any, is a replay');
      const after = await listedIDs(page);
      check(after.length === before.length + 1, `the page lists one more task (before ${before.length}, after ${after.length})`);
      check(after.filter((id) => id === st.taskID).length === 1, 'the new task is listed once');
      // Via the API: the key names that one task (a replay, no new task).
      const again = await fetch(origin + '/tasks', {
        method: 'POST', headers: { 'Content-Type': 'application/json', 'Idempotency-Key': mine[0].key }, body: mine[0].body,
      });
      const againBody = await again.json();
      check(again.status === 200 && again.headers.get('idempotent-replayed') === 'true', `re-POST with the key is a replay (got ${again.status})`);
      check(againBody.task_id === st.taskID, 're-POST names the same task');
      report.tasks.doubleClick = st.taskID;
      return { posts: mine.map((p) => ({ status: p.status, replayed: p.replayed })), taskID: st.taskID };
    });

    await step('slow double click (second click after the reply) replays, never a second task', async () => {
      await resetStatus(page);
      const before = await listedIDs(page);
      const from = posts.length;
      await page.fill('#prompt', 'A slow double click.');
      const box = await page.locator('#send').boundingBox();
      const x = box.x + box.width / 2; const y = box.y + box.height / 2;
      await page.mouse.move(x, y);
      await page.mouse.down({ clickCount: 1 });
      await page.mouse.up({ clickCount: 1 });
      const first = await submitStatus(page);
      check(first.status === '202', `first click: 202 (got ${first.status})`);
      await resetStatus(page);
      await page.mouse.down({ clickCount: 2 });
      await page.mouse.up({ clickCount: 2 });
      const second = await submitStatus(page);
      await settle(posts);
      const mine = posts.slice(from);
      check(mine.length === 2, `two POSTs went out (got ${mine.length})`);
      check(mine[0].key === mine[1].key, 'both carry the same Idempotency-Key');
      check(mine[0].status === 202 && mine[1].status === 200 && mine[1].replayed === 'true', 'second is 200 Idempotent-Replayed');
      check(second.status === '200' && second.replayed === 'true' && second.taskID === first.taskID, 'the page shows the replay of the same task');
      check(/Idempotent-Replayed/.test(second.text), 'the replay is said in words');
      report.tasks.slowDoubleClick = first.taskID;
      const after = await listedIDs(page);
      check(after.length === before.length + 1, `one more task listed (before ${before.length}, after ${after.length})`);
      return { taskID: first.taskID, statusText: second.text };
    });

    await step('a network error and a 503 are retried with the same key', async () => {
      await resetStatus(page);
      const keys = [];
      const handler = async (route) => {
        if (route.request().method() !== 'POST') return route.fallback();
        keys.push(route.request().headers()['idempotency-key']);
        if (keys.length === 1) return route.abort('connectionreset');
        if (keys.length === 2) {
          return route.fulfill({
            status: 503,
            headers: { 'Retry-After': '1', 'Content-Type': 'application/problem+json' },
            body: JSON.stringify({ type: 'about:blank', title: 'Service unavailable', status: 503, detail: 'injected by the test' }),
          });
        }
        return route.fallback();
      };
      await page.route(origin + '/tasks', handler);
      try {
        await page.fill('#prompt', 'Survive a flaky network.');
        const t0 = Date.now();
        await page.click('#send');
        const st = await submitStatus(page);
        const waited = Date.now() - t0;
        check(st.status === '202', `202 after the retries (got ${st.status}: ${st.text})`);
        check(keys.length === 3, `three sends (got ${keys.length})`);
        check(keys.every((k) => k && k === keys[0]), 'every send carries the same Idempotency-Key');
        check(waited >= 1000, `Retry-After: 1 honoured (took ${waited} ms)`);
        check(/after 3 sends/.test(st.text), 'the page says it retried');
        report.tasks.retried = st.taskID;
        return { taskID: st.taskID, sends: keys.length, waitedMs: waited };
      } finally {
        await page.unroute(origin + '/tasks', handler);
      }
    });

    await step('a throttled attempt: the page says when the next one runs, then shows both attempts', async () => {
      await resetStatus(page);
      await page.fill('#prompt', 'Throttled once, then answered.');
      if (!(await page.$eval('#advanced', (d) => d.open))) await page.click('#advanced > summary');
      await page.selectOption('#simulate', 'throttle');
      await page.click('#send');
      const st = await submitStatus(page);
      check(st.status === '202', `202 (got ${st.status}: ${st.text})`);
      report.tasks.throttled = st.taskID;
      await page.waitForSelector(`#task-view[data-task-id="${st.taskID}"][data-state="retry_wait"]`);
      await page.waitForSelector('#task-next-dd:not([hidden])');
      const next = (await page.textContent('#task-next')).trim();
      check(/^attempt 2 (in \d+ (ms|s)|due now)/.test(next), 'retry_wait says when attempt 2 runs: ' + next);
      const waiting = await page.$$eval('#task-history li', (els) => els.map((e) => e.getAttribute('data-outcome')));
      check(waiting.join() === 'retry', 'while waiting, the timeline shows the retried attempt: ' + waiting.join());
      await page.waitForSelector(`#task-view[data-task-id="${st.taskID}"][data-state="completed"]`);
      const items = await page.$$eval('#task-history li', (els) => els.map((e) => ({
        attempt: e.getAttribute('data-attempt'), outcome: e.getAttribute('data-outcome'), text: e.textContent })));
      check(items.length === 2 && items[0].attempt === '1' && items[0].outcome === 'retry' && items[1].attempt === '2' && items[1].outcome === 'completed',
        'timeline: attempt 1 retried, attempt 2 completed: ' + JSON.stringify(items.map((i) => i.attempt + ' ' + i.outcome)));
      check(/retried \(transient\)/.test(items[0].text) && /claimed .* ended .* took /.test(items[0].text), 'the retried attempt says why and when: ' + items[0].text);
      check(/ref /.test(items[1].text) && /tokens in/.test(items[1].text), 'the completed attempt names its reference and tokens: ' + items[1].text);
      check(await page.isHidden('#task-next-dd'), 'no next attempt once completed');
      await page.selectOption('#simulate', 'none');
      await page.click('#advanced > summary'); // closed again, as the next step expects it
      await shot(page, '01b-attempts.png');
      return { taskID: st.taskID, next, timeline: items.map((i) => i.text) };
    });

    await step('a credentials fault parks the task (needs_review)', async () => {
      await resetStatus(page);
      await page.fill('#prompt', 'This one meets bad credentials.');
      await page.click('#advanced > summary');
      await page.selectOption('#simulate', 'credentials');
      await page.click('#send');
      const st = await submitStatus(page);
      check(st.status === '202', `202 (got ${st.status}: ${st.text})`);
      await page.waitForSelector(`#task-view[data-task-id="${st.taskID}"][data-state="needs_review"]`);
      await page.waitForSelector('#task-review:not([hidden])');
      const reason = (await page.textContent('#task-review-reason')).trim();
      const summary = (await page.textContent('#task-review-summary')).trim();
      check(reason.length > 0 && summary.length > 0, 'review reason and summary shown');
      report.tasks.parked = st.taskID;
      // Cancel is refused for a parked task, and the page says why.
      await page.click('#cancel');
      await page.waitForFunction(() => /409/.test(document.getElementById('task-action-status').textContent));
      const cancelText = (await page.textContent('#task-action-status')).trim();
      check(/cancel/i.test(cancelText), 'the 409 is explained');
      check(await page.getAttribute('#task-view', 'data-state') === 'needs_review', 'still parked after the refused cancel');
      await page.selectOption('#simulate', 'none');
      await shot(page, '02-needs-review.png');
      return { taskID: st.taskID, reason, errorClass: (await page.textContent('#task-error-class')).trim(), cancelText };
    });

    await step('retry from the review view re-queues the task (which parks again)', async () => {
      const id = report.tasks.parked;
      await page.click('#tab-review');
      await page.fill('#operator', 'browser-test');
      const item = page.locator(`#review-list li[data-task-id="${id}"]`);
      // The item, or the page's explanation of why the queue did not load.
      await page.waitForFunction((tid) => document.querySelector(`#review-list li[data-task-id="${tid}"]`) ||
        document.querySelector('#review-status.error'), id);
      if (!(await item.count())) throw new Error('review queue did not load: ' + (await page.textContent('#review-status')));
      await item.locator('.ri-note').fill('Trying once more.');
      await item.locator('[data-action="retry"]').click();
      await page.waitForSelector(`#review-status[data-task-id="${id}"][data-task-state]`);
      const text = (await page.textContent('#review-status')).trim();
      check(/^Re-queued/.test(text), 'the page says the task was re-queued: ' + text);
      const after = await page.getAttribute('#review-status', 'data-task-state');
      check(['queued', 'running', 'needs_review'].includes(after), `task re-queued (state ${after})`);
      // The simulated credentials fault applies on every attempt: the task
      // parks again and comes back to the queue.
      // Every check is on a list loaded after the retry: the item shown
      // before it may still be on screen, and its task, re-queued, may not
      // have parked again yet.
      const deadline = Date.now() + STEP_TIMEOUT;
      for (;;) {
        await page.waitForFunction(() => !document.getElementById('review-refresh').disabled);
        await page.click('#review-refresh');
        await page.waitForFunction(() => !document.getElementById('review-refresh').disabled);
        if (await item.count()) break;
        check(Date.now() < deadline, 're-parked task back in the review queue');
        await page.waitForTimeout(500);
      }
      return { taskID: id, stateAfterRetry: after, statusText: text };
    });

    await step('resolve the parked task from the review view', async () => {
      const id = report.tasks.parked;
      const item = page.locator(`#review-list li[data-task-id="${id}"]`);
      await item.waitFor({ state: 'visible' });
      const summary = (await item.locator('.ri-summary').textContent()).trim();
      check(summary.length > 0, 'review item shows its summary');
      const safe = await item.locator('.ri-safe li').count();
      check(safe > 0, 'review item lists safe actions');
      await item.locator('.ri-note').fill('Credentials were wrong in this demo; closing as failed.');
      await item.locator('.ri-outcome').selectOption('failed');
      await shot(page, '03-review-queue.png');
      await item.locator('[data-action="resolve"]').click();
      await page.waitForSelector(`#review-status[data-task-id="${id}"][data-task-state]`);
      await item.waitFor({ state: 'detached' });
      const finalState = await page.getAttribute('#review-status', 'data-task-state');
      check(finalState === 'failed', `task's final state is failed (got ${finalState})`);
      const statusText = await page.textContent('#review-status');
      // Back on the task view, the task shows its final state.
      await page.click('#tab-tasks');
      await page.waitForSelector(`#task-list li[data-task-id="${id}"][data-state="failed"]`);
      await page.click(`#task-list li[data-task-id="${id}"] button`);
      await page.waitForSelector(`#task-view[data-task-id="${id}"][data-state="failed"]`);
      return { taskID: id, finalState, statusText };
    });

    await step('final screenshot', async () => {
      await page.click(`#task-list li[data-task-id="${report.tasks.completed}"] button`);
      await page.waitForSelector(`#task-view[data-task-id="${report.tasks.completed}"][data-state="completed"]`);
      await shot(page, '04-final.png');
    });

    await step('no page errors and no foreign network loads', async () => {
      const pageErrors = report.errors.filter((e) => e.startsWith('pageerror'));
      check(pageErrors.length === 0, 'page errors: ' + pageErrors.join('; '));
      check(foreign.length === 0, 'foreign requests: ' + foreign.join(', '));
      return { consoleErrors: report.errors.length };
    });
    report.ok = true;
  } catch (err) {
    if (page) await shot(page, 'failure.png').catch(() => {});
    throw err;
  } finally {
    await b.close();
  }
}

run(report, log, OVERALL_TIMEOUT, main);
