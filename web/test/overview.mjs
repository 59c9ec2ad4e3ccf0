// Browser test of the page's Overview tab, in headless Debian Chromium
// driven by playwright-core (never a downloaded browser build).
//
//   node web/test/overview.mjs <stack URL> <screenshot dir>
//
// Opens the Overview tab of a fresh local stack, submits a mix of tasks
// (completing, failing, parking, throttled, slow), waits for the charts to
// show them, asserts the figures and saves screenshots (light and dark).
// Prints one JSON report line on stdout:
//   {"ok":bool,"steps":[{"name","ok","ms","detail"}...],"screenshots":[paths],
//    "tasks":{...},"figures":{...},"errors":[...]}
// and exits 0 only when every step passed. Progress goes to stderr.
import { createRun, launch, run, mkdir, STEP_TIMEOUT } from './harness.mjs';

const OVERALL_TIMEOUT = 170_000;

const [, , stackURL, shotDirArg] = process.argv;
if (!stackURL || !shotDirArg) {
  console.error('usage: node overview.mjs <stack URL> <screenshot dir>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const h = createRun('overview', shotDirArg);
const { report, log, step, check, shotDir } = h;
report.figures = {};
let page;

// shot acts on the page under test.
const shot = (name) => h.shot(page, name);

// figures reads what the Overview tab shows, from the DOM.
async function figures() {
  return page.evaluate(() => {
    const q = (s) => Array.from(document.querySelectorAll(s));
    const out = { states: {}, ages: {}, agesText: {}, rates: {}, noData: [], reviews: {}, reviewsTotal: '', generatedAt: '' };
    q('#ov-states .ov-row').forEach((r) => { out.states[r.dataset.state] = Number(r.dataset.count); });
    q('#ov-ages .ov-row').forEach((r) => {
      out.ages[r.dataset.state] = Number(r.dataset.age);
      out.agesText[r.dataset.state] = r.querySelector('.ov-num').textContent;
    });
    q('#ov-rates .ov-rate').forEach((r) => {
      if (r.dataset.nodata === 'true') out.noData.push(r.dataset.series);
      else out.rates[r.dataset.series] = Number(r.dataset.total);
    });
    q('#ov-reviews .ov-row').forEach((r) => { out.reviews[r.dataset.reason] = Number(r.dataset.count); });
    out.reviewsTotal = document.getElementById('ov-reviews-total').textContent;
    out.generatedAt = document.getElementById('view-overview').dataset.generatedAt || '';
    out.sparklines = q('#ov-rates svg.ov-spark polyline').length;
    out.bars = q('#ov-states svg.ov-bar rect.ov-fill').length;
    return out;
  });
}

// submit POSTs a task from the page (same origin, as the page's own code does).
async function submit(name, simulate) {
  const r = await page.evaluate(async ({ name, simulate }) => {
    const input = { prompt: 'overview test task ' + name };
    if (simulate) input.simulate = simulate;
    const resp = await fetch('/tasks', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'overview-' + name },
      body: JSON.stringify({ kind: 'generate', input }),
    });
    return { status: resp.status, body: await resp.json() };
  }, { name, simulate });
  check(r.status === 202, `submit ${name}: 202 (got ${r.status})`);
  report.tasks[name] = r.body.task_id;
  return r.body.task_id;
}

// waitFigures polls the DOM until pred holds (the tab refreshes itself).
async function waitFigures(pred, what) {
  const deadline = Date.now() + STEP_TIMEOUT;
  let f;
  for (;;) {
    f = await figures();
    if (pred(f)) return f;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what + ': ' + JSON.stringify(f));
    await page.waitForFunction((prev) => document.getElementById('view-overview').dataset.generatedAt !== prev,
      f.generatedAt, { timeout: STEP_TIMEOUT });
  }
}

