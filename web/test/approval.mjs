// Browser test of the page's approval gate (DESIGN §10), in headless Debian
// Chromium driven by playwright-core (never a downloaded browser build).
//
//   node web/test/approval.mjs <stack URL> <screenshot dir>
//
// Submits from the page with "Require approval" and a deliver plan, then
// drives each decision through the page's buttons: Approve (a delivery is
// created; it opens as its deliver task with its receipt), Withdraw after a
// delivery started (409 deliveries-started), Edit & approve, Withdraw while
// the delivery is unstarted (200), Approve from a stale tab after another
// reviewer changed the result (409 artifact-changed), Reject. Tasks whose
// prompt contains HOLD have their deliveries held back by the Go test (a
// throttled worker), so they stay unstarted.
// Prints one JSON report line on stdout:
//   {"ok":bool,"steps":[{"name","ok","ms","detail"}...],"screenshots":[paths],
//    "tasks":{...},"hashes":{...},"errors":[...]}
// and exits 0 only when every step passed. Progress goes to stderr.
import { createRun, launch, run, mkdir } from './harness.mjs';

const OVERALL_TIMEOUT = 200_000;
export const HOLD = 'hold-deliveries';

const [, , stackURL, shotDirArg] = process.argv;
if (!stackURL || !shotDirArg) {
  console.error('usage: node approval.mjs <stack URL> <screenshot dir>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const h = createRun('approval', shotDirArg);
const { report, log, step, check, shotDir } = h;
let page;
const HEX64 = /^[0-9a-f]{64}$/;

// shot and text act on the page under test.
const shot = (name) => h.shot(page, name);
const text = (sel) => h.text(page, sel);

// api is another client of the same API (a second reviewer using the CLI).
async function api(method, path, body) {
  const r = await fetch(stackURL + path, {
    method,
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, body: await r.json().catch(() => null) };
}

// submit fills the form and presses Send; it returns the new task's id.
async function submit(name, prompt, { approval, destination = '', params = '' }) {
  await page.click('#tab-tasks');
  await page.fill('#prompt', prompt);
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

async function waitState(id, state) {
  await page.waitForSelector(`#task-view[data-task-id="${id}"][data-state="${state}"]`);
}

async function waitOutcome(o) {
  await page.waitForSelector(`#approval-status[data-outcome="${o}"]`);
  return text('#approval-status');
}

async function shownSha() {
  return page.getAttribute('#approval', 'data-result-sha');
}

async function deliveries() {
  return page.$$eval('#deliveries li[data-task-id]', (lis) => lis.map((li) => ({ id: li.dataset.taskId, state: li.dataset.state, text: li.textContent })));
}

// plan is the deliver plan the page shows beside Approve.
async function plan() {
  return page.$$eval('#approval-plan li[data-destination]', (lis) => lis.map((li) => ({ destination: li.dataset.destination, params: li.dataset.params, text: li.textContent })));
}

async function main() {
  await mkdir(shotDir, { recursive: true });
  // launch aborts loads beyond the stack (listed in foreign) and collects
  // CSP violations from the console (csp).
  const b = await launch(origin, report);
  const { foreign, csp: cspViolations } = b;
  page = b.page;
  try {
    await page.addInitScript(() => {
      window.__csp = [];
      document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
    });

    await step('open the page; a delivery without an approval is refused before sending', async () => {
      await page.goto(stackURL, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      let posts = 0;
      const onReq = (req) => { if (req.method() === 'POST') posts++; };
      page.on('request', onReq);
      await page.fill('#prompt', 'no gate');
      await page.setChecked('#require-approval', false);
      await page.selectOption('#deliver-destination', 'notify');
      await page.click('#send');
      const msg = await text('#submit-status');
      check(/Require approval/.test(msg), 'says the delivery needs an approval: ' + msg);
      await page.setChecked('#require-approval', true);
      await page.fill('#deliver-params', '{"to":');
      await page.click('#send');
      const msg2 = await text('#submit-status');
      check(/JSON object/.test(msg2), 'says params must be a JSON object: ' + msg2);
      page.off('request', onReq);
      check(posts === 0, `nothing was sent (${posts} POSTs)`);
      return { msg, msg2 };
    });

    await step('submit with an approval gate and a notify delivery; it awaits approval with its hash', async () => {
      const id = await submit('approved', 'Summarise the quarterly report for the requester.',
        { approval: true, destination: 'notify', params: '{"to":"requester@example.com"}' });
      await waitState(id, 'awaiting_approval');
      await page.waitForSelector('#approval:not([hidden]) #approve:visible');
      const sha = await shownSha();
      const v = await api('GET', '/tasks/' + id);
      check(v.status === 200 && v.body.state === 'awaiting_approval', 'API: awaiting_approval');
      check(HEX64.test(sha) && sha === v.body.result_sha256, `shown hash ${sha} is the API's result_sha256 ${v.body.result_sha256}`);
      check((await text('#approval-sha')) === sha, 'the hash is on screen');
      check((await text('#task-result')).length > 0, 'the artifact (result) is shown');
      check(await page.getAttribute('#approval', 'data-approval-state') === 'pending', 'approval pending');
      check(await page.isHidden('#deliveries-box'), 'no deliveries before the approval');
      // The approver sees where the artifact goes before approving it.
      const p = await plan();
      check(await page.isVisible('#approval-plan'), 'the plan is shown beside Approve');
      check(p.length === 1 && p[0].destination === 'notify' && p[0].params === JSON.stringify(v.body.plan.deliver[0].params) &&
        p[0].text.includes('requester@example.com'), 'the plan names the destination and its params, as the API gives them: ' + JSON.stringify(p));
      report.hashes.approved = sha;
      await shot('approval-01-awaiting.png');
      return { id, sha };
    });

    await step('Approve: completed, one notify delivery created', async () => {
      const id = report.tasks.approved;
      await page.fill('#approval-note', 'looks right');
      await page.click('#approve');
      const msg = await waitOutcome('approved');
      await waitState(id, 'completed');
      check(/1 delivery created: notify/.test(msg), 'status names the delivery: ' + msg);
      check(await page.isHidden('#approval-act'), 'no decision buttons once approved');
      const ds = await deliveries();
      check(ds.length === 1 && /notify/.test(ds[0].text), 'one notify delivery listed: ' + JSON.stringify(ds));
      check(/Approved/.test(await text('#approval-decision')) && /looks right/.test(await text('#approval-decision')), 'decision and note shown');
      report.tasks.delivery = ds[0].id;
      await shot('approval-02-approved.png');
      return { msg, ds };
    });

    await step('Withdraw after the delivery started: 409 deliveries-started, shown', async () => {
      const id = report.tasks.approved;
      const del = report.tasks.delivery;
      // The page polls until the delivery leaves queued (the worker claimed it).
      await page.waitForSelector(`#deliveries li[data-task-id="${del}"]:not([data-state="queued"])`);
      await page.fill('#withdraw-note', 'too late?');
      await page.click('#withdraw');
      const msg = await waitOutcome('deliveries-started');
      check(msg.includes(del) && /409/.test(msg) && /outcome stands/.test(msg), 'names the started delivery: ' + msg);
      const v = await api('GET', '/tasks/' + id);
      check(v.body.state === 'completed' && v.body.approval.state === 'approved', 'nothing changed: ' + JSON.stringify(v.body.approval));
      await shot('approval-03-withdraw-409.png');
      return { msg };
    });

    await step('a delivery opens as its deliver task with its receipt', async () => {
      const del = report.tasks.delivery;
      await page.click(`#deliveries li[data-task-id="${del}"] a`);
      await page.waitForSelector(`#task-view[data-task-id="${del}"]`);
      await page.waitForFunction(() => document.getElementById('task-kind').textContent === 'deliver');
      check(await page.locator('#task-receipt dd[data-deliver]').first().isVisible(), 'deliver receipt rows shown');
      check((await text('#task-parent-dt')) === 'Delivery of' && (await text('#task-parent')) === report.tasks.approved, 'names its approved task');
      check(await page.isHidden('#approval'), 'a deliver task has no approval block');
      // The page polls the delivery until it settles; a completed one shows
      // its receipt (a destination that is not configured fails it).
      await page.waitForSelector(`#task-view[data-task-id="${del}"]:is([data-state="completed"], [data-state="failed"], [data-state="needs_review"])`);
      const state = await page.getAttribute('#task-view', 'data-state');
      const receipt = await page.$$eval('#task-receipt [data-field]', (ns) => Object.fromEntries(ns.map((n) => [n.dataset.field, n.textContent])));
      check(receipt.operation_id === del, 'operation id is the deliver task id: ' + receipt.operation_id);
      if (state === 'completed') {
        check(receipt.destination === 'notify', 'receipt names the destination: ' + receipt.destination);
        check(receipt.approved_by !== '—' && receipt.policy !== '—', 'receipt names the approver and policy');
      }
      receipt.state = state;
      await shot('approval-04-delivery.png');
      await page.click('#task-parent');
      await page.waitForSelector(`#task-view[data-task-id="${report.tasks.approved}"]`);
      return receipt;
    });

    await step('Edit & approve: the edit becomes the result, the generated one is kept', async () => {
      const id = await submit('edited', 'Draft a CRM follow-up note ' + HOLD,
        { approval: true, destination: 'crm', params: '{"client_reference":"browser-4711"}' });
      await waitState(id, 'awaiting_approval');
      await page.waitForSelector('#approve:visible');
      const generated = await shownSha();
      await page.click('#edit-approve');
      check(await page.isVisible('#approval-edit'), 'the editor opens');
      const orig = await page.inputValue('#approval-edit');
      check(orig === (await page.textContent('#task-result')), 'the editor starts from the shown result');
      await page.fill('#approval-edit', orig + '\nEdited by the browser test.');
      await page.fill('#approval-note', 'tightened the wording');
      await page.click('#approve-edited');
      const msg = await waitOutcome('approved-edited');
      await waitState(id, 'completed');
      const v = await api('GET', '/tasks/' + id);
      check(v.body.generated_sha256 === generated && v.body.result_sha256 !== generated, 'API: generated kept, result edited');
      check(/Edited by the browser test\.$/.test(v.body.result.text), 'the edit is the result');
      check((await text('#approval-generated')) === generated, 'generated hash shown');
      check((await text('#approval-sha')) === v.body.result_sha256, 'edited hash shown');
      const ds = await deliveries();
      check(ds.length === 1 && ds[0].state === 'queued', 'one unstarted crm delivery: ' + JSON.stringify(ds));
      report.hashes.generated = generated;
      report.hashes.edited = v.body.result_sha256;
      report.tasks.heldDelivery = ds[0].id;
      await shot('approval-05-edited.png');
      return { msg };
    });

    await step('Withdraw while the delivery is unstarted: cancelled, awaiting approval again', async () => {
      const id = report.tasks.edited;
      await page.fill('#withdraw-note', 'wrong client');
      await page.click('#withdraw');
      const msg = await waitOutcome('withdrawn');
      await waitState(id, 'awaiting_approval');
      await page.waitForSelector(`#deliveries li[data-task-id="${report.tasks.heldDelivery}"][data-state="cancelled"]`);
      check(await page.getAttribute('#approval', 'data-approval-state') === 'withdrawn', 'approval withdrawn');
      check(await page.isVisible('#approve'), 'decision buttons are back');
      check((await shownSha()) === report.hashes.edited, 'the edited result is what now awaits approval');
      await shot('approval-06-withdrawn.png');
      return { msg };
    });

    await step('Approve from a stale tab: 409 artifact-changed, shown; the current result loads', async () => {
      const id = report.tasks.edited;
      const stale = await shownSha();
      // This tab stops hearing from the API about this task (a stale tab) ...
      const held = (route) => (route.request().method() === 'GET' ? route.abort() : route.continue());
      await page.route(`**/tasks/${id}`, held);
      // A poll sent before the route went in may still be on its way and
      // would bring the other reviewer's result. The page polls one request
      // at a time, so once one is aborted none is left in flight; a page
      // that stopped polling has none either (a few seconds without one).
      await page.waitForEvent('requestfailed', {
        predicate: (r) => r.method() === 'GET' && new URL(r.url()).pathname.endsWith('/tasks/' + id), timeout: 5000,
      }).catch(() => {});
      // ... while another reviewer edits and approves it, then withdraws.
      const cur = await api('GET', '/tasks/' + id);
      const edited = { ...cur.body.result, text: cur.body.result.text + ' (second reviewer)' };
      const a = await api('POST', `/tasks/${id}/approve`, { artifact_sha256: stale, edited_result: edited, note: 'second reviewer' });
      check(a.status === 200, 'the other reviewer approved: ' + a.status);
      const w = await api('POST', `/tasks/${id}/withdraw`, { note: 'second reviewer withdraws' });
      check(w.status === 200 && w.body.state === 'awaiting_approval' && w.body.result_sha256 !== stale, 'awaiting again with another result');
      check((await shownSha()) === stale, 'this tab still shows the old hash');
      await page.click('#approve');
      const msg = await waitOutcome('artifact-changed');
      check(/409 artifact changed/.test(msg) && msg.includes(stale.slice(0, 12)) && msg.includes(w.body.result_sha256.slice(0, 12)),
        'names the approved and the current hash: ' + msg);
      const v = await api('GET', '/tasks/' + id);
      check(v.body.state === 'awaiting_approval' && v.body.result_sha256 === w.body.result_sha256, 'nothing changed');
      await shot('approval-07-stale-409.png');
      await page.unroute(`**/tasks/${id}`, held);
      await page.waitForSelector(`#approval[data-result-sha="${w.body.result_sha256}"]`);
      report.hashes.current = w.body.result_sha256;
      return { msg };
    });

    await step('Reject: rejected, nothing delivered', async () => {
      const id = await submit('rejected', 'Announce the launch date publicly.',
        { approval: true, destination: 'publish', params: '{"slug":"launch-date"}' });
      await waitState(id, 'awaiting_approval');
      await page.waitForSelector('#reject:visible');
      const p = await plan();
      check(p.length === 1 && p[0].destination === 'publish' && p[0].text.includes('launch-date'), 'the plan shown: ' + JSON.stringify(p));
      await page.fill('#approval-note', 'not yet public');
      await page.click('#reject');
      const msg = await waitOutcome('rejected');
      await waitState(id, 'rejected');
      check(await page.isHidden('#approval-act'), 'no decision buttons once rejected');
      check(await page.isHidden('#deliveries-box'), 'no deliveries');
      check(/Rejected/.test(await text('#approval-decision')) && /not yet public/.test(await text('#approval-decision')), 'decision and note shown');
      check(await page.isDisabled('#cancel'), 'rejected is final');
      await shot('approval-08-rejected.png');
      return { msg };
    });

    await step('no CSP violations, page errors or foreign loads', async () => {
      const violations = await page.evaluate(() => window.__csp || []);
      check(violations.length === 0 && cspViolations.length === 0, 'CSP violations: ' + violations.concat(cspViolations).join('; '));
      const pageErrors = report.errors.filter((e) => e.startsWith('pageerror'));
      check(pageErrors.length === 0, 'page errors: ' + pageErrors.join('; '));
      check(foreign.length === 0, 'foreign requests: ' + foreign.join(', '));
    });
    report.ok = true;
  } catch (err) {
    if (page) await shot('approval-failure.png').catch(() => {});
    throw err;
  } finally {
    await b.close();
  }
}

run(report, log, OVERALL_TIMEOUT, main);
