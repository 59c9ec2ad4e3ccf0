// Browser test of the lists with sign-in: a requester and an approver,
// each signed in to their own Chromium profile against a local OpenID
// Connect issuer from npm (oauth2-mock-server), the local stack's emulated
// JWT authorizer and an approver claim (groups = approvers, no
// self-approval).
//
//   node web/test/listsapprover.mjs <screenshot dir>   (stack URL on stdin)
//
// Handshake with the Go test as signin.mjs (harness.mjs issuerHandshake,
// web/harness_test.go runWithIssuer). alice submits a gated task; her My
// tasks lists it and her inbox is empty (she may not decide). carol, an
// approver, sees none of alice's tasks in My tasks, sees the task in her
// inbox with its plan beside the result, approves it, and it leaves; the
// task view shows its delivery; alice's My tasks shows it completed and
// its delivery without a click. Every list read carries the reader's
// bearer and goes to the stack only.
import { OAuth2Server } from 'oauth2-mock-server';
import { createRun, launch, run, mkdir, issuerHandshake } from './harness.mjs';

const CLIENT_ID = 'taskledger-page';
const OVERALL_TIMEOUT = 170_000;

const [, , shotDirArg] = process.argv;
if (!shotDirArg) {
  console.error('usage: node listsapprover.mjs <screenshot dir>  (stack URL on stdin)');
  process.exit(2);
}
const h = createRun('listsapprover', shotDirArg);
const { report, log, step, check, shotDir } = h;

// The issuer signs in whoever the test names next (the mock has no login
// form); carol's tokens carry the approver group.
const issuerServer = new OAuth2Server();
let nextUser = null;
issuerServer.service.on('beforeTokenSigning', (token) => {
  token.payload.sub = nextUser.sub;
  token.payload.email = nextUser.sub + '@example.com';
  if (nextUser.groups) token.payload.groups = nextUser.groups;
});

// open launches a profile for user, records its list reads (with the
// Authorization header they carried) and signs it in.
async function open(stackURL, origin, issuer, user) {
  const b = await launch(origin, report, { passThrough: [issuer] });
  const reads = [];
  b.page.on('request', (req) => {
    const u = new URL(req.url());
    if (u.origin === origin && (u.pathname === '/tasks' || u.pathname === '/approvals') && req.method() === 'GET') {
      reads.push({ path: u.pathname + u.search, auth: req.headers()['authorization'] || '' });
    }
  });
  nextUser = user;
  const p = b.page;
  await p.goto(stackURL, { waitUntil: 'load' });
  await p.waitForSelector('html[data-ready="true"][data-auth="signed-out"]');
  await Promise.all([p.waitForURL((u) => u.searchParams.has('code'), { waitUntil: 'commit' }), p.click('#sign-in')]);
  await p.waitForSelector('html[data-ready="true"][data-auth="signed-in"]');
  const bearer = await p.evaluate((o) => (JSON.parse(sessionStorage.getItem('taskledger.auth:' + o) || 'null') || {}).bearer, origin);
  check(typeof bearer === 'string' && bearer.split('.').length === 3, user.sub + ' holds a JWT');
  return { ...b, reads, bearer };
}

const rowIDs = (p) => p.$$eval('#mine-rows tr[data-task-id]', (trs) => trs.map((tr) => ({ id: tr.dataset.taskId, state: tr.dataset.state, kind: tr.dataset.kind })));