async function main() {
  await mkdir(shotDir, { recursive: true });
  // launch aborts loads beyond the stack (listed in foreign) and collects
  // CSP violations from the console (csp).
  const b = await launch(origin, report, { viewport: { width: 1280, height: 900 } });
  const { foreign, csp: cspViolations } = b;
  page = b.page;
  try {
    await step('open the Overview tab of an empty stack', async () => {
      await page.goto(stackURL, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      await page.click('#tab-overview');
      check(await page.getAttribute('#tab-overview', 'aria-selected') === 'true', 'tab selected');
      check(await page.isHidden('#view-tasks'), 'tasks view hidden');
      await page.waitForSelector('#view-overview[data-loaded="true"]');
      const f = await figures();
      for (const s of ['active', 'retry_wait', 'unknown']) check(f.states[s] === 0, `${s} = 0 (got ${f.states[s]})`);
      check(f.reviewsTotal === '0 open', `no open reviews (got ${f.reviewsTotal})`);
      check(await page.isVisible('[data-testid="ov-reviews-empty"]'), '"No open review items." shown');
      // No call has been made yet: tokens and cost say "no data".
      check(f.noData.includes('tokens') && f.noData.includes('cost_usd'), 'tokens and cost show no data: ' + f.noData);
      check(f.noData.length === 2 && f.rates.completed === 0 && f.rates.failed === 0, 'events show zeros, not no data: ' + JSON.stringify(f.rates));
      await shot('overview-01-empty.png');
      return f;
    });

    await step('submit a mix of tasks', async () => {
      for (let i = 1; i <= 4; i++) await submit('ok' + i, '');
      await submit('bad', 'bad_request');
      await submit('creds', 'credentials');
      await submit('throttled', 'throttle');
      return report.tasks;
    });

    await step('the charts show completions, the failure, the retry and the parked task', async () => {
      const f = await waitFigures((f) => f.rates.completed >= 5 && f.rates.failed >= 1 && f.rates.parked >= 1 &&
        f.rates.retried >= 1 && f.reviews.provider_config === 1,
      'completed ≥ 5, failed ≥ 1, retried ≥ 1, parked ≥ 1, a provider_config review');
      check(f.rates.completed === 5, `5 completions: 4 plain + the throttled one after its retry (got ${f.rates.completed})`);
      check(f.rates.failed === 1, `exactly one failure (got ${f.rates.failed})`);
      check(f.rates.parked === 1, `exactly one park (got ${f.rates.parked})`);
      check(f.reviewsTotal === '1 open', `one open review (got ${f.reviewsTotal})`);
      check(f.sparklines >= 5, `sparklines drawn (${f.sparklines})`);
      // Every completed call's usage is recorded (budgeted or not), priced
      // by the local stack's price table.
      check(f.noData.length === 0, 'tokens and cost show data: ' + f.noData);
      check(f.rates.tokens > 0 && f.rates.cost_usd > 0, `tokens and cost above 0 (got ${f.rates.tokens}, ${f.rates.cost_usd})`);
      return f;
    });

    await step('a slow task shows as active (queued or running), with its age growing', async () => {
      // Submitted alone: the worker's batch metrics are written when its
      // batch ends, so a slow task in the same batch would hold the others'.
      await submit('slow', 'slow');
      const f = await waitFigures((f) => f.states.active === 1 && f.ages.active > 0, 'the slow task active');
      check(f.bars >= 1, 'a state bar drawn');
      check(/\d+ s/.test(f.agesText.active), `active age as text (${f.agesText.active})`);
      // The tab refreshes by itself: a later read shows the task older.
      const g = await waitFigures((g) => g.generatedAt !== f.generatedAt && g.ages.active > f.ages.active, 'a refresh with an older active task');
      report.figures = g;
      await shot('overview-02-busy.png');
      return g;
    });

    await step('dark colour scheme stays readable', async () => {
      await page.emulateMedia({ colorScheme: 'dark' });
      await shot('overview-03-dark.png');
      await page.emulateMedia({ colorScheme: 'light' });
    });

    await step('other tabs stop the refresh; no CSP violations, page errors or foreign loads', async () => {
      let reads = 0;
      const onReq = (req) => { if (new URL(req.url()).pathname === '/overview') reads++; };
      await page.click('#tab-tasks');
      check(await page.isHidden('#view-overview'), 'overview hidden');
      page.on('request', onReq);
      await page.waitForTimeout(4000); // longer than one refresh period: watching for requests that must not come
      page.off('request', onReq);
      check(reads === 0, `no /overview reads while another tab is shown (got ${reads})`);
      check(cspViolations.length === 0, 'CSP violations: ' + cspViolations.join('; '));
      const pageErrors = report.errors.filter((e) => e.startsWith('pageerror'));
      check(pageErrors.length === 0, 'page errors: ' + pageErrors.join('; '));
      check(foreign.length === 0, 'foreign requests: ' + foreign.join(', '));
      return { reads };
    });
    await step('deployed (no /overview route) the tab points to the CloudWatch dashboard', async () => {
      // API Gateway's answer for a route the deployed API does not have.
      await page.route('**/overview', (r) => r.fulfill({ status: 404, contentType: 'application/json', body: '{"message":"Not Found"}' }));
      await page.click('#tab-overview');
      await page.waitForSelector('#ov-deployed:not([hidden])');
      check(await page.isHidden('#ov-body'), 'no charts without data');
      const text = (await page.textContent('#ov-deployed')).replace(/\s+/g, ' ').trim();
      check(/DashboardUrl/.test(text), 'names the DashboardUrl output: ' + text);
      await page.unroute('**/overview');
      return { text: text.slice(0, 120) };
    });
    report.ok = true;
  } catch (err) {
    if (page) await shot('overview-failure.png').catch(() => {});
    throw err;
  } finally {
    await b.close();
  }
}

run(report, log, OVERALL_TIMEOUT, main);