async function main() {
  const { issuer, stackURL, origin } = await issuerHandshake(issuerServer, CLIENT_ID);
  log('stack', origin, 'issuer', issuer);
  await mkdir(shotDir, { recursive: true });
  const closers = [];
  try {
    let alice, carol, id;
    await step('alice (requester) submits a gated task: My tasks lists it, her inbox is empty', async () => {
      alice = await open(stackURL, origin, issuer, { sub: 'alice' });
      closers.push(alice.close);
      const p = alice.page;
      await p.fill('#prompt', 'Summarise the board minutes for the shareholders.');
      await p.setChecked('#require-approval', true);
      await p.selectOption('#deliver-destination', 'notify');
      await p.fill('#deliver-params', '{"to":"shareholders@example.com"}');
      await p.click('#send');
      await p.waitForSelector('#submit-status[data-status="202"]');
      id = await p.getAttribute('#submit-status', 'data-task-id');
      report.tasks.gated = id;
      await p.waitForSelector(`#task-view[data-task-id="${id}"][data-state="awaiting_approval"]`);
      await p.click('#tab-mine');
      await p.waitForSelector(`#mine-rows tr[data-task-id="${id}"][data-state="awaiting_approval"]`);
      await p.click('#tab-inbox');
      await p.waitForSelector('#view-inbox[data-loaded="true"]');
      await p.waitForSelector('#inbox-empty:visible');
      check((await p.$$('#inbox-list li')).length === 0, 'alice may not decide: nothing listed');
    });

    await step('carol (approver) sees none of alice\'s tasks in My tasks, and the task in her inbox with its plan', async () => {
      carol = await open(stackURL, origin, issuer, { sub: 'carol', groups: ['approvers'] });
      closers.push(carol.close);
      const p = carol.page;
      await p.click('#tab-mine');
      await p.waitForSelector('#view-mine[data-loaded="true"]');
      check((await rowIDs(p)).length === 0, 'carol has no tasks of her own');
      await p.click('#tab-inbox');
      const li = `#inbox-list li[data-task-id="${id}"]`;
      await p.waitForSelector(li);
      const plan = await p.$$eval(`${li} [data-testid=plan-entry]`, (ls) => ls.map((l) => [l.dataset.destination, l.dataset.params]));
      check(plan.length === 1 && plan[0][0] === 'notify' && plan[0][1] === '{"to":"shareholders@example.com"}', 'the plan beside the result: ' + JSON.stringify(plan));
      check((await p.textContent(`${li} [data-testid=inbox-result]`)).length > 0, 'the result is shown');
      report.hashes.approved = await p.getAttribute(li, 'data-result-sha');
      await h.shot(p, 'listsapprover-inbox.png');
    });

    await step('carol approves: the task leaves her inbox and its delivery shows in the task view', async () => {
      const p = carol.page;
      const li = `#inbox-list li[data-task-id="${id}"]`;
      await p.click(`${li} [data-testid=inbox-approve]`);
      await p.waitForSelector(li, { state: 'detached' });
      await p.waitForSelector('#inbox-status[data-outcome="approved"]');
      await p.click('[data-testid=inbox-decided-open]');
      await p.waitForSelector(`#task-view[data-task-id="${id}"][data-state="completed"]`);
      await p.waitForSelector('#deliveries li[data-task-id]');
      report.tasks.delivery = await p.getAttribute('#deliveries li[data-task-id]', 'data-task-id');
    });

    await step('alice\'s My tasks shows it completed and its delivery, without a click', async () => {
      const p = alice.page;
      await p.click('#tab-mine');
      await p.waitForSelector(`#mine-rows tr[data-task-id="${id}"][data-state="completed"]`);
      await p.waitForSelector(`#mine-rows tr[data-task-id="${report.tasks.delivery}"][data-kind="deliver"]`);
      await h.shot(p, 'listsapprover-mine.png');
    });

    await step('alice signs out: her rows leave the page and no list is read', async () => {
      const p = alice.page;
      const before = alice.reads.length;
      await p.click('#sign-out');
      await p.waitForSelector('html[data-auth="signed-out"]');
      check((await rowIDs(p)).length === 0, 'no rows after sign out');
      check(await p.isVisible('#mine-empty'), 'the list says it is empty');
      // Longer than a refresh period: the only way to see that no read is made.
      await p.waitForTimeout(4000);
      check(alice.reads.length === before, `no list read after sign out (${alice.reads.length - before})`);
    });

    await step('every list read carried its reader\'s bearer, to the stack only', async () => {
      for (const [who, b] of [['alice', alice], ['carol', carol]]) {
        check(b.reads.length > 0, who + ' read lists');
        const bad = b.reads.filter((r) => r.auth !== 'Bearer ' + b.bearer);
        check(bad.length === 0, who + '\'s list reads without their bearer: ' + JSON.stringify(bad.map((r) => r.path)));
        check(b.foreign.filter((u) => !u.startsWith(issuer + '/')).length === 0, who + ': no request beyond the stack and issuer: ' + JSON.stringify(b.foreign));
        check(b.csp.length === 0, who + ': no CSP violation: ' + JSON.stringify(b.csp));
      }
      check(report.errors.length === 0, 'no page errors: ' + JSON.stringify(report.errors));
    });
    report.ok = true;
  } finally {
    for (const c of closers) await c();
    await issuerServer.stop().catch(() => {});
  }
}

run(report, log, OVERALL_TIMEOUT, main);
